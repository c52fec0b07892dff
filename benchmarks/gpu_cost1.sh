#!/usr/bin/env bash
# Issue 11, first device call of 2026-11-23 evening (< 9.5 min on an H200):
# build; the counter and overhead GPU tests on the shipped defaults (decode
# every 10 ms, the sampler's stop inside the finish, warm-up once, no reset);
# where summary() spends its time (summary_probe.py); the options table with
# the tracing floors on both loops (per-kernel activity records alone, and
# CUPTI's graph-level trace in place of per-kernel records); and the
# overhead table beside torch.profiler.  Logs come back in $OUT.
# Usage (GPU machine, repo root): bash benchmarks/gpu_cost1.sh
set -u -o pipefail
OUT=${OUT:-/tmp/loopscope-out}; mkdir -p "$OUT"
export LOOPSCOPE_CACHE_DIR="$OUT/cache"
source benchmarks/gpu_prologue.sh "$OUT"
timeout 100 python3 -m pytest tests/gpu/test_gpu_overhead.py tests/gpu/test_gpu_metrics.py -v -s \
  -p no:cacheprovider > "$OUT/tests.log" 2>&1
grep -E "PASSED|FAILED|ERROR|passed|failed" "$OUT/tests.log" | tail -16
timeout 40 python3 benchmarks/summary_probe.py --top 22 > "$OUT/summary_probe.txt" 2>&1
head -12 "$OUT/summary_probe.txt"
OPTION_VARIANTS=default,activity_floor,graph_floor,graph_trace,both_kernel_kinds,decode_2ms,counters_only,trace_only
timeout 150 python3 benchmarks/overhead_options.py --rounds 10 --budget-s 125 --variants "$OPTION_VARIANTS" \
  --json "$OUT/options.json" > "$OUT/options.txt" 2>&1
timeout 170 python3 benchmarks/overhead.py --rounds 14 --budget-s 135 --json "$OUT/overhead.json" \
  > "$OUT/overhead.txt" 2>&1
rm -rf "$OUT/cache"
echo "== options (benchmarks/overhead_options.py) =="; tail -18 "$OUT/options.txt"
echo "== overhead (benchmarks/overhead.py) =="; tail -20 "$OUT/overhead.txt"
