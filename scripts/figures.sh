#!/usr/bin/env bash
# Regenerates docs/figures/: a bench, a recording and a profile of the bundled model,
# then `specscope plot`. The data files stay beside the figures (docs/figures/data/),
# so `specscope plot` can redraw them without rerunning anything.
#
#   scripts/figures.sh [OUT_DIR]      (default docs/figures; about 15 minutes on 2 cores)
#   KEEP_PROFILE=1 scripts/figures.sh (keeps OUT_DIR/data/profile.json)
#
# Two benches: priced by this machine's cost profile (measured tokens/s; the block
# sizes RecGuide chooses here), and by the B200 roofline profile of NLD-8B (the
# decisions a GPU would make, with modeled tokens/s), in OUT_DIR/b200-modeled/.
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-docs/figures}"
data="$out/data"
mkdir -p "$data" "$out/b200-modeled"
export CARGO_TERM_COLOR=never
cargo build --release --bin specscope
bin=target/release/specscope
conc="${CONCURRENCY:-1,2,4,8,16}"
limit="${LIMIT:-4}"

"$bin" bench --configs ar,linear,recguide,recguide-throughput --blocks 8,16,32 \
  --concurrency "$conc" --limit "$limit" --max-new-tokens 128 --repeats 2 --requests-per-slot 0 \
  --cost-profile cpu --force --json "$data/bench-cpu.json"
"$bin" bench --configs ar,linear,recguide --blocks 8,16,32 \
  --concurrency "$conc" --limit "$limit" --max-new-tokens 128 --requests-per-slot 0 \
  --cost-profile b200-nld8b --force --json "$data/bench-b200.json"
# The default chat's options (the paper preset), 10 held-out prompts per family.
"$bin" trace record --limit 10 --force --out "$data/session.jsonl"
# Forward latency depends on the architecture, not the weights: KEEP_PROFILE=1 keeps
# the measured profile.json when only the weights changed.
if [ "${KEEP_PROFILE:-0}" != 1 ] || [ ! -f "$data/profile.json" ]; then
  "$bin" profile --rows 1,2,4,8 --tokens 1,4,8,16,32 --cache 256,1024 --repeats 5 \
    --force --json "$data/profile.json"
fi

"$bin" plot --bench "$data/bench-cpu.json" --recording "$data/session.jsonl" \
  --profile "$data/profile.json" --out "$out" --force
"$bin" plot --bench "$data/bench-b200.json" --out "$out/b200-modeled" --force
ls "$out" "$out/b200-modeled"
