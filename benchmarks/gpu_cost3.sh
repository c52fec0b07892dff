#!/usr/bin/env bash
# Issue 11, third device call of 2026-11-23 evening (< 6 min on an H200):
# summary() and enter on the real demo loop (summary_probe.py), and the
# counter data image's size against CUPTI's decode time (the finish's tail).
# Usage (GPU machine, repo root): bash benchmarks/gpu_cost3.sh
set -u -o pipefail
OUT=${OUT:-/tmp/loopscope-out}; mkdir -p "$OUT"
export LOOPSCOPE_CACHE_DIR="$OUT/cache"
source benchmarks/gpu_prologue.sh "$OUT"
timeout 60 python3 benchmarks/summary_probe.py --top 16 > "$OUT/summary_probe.txt" 2>&1
head -10 "$OUT/summary_probe.txt"; grep -A24 "enter outside" "$OUT/summary_probe.txt"
timeout 200 python3 benchmarks/overhead_options.py --rounds 10 --budget-s 170 \
  --variants default,small_image,image_128,counters_only \
  --json "$OUT/options.json" > "$OUT/options.txt" 2>&1
rm -rf "$OUT/cache"
echo "== options =="; grep -E "^ +(tail|counters:)" "$OUT/options.txt"; tail -10 "$OUT/options.txt"
