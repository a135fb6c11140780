# tools/device/configure.sh -- sourced by tools/device/run_checks.sh and bench/gpu_suite.sh ON THE DEVICE MACHINE:
# configure_device_build BUILD LOG configures the project against the PyTorch install's LibTorch (CUDA) with the
# headers tools/device/fetch_deps.sh carried in .deps/device, and without the parts that need Debian libraries the
# machine lacks (CLI: yaml-cpp; TensorBoard: protobuf, libpng; MLflow and object stores: libcurl; streaming: libzstd,
# OpenSSL, libjpeg). TORCH_PREFIX overrides where LibTorch is found (a dry run on Debian).
configure_device_build() {
  local build="$1" log="$2"
  local deps="$PWD/.deps/device/usr"
  local torch_prefix="${TORCH_PREFIX:-$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')}"
  local zlib_lib
  zlib_lib="$(ls /usr/lib/x86_64-linux-gnu/libz.so.1 /lib/x86_64-linux-gnu/libz.so.1 2>/dev/null | head -1)"
  [ -n "$zlib_lib" ] || zlib_lib="$deps/lib/x86_64-linux-gnu/libz.a"
  local pcre2_lib
  pcre2_lib="$(ls /usr/lib/x86_64-linux-gnu/libpcre2-8.so.0 /lib/x86_64-linux-gnu/libpcre2-8.so.0 2>/dev/null | head -1)"
  [ -n "$pcre2_lib" ] || pcre2_lib="$(ls "$PWD"/.deps/device/usr/lib/x86_64-linux-gnu/libpcre2-8.so.0 2>/dev/null | head -1)"
  TORCH_CUDA_ARCH_LIST="9.0" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$torch_prefix" -Dnlohmann_json_DIR="$deps/share/cmake/nlohmann_json" \
    -DZLIB_INCLUDE_DIR="$deps/include" -DZLIB_LIBRARY="$zlib_lib" -DCOMPOSER_GLOO_INCLUDE_DIR="$deps/include" \
    -DCOMPOSER_PCRE2_INCLUDE_DIR="$deps/include" -DCOMPOSER_PCRE2_LIBRARY="$pcre2_lib" \
    -DCOMPOSER_BUILD_TOOLS=OFF -DCOMPOSER_GTEST_SOURCE_DIR="$deps/src/googletest" \
    -DCOMPOSER_WITH_TENSORBOARD=OFF -DCOMPOSER_WITH_MLFLOW=OFF -DCOMPOSER_WITH_OBJECT_STORES=OFF \
    -DCOMPOSER_WITH_STREAMING=OFF > "$log" 2>&1
}
