#!/usr/bin/env bash
# NVIDIA's CUPTI and runtime wheels of CUDA 12.0, 12.6, 12.9 and 13, unpacked
# into DEST/<set>/nvidia/...: the header sets and the libcupti.so.12 that
# tests/capture/test_cupti_stacks.py compiles against and loads (one build
# reads every one of them; doctor on a CPU machine with the CUDA 12 CUPTI).
# Usage: bash .ci/cuda_wheels.sh DEST   (then LOOPSCOPE_TEST_WHEELS=DEST)
set -euo pipefail
dest=$1
mkdir -p "$dest"
fetch() {  # fetch SET SPEC...
  local set=$1; shift
  [ -d "$dest/$set/nvidia" ] && return 0
  local tmp; tmp=$(mktemp -d)
  python -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_25_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$tmp" "$@"
  for w in "$tmp"/*.whl; do python -m zipfile -e "$w" "$dest/$set"; done
  rm -rf "$tmp"
}
runtime12="nvidia-cuda-runtime-cu12==12.9.79"   # cuda.h for every CUDA 12 set
fetch cu12-12.0 "nvidia-cuda-cupti-cu12==12.0.146" "$runtime12"
fetch cu12-12.6 "nvidia-cuda-cupti-cu12==12.6.80" "$runtime12"
fetch cu12-12.9 "nvidia-cuda-cupti-cu12==12.9.79" "$runtime12"
# the same specs as pyproject.toml's build requirements: the headers the build used
fetch cu13 "nvidia-cuda-cupti>=13,<14" "nvidia-cuda-runtime>=13,<14" "nvidia-cuda-crt>=13,<14"
