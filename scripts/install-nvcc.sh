#!/usr/bin/env bash
# Installs nvcc from the distribution's nvidia-cuda-toolkit package when it is
# missing (Debian: CUDA 11.8 on bookworm, 12.4 on trixie; Ubuntu: multiverse). The
# `cuda` build needs nvcc only to compile kernels to PTX; the binary loads the host's
# CUDA libraries at run time, whatever version this installs.
#
# The package lives in components the stock sources may not list (Debian's non-free,
# Ubuntu's multiverse): a file of ours adds them for this distribution's own
# release, never another's. Other distributions are refused with what to do instead.
#
# Before it changes anything it says what it will do (the apt source file it would
# add, about 5 GiB of packages on Debian bookworm: the package's dependencies are
# CUDA 11.8's libraries, which specscope never loads) and, in a terminal, asks
# (`--yes` skips the question; CI is not a terminal). Once the package lists are read
# it prints apt's own package count and size, and apt's lines show the progress of
# the download and the unpacking. The stock apt sources are never edited.
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
# The component nvidia-cuda-toolkit is in, and whether a source already enables it
# (one-line or deb822 sources; `non-free-firmware` is not `non-free`). The stock
# files are never edited: a missing component comes in a file of ours.
has() { grep -rqsE "(^|[[:space:]])$1([[:space:]]|\$)" /etc/apt/sources.list /etc/apt/sources.list.d/; }
# apt refuses two sources for one URI and suite that name different keyrings
# ("Conflicting values set for option Signed-By"): ours names the one the stock
# source of that URI names, in a deb822 stanza or a one-line entry's [signed-by=…].
signed_by() {
  local uri="$1" stanza line
  stanza=$(awk -v RS= -v uri="$uri" '$0 ~ ("URIs:[^\n]*" uri "/?([ \t\n]|$)")' \
    /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^Signed-By:[[:space:]]*//p' | head -1)
  if [ -n "$stanza" ]; then echo "$stanza"; return; fi
  line=$(grep -hsE "^deb[[:space:]]+\[[^]]*signed-by=[^]]*\][[:space:]]+$uri/?[[:space:]]" \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list | head -1)
  [ -n "$line" ] && printf '%s\n' "$line" | sed -E 's/.*signed-by=([^] ]+).*/\1/'
  return 0
}
option() { [ -n "$1" ] && printf '[signed-by=%s] ' "$1"; return 0; }
line=""
case "${ID:-}" in
  debian)
    uri=http://deb.debian.org/debian
    has non-free || line="deb $(option "$(signed_by "$uri")")$uri $codename contrib non-free"
    ;;
  ubuntu)
    if ! has multiverse; then
      mirror=http://archive.ubuntu.com/ubuntu
      case "$(dpkg --print-architecture)" in amd64 | i386) ;; *) mirror=http://ports.ubuntu.com/ubuntu-ports ;; esac
      line="deb $(option "$(signed_by "$mirror")")$mirror $codename multiverse"
    fi
    ;;
  *)
    echo "install-nvcc.sh: ${PRETTY_NAME:-this distribution} is neither Debian nor Ubuntu;" \
      "install NVIDIA's CUDA toolkit (nvcc) from https://developer.nvidia.com/cuda-downloads" \
      "or your distribution, or set NVCC=/path/to/nvcc" >&2
    exit 1
    ;;
esac
# What will be done, before anything is.
say "nvcc is missing: this installs ${PRETTY_NAME:-the distribution}'s nvidia-cuda-toolkit, only for"
say "nvcc (kernels/ compiled to PTX). Its dependencies are the distribution's CUDA libraries,"
say "which the specscope binary never loads: about 5 GiB on Debian bookworm (apt's exact"
say "figures follow once the package lists are read). It takes about 5 minutes here."
if [ -n "$line" ]; then
  say "it first writes $list with: $line"
  say "(the package is in that component; delete the file to undo)"
fi
say "undo the install: apt-get remove nvidia-cuda-toolkit && apt-get autoremove"
if [ -z "$yes" ] && [ -t 0 ] && [ -t 2 ]; then
  printf 'install-nvcc.sh: go on? [y/N] ' >&2
  answer=""
  read -r answer || true
  case "$answer" in y | Y | yes) ;; *) say "nothing changed"; exit 1 ;; esac
fi
if [ -n "$line" ]; then
  echo "$line" | $SUDO tee "$list" >/dev/null
fi
say "reading the package lists (apt-get update)"
if ! $SUDO apt-get update -qq; then
  # Never leave apt broken by a file of ours.
  if [ -n "$line" ]; then
    $SUDO rm -f "$list"
    say "apt-get update failed with $list; removed it (apt's sources are as they were)"
  fi
  exit 1
fi
# apt's own count of packages and disk space, before anything is installed.
plan=$(LC_ALL=C $SUDO apt-get install --no-install-recommends --assume-no nvidia-cuda-toolkit 2>/dev/null || true)
summary=$(printf '%s\n' "$plan" | grep -E '^[0-9]+ upgraded|^Need to get|^After this operation' || true)
say "apt says:"
printf '%s\n' "${summary:-  (apt gave no summary)}" | sed 's/^/    /' >&2
start=$(date +%s)
# One line per package downloaded and unpacked: the progress of a 5 GiB install.
set +e
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dpkg::Progress-Fancy=0 \
  --no-install-recommends nvidia-cuda-toolkit |
  grep -E '^(Get:|Unpacking|Setting up nvidia-cuda-toolkit)'
status=${PIPESTATUS[0]}
set -e
[ "$status" = 0 ] || { say "apt-get install failed (exit $status)"; exit 1; }
command -v nvcc >/dev/null 2>&1 || { say "apt finished but no nvcc is on PATH"; exit 1; }
say "nvcc installed in $(($(date +%s) - start)) s: $(nvcc --version | tail -1)"
