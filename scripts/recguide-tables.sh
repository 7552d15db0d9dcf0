#!/usr/bin/env bash
# The RecGuide tables of docs/results.md ("RecGuide priced at the load"): the paper's
# loads under the B200 and H200 profiles of NLD-8B (modeled), the row ablation at
# C = 1, the adaptive ablation across C, and the same sweep priced by this CPU
# (measured tokens/s beside the modeled ones). Bench files and tables go to OUT_DIR.
#
#   scripts/recguide-tables.sh [OUT_DIR]   (default target/recguide-tables; about 27
#                                           minutes on 2 cores, each sweep 9 to 10)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/recguide-tables}"
mkdir -p "$out"
export CARGO_TERM_COLOR=never
cargo build --release --bin specscope
bin=target/release/specscope
loads=1,2,4,8,16,32,64,128

# The paper's loads: 96 prompts (32 per held-out family), run whole again where a
# load needs at least 2 requests per slot (C = 64: 192 requests, C = 128: 288), every
# configuration once.
for p in b200-nld8b h200-nld8b; do
  "$bin" bench --configs ar,linear,recguide,recguide-lockstep,recguide-throughput --concurrency "$loads" \
    --limit 32 --max-new-tokens 128 --cost-profile "$p" --force --json "$out/$p.json" \
    | tee "$out/$p.txt"
done
# C = 128 held for shorter or longer: a closed batch of 128 (the 96 prompts and 32 again;
# 0), then the prompts run 2, 3 and 4 times (1, 2 and 3 requests per slot).
for p in b200-nld8b h200-nld8b; do
  for k in 0 1 2 3; do
    "$bin" bench --configs linear,recguide --blocks 8 --concurrency 128 --requests-per-slot "$k" \
      --limit 32 --max-new-tokens 128 --cost-profile "$p" --force --json "$out/$p-held$k.json" \
      | tee "$out/$p-held$k.txt"
  done
done
# Row ablation at C = 1: every row of each table rides (unpriced), against the
# priced default.
"$bin" bench --configs ar,linear,recguide-all-rows \
  --row-tables corrections,p1-conditional-new,no-p3,two-plus-new,multi,conditional-rank \
  --concurrency 1 --limit 8 --max-new-tokens 128 --cost-profile b200-nld8b \
  --force --json "$out/rows.json" | tee "$out/rows.txt"
# Adaptive ablation across C (no branch rows): entropy only, + the previous round's
# outcome, with the reference's buckets; then rows priced with it (the default).
"$bin" bench --configs ar,linear,recguide-adaptive-entropy,recguide-adaptive,recguide-adaptive-buckets,recguide \
  --concurrency 1,4,16,64 --limit 8 --max-new-tokens 128 --cost-profile b200-nld8b \
  --force --json "$out/adaptive.json" | tee "$out/adaptive.txt"
# Priced by this CPU: measured tokens/s, and the CPU's own decisions.
"$bin" bench --configs ar,linear,recguide,recguide-throughput --concurrency 1,4,16,64 \
  --limit 8 --max-new-tokens 128 --cost-profile cpu --force --json "$out/cpu.json" \
  | tee "$out/cpu.txt"
scripts/recguide-table.py "$out/b200-nld8b.json" "$out/h200-nld8b.json" "$out/cpu.json"
for p in b200-nld8b h200-nld8b; do
  scripts/recguide-table.py --held "$out/$p-held"{0,1,2,3}.json
done
