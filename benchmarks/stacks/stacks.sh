#!/usr/bin/env bash
# The CUDA 12 and CUDA 13 stacks on one GPU machine (issue "Every stack a PyTorch
# user has"): builds loopscope and kstack.cu for each runtime, runs cuda_stack.py on
# each, launch_nesting.py on CUDA 12, loopscope doctor in both set-ups, records the metric sets per chip, and the demo.
# Usage (GPU machine, repo root; the cu12 runtime and CUPTI wheels in WHEELS):
#   bash benchmarks/stacks/stacks.sh WHEELS OUTDIR
set -u -o pipefail
case "${1:-}" in -h|--help|"") sed -n '2,/^set /s/^# \{0,1\}//p' "$0" | grep -v '^set '; [ -n "${1:-}" ]; exit $? ;; esac
wheels=$1; out=$2; mkdir -p "$out"
source benchmarks/gpu_prologue.sh "$out"
export LOOPSCOPE_CACHE_DIR=/tmp/loopscope-stacks-cache  # not under $out: 8 files come back
bash benchmarks/stacks/build.sh 12 "$wheels" /tmp/k12 > /tmp/build12.log 2>&1 || tail -20 /tmp/build12.log
bash benchmarks/stacks/build.sh 13 - /tmp/k13 > /tmp/build13.log 2>&1 || tail -20 /tmp/build13.log
for s in 12 13; do
  timeout 120 python3 benchmarks/stacks/cuda_stack.py --stack $s --lib /tmp/k$s --json "$out/stack$s.json" \
    2>&1 | tail -14; echo "stack $s exit $?"
done
echo "== a light profile's syncs on CUDA 12 (and launch nesting)"; timeout 60 python3 benchmarks/stacks/launch_nesting.py --lib /tmp/k12 2>&1 | tail -4; echo "exit $?"
echo "== loopscope doctor (the CLI, a fresh process: torch cu13)"; timeout 120 python3 -m loopscope doctor --json "$out/doctor.json"; echo "exit $?"
timeout 240 python3 benchmarks/counters/metric_sets.py --out "$out/metric_sets.json" 2>&1 | tail -9
echo "== demo"; timeout 120 python3 -m loopscope demo 2>&1 | head -12; echo "demo exit $?"
