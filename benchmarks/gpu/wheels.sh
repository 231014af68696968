#!/usr/bin/env bash
# Download the wheels of benchmarks/gpu/carried-wheels.txt for a lent GPU machine's CPython 3.12 on x86-64 Linux into
# DIR (default .gpu-wheels, git-ignored), where run_smoke.sh installs them offline. Needs the package index (PyPI).
#   bash benchmarks/gpu/wheels.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.gpu-wheels}
mkdir -p "$dir"
requirements=$(grep -v '^#' benchmarks/gpu/carried-wheels.txt | grep -v '^connection-pool==')
# shellcheck disable=SC2086
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$dir" $requirements
# Snakemake's connection_pool publishes no wheel: build one here (pure Python), since the machine can fetch no
# build dependency.
python3 -m pip wheel --quiet --no-deps -w "$dir" "$(grep '^connection-pool==' benchmarks/gpu/carried-wheels.txt)"
echo "wheels.sh: $(ls "$dir" | wc -l) wheels, $(du -sh "$dir" | cut -f1) in $dir"
