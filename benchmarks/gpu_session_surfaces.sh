#!/usr/bin/env bash
# One device call for issue 6 (pytest, notebook, command line): build, the
# demo recording, the GPU plugin test, the tour's outputs.  Logs go to $OUT.
# Usage (on the GPU machine, repo root): bash benchmarks/gpu_session_surfaces.sh
# Then: copy $OUT/demo_recording.json.gz to python/loopscope/data/ (the bundled
# demo recording, package data) and paste the outputs into docs/tour.md
# (demo_eager.txt, gpu_tests.log, run.txt; notebook_view_*.png are the pictures).
set -u -o pipefail
OUT=${OUT:-/tmp/loopscope-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
{
  date -u +%Y-%m-%dT%H:%MZ
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
} 2>&1 | tee "$OUT/machine.txt"
LOOPSCOPE_WERROR=1 python3 -m pip install --no-build-isolation --no-deps -q -e . > "$OUT/build.log" 2>&1 \
  || { tail -30 "$OUT/build.log"; exit 1; }
python3 benchmarks/record_demo.py --out "$OUT/demo_recording.json.gz" 2>&1 | tee "$OUT/record_demo.txt" | tail -5
python3 -m pytest tests/gpu -m gpu -v -s -p no:cacheprovider > "$OUT/gpu_tests.log" 2>&1; tail -3 "$OUT/gpu_tests.log"
python3 -m loopscope demo > "$OUT/demo_eager.txt" 2>&1
python3 -m loopscope run --steps denoise_step --max-severe-gaps 0 --json "$OUT/run.json" \
  --trace "$OUT/run_trace.json" benchmarks/denoise_script.py --iterations 10 > "$OUT/run.txt" 2>&1
echo "run exit status: $?" | tee -a "$OUT/run.txt"
python3 benchmarks/notebook_view.py "$OUT" 2>&1 | tee "$OUT/notebook_view.txt"
# The CPU suite must give the same exact answers here.
python3 -m pytest tests -q -p no:cacheprovider -x 2>&1 | tail -4 | tee "$OUT/suite.txt"
