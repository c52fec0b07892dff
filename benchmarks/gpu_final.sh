#!/usr/bin/env bash
# The session's last device call (< 8.5 min at most on an H200): build; the
# GPU tests of the worker, the counters, the round trip and fork inside a
# profile; issue 11's options table (the new defaults against the old, each
# variant on both loops) and the overhead table beside torch.profiler.  The
# default variant runs in both tables (two processes): the spread between
# them is the noise floor.  Logs come back in $OUT; the tables print last.
# Usage (GPU machine, repo root): bash benchmarks/gpu_final.sh
set -u -o pipefail
OUT=${OUT:-/tmp/loopscope-out}; mkdir -p "$OUT"
export LOOPSCOPE_CACHE_DIR="$OUT/cache"   # a cache of this run only: the first process builds it
source benchmarks/gpu_prologue.sh "$OUT"
timeout 90 python3 -m pytest tests/gpu/test_gpu_overhead.py tests/gpu/test_gpu_metrics.py -v -s \
  -p no:cacheprovider > "$OUT/tests.log" 2>&1
timeout 60 python3 -m pytest tests/gpu/test_gpu_trace_roundtrip.py tests/hostile/test_hostile_processes.py \
  -m gpu -k "roundtrip or real_loop or fork_inside" -v -s -p no:cacheprovider > "$OUT/tests2.log" 2>&1
grep -E "PASSED|FAILED|passed|failed" "$OUT/tests.log" "$OUT/tests2.log" | sed 's/^.*out\///' | tail -24
OPTION_VARIANTS=default,old_defaults,warm_up_none,decode_10ms,counters_only,trace_only
timeout 140 python3 benchmarks/overhead_options.py --rounds 12 --budget-s 110 --variants "$OPTION_VARIANTS" \
  --json "$OUT/options.json" > "$OUT/options.txt" 2>&1
timeout 190 python3 benchmarks/overhead.py --loops eager,graph --rounds 16 --budget-s 150 --json "$OUT/overhead.json" \
  > "$OUT/overhead.txt" 2>&1
echo "== options (benchmarks/overhead_options.py) =="; grep -E "^ +tail " "$OUT/options.txt" | head -12
tail -16 "$OUT/options.txt"
echo "== overhead (benchmarks/overhead.py) =="; grep -E "^ +finish decoded" "$OUT/overhead.txt" | head -8
tail -22 "$OUT/overhead.txt"
