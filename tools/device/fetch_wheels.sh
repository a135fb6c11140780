#!/usr/bin/env bash
# tools/device/fetch_wheels.sh -- run HERE, before a device run that compares with Composer's Trainer: downloads
# MosaicML Composer and the packages it imports that the device image lacks (../.library/device/KINDS.md lists the
# image's packages) as Python 3.12 wheels into .whl (ignored by git; name it in the device tool's `carry`).
# bench/gpu_suite.sh installs them there with --no-deps into a private folder. Composer 0.32.1 asks for torch<2.7.1;
# the device has a newer torch, so whether it imports there is part of what the run reports.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .whl && mkdir -p .whl
# Versions: the project environment's (tools/constraints.txt), so both sides run the same Composer.
pins=(mosaicml coolname importlib-metadata torch-optimizer pytorch-ranger mosaicml-cli argcomplete arrow backoff gql
      graphql-core websockets prompt-toolkit wcwidth questionary ruamel.yaml validators termcolor types-python-dateutil)
reqs=()
for p in "${pins[@]}"; do
  line="$(grep -ihE "^${p//[-_.]/[-_.]}==" tools/constraints.txt tools/requirements.txt | head -1 || true)"
  reqs+=("${line:-$p}")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any -d .whl "${reqs[@]}"
du -sh .whl
