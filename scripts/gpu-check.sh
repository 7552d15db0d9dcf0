#!/usr/bin/env bash
# The GPU check, from a prebuilt binary: no cargo, no network, nothing large carried.
# It writes its own NLD-geometry checkpoint, and a short report of what ran and what
# failed, step by step.
#
#   scripts/gpu-check.sh [OUT_DIR]
#
# Steps, in order of value (a step that no longer fits the time left is skipped):
#   env        the GPU, the driver, the binary and the CUDA libraries it will load
#   check      the fused kernel's self-check; bf16 on the device against f32 on the CPU
#              (top-1 agreement); every mode = AR on the device (bundled model)
#   synthetic  a random checkpoint of $GEOMETRY (NLD-8B in bf16 by default) in $WORK
#   latency    forward ms against query tokens (1 … 4096) and context, one row
#   profile    rows × tokens × context as a cost profile (`--cost-profile FILE` reads
#              it), each point beside the roofline model's ms for this GPU
#   bench      AR, LinearSS and RecGuide over C = 1 … 64 on the synthetic checkpoint
#              (tokens meaningless, forwards and times real): measured tokens/s beside
#              the modeled ones
#
# OUT_DIR (default gpu-check-DATE) receives at most 7 small files: report.txt,
# report.json, steps.log and each step's JSON (check, latency, profile, bench).
#
# Environment:
#   SPECSCOPE_BIN     the binary [target-cuda/release/specscope; built with cargo
#                     first when it is missing and cargo is here]
#   GPU_CHECK_DEVICE  cuda [default], or cpu: the same steps at toy sizes, a check of
#                     the script and of the binary without a GPU
#   GEOMETRY          synthetic geometry [nld-8b on cuda, toy on cpu]
#   GPU               roofline GPU to compare with: b200, h200 or h100 [from nvidia-smi]
#   MODEL             the model `check` runs [the bundled model]
#   BUDGET            seconds for everything [480]
#   WORK              where the checkpoint goes (17 GB for nld-8b) [a temporary
#                     directory, removed at the end]
#   CUDA_LIB_DIRS     extra directories to search for the CUDA libraries (colon-separated)
set -uo pipefail
cd "$(dirname "$0")/.."
start_all=$(date +%s)

out="${1:-gpu-check-$(date -u +%Y%m%d-%H%M%S)}"
device="${GPU_CHECK_DEVICE:-cuda}"
budget="${BUDGET:-480}"
# Inputs checked before anything runs: BUDGET reaches shell arithmetic (where text is
# evaluated), and the report must land in a directory of its own.
die() {
  echo "gpu-check: $*" >&2
  exit 2
}
[[ "$budget" =~ ^[0-9]{1,6}$ ]] || die "BUDGET=$budget: a whole number of seconds (e.g. 480)"
[ "$budget" -ge 60 ] || die "BUDGET=$budget: under 60 s no step fits"
case "$device" in cuda | cpu) ;; *) die "GPU_CHECK_DEVICE=$device: cuda or cpu" ;; esac
case "${GPU:-h100}" in b200 | h200 | h100) ;; *) die "GPU=$GPU: b200, h200 or h100" ;; esac
[ ! -e "$out" ] || [ -d "$out" ] || die "$out exists and is not a directory: name a directory for the report"
mkdir -p "$out" || die "cannot create the directory $out"
out="$(cd "$out" && pwd)" || die "cannot enter $out"
[ -w "$out" ] || die "cannot write in $out"
log="$out/steps.log"
: >"$log"
bin="${SPECSCOPE_BIN:-target-cuda/release/specscope}"
work="${WORK:-$(mktemp -d)}"
[ -n "${WORK:-}" ] || trap 'rm -rf "$work"' EXIT

if [ "$device" = cuda ]; then
  geometry="${GEOMETRY:-nld-8b}"
  gpu_line="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
  if [ -z "${GPU:-}" ]; then
    case "$gpu_line" in
      *B200*) GPU=b200 ;; *H200*) GPU=h200 ;; *) GPU=h100 ;;
    esac
  fi
  # Sizes of a GPU run.
  check_args=(--dtype bf16 --limit 2 --max-new-tokens 48 --concurrency 1,8)
  latency_args=(--rows 1 --tokens 1,2,4,8,16,32,64,128,256,512,1024,2048,4096 --cache 0,1024,4096 --repeats 3)
  profile_args=(--rows 1,2,4,8,16,32,64 --tokens 1,4,8,16,32 --cache 256,1024 --repeats 3)
  bench_args=(--concurrency 1,2,4,8,16,32,64 --limit 22 --max-new-tokens 24 --blocks 16,32)
  timeouts=(check=110 synthetic=100 latency=60 profile=90 bench=170)
else
  geometry="${GEOMETRY:-toy}"
  gpu_line="none (GPU_CHECK_DEVICE=$device)"
  GPU="${GPU:-h100}"
  check_args=(--dtype bf16 --limit 1 --max-new-tokens 12 --concurrency 1,2)
  latency_args=(--rows 1 --tokens 1,8,64 --cache 0,64 --repeats 1)
  profile_args=(--rows 1,2 --tokens 1,8 --cache 16,64 --repeats 1)
  bench_args=(--concurrency 1,2 --limit 1 --max-new-tokens 8 --blocks 8)
  timeouts=(check=120 synthetic=30 latency=30 profile=30 bench=60)
fi
timeout_of() {
  local kv
  for kv in "${timeouts[@]}"; do [ "${kv%%=*}" = "$1" ] && echo "${kv#*=}"; done
}

# The CUDA libraries: the binary opens libcublas.so.13 and friends by name at run time
# (vendor/README.md). A PyTorch install keeps them under site-packages/nvidia/*/lib,
# which the loader does not search: put every such directory on LD_LIBRARY_PATH.
lib_dirs=()
if [ "$device" = cuda ]; then
  roots=()
  for py in python3 python; do
    command -v "$py" >/dev/null 2>&1 || continue
    while IFS= read -r d; do roots+=("$d"); done < <("$py" -c 'import site, sys
print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
    break
  done
  IFS=: read -r -a extra <<<"${CUDA_LIB_DIRS:-}"
  for r in "${roots[@]}"; do
    [ -d "$r/nvidia" ] || continue
    while IFS= read -r d; do lib_dirs+=("$d"); done < <(find "$r/nvidia" -maxdepth 3 -name 'libcu*.so.*' -printf '%h\n' 2>/dev/null | sort -u)
  done
  for d in "${extra[@]}" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -n "$d" ] && [ -d "$d" ] && lib_dirs+=("$d")
  done
  if [ "${#lib_dirs[@]}" -gt 0 ]; then
    joined="$(IFS=:; echo "${lib_dirs[*]}")"
    export LD_LIBRARY_PATH="$joined${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
fi

names=()
states=()
secs=()
# step NAME COMMAND...: runs it under its timeout, output appended to steps.log.
step() {
  local name="$1"
  shift
  local limit left t0 rc
  limit="$(timeout_of "$name")"
  limit="${limit:-60}"
  left=$((budget - ($(date +%s) - start_all)))
  names+=("$name")
  if [ "$left" -lt 15 ]; then
    states+=("skipped (time)")
    secs+=(0)
    echo "== $name: skipped, ${left}s of the budget left" | tee -a "$log"
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit="$left"
  echo "== $name (at most ${limit}s): $*" | tee -a "$log"
  t0=$(date +%s)
  timeout --kill-after=5 "$limit" "$@" >>"$log" 2>&1
  rc=$?
  secs+=($(($(date +%s) - t0)))
  case "$rc" in
    0) states+=("ok") ;;
    124 | 137) states+=("TIMEOUT after ${limit}s") ;;
    *) states+=("FAILED, exit $rc") ;;
  esac
  echo "   ${states[-1]} ($(($(date +%s) - t0)) s)" | tee -a "$log"
  return 0
}

if [ ! -x "$bin" ]; then
  if command -v cargo >/dev/null 2>&1; then
    features=()
    [ "$device" = cuda ] && features=(--features cuda)
    echo "building $bin (no prebuilt binary)" | tee -a "$log"
    CARGO_TARGET_DIR="${bin%/release/specscope}" CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-80}" \
      cargo build --release "${features[@]}" --bin specscope >>"$log" 2>&1 || true
  fi
  if [ ! -x "$bin" ]; then
    echo "gpu-check: no binary at $bin and no cargo to build one: set SPECSCOPE_BIN" | tee -a "$log" >&2
    exit 1
  fi
fi

env_info() {
  echo "host: $(uname -srm); $(ldd --version 2>/dev/null | head -1)"
  echo "GPU: $gpu_line"
  echo "binary: $bin"
  echo "libraries the binary links (none of CUDA's expected):"
  ldd "$bin" | sed 's/^/  /'
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  if [ "$device" = cuda ]; then
    nvidia-smi || true
  fi
}
# `timeout` runs programs, not functions: env_info runs in a child bash.
export -f env_info
export bin gpu_line device
model_args=(--device "$device")
[ -n "${MODEL:-}" ] && model_args+=(--model "$MODEL")
synth="$work/$geometry"

step env bash -c env_info
step check "$bin" check "${model_args[@]}" "${check_args[@]}" --force --json "$out/check.json"
step synthetic "$bin" synthetic "$synth" --geometry "$geometry" --force
step latency "$bin" profile --model "$synth" --device "$device" "${latency_args[@]}" \
  --roofline "$GPU" --force --json "$out/latency.json"
step profile "$bin" profile --model "$synth" --device "$device" "${profile_args[@]}" \
  --roofline "$GPU" --force --json "$out/profile.json"
cost=("--cost-profile" "$GPU-nld8b")
step bench "$bin" bench --model "$synth" --device "$device" --configs ar,linear,recguide \
  --requests-per-slot 0 "${bench_args[@]}" "${cost[@]}" --force --json "$out/bench.json"

# A skipped or failed step fails the check: a report with no step run is no check.
failed=0
for s in "${states[@]}"; do [ "$s" = ok ] || failed=$((failed + 1)); done
{
  echo "specscope gpu-check, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(($(date +%s) - start_all)) s of ${budget}"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "device: $device; GPU: ${gpu_line:-unknown}; roofline compared: $GPU; geometry: $geometry"
  searched="${lib_dirs[*]:-}"
  echo "CUDA libraries searched in: ${searched:-the default paths of the loader}"
  for i in "${!names[@]}"; do
    printf '%-10s %s (%s s)\n' "${names[$i]}" "${states[$i]}" "${secs[$i]}"
  done
  echo
  echo "check:"
  sed -n '/^kernel\|^agreement\|^lossless/p' "$log" | sed 's/^/  /'
  echo "latency and profile (measured/ = measured ÷ the $GPU roofline):"
  sed -n '/^ *cache  *rows/,/^logits statistics/p' "$log" | sed 's/^/  /'
  grep -h '^fitted cost' "$log" | sed 's/^/  /'
  echo "bench (mod = modeled by $GPU-nld8b's roofline prices; tok/s = measured):"
  sed -n '/^config/,/^mod = /p' "$log" | sed 's/^/  /'
} >"$out/report.txt"

esc() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g'; }
{
  printf '{\n  "device": "%s",\n  "gpu": "%s",\n  "roofline": "%s",\n' "$(esc "$device")" "$(esc "${gpu_line:-}")" "$GPU"
  printf '  "geometry": "%s",\n  "commit": "%s",\n  "steps": [\n' "$geometry" "$(git rev-parse HEAD 2>/dev/null)"
  for i in "${!names[@]}"; do
    sep=","
    [ "$i" = $((${#names[@]} - 1)) ] && sep=""
    printf '    {"name": "%s", "state": "%s", "secs": %s}%s\n' "${names[$i]}" "$(esc "${states[$i]}")" "${secs[$i]}" "$sep"
  done
  printf '  ],\n  "files": ["check.json", "latency.json", "profile.json", "bench.json", "steps.log"]\n}\n'
} >"$out/report.json"

cat "$out/report.txt"
echo "report: $out/report.txt"
[ "$failed" = 0 ]
