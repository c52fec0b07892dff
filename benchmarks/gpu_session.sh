#!/usr/bin/env bash
# One device call: build, GPU tests, probes, demo, benchmarks (instrument's too).  Logs go
# to $OUT.  Usage (on the GPU machine, repo root): bash benchmarks/gpu_session.sh [quick]
set -u -o pipefail
OUT=${OUT:-/tmp/loopscope-out}; mkdir -p "$OUT"
source benchmarks/gpu_prologue.sh "$OUT"
python3 -m pytest tests -v -s -p no:cacheprovider 2>&1 | tee "$OUT/tests.log" | tail -40
python3 benchmarks/sync_probe.py --json "$OUT/sync_probe.json" 2>&1 | tee "$OUT/sync_probe.txt"
python3 benchmarks/pm_probe.py --json "$OUT/pm_probe.json" 2>&1 | tee "$OUT/pm_probe.txt"
python3 -m loopscope demo 2>&1 | tee "$OUT/demo_eager.txt"
python3 -m loopscope demo --graph 2>&1 | tee "$OUT/demo_graph.txt" | head -12
python3 -m loopscope demo --layers 2>&1 | tee "$OUT/demo_layers.txt" | tail -30
python3 benchmarks/bench_instrument_gpu.py --rounds 20 --json "$OUT/instrument_gpu.json" 2>&1 | tee "$OUT/instrument_gpu.txt"
[ "${1:-}" = quick ] && exit 0
python3 benchmarks/bench_instrument.py --rounds 30 --json "$OUT/instrument_cpu.json" 2>&1 | tee "$OUT/instrument_cpu.txt"
python3 benchmarks/first_gap_probe.py 2>&1 | tee "$OUT/first_gap.txt"
bash benchmarks/ncu_compare.sh 2>&1 | tee "$OUT/ncu_compare.txt"
python3 benchmarks/bench_summary.py 2>&1 | tee "$OUT/bench_summary.txt"
python3 benchmarks/bench_summary.py --layers 2>&1 | tee -a "$OUT/bench_summary.txt"
python3 benchmarks/bench_overhead.py --rounds 30 --json "$OUT/overhead_eager.json" 2>&1 | tee "$OUT/overhead_eager.txt"
python3 benchmarks/bench_overhead.py --rounds 30 --graph --json "$OUT/overhead_graph.json" 2>&1 | tee "$OUT/overhead_graph.txt"
