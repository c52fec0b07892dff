#!/usr/bin/env bash
# One device call: what each CUPTI call of a profile's start and stop costs
# (benchmarks/cupti_costs.c), where a whole profile's time goes today
# (benchmarks/session_phases.py, eager and CUDA-graph demo loop), and the small
# Kineto traces the trace-reader tests use.  Everything lands in $OUT.
set -u -o pipefail
OUT=${OUT:-/tmp/loopscope-out}; mkdir -p "$OUT"
source benchmarks/gpu_prologue.sh "$OUT"
gcc -O2 -std=c11 -I/usr/local/cuda/include benchmarks/cupti_costs.c -o /tmp/cupti_costs \
  -L/usr/local/cuda/lib64 -L/usr/local/cuda/extras/CUPTI/lib64 -lcupti -lcuda -lpthread \
  -Wl,-rpath,/usr/local/cuda/extras/CUPTI/lib64:/usr/local/cuda/lib64 > "$OUT/cupti_costs.txt" 2>&1 \
  && timeout 120 /tmp/cupti_costs >> "$OUT/cupti_costs.txt" 2>&1
cat "$OUT/cupti_costs.txt"
timeout 120 python3 benchmarks/record_kineto_fixtures.py --out "$OUT/kineto" > "$OUT/kineto.txt" 2>&1
tail -5 "$OUT/kineto.txt"
timeout 200 python3 benchmarks/session_phases.py --rounds 15 --json "$OUT/phases_eager.json" 2>&1 | tee "$OUT/phases_eager.txt"
timeout 150 python3 benchmarks/session_phases.py --rounds 15 --graph --json "$OUT/phases_graph.json" 2>&1 | tee "$OUT/phases_graph.txt"
