#!/usr/bin/env bash
# The installed package as a C++ user meets it: `cmake --install BUILD --prefix P`, then a project outside the source
# tree (tests/install/consumer) configures with find_package(composer) (CMAKE_PREFIX_PATH: P and LibTorch only),
# builds, and runs. Also checks that no exported target names a path of this build or of the .venv.
# Usage: install_test.sh BUILD_DIR TORCH_CMAKE_DIR WORK_DIR
set -euo pipefail
build=$1 torch_cmake=$2 work=$3
here="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
targets=$(cat "$work"/prefix/lib*/cmake/composer/composerTargets*.cmake)
for baked in "$(cd "$build" && pwd)" "$(cd "$here/../.." && pwd)" .venv /usr/lib/x86_64-linux-gnu; do
  if grep -qF -- "$baked" <<<"$targets"; then
    echo "install_test: the exported targets name '$baked':"
    grep -nF -- "$baked" "$work"/prefix/lib*/cmake/composer/composerTargets*.cmake | head -5
    exit 1
  fi
done
cmake -S "$here/consumer" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix;$torch_cmake" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/consumer" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
if grep -q "may conflict" "$work/build.log"; then
  echo "install_test: the consumer links two CUDA runtimes:"; grep "may conflict" "$work/build.log"; exit 1
fi
if [ "$(ldd "$work/consumer/consumer" | grep -c 'libcudart\.so')" -gt 1 ]; then
  echo "install_test: the consumer loads two CUDA runtimes:"; ldd "$work/consumer/consumer" | grep libcudart; exit 1
fi
"$work/consumer/consumer"
