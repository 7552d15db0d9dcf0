#!/usr/bin/env bash
# One command for a person with a GPU: builds with CUDA, runs the device tests, the
# profile and a bench over concurrency on the GPU, and writes one report.
#
#   scripts/gpu-check.sh [MODEL] [OUT_DIR]
#
# MODEL: a hub id or a local model directory (default: the bundled model; a real
# checkpoint such as a local copy of Nemotron-Labs-Diffusion-8B is what the GPU path
# is for). OUT_DIR (default gpu-check-DATE) receives report.txt, report.json and every
# step's log and output.
#
# Environment: CUDA_COMPUTE_CAP (default: nvidia-smi's, e.g. 90 for an H100/H200),
# CARGO_TARGET_DIR (default target-cuda), CONCURRENCY (default 1,2,4,8,16,32,64),
# LIMIT (prompts per family for the bench, default 4), MAX_NEW (default 128).
# GPU_CHECK_DEVICE=cpu runs the same steps on the CPU without the cuda feature (a
# check of the script itself; nothing about the GPU).
set -uo pipefail
cd "$(dirname "$0")/.."

model="${1:-}"
out="${2:-gpu-check-$(date -u +%Y%m%d-%H%M%S)}"
device="${GPU_CHECK_DEVICE:-cuda}"
concurrency="${CONCURRENCY:-1,2,4,8,16,32,64}"
limit="${LIMIT:-4}"
max_new="${MAX_NEW:-128}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
export CARGO_TERM_COLOR=never

features=()
if [ "$device" = cuda ]; then
  features=(--features cuda)
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target-cuda}"
  if [ -z "${CUDA_COMPUTE_CAP:-}" ] && command -v nvidia-smi >/dev/null 2>&1; then
    CUDA_COMPUTE_CAP="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')"
  fi
  export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-80}"
  gpu="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
else
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
  gpu="none (GPU_CHECK_DEVICE=$device)"
fi
bin="$CARGO_TARGET_DIR/release/specscope"
model_args=(--device "$device")
if [ -n "$model" ]; then model_args+=(--model "$model"); fi

names=()
codes=()
secs=()
# step NAME COMMAND...: runs it with its output in $out/NAME.log, records status and time.
step() {
  local name="$1"
  shift
  echo "== $name: $*"
  local start end
  start=$(date +%s)
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  end=$(date +%s)
  names+=("$name")
  codes+=("$rc")
  secs+=("$((end - start))")
  if [ "$rc" = 0 ]; then echo "   ok ($((end - start)) s)"; else echo "   FAILED (exit $rc; see $out/$name.log)"; fi
  return 0
}

step build cargo build --release "${features[@]}" --bin specscope
export SPECSCOPE_TEST_DEVICE="$device"
step device-tests cargo test --release "${features[@]}" --test device --test backbone --test lossless --test dtype -- --nocapture
run_json() {
  "$bin" run "${model_args[@]}" --json --max-new-tokens 64 \
    -p "A farmer has 12 apples and buys 5 more. How many apples does the farmer have?" >"$out/run.json"
}
step run run_json
step profile "$bin" profile "${model_args[@]}" --rows 1,2,4,8,16,32,64 --tokens 1,8,16,32 \
  --cache 256,1024 --repeats 5 --json "$out/profile.json"
profile_arg=()
if [ -s "$out/profile.json" ]; then profile_arg=(--cost-profile "$out/profile.json"); fi
step bench "$bin" bench "${model_args[@]}" --configs ar,linear,recguide --blocks 8,16,32 \
  --concurrency "$concurrency" --limit "$limit" --max-new-tokens "$max_new" \
  "${profile_arg[@]}" --json "$out/bench.json"

kernel="$(grep -o '"signals_kernel": *"[^"]*"' "$out/run.json" 2>/dev/null | sed 's/.*: *"//; s/"$//')"
reads="$(grep -o '"bytes_per_position": *[0-9.e+-]*' "$out/run.json" 2>/dev/null | sed 's/.*: *//')"
failed=0
for c in "${codes[@]}"; do [ "$c" = 0 ] || failed=$((failed + 1)); done

{
  echo "specscope gpu-check, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
  echo "device: $device; GPU: ${gpu:-unknown}; CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-}"
  echo "model: ${model:-bundled}"
  echo "signals kernel: ${kernel:-unknown}"
  echo "bytes to host per logits position: ${reads:-unknown}"
  for i in "${!names[@]}"; do
    printf '%-13s %s (%s s)\n' "${names[$i]}" "$([ "${codes[$i]}" = 0 ] && echo ok || echo "FAILED, exit ${codes[$i]}")" "${secs[$i]}"
  done
  if [ -f "$out/device-tests.log" ]; then
    echo "tests:"
    grep -E '^test result|skipped:' "$out/device-tests.log" | sed 's/^/  /'
  fi
  if [ -f "$out/bench.log" ]; then
    echo "bench (modeled columns priced by the profile measured above):"
    sed -n '/^config/,$p' "$out/bench.log" | sed 's/^/  /'
  fi
} >"$out/report.txt"

esc() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g'; }
{
  printf '{\n  "device": "%s",\n  "gpu": "%s",\n  "model": "%s",\n' "$(esc "$device")" "$(esc "${gpu:-}")" "$(esc "${model:-bundled}")"
  printf '  "commit": "%s",\n  "signals_kernel": "%s",\n' "$(git rev-parse HEAD 2>/dev/null)" "$(esc "${kernel:-}")"
  printf '  "bytes_per_position": %s,\n  "steps": [\n' "${reads:-null}"
  for i in "${!names[@]}"; do
    sep=","
    [ "$i" = $((${#names[@]} - 1)) ] && sep=""
    printf '    {"name": "%s", "exit": %s, "secs": %s}%s\n' "${names[$i]}" "${codes[$i]}" "${secs[$i]}" "$sep"
  done
  printf '  ],\n  "files": {"profile": "profile.json", "bench": "bench.json", "run": "run.json"}\n}\n'
} >"$out/report.json"

cat "$out/report.txt"
echo "report: $out/report.txt, $out/report.json"
[ "$failed" = 0 ]
