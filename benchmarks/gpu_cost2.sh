#!/usr/bin/env bash
# Issue 11, second device call of 2026-11-23 evening (< 6 min on an H200):
# where the graph-level trace crashes (gdb), summary() with the syntax index
# cached per process, and the decode period (5 ms) against the default, with
# the graph-level trace variants, on both loops.
# Usage (GPU machine, repo root): bash benchmarks/gpu_cost2.sh
set -u -o pipefail
OUT=${OUT:-/tmp/loopscope-out}; mkdir -p "$OUT"
export LOOPSCOPE_CACHE_DIR="$OUT/cache"
source benchmarks/gpu_prologue.sh "$OUT"
if command -v gdb > /dev/null; then
  timeout 90 gdb -batch -ex run -ex bt --args python3 benchmarks/graph_trace_probe.py > "$OUT/graph_probe.txt" 2>&1
else
  timeout 90 python3 -X faulthandler benchmarks/graph_trace_probe.py > "$OUT/graph_probe.txt" 2>&1
fi
echo "== graph_trace_probe (exit $?) =="; grep -E "^profile|^#[0-9]+ |SIGSEGV|Fatal|File " "$OUT/graph_probe.txt" | head -24
timeout 40 python3 benchmarks/summary_probe.py --top 12 > "$OUT/summary_probe.txt" 2>&1
head -10 "$OUT/summary_probe.txt"
timeout 170 python3 benchmarks/overhead_options.py --rounds 10 --budget-s 150 \
  --variants default,decode_5ms,graph_trace,graph_floor,activity_floor,counters_only \
  --json "$OUT/options.json" > "$OUT/options.txt" 2>&1
rm -rf "$OUT/cache"
echo "== options =="; tail -14 "$OUT/options.txt"
