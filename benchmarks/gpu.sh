#!/usr/bin/env bash
# One GPU runner: builds loopscope (benchmarks/gpu_prologue.sh) and runs the
# suites named, each with its log under $OUT and a short result printed last.
# Usage (GPU machine, repo root): bash benchmarks/gpu.sh SUITE [SUITE ...]
#   tests     every GPU test (tests/gpu, tests/hostile -m gpu, README's and docs/'s examples)
#   suite     the whole test suite on this machine's Python, CPU tests included (~5 min)
#   beside    loopscope beside torch.profiler in one process (issue 24)
#   first     the first profile of fresh processes, with a shared cache (issue 30)
#   ranks     the straggler rule on 2 and 4 ranks (issue 26; needs >= 4 GPUs)
#   cost      every row of benchmarks/cost/overhead.py --back-to-back --quick: eager, graph, GPT-2 (issue 27; ~6-9 min)
#   graphs    graph-level mode against per kernel: test_gpu_graph_replays.py, graph_mode.py (issue 27; ~5 min)
#   options   benchmarks/cost/overhead_options.py: $OPTION_VARIANTS (default: default,counters_only,activity_floor)
#   phases    where a profile's time goes, eager and CUDA graph (benchmarks/cost/session_phases.py)
#   counters  PM sampling: its GPU tests, its cost and buffer sizing (bench_counters.py), ncu_compare.sh
#   instrument  per-layer GPU times (bench_instrument_gpu.py) and the host cost a module call
#   summary   summary() on the demo capture, with and without per-layer ranges (bench_summary.py)
#   verdicts  issue 15's verdicts, projections and replay floor (benchmarks/tour/verdicts_gpu.py)
#   scale     10M live kernels (live_ten_million.py, twice), bench_scale.py's cases; BASELINE=DIR: an older tree between
#   demo      the tour's outputs: demo eager/--graph/--layers, the demo recording, loopscope run, notebook view
#   fixtures  the Kineto traces of tests/data/kineto (and an Nsight Systems export where nsys is on PATH)
#   probes    the probes of finished decisions (benchmarks/probes/): syncs, PM, first gap, summary(), CUPTI calls
#   sampler   one PM sampler a process (issue 43): back-to-back and counter tests, lifetime_sampler.py
#   stacks    CUDA 12 (wheels in $WHEELS: nvidia-cuda-runtime-cu12, nvidia-cuda-cupti-cu12) and CUDA 13 (benchmarks/stacks/stacks.sh)
# Multi-GPU kinds: NVLink multicast stays off (NCCL_NVLS_ENABLE=0 ...).
set -u -o pipefail
SUITES="sampler stacks tests suite beside first ranks cost graphs options phases counters instrument summary verdicts scale demo fixtures probes"
case "${1:-}" in
  -h|--help) sed -n '2,/^# Multi-GPU/s/^# \{0,1\}//p' "$0"; exit 0 ;;
  "") echo "usage: bash benchmarks/gpu.sh SUITE [SUITE ...] (one of: $SUITES; --help says what each runs)"; exit 2 ;;
esac
for suite in "$@"; do  # a misspelt suite ends the call before the build, not after the others ran
  case " $SUITES " in *" $suite "*) ;; *) echo "unknown suite $suite ($SUITES)"; exit 2 ;; esac
done
OUT=${OUT:-/tmp/loopscope-out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LOOPSCOPE_CACHE_DIR="$OUT/cache"   # this run's own cache: the first process builds it
source benchmarks/gpu_prologue.sh "$OUT"
summary=()
for suite in "$@"; do
  case "$suite" in
    sampler)
      timeout 240 python3 -m pytest tests/gpu/test_gpu_back_to_back.py tests/gpu/test_gpu_metrics.py \
        -q -rs -p no:cacheprovider > "$OUT/sampler_tests.log" 2>&1
      summary+=("sampler tests: $(tail -1 "$OUT/sampler_tests.log")")
      grep -E "^(FAILED|ERROR|E  )" "$OUT/sampler_tests.log" | head -12
      timeout 330 python3 benchmarks/cost/lifetime_sampler.py --variants "${SAMPLER_VARIANTS:-b2b,b2b_summary,counters,alternating,graph,mem_compute,gpt2}" \
        --json "$OUT/lifetime_sampler.json" > "$OUT/lifetime_sampler.txt" 2>&1
      tail -20 "$OUT/lifetime_sampler.txt" ;;
    stacks)
      bash benchmarks/stacks/stacks.sh "${WHEELS:-.whl}" "$OUT" 2>&1 | grep -v "^20..-\|^NVIDIA\|^torch " | tail -40 ;;
    tests)
      timeout 300 python3 -m pytest tests/gpu tests/surfaces/test_readme_quickstart.py \
        tests/surfaces/test_readme_examples.py tests/capture/test_first_profile_metrics.py \
        -q -rs -p no:cacheprovider > "$OUT/tests.log" 2>&1
      timeout 240 python3 -m pytest tests/hostile -m gpu -q -rs -p no:cacheprovider > "$OUT/hostile.log" 2>&1
      summary+=("tests: $(tail -1 "$OUT/tests.log")" "hostile -m gpu: $(tail -1 "$OUT/hostile.log")")
      grep -E "^(FAILED|ERROR)" "$OUT/tests.log" "$OUT/hostile.log" | head -10 ;;
    beside)
      timeout 200 python3 benchmarks/cost/beside_torch_profiler.py --cycles 3 --out "$OUT/beside.jsonl" \
        > "$OUT/beside.txt" 2>&1
      grep -v -i warn "$OUT/beside.txt" | tail -14 ;;
    first)
      timeout 200 python3 benchmarks/cost/first_profile.py --loop-ms 50 --runs 4 --run-cli --plugin \
        --out "$OUT/first.jsonl" > "$OUT/first.txt" 2>&1
      tail -8 "$OUT/first.txt" ;;
    ranks)
      timeout 500 python3 benchmarks/ranks/distributed_straggler.py --json "$OUT/straggler.json" \
        --out /tmp/straggler_traces > "$OUT/straggler.txt" 2>&1
      tail -45 "$OUT/straggler.txt" ;;
    cost)  # --budget-s: no process starts after 360 s (a gpt2 one may take 180 s more)
      timeout 545 python3 benchmarks/cost/overhead.py --back-to-back --quick --budget-s 360 --json "$OUT/overhead.json" > "$OUT/overhead.txt" 2>&1; sed -n '/rounds a variant/,$p' "$OUT/overhead.txt" ;;
    graphs)
      timeout 200 python3 -m pytest tests/gpu/test_gpu_graph_replays.py -q -rs -p no:cacheprovider \
        > "$OUT/graphs_tests.log" 2>&1
      timeout 330 python3 benchmarks/cost/graph_mode.py --rounds 12 --repeat 2 --json "$OUT/graph_mode.json" \
        > "$OUT/graph_mode.txt" 2>&1
      summary+=("graphs tests: $(tail -1 "$OUT/graphs_tests.log")")
      sed -n '/^loop /,$p' "$OUT/graph_mode.txt" ;;
    suite)
      timeout 540 python3 -m pytest tests -q -p no:cacheprovider > "$OUT/suite.log" 2>&1
      summary+=("whole suite: $(tail -1 "$OUT/suite.log")")
      grep -E "^(FAILED|ERROR)" "$OUT/suite.log" | head -10 ;;
    options)
      timeout 300 python3 benchmarks/cost/overhead_options.py --rounds 12 --budget-s 250 \
        --variants "${OPTION_VARIANTS:-default,counters_only,activity_floor}" --json "$OUT/options.json" \
        > "$OUT/options.txt" 2>&1
      grep -E "^ +(tail|counters:)" "$OUT/options.txt" | head -12; tail -16 "$OUT/options.txt" ;;
    phases)
      timeout 200 python3 benchmarks/cost/session_phases.py --rounds 15 --json "$OUT/phases_eager.json" \
        > "$OUT/phases_eager.txt" 2>&1
      timeout 150 python3 benchmarks/cost/session_phases.py --rounds 15 --graph --json "$OUT/phases_graph.json" \
        > "$OUT/phases_graph.txt" 2>&1
      tail -20 "$OUT/phases_eager.txt" "$OUT/phases_graph.txt" ;;
    counters)
      timeout 150 python3 -m pytest tests/gpu/test_gpu_metrics.py -q -rs -p no:cacheprovider \
        > "$OUT/counters_tests.log" 2>&1
      summary+=("counters tests: $(tail -1 "$OUT/counters_tests.log")")
      timeout 330 python3 benchmarks/counters/bench_counters.py --rounds "${ROUNDS:-30}" --json "$OUT/bench_counters.json" \
        > "$OUT/bench_counters.txt" 2>&1
      grep -E "^(eager|graph) |session ms|set-up|^metrics o" "$OUT/bench_counters.txt"
      timeout 120 bash benchmarks/counters/ncu_compare.sh > "$OUT/ncu_compare.txt" 2>&1
      cat "$OUT/ncu_compare.txt" ;;
    instrument)
      timeout 120 python3 benchmarks/host/bench_instrument_gpu.py --rounds 20 --json "$OUT/instrument_gpu.json" \
        > "$OUT/instrument_gpu.txt" 2>&1
      timeout 200 python3 benchmarks/host/bench_instrument.py --rounds 30 --json "$OUT/instrument_cpu.json" \
        > "$OUT/instrument_cpu.txt" 2>&1
      tail -14 "$OUT/instrument_gpu.txt" "$OUT/instrument_cpu.txt" ;;
    summary)
      timeout 60 python3 benchmarks/scale/bench_summary.py > "$OUT/bench_summary.txt" 2>&1
      timeout 60 python3 benchmarks/scale/bench_summary.py --layers >> "$OUT/bench_summary.txt" 2>&1
      tail -12 "$OUT/bench_summary.txt" ;;
    verdicts)
      timeout 120 python3 benchmarks/tour/verdicts_gpu.py --rounds 20 --json "$OUT/verdicts_gpu.json" \
        > "$OUT/verdicts_gpu.txt" 2>&1
      tail -25 "$OUT/verdicts_gpu.txt" ;;
    scale)  # BASELINE: a copy of an older tree (git archive REV | tar -x -C DIR), built here once
      [ -z "${BASELINE:-}" ] || ls "$BASELINE"/python/loopscope/_core*.so > /dev/null 2>&1 \
        || (cd "$BASELINE" && python3 setup.py -q build_ext --inplace > "$OUT/baseline_build.log" 2>&1) \
        || { tail -20 "$OUT/baseline_build.log"; exit 1; }
      for variant in new ${BASELINE:+baseline} new; do
        pp=python; [ "$variant" = baseline ] && pp="$BASELINE/python"
        echo "live 10M $variant: $(PYTHONPATH=$pp timeout 150 python3 benchmarks/scale/live_ten_million.py 2>&1 | tail -1)" \
          | tee -a "$OUT/scale.txt"
      done
      for case in steps gpu_steps graph kernels "kernels --streams 4"; do
        for variant in new ${BASELINE:+baseline}; do
          pp=python; [ "$variant" = baseline ] && pp="$BASELINE/python"
          echo "bench_scale $case ($variant):" >> "$OUT/scale.txt"
          PYTHONPATH=$pp timeout 150 python3 benchmarks/scale/bench_scale.py --case $case --no-html >> "$OUT/scale.txt" 2>&1
        done
      done
      grep -E "^live|summary\(\)|^bench" "$OUT/scale.txt" | cut -c1-400 ;;
    demo)
      timeout 30 python3 -m loopscope demo > "$OUT/demo_eager.txt" 2>&1
      timeout 30 python3 -m loopscope demo --graph > "$OUT/demo_graph.txt" 2>&1
      timeout 30 python3 -m loopscope demo --layers > "$OUT/demo_layers.txt" 2>&1
      timeout 120 python3 benchmarks/tour/record_demo.py --out "$OUT/demo_recording.json.gz" > "$OUT/record_demo.txt" 2>&1
      timeout 120 python3 -m loopscope run --steps denoise_step --max-severe-gaps 0 --json "$OUT/run.json" \
        --trace "$OUT/run_trace.json" benchmarks/tour/denoise_script.py --iterations 10 > "$OUT/run.txt" 2>&1
      echo "run exit status: $? (1: the budget failed, as the tour shows)" >> "$OUT/run.txt"
      timeout 120 python3 benchmarks/tour/notebook_view.py "$OUT" > "$OUT/notebook_view.txt" 2>&1
      head -8 "$OUT/demo_eager.txt"; tail -5 "$OUT/record_demo.txt" "$OUT/run.txt" "$OUT/notebook_view.txt" ;;
    fixtures)
      timeout 120 python3 benchmarks/tour/record_kineto_fixtures.py --out "$OUT/kineto" > "$OUT/kineto.txt" 2>&1
      tail -5 "$OUT/kineto.txt"
      if command -v nsys > /dev/null; then
        timeout 200 bash benchmarks/tour/record_nsys_fixture.sh "$OUT/nsys" > "$OUT/nsys.txt" 2>&1; tail -5 "$OUT/nsys.txt"
      fi ;;
    probes)
      timeout 60 python3 benchmarks/probes/sync_probe.py --json "$OUT/sync_probe.json" > "$OUT/sync_probe.txt" 2>&1
      timeout 180 python3 benchmarks/probes/pm_probe.py --json "$OUT/pm_probe.json" > "$OUT/pm_probe.txt" 2>&1
      timeout 60 python3 benchmarks/probes/first_gap_probe.py > "$OUT/first_gap.txt" 2>&1
      timeout 60 python3 benchmarks/probes/summary_probe.py --top 16 > "$OUT/summary_probe.txt" 2>&1
      gcc -O2 -std=c11 -I/usr/local/cuda/include benchmarks/probes/cupti_costs.c -o "$OUT/cupti_costs" \
        -L/usr/local/cuda/lib64 -L/usr/local/cuda/extras/CUPTI/lib64 -lcupti -lcuda -lpthread \
        -Wl,-rpath,/usr/local/cuda/extras/CUPTI/lib64:/usr/local/cuda/lib64 > "$OUT/cupti_costs.txt" 2>&1 \
        && timeout 120 "$OUT/cupti_costs" >> "$OUT/cupti_costs.txt" 2>&1; rm -f "$OUT/cupti_costs"
      tail -8 "$OUT/sync_probe.txt" "$OUT/pm_probe.txt" "$OUT/first_gap.txt" "$OUT/summary_probe.txt" \
        "$OUT/cupti_costs.txt" ;;
  esac
done
printf '%s\n' "${summary[@]}"
