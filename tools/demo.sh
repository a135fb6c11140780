#!/usr/bin/env bash
# tools/demo.sh -- the README's main job: installs dependencies (Debian packages and the project environment .venv),
# fetches the data, builds composer-cpp and trains the demo (a CNN on Fashion-MNIST to >= 90% test accuracy, about two
# minutes on 2 CPU cores). Extra arguments are config overrides, e.g. `bash tools/demo.sh max_duration=1ep`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
bash tools/fetch_data.sh
export CCACHE_BASEDIR="$PWD" CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target composer-cpp
./build/tools/composer-cpp train examples/configs/fashion_cnn.yaml "$@"
