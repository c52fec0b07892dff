#!/usr/bin/env bash
# Every GPU check of the project, in two device calls of < 10 minutes each.
#   bash benchmarks/gpu_all.sh tests   build, whole suite, sync/PM probes, ncu comparison, demos
#   bash benchmarks/gpu_all.sh bench   demo recording, CLI/notebook outputs, instrument and
#                                      overhead benchmarks
#   bash benchmarks/gpu_all.sh counters  PM sampling only: its GPU tests, what it costs and how
#                                      its buffers must be sized (bench_counters.py), probes
# Logs go to $OUT/logs and come back as $OUT/logs.tgz (the device returns 8 files at most).
set -u -o pipefail
OUT=${OUT:-/tmp/loopscope-out}; L="$OUT/logs"; mkdir -p "$L"
export PYTHONUNBUFFERED=1
part=${1:-tests}
{
  date -u +%Y-%m-%dT%H:%MZ
  nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
  python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
  command -v ncu nsys triton 2>/dev/null; python3 -c "import triton; print('triton', triton.__version__)" 2>&1 | tail -1
} > "$L/machine.txt" 2>&1
LOOPSCOPE_WERROR=1 python3 -m pip install --no-build-isolation --no-deps -q -e . > "$L/build.log" 2>&1 \
  || { tail -30 "$L/build.log"; exit 1; }
if [ "$part" = tests ]; then
  timeout 300 python3 -m pytest tests -v -s -p no:cacheprovider > "$L/tests.log" 2>&1
  timeout 60 python3 benchmarks/sync_probe.py --json "$L/sync_probe.json" > "$L/sync_probe.txt" 2>&1
  timeout 180 python3 benchmarks/pm_probe.py --json "$L/pm_probe.json" > "$L/pm_probe.txt" 2>&1
  timeout 120 bash benchmarks/ncu_compare.sh > "$L/ncu_compare.txt" 2>&1
  python3 -m loopscope demo > "$L/demo_eager.txt" 2>&1
  python3 -m loopscope demo --graph > "$L/demo_graph.txt" 2>&1
  python3 -m loopscope demo --layers > "$L/demo_layers.txt" 2>&1
elif [ "$part" = counters ]; then
  timeout 150 python3 -m pytest tests/gpu/test_gpu_metrics.py -v -s -p no:cacheprovider > "$L/tests_metrics.log" 2>&1
  tail -3 "$L/tests_metrics.log"
  timeout 330 python3 benchmarks/bench_counters.py --rounds ${ROUNDS:-30} ${COUNTERS_ARGS:-} --json "$L/bench_counters.json" > "$L/bench_counters.txt" 2>&1
  grep -E "^(eager|graph) |session ms|set-up|^metrics o" "$L/bench_counters.txt"
  timeout 90 python3 benchmarks/pm_probe.py --only start,long,again,clocks --json "$L/pm_probe.json" > "$L/pm_probe.txt" 2>&1
  tail -25 "$L/pm_probe.txt"
else
  timeout 120 python3 benchmarks/pm_probe.py --only start,copy,mm,clock,demo --json "$L/pm_probe.json" > "$L/pm_probe.txt" 2>&1
  timeout 120 bash benchmarks/ncu_compare.sh > "$L/ncu_compare.txt" 2>&1
  timeout 120 python3 benchmarks/record_demo.py --out "$OUT/demo_recording.json.gz" > "$L/record_demo.txt" 2>&1
  timeout 120 python3 -m loopscope run --steps denoise_step --max-severe-gaps 0 --json "$L/run.json" \
    --trace "$L/run_trace.json" benchmarks/denoise_script.py --iterations 10 > "$L/run.txt" 2>&1
  echo "run exit status: $?" >> "$L/run.txt"
  timeout 120 python3 benchmarks/notebook_view.py "$L" > "$L/notebook_view.txt" 2>&1
  timeout 120 python3 benchmarks/bench_instrument_gpu.py --rounds 20 --json "$L/instrument_gpu.json" > "$L/instrument_gpu.txt" 2>&1
  timeout 60 python3 benchmarks/bench_summary.py > "$L/bench_summary.txt" 2>&1
  timeout 170 python3 benchmarks/bench_overhead.py --rounds 20 --json "$L/overhead_eager.json" > "$L/overhead_eager.txt" 2>&1
  timeout 120 python3 benchmarks/bench_overhead.py --rounds 20 --graph --json "$L/overhead_graph.json" > "$L/overhead_graph.txt" 2>&1
fi
tar -czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$L"
