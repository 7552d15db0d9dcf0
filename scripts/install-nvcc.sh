#!/usr/bin/env bash
# Installs nvcc from Debian's nvidia-cuda-toolkit (CUDA 11.8 on bookworm) when
# it is missing. The package lives in the `contrib non-free` components, which
# the stock deb822 sources do not list, so they are added first.
set -euo pipefail
if command -v nvcc >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
src=/etc/apt/sources.list.d/debian.sources
if [ -f "$src" ] && ! grep -q 'non-free' "$src"; then
  $SUDO sed -i 's/^Components: main$/Components: main contrib non-free non-free-firmware/' "$src"
elif [ ! -f "$src" ]; then
  echo "deb http://deb.debian.org/debian bookworm main contrib non-free" |
    $SUDO tee /etc/apt/sources.list.d/specscope-cuda.list >/dev/null
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nvidia-cuda-toolkit >/dev/null
nvcc --version | tail -1
