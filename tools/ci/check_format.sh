#!/usr/bin/env bash
# tools/ci/check_format.sh -- fails when a C++ file differs from what the committed .clang-format makes of it.
#   bash tools/ci/check_format.sh          check (CI runs this)
#   bash tools/ci/check_format.sh --fix    rewrite the files in place
set -euo pipefail
cd "$(dirname "$0")/../.."
mapfile -t files < <(git ls-files '*.h' '*.cpp')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  echo "check_format: formatted ${#files[@]} files"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf '%s\n' "${bad[@]}"
  echo "check_format: ${#bad[@]} file(s) differ from .clang-format; run: bash tools/ci/check_format.sh --fix"
  exit 1
fi
echo "check_format: ${#files[@]} files follow .clang-format ($(clang-format --version | head -1))"
