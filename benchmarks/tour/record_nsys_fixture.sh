#!/usr/bin/env bash
# A small real Nsight Systems SQLite export of the NVTX-marked demo loop
# (benchmarks/tour/nvtx_denoise.py), with GPU metrics, for the trace-reader tests
# (tests/data/nsys/).  GPU machine with nsys on PATH:
#   bash benchmarks/tour/record_nsys_fixture.sh OUT_DIR
# then check it:  python -m loopscope analyze OUT_DIR/nvtx_denoise.sqlite
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^set /s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
out="${1:?usage: record_nsys_fixture.sh OUT_DIR}"
mkdir -p "$out"
cd "$(dirname "$0")/.."
if ! command -v nsys >/dev/null; then
  echo "record_nsys_fixture: nsys is not on PATH (Nsight Systems CLI needed)" >&2
  exit 2
fi
nsys profile --force-overwrite true --trace=cuda,nvtx --cuda-memory-usage=false \
  --gpu-metrics-devices=all --gpu-metrics-frequency=2000 -o "$out/nvtx_denoise" python benchmarks/tour/nvtx_denoise.py --steps 3 --depth 4
nsys export --force-overwrite true --type sqlite -o "$out/nvtx_denoise.sqlite" "$out/nvtx_denoise.nsys-rep"
ls -la "$out/nvtx_denoise.sqlite"
python -m loopscope analyze "$out/nvtx_denoise.sqlite" --steps 'Denoise_Step_\d+'
