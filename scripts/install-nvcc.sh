#!/usr/bin/env bash
# Installs nvcc from the distribution's nvidia-cuda-toolkit package when it is
# missing (Debian: CUDA 11.8 on bookworm, 12.4 on trixie; Ubuntu: multiverse). The
# `cuda` build needs nvcc only to compile kernels to PTX; the binary loads the host's
# CUDA libraries at run time, whatever version this installs.
#
# The package lives in components the stock sources may not list (Debian's contrib
# and non-free, Ubuntu's multiverse): they are added for this distribution's own
# release, never another's. Other distributions are refused with what to do instead.
set -euo pipefail
if command -v nvcc >/dev/null 2>&1; then
  exit 0
fi
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
        $SUDO sed -i 's/^Components: main$/Components: main contrib non-free non-free-firmware/' "$src"
      fi
    elif ! grep -rqs '^deb .* non-free' /etc/apt/sources.list /etc/apt/sources.list.d/; then
      echo "deb http://deb.debian.org/debian $codename main contrib non-free" | $SUDO tee "$list" >/dev/null
    fi
    ;;
  ubuntu)
    if ! grep -rqs 'multiverse' /etc/apt/sources.list /etc/apt/sources.list.d/; then
      mirror=http://archive.ubuntu.com/ubuntu
      case "$(dpkg --print-architecture)" in amd64 | i386) ;; *) mirror=http://ports.ubuntu.com/ubuntu-ports ;; esac
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
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nvidia-cuda-toolkit >/dev/null
nvcc --version | tail -1
