#!/usr/bin/env bash
# Real NLD-8B logs beside the bundled drill model and the simulated NLD-8B backbone,
# all at B = 16: the table and the figure of docs/results.md ("Real NLD-8B logs against
# the drill model").
#
# Usage: scripts/nld-real-vs-drill.sh RESULTS_DIR [OUT_DIR]
#   RESULTS_DIR: configs/sglang_pytorch_diff/results of the RecGuide author's public
#   repository linyewei526/Nemotron-Labs-Diffusion (commit 9a6c93e0), downloaded.
#   OUT_DIR (default target/nld-compare): the recordings; the figure goes to
#   docs/figures/nld/real-vs-drill.svg.
# SPECSCOPE names the binary (default: specscope on PATH).
set -euo pipefail
R=${1:?usage: scripts/nld-real-vs-drill.sh RESULTS_DIR [OUT_DIR]}
OUT=${2:-target/nld-compare}
BIN=${SPECSCOPE:-specscope}
mkdir -p "$OUT" docs/figures/nld

one() { # one GLOB: the single file a glob names
  local m=( $1 )
  [ -f "${m[0]}" ] || { echo "missing: $1" >&2; exit 1; }
  echo "${m[0]}"
}
imp() { # imp NAME LABEL FILE...: the eval's requests (a server's warm-up dropped)
  local name=$1 label=$2
  shift 2
  "$BIN" trace import "$@" --joined-only --label "$label" --out "$OUT/$name.jsonl" --force
}
art() { one "$R/$1/*/eval_runs/gsm8k/*/artifacts/gsm8k/$2"; }
trace() { one "$R/$1/*/traces/raw_trace_gsm8k.jsonl"; }

imp 1-sglang-base-graph "SGLang LinearSpec, NLD-8B, base draft" \
  "$(trace sglang_base_graph)" "$(art sglang_base_graph sglang_timing.jsonl)"
imp 2-sglang-lora-graph-unhooked "SGLang LinearSpec, NLD-8B, LoRA asked, graphs draft with base" \
  "$(trace sglang_lora_graph)" "$(art sglang_lora_graph sglang_timing.jsonl)"
imp 3-sglang-lora-eager "SGLang LinearSpec, NLD-8B, LoRA draft, eager" \
  "$(trace sglang_lora_eager)" "$(art sglang_lora_eager sglang_timing.jsonl)"
imp 4-sglang-lora-graph "SGLang LinearSpec, NLD-8B, LoRA draft, CUDA graphs" \
  "$(trace sglang_lora_graph_predraft_hook)" "$(art sglang_lora_graph_predraft_hook sglang_timing.jsonl)"
imp 5-pytorch-lora "PyTorch LinearSpec, NLD-8B, LoRA draft" \
  "$(trace pytorch_lora)" "$(one "$R/pytorch_lora/*/runtime/gsm8k/pytorch_request_stats.jsonl")"
imp 6-sglang-lora-graph-stats "SGLang LinearSpec block stats, NLD-8B, LoRA draft, CUDA graphs" \
  "$(art sglang_lora_graph_predraft_hook sglang_decode_stats.jsonl)" \
  "$(art sglang_lora_graph_predraft_hook sglang_timing.jsonl)"

# The same block size on this repository's models: the drill model over every held-out
# math prompt, the simulator over 20 of them (its answers run 256 to 1535 tokens).
"$BIN" trace record --mode linear --block 16 --prompts assets/prompts/math.jsonl \
  --out "$OUT/7-drill-b16.jsonl" --force
"$BIN" trace record --model sim:nld-8b --mode linear --block 16 \
  --prompts assets/prompts/math.jsonl --limit 20 --out "$OUT/8-sim-b16.jsonl" --force

"$BIN" trace compare "$OUT"/[1-8]-*.jsonl
# The figure: the log that holds every field (PyTorch, schema version 2), the drill
# model and the simulator.
"$BIN" trace compare "$OUT"/[578]-*.jsonl --figure docs/figures/nld/real-vs-drill.svg --force >/dev/null
