#!/usr/bin/env bash
# tools/test.sh -- the README's test command: installs dependencies, fetches data, builds, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
if [ -x tools/fetch_data.sh ]; then bash tools/fetch_data.sh data; fi
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
