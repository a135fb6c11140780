#!/usr/bin/env bash
# tools/device/fetch_deps.sh -- run HERE (Debian), before a device run: downloads the build dependencies the device
# machine lacks (it has PyTorch, CMake, ninja and nvcc but no Debian packages and no network) and unpacks them into
# .deps/device (ignored by git; name it in the device tool's `carry`). About 8 MB:
#   nlohmann-json3-dev (headers + CMake config), zlib1g-dev (headers), libgloo-dev (headers for the Gloo backend),
#   googletest (sources, built there), libpcre2-dev and libpcre2-8-0 (PCRE2's header and library, for the tokenizers).
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=.deps/device
rm -rf "$dest" && mkdir -p "$dest/debs"
(cd "$dest/debs" && apt-get download nlohmann-json3-dev zlib1g-dev libgloo-dev googletest libpcre2-dev libpcre2-8-0)
for deb in "$dest"/debs/*.deb; do dpkg -x "$deb" "$dest"; done
rm -rf "$dest/debs" "$dest/usr/share/doc" "$dest/usr/share/man"
du -sh "$dest"
