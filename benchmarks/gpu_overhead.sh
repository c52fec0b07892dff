#!/usr/bin/env bash
# One device call for issue 11 (~6.5 min expected, 8.8 min at most, on an H200): build, the GPU tests of
# the worker hand-over and of PM sampling, the options comparison and the
# overhead table (both loops).  Everything lands in $OUT; the tables print last.
# Usage (GPU machine, repo root): bash benchmarks/gpu_overhead.sh
set -u -o pipefail
OUT=${OUT:-/tmp/loopscope-out}; mkdir -p "$OUT"
export LOOPSCOPE_CACHE_DIR="$OUT/cache"   # a cache of this run only: the first process builds it
source benchmarks/gpu_prologue.sh "$OUT"
timeout 100 python3 -m pytest tests/gpu/test_gpu_overhead.py tests/gpu/test_gpu_metrics.py -v -s \
  -p no:cacheprovider > "$OUT/tests.log" 2>&1
grep -E "passed|failed|PASSED|FAILED|Error" "$OUT/tests.log" | tail -20
# The variants that show issue 11's last changes, both loops each (~5.7 s a process).
OPTION_VARIANTS=default,old_defaults,warm_up_every,warm_up_none,stop_after_finish,decode_10ms,decode_1ms,counters_only,trace_only
timeout 165 python3 benchmarks/overhead_options.py --rounds 12 --budget-s 130 --variants "$OPTION_VARIANTS" \
  --json "$OUT/options.json" > "$OUT/options.txt" 2>&1
timeout 200 python3 benchmarks/overhead.py --loops eager,graph --rounds 20 --budget-s 155 --json "$OUT/overhead.json" \
  > "$OUT/overhead.txt" 2>&1
echo "== options (benchmarks/overhead_options.py) =="; grep -E "^ +tail " "$OUT/options.txt" | head -18
tail -20 "$OUT/options.txt"
echo "== overhead (benchmarks/overhead.py) =="; grep -E "^ +finish decoded" "$OUT/overhead.txt" | head -8
tail -22 "$OUT/overhead.txt"
