#!/usr/bin/env bash
# One device call that shows the GPU halves of issues 13, 14 and 15 on the
# merged code (~5 min expected, < 9 min at most): build, every GPU test
# (tests/gpu, tests/hostile -m gpu), the verdict checks of issue 15
# (benchmarks/verdicts_gpu.py), the demo report eager and as CUDA-graph
# replays, and the Kineto fixtures with and without ProfilerStep markers.
# Logs come back as $OUT/logs.tgz, the fixtures under $OUT/k (the device
# returns 8 files at most); the short table prints last.
# Usage (GPU machine, repo root): bash benchmarks/gpu_verify.sh
set -u -o pipefail
OUT=${OUT:-/tmp/loopscope-out}; L="$OUT/logs"; mkdir -p "$L" "$OUT/k"
source benchmarks/gpu_prologue.sh "$L"
timeout 170 python3 -m pytest tests/gpu -m gpu -v -s -p no:cacheprovider > "$L/tests_gpu.log" 2>&1
echo "tests/gpu rc=$?"
timeout 200 python3 -m pytest tests/hostile -m gpu -v -s -p no:cacheprovider > "$L/tests_hostile.log" 2>&1
echo "tests/hostile -m gpu rc=$?"
timeout 120 python3 benchmarks/verdicts_gpu.py --rounds 20 --json "$L/verdicts_gpu.json" \
  > "$L/verdicts_gpu.txt" 2>&1
echo "verdicts_gpu rc=$?"
timeout 40 python3 benchmarks/record_kineto_fixtures.py --out "$OUT/k" > "$L/kineto.txt" 2>&1
echo "kineto fixtures rc=$?"
timeout 30 python3 -m loopscope demo > "$L/demo_eager.txt" 2>&1
timeout 30 python3 -m loopscope demo --graph > "$L/demo_graph.txt" 2>&1
tar -C "$OUT" -czf "$OUT/logs.tgz" logs && rm -rf "$L"
tar -xzf "$OUT/logs.tgz" -C /tmp
L=/tmp/logs
echo "== tests =="; grep -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed" "$L/tests_gpu.log" "$L/tests_hostile.log" | sed 's/^.*logs\///' | tail -60
echo "== verdicts =="; tail -25 "$L/verdicts_gpu.txt"
echo "== fixtures =="; ls -la "$OUT/k"; tail -5 "$L/kineto.txt"
echo "== demo =="; head -12 "$L/demo_eager.txt"; head -12 "$L/demo_graph.txt"
