#!/usr/bin/env bash
# Installs nvcc from the distribution's nvidia-cuda-toolkit package when it is
# missing (Debian: CUDA 11.8 on bookworm, 12.4 on trixie; Ubuntu: multiverse). The
# `cuda` build needs nvcc only to compile kernels to PTX; the binary loads the host's
# CUDA libraries at run time, whatever version this installs.
#
# The package lives in components the stock sources may not list (Debian's contrib
# and non-free, Ubuntu's multiverse): they are added for this distribution's own
# release, never another's. Other distributions are refused with what to do instead.
#
# Before it changes anything it says what it will do: which apt source it edits, the
# packages and the disk space apt reports (about 5 GiB on Debian bookworm: the
# package's dependencies are CUDA 11.8's libraries, which specscope never loads), and
# in a terminal it asks first (`--yes` skips the question; CI is not a terminal).
# apt's own lines show the progress of the download and the unpacking.
set -euo pipefail
yes=""
for a in "$@"; do
  case "$a" in
    --yes | -y) yes=1 ;;
    *) echo "install-nvcc.sh: unknown argument '$a' (only --yes)" >&2; exit 2 ;;
  esac
done
if command -v nvcc >/dev/null 2>&1; then
  exit 0
fi
say() { echo "install-nvcc.sh: $*" >&2; }
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
if [ ! -r /etc/os-release ]; then
  echo "install-nvcc.sh: no /etc/os-release; install NVIDIA's CUDA toolkit (nvcc) yourself, or set NVCC=/path/to/nvcc" >&2
  exit 1
fi
# shellcheck disable=SC1091
. /etc/os-release
codename="${VERSION_CODENAME:-}"
if [ -z "$codename" ]; then
  echo "install-nvcc.sh: /etc/os-release names no VERSION_CODENAME; install nvcc yourself or set NVCC" >&2
  exit 1
fi
list=/etc/apt/sources.list.d/specscope-cuda.list
case "${ID:-}" in
  debian)
    src=/etc/apt/sources.list.d/debian.sources
    if [ -f "$src" ]; then
      # deb822: widen the stock entry's components.
      if ! grep -q 'non-free' "$src"; then
        say "adding contrib non-free non-free-firmware to the Components of $src (nvidia-cuda-toolkit is in non-free)"
        $SUDO sed -i 's/^Components: main$/Components: main contrib non-free non-free-firmware/' "$src"
      fi
    elif ! grep -rqs '^deb .* non-free' /etc/apt/sources.list /etc/apt/sources.list.d/; then
      say "writing $list (Debian $codename main contrib non-free; delete it to undo)"
      echo "deb http://deb.debian.org/debian $codename main contrib non-free" | $SUDO tee "$list" >/dev/null
    fi
    ;;
  ubuntu)
    if ! grep -rqs 'multiverse' /etc/apt/sources.list /etc/apt/sources.list.d/; then
      mirror=http://archive.ubuntu.com/ubuntu
      case "$(dpkg --print-architecture)" in amd64 | i386) ;; *) mirror=http://ports.ubuntu.com/ubuntu-ports ;; esac
      say "writing $list (Ubuntu $codename multiverse; delete it to undo)"
      echo "deb $mirror $codename multiverse" | $SUDO tee "$list" >/dev/null
    fi
    ;;
  *)
    echo "install-nvcc.sh: ${PRETTY_NAME:-this distribution} is neither Debian nor Ubuntu;" \
      "install NVIDIA's CUDA toolkit (nvcc) from https://developer.nvidia.com/cuda-downloads" \
      "or your distribution, or set NVCC=/path/to/nvcc" >&2
    exit 1
    ;;
esac
say "reading the package lists (apt-get update)"
$SUDO apt-get update -qq
# apt's own count of packages and disk space, before anything is installed.
plan=$(LC_ALL=C $SUDO apt-get install --no-install-recommends --assume-no nvidia-cuda-toolkit 2>/dev/null || true)
summary=$(printf '%s\n' "$plan" | grep -E '^[0-9]+ upgraded|^Need to get|^After this operation' || true)
say "will install nvidia-cuda-toolkit, only for nvcc (kernels/ compiled to PTX); its dependencies are"
say "this distribution's CUDA libraries, which the specscope binary never loads. apt says:"
printf '%s\n' "${summary:-  (apt gave no summary)}" | sed 's/^/    /' >&2
say "undo: apt-get remove nvidia-cuda-toolkit && apt-get autoremove"
if [ -z "$yes" ] && [ -t 0 ] && [ -t 2 ]; then
  printf 'install-nvcc.sh: go on? [y/N] ' >&2
  read -r answer
  case "$answer" in y | Y | yes) ;; *) say "nothing installed"; exit 1 ;; esac
fi
start=$(date +%s)
# One line per package downloaded and unpacked: the progress of a 5 GiB install.
set +e
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q -o Dpkg::Progress-Fancy=0 \
  --no-install-recommends nvidia-cuda-toolkit |
  grep -E '^(Get:|Unpacking|Setting up nvidia-cuda-toolkit)'
status=${PIPESTATUS[0]}
set -e
[ "$status" = 0 ] || { say "apt-get install failed (exit $status)"; exit 1; }
command -v nvcc >/dev/null 2>&1 || { say "apt finished but no nvcc is on PATH"; exit 1; }
say "nvcc installed in $(($(date +%s) - start)) s: $(nvcc --version | tail -1)"
