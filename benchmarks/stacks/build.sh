#!/usr/bin/env bash
# Builds benchmarks/stacks/kstack.cu on a GPU machine (nvcc there):
#   bash build.sh 12 WHEEL_DIR OUT_DIR  against the CUDA 12 runtime of the carried wheels
#        (nvidia-cuda-runtime-cu12, nvidia-cuda-cupti-cu12: unpacked into OUT_DIR/nvidia/...,
#        a pip layout, so loopscope finds libcupti.so.12 beside libcudart.so.12)
#   bash build.sh 13 - OUT_DIR           against the toolkit's CUDA 13 runtime
# -> OUT_DIR/libkstack.so
set -eu
case "${1:-}" in -h|--help|"") sed -n '2,/^set /s/^# \{0,1\}//p' "$0" | grep -v '^set '; [ -n "${1:-}" ]; exit $? ;; esac
major=$1; wheels=$2; out=$3; mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
if [ "$major" = 12 ]; then
  for w in "$wheels"/nvidia_cuda_runtime_cu12-*.whl "$wheels"/nvidia_cuda_cupti_cu12-*.whl; do
    python3 -m zipfile -e "$w" "$out"
  done
  lib="$out/nvidia/cuda_runtime/lib"; ln -sf libcudart.so.12 "$lib/libcudart.so"
  # the CUDA 12.9 runtime's own headers first, nvcc's for the rest
  nvcc -arch=sm_90 -shared -Xcompiler -fPIC -cudart none -I"$out/nvidia/cuda_runtime/include" \
    "$here/kstack.cu" -o "$out/libkstack.so" -L"$lib" -lcudart -Xlinker -rpath="$lib"
else
  nvcc -arch=sm_90 -shared -Xcompiler -fPIC -cudart shared "$here/kstack.cu" -o "$out/libkstack.so"
fi
echo "built $out/libkstack.so (CUDA $major runtime)"
