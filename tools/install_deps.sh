#!/usr/bin/env bash
# tools/install_deps.sh -- installs what Composer C++ needs to build, test and benchmark:
#   1. Debian packages (compiler, CMake, the C++ libraries, Gloo's headers), with apt-get;
#   2. the project environment .venv (git-ignored): PyTorch 2.7.0, whose LibTorch CMake builds against, and
#      MosaicML Composer 0.32.1, the reference the peer tests and benchmarks run beside us (tools/requirements.txt,
#      every version pinned in tools/constraints.txt).
# Idempotent: a second run installs nothing. Needs root (or sudo), Debian 12's archive and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(
  build-essential cmake ninja-build ccache pkg-config
  clang-format                        # tools/ci/check_format.sh (Debian 12: clang-format 14)
  python3 python3-venv                # the project environment's interpreter (Debian's python3.11)
  libgloo-dev                         # gloo/*.h for ProcessGroupGloo.hpp; the wheel ships Gloo's code, not its headers
  libgtest-dev libgmock-dev libbenchmark-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev zlib1g-dev
  libprotobuf-dev protobuf-compiler libpng-dev libboost-dev   # TensorboardLogger (COMPOSER_WITH_TENSORBOARD)
  libcurl4-openssl-dev                # MLFlowLogger, the S3 and HTTP object stores (COMPOSER_WITH_OBJECT_STORES)
  libzstd-dev libssl-dev libjpeg-dev  # StreamingDataset: zstd shards, their hashes (OpenSSL libcrypto), jpeg columns
  libpcre2-dev                        # BpeTokenizer: the pre-tokenizers' Unicode patterns (\p{L}, \p{N})
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PKGS[@]} Debian packages present"
else
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "install_deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The project environment. A stamp holding the requirement files' checksum makes the second run a no-op and a
# changed pin a reinstall.
want="$(cat tools/requirements.txt tools/constraints.txt | sha256sum | cut -d' ' -f1)"
if [ -x .venv/bin/python ] && [ "$(cat .venv/.composer-stamp 2>/dev/null)" = "$want" ]; then
  echo "install_deps: .venv up to date ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'))"
  exit 0
fi
start=$(date +%s)
[ -x .venv/bin/python ] || /usr/bin/python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade -r tools/requirements.txt -c tools/constraints.txt
echo "$want" > .venv/.composer-stamp
echo "install_deps: .venv ready in $(( $(date +%s) - start )) s ($(.venv/bin/python -c 'import torch, composer; print("torch", torch.__version__, "composer", composer.__version__)'))"
