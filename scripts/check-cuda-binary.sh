#!/usr/bin/env bash
# Keeps the CUDA binary's packaging true (CI runs it after the `--features cuda`
# build): it names no CUDA library, runs on the CPU, says in one line that it has no
# GPU, and the GPU check's prebuilt path runs with it in CPU mode.
#
#   scripts/check-cuda-binary.sh BINARY
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:?usage: scripts/check-cuda-binary.sh BINARY}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# 1. No CUDA library by name: the host's are opened at run time (vendor/README.md).
if ldd "$bin" | grep -E 'lib(cuda|cudart|cublas|cublasLt|curand|nvrtc)\.so'; then
  echo "check-cuda-binary: $bin links the CUDA libraries above by name" >&2
  exit 1
fi
echo "ok: $bin names no CUDA library"

# 2. --device cuda where no GPU can be opened: one line on stderr, a failing status.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "skipped: a GPU is present, so --device cuda is not expected to fail"
else
  if "$bin" run --device cuda --max-new-tokens 4 -p hello >"$tmp/out" 2>"$tmp/err"; then
    echo "check-cuda-binary: --device cuda succeeded without a GPU" >&2
    exit 1
  fi
  if [ "$(wc -l <"$tmp/err")" != 1 ] || ! grep -qi cuda "$tmp/err"; then
    echo "check-cuda-binary: --device cuda without a GPU should fail in one line naming CUDA; it wrote:" >&2
    cat "$tmp/err" >&2
    exit 1
  fi
  echo "ok: --device cuda without a GPU: $(cat "$tmp/err")"
fi

# 3. With every CUDA library on this machine hidden (where a mount namespace can be
# made): --device cpu still runs, and --device cuda names what it cannot load.
hide_and_run() {
  local f
  for f in $(ldconfig -p | grep -Eo '/[^ ]*lib(cuda|cudart|cublas|cublasLt|curand|nvrtc)\.so[.0-9]*' | sort -u); do
    mount --bind /dev/null "$f" 2>/dev/null || exit 2 # cannot hide: skip, not fail
  done
  "$bin" run --device cpu --max-new-tokens 4 -p hello >/dev/null 2>&1 || exit 1
  "$bin" run --device cuda --max-new-tokens 4 -p hello 2>&1 >/dev/null | grep -q 'cannot load lib'
}
hidden=2
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
  export -f hide_and_run
  export bin
  unshare -m bash -c hide_and_run && hidden=0 || hidden=$?
fi
case "$hidden" in
  0) echo "ok: with no CUDA library, --device cpu runs and --device cuda names the missing library" ;;
  2) echo "skipped: hiding the CUDA libraries needs root and a mount namespace" ;;
  *)
    echo "check-cuda-binary: with the CUDA libraries hidden, --device cpu failed or --device cuda did not name a library" >&2
    exit 1
    ;;
esac

# 4. The GPU check from this prebuilt binary, on the CPU (toy sizes).
GPU_CHECK_DEVICE=cpu SPECSCOPE_BIN="$bin" BUDGET=400 WORK="$tmp/work" \
  scripts/gpu-check.sh "$tmp/report"
files="$(find "$tmp/report" -type f | wc -l)"
bytes="$(du -sb "$tmp/report" | cut -f1)"
if [ "$files" -gt 8 ] || [ "$bytes" -gt $((16 << 20)) ]; then
  echo "check-cuda-binary: the report is $files files, $bytes bytes (at most 8 and 16 MiB)" >&2
  exit 1
fi
echo "ok: gpu-check.sh from the prebuilt binary on the CPU ($files files, $bytes bytes)"
