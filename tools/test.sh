#!/usr/bin/env bash
# tools/test.sh -- the README's test command: installs dependencies (Debian packages and the project environment
# .venv), fetches the data, builds, runs every test (labels unit, slow, dist, peer; peer compares with MosaicML
# Composer running in .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
bash tools/fetch_data.sh fashion-mnist text gpt2 smollm2   # smollm2: the pretrained-model tests
python3 tools/ci/check_layering.py   # component folders include each other only downwards (docs/architecture.md)
python3 tools/ci/check_sizes.py      # functions within 80 lines, files within 500, but for a commented allow-list
bash tools/ci/check_format.sh       # every C++ file as the committed .clang-format writes it
# ccache keys on paths relative to the checkout, so a fresh clone reuses what an earlier one compiled.
export CCACHE_BASEDIR="$PWD" CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
