#!/usr/bin/env bash
# The tables of docs/results.md ("RecGuide under simulated NLD-8B acceptance"): the
# paper's loads with the simulated NLD-8B (`--model sim:nld-8b`) priced by the paper's
# measured B200 sweep, the row ablation at C = 1 and the adaptive ablation across C.
# Every figure is simulated acceptance at modeled (measured-price) time. Bench files and
# tables go to OUT_DIR.
#
#   scripts/sim-tables.sh [OUT_DIR]   (default target/sim-tables; about 12 minutes on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/sim-tables}"
mkdir -p "$out"
export CARGO_TERM_COLOR=never
cargo build --release --bin specscope
bin=target/release/specscope
loads=1,2,4,8,16,32,64,128
sim=(--model sim:nld-8b --cost-profile b200-nld8b-measured --max-new-tokens 256)

# The statistics the simulator was calibrated to, beside the published ones.
"$bin" sim check | tee "$out/check.txt"
# The paper's loads: 96 prompts (32 per family), every request a fresh answer, two
# requests per slot at least.
"$bin" bench "${sim[@]}" --configs ar,linear,recguide --concurrency "$loads" --limit 32 \
  --force --json "$out/sweep.json" | tee "$out/sweep.txt"
# Rows at C = 1: correction rows alone, then with the continuation (the default table),
# every row riding (unpriced) and priced (the default), at fixed B and adaptive.
"$bin" bench "${sim[@]}" --configs ar,linear,recguide-fixed,recguide-all-rows,recguide \
  --row-tables corrections,conditional-rank --concurrency 1 --limit 32 \
  --force --json "$out/rows.json" | tee "$out/rows.txt"
# Adaptive block size across C without rows: entropy only, + the previous round's
# outcome, with the reference's buckets; then rows priced with it (the default).
"$bin" bench "${sim[@]}" \
  --configs ar,linear,recguide-adaptive-entropy,recguide-adaptive,recguide-adaptive-buckets,recguide \
  --concurrency "$loads" --limit 16 --force --json "$out/adaptive.json" | tee "$out/adaptive.txt"
scripts/recguide-table.py "$out/sweep.json"
scripts/recguide-table.py --configs "$out/rows.json" "$out/adaptive.json"
"$bin" plot --bench "$out/sweep.json" --out "$out/figures" --force
