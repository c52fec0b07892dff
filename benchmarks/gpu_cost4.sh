#!/usr/bin/env bash
# Issue 11, the evening's timing call (< 7 min on an H200): build; the
# worker, counter and overhead GPU tests (the counters' end now runs beside
# the activity flush); benchmarks/overhead.py with every row on both loops
# beside torch.profiler; the options table's default and counters-only rows
# (a second process for the default: the spread is the noise floor).
# Usage (GPU machine, repo root): bash benchmarks/gpu_cost4.sh
set -u -o pipefail
OUT=${OUT:-/tmp/loopscope-out}; mkdir -p "$OUT"
export LOOPSCOPE_CACHE_DIR="$OUT/cache"
source benchmarks/gpu_prologue.sh "$OUT"
timeout 100 python3 -m pytest tests/gpu/test_gpu_overhead.py tests/gpu/test_gpu_metrics.py -v -s \
  -p no:cacheprovider > "$OUT/tests.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/tests.log" | tail -8
timeout 250 python3 benchmarks/overhead.py --loops eager,graph --rounds 12 --budget-s 215 --json "$OUT/overhead.json" \
  > "$OUT/overhead.txt" 2>&1
timeout 90 python3 benchmarks/overhead_options.py --rounds 10 --budget-s 70 \
  --variants default,counters_only,activity_floor --json "$OUT/options.json" > "$OUT/options.txt" 2>&1
rm -rf "$OUT/cache"
echo "== options =="; grep -E "^ +(tail|counters:)" "$OUT/options.txt"; tail -8 "$OUT/options.txt"
echo "== overhead (benchmarks/overhead.py) =="; tail -21 "$OUT/overhead.txt"
