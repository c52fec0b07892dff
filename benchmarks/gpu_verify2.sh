#!/usr/bin/env bash
# The evening's verification call (< 9 min on an H200): build; every GPU test
# (tests/gpu, tests/hostile -m gpu: 10M kernels, 1,000 profiles, threads,
# fork, exit and SIGINT); the sync-kind tests on the GPU machine's Python
# 3.12; the counters' reason for short profiles (h11s item 3); the demo.
# Usage (GPU machine, repo root): bash benchmarks/gpu_verify2.sh
set -u -o pipefail
OUT=${OUT:-/tmp/loopscope-out}; mkdir -p "$OUT"
source benchmarks/gpu_prologue.sh "$OUT"
timeout 190 python3 -m pytest tests/gpu -m gpu -v -s -p no:cacheprovider > "$OUT/tests_gpu.log" 2>&1
echo "tests/gpu rc=$?"
timeout 230 python3 -m pytest tests/hostile -m gpu -v -s -p no:cacheprovider > "$OUT/tests_hostile.log" 2>&1
echo "tests/hostile -m gpu rc=$?"
timeout 60 python3 -m pytest tests/test_syncs.py -q -p no:cacheprovider > "$OUT/tests_syncs.log" 2>&1
echo "tests/test_syncs.py (python 3.12) rc=$?"; tail -2 "$OUT/tests_syncs.log"
timeout 40 python3 - > "$OUT/short_profiles.txt" 2>&1 <<'PY'
import warnings; warnings.simplefilter("ignore")
import torch, loopscope
torch.ones(1, device="cuda")
for i in range(3):
    with loopscope.profile() as p:
        pass
    print(i, p.summary()["metrics_error"])
PY
cat "$OUT/short_profiles.txt"
timeout 40 python3 -m loopscope demo > "$OUT/demo.txt" 2>&1; echo "demo rc=$?"; head -6 "$OUT/demo.txt"
echo "== tests =="; grep -hE "(PASSED|FAILED|ERROR|SKIPPED)|^=+ .*(passed|failed)" "$OUT/tests_gpu.log" "$OUT/tests_hostile.log" | sed 's/ {.*//; s/^tests\///' | cut -c1-150 | tail -60
