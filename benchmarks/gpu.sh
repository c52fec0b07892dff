#!/usr/bin/env bash
# One GPU runner: builds loopscope (benchmarks/gpu_prologue.sh) and runs the
# suites named, each with its log under $OUT and a short result printed last.
# Usage (GPU machine, repo root): bash benchmarks/gpu.sh SUITE [SUITE ...]
#   tests     every GPU test (tests/gpu, tests/hostile -m gpu, README's and docs/'s examples)
#   beside    loopscope beside torch.profiler in one process (issue 24)
#   first     the first profile of fresh processes, with a shared cache (issue 30)
#   ranks     the straggler rule on 2 and 4 ranks (issue 26; needs >= 4 GPUs)
#   cost      benchmarks/overhead.py --back-to-back --quick: every row on eager, graph and
#             GPT-2 generate(), block, block+post and back to back (issue 27; ~6-9 min)
#   graphs    graph-level mode against per-kernel tracing: tests/gpu/test_gpu_graph_replays.py
#             and benchmarks/graph_mode.py on the demo graph loop and a compiled MLP (~5 min)
# Multi-GPU kinds: NVLink multicast stays off (NCCL_NVLS_ENABLE=0 ...).
set -u -o pipefail
OUT=${OUT:-/tmp/loopscope-out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LOOPSCOPE_CACHE_DIR="$OUT/cache"   # this run's own cache: the first process builds it
source benchmarks/gpu_prologue.sh "$OUT"
summary=()
for suite in "$@"; do
  case "$suite" in
    tests)
      timeout 300 python3 -m pytest tests/gpu tests/test_readme_quickstart.py tests/test_readme_examples.py \
        tests/test_first_profile_metrics.py -q -rs -p no:cacheprovider > "$OUT/tests.log" 2>&1
      timeout 120 python3 -m pytest tests/hostile -m gpu -q -rs -p no:cacheprovider > "$OUT/hostile.log" 2>&1
      summary+=("tests: $(tail -1 "$OUT/tests.log")" "hostile -m gpu: $(tail -1 "$OUT/hostile.log")")
      grep -E "^(FAILED|ERROR)" "$OUT/tests.log" "$OUT/hostile.log" | head -10 ;;
    beside)
      timeout 200 python3 benchmarks/beside_torch_profiler.py --cycles 3 --out "$OUT/beside.jsonl" \
        > "$OUT/beside.txt" 2>&1
      grep -v -i warn "$OUT/beside.txt" | tail -14 ;;
    first)
      timeout 200 python3 benchmarks/first_profile.py --loop-ms 50 --runs 4 --run-cli --plugin \
        --out "$OUT/first.jsonl" > "$OUT/first.txt" 2>&1
      tail -8 "$OUT/first.txt" ;;
    ranks)
      timeout 500 python3 benchmarks/distributed_straggler.py --json "$OUT/straggler.json" \
        --out /tmp/straggler_traces > "$OUT/straggler.txt" 2>&1
      tail -45 "$OUT/straggler.txt" ;;
    cost)  # --budget-s: no process starts after 360 s (a gpt2 one may take 180 s more)
      timeout 545 python3 benchmarks/overhead.py --back-to-back --quick --budget-s 360 --json "$OUT/overhead.json" > "$OUT/overhead.txt" 2>&1; sed -n '/rounds a variant/,$p' "$OUT/overhead.txt" ;;
    graphs)
      timeout 200 python3 -m pytest tests/gpu/test_gpu_graph_replays.py -q -rs -p no:cacheprovider \
        > "$OUT/graphs_tests.log" 2>&1
      timeout 330 python3 benchmarks/graph_mode.py --rounds 12 --repeat 2 --json "$OUT/graph_mode.json" \
        > "$OUT/graph_mode.txt" 2>&1
      summary+=("graphs tests: $(tail -1 "$OUT/graphs_tests.log")")
      sed -n '/^loop /,$p' "$OUT/graph_mode.txt" ;;
    *) echo "unknown suite $suite (tests, beside, first, ranks, cost, graphs)"; exit 2 ;;
  esac
done
printf '%s\n' "${summary[@]}"
