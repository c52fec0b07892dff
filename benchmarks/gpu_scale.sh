#!/usr/bin/env bash
# Issue 14's scale figures on the GPU machine, in parts (each fits a call):
#   live   the 10M-kernel summary on live records (benchmarks/live_ten_million.py),
#          this tree against main before this work (a copy in .baseline, made
#          with `git archive REV`: 012fc30 on 2026-11-26 afternoon, c9101dd
#          that evening), alternating, one process per run
#   tests  every GPU test (tests/gpu, tests/hostile -m gpu) on this tree
#   cpu    benchmarks/bench_scale.py's synthetic cases on this machine's CPU
#   py312  the row-dict and scale tests on this machine's Python
# Usage (GPU machine, repo root): bash benchmarks/gpu_scale.sh live tests
set -u -o pipefail
OUT=${OUT:-/tmp/loopscope-out}; mkdir -p "$OUT"
source benchmarks/gpu_prologue.sh "$OUT"
for part in "$@"; do
  case $part in
  live)
    (cd .baseline && python3 setup.py -q build_ext --inplace > "$OUT/baseline_build.log" 2>&1) \
      || { tail -20 "$OUT/baseline_build.log"; exit 1; }
    for variant in new baseline new; do
      if [ "$variant" = baseline ]; then pp=.baseline/python; else pp=python; fi
      echo "live 10M $variant: $(PYTHONPATH=$pp timeout 150 python3 benchmarks/live_ten_million.py 2>&1 | tail -1)" | tee -a "$OUT/scale.txt"
    done ;;
  tests)
    timeout 200 python3 -m pytest tests/gpu -m gpu -q -p no:cacheprovider > "$OUT/tests_gpu.log" 2>&1
    echo "tests/gpu rc=$?: $(tail -1 "$OUT/tests_gpu.log")" | tee -a "$OUT/scale.txt"
    timeout 240 python3 -m pytest tests/hostile -m gpu -q -p no:cacheprovider > "$OUT/tests_hostile.log" 2>&1
    echo "tests/hostile -m gpu rc=$?: $(tail -1 "$OUT/tests_hostile.log")" | tee -a "$OUT/scale.txt" ;;
  cpu)
    for case in steps gpu_steps graph kernels "kernels --streams 4"; do
      echo "bench_scale $case:" | tee -a "$OUT/scale.txt"
      timeout 150 python3 benchmarks/bench_scale.py --case $case --no-html 2>&1 | tee -a "$OUT/scale.txt"
    done ;;
  cpu_base)  # the slowest synthetic cases, this tree and .baseline alternating
    [ -f .baseline/python/loopscope/_core*.so ] || (cd .baseline && python3 setup.py -q build_ext --inplace > "$OUT/baseline_build.log" 2>&1)
    for case in ${BASE_CASES:-gpu_steps "kernels --streams 4"}; do
      for variant in new baseline; do
        if [ "$variant" = baseline ]; then pp=.baseline/python; else pp=python; fi
        echo "bench_scale $case ($variant):" | tee -a "$OUT/scale.txt"
        PYTHONPATH=$pp timeout 150 python3 benchmarks/bench_scale.py --case $case --no-html 2>&1 | tee -a "$OUT/scale.txt"
      done
    done ;;
  py312)  # the summary's row dicts and scale tests on the GPU machine's Python
    timeout 200 python3 -m pytest tests/test_rows.py tests/test_steps_ranges.py \
      tests/hostile/test_hostile_scale.py -q -p no:cacheprovider > "$OUT/tests_py312.log" 2>&1
    echo "row and scale tests (python 3.12) rc=$?: $(tail -1 "$OUT/tests_py312.log")" | tee -a "$OUT/scale.txt" ;;
  esac
done
echo "== table =="; grep -E "^live|^tests|^row|summary\(\)|^bench" "$OUT/scale.txt" | cut -c1-400
