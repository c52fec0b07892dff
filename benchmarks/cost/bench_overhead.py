"""Overhead of loopscope on the demo denoise loop, side by side in one run.

Each round times one 10-step loop (wall clock, ending in a synchronize) under:
  none        no profiler, no step marks
  loopscope   inside a running loopscope.profile(), steps marked with prof.step()
              (the defaults: GPU tracing, sync callbacks, PM sampling)
  ls_nometrics  loopscope.profile(metrics=False): tracing + sync callbacks
  ls_nosyncs  loopscope.profile(syncs=False, metrics=False): tracing only
  ls_syncs_only  loopscope.profile(trace=False, metrics=False): sync callbacks only
  ls_notrace  loopscope.profile(trace=False, syncs=False, metrics=False): step ranges only
  ls_counters loopscope.profile(trace=False, syncs=False, metrics=True): counters-only mode
              (PM sampling + ranges, no per-kernel tracing)
  ls_counters_syncs  loopscope.profile(trace=False, metrics=True): counters-only + syncs
  torch_cuda  inside torch.profiler with CUDA activity only (Kineto/CUPTI)
  ls_after_kineto  loopscope once Kineto holds CUPTI's callback slot (launch
              calls from runtime+driver activity records instead of callbacks)
Three phases (Kineto never gives CUPTI's callback slot back); inside each the
variants alternate round by round with no-profiler rounds, and each ratio is
against its own phase's no-profiler median.  Medians of --rounds rounds.
Usage: python benchmarks/cost/bench_overhead.py [--rounds 30] [--graph] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

import torch

import loopscope
from loopscope.demo import build, eager_loop, graph_loop_factory


# Each variant is compared with the no-profiler rounds of its own phase.
BASELINE = {"none": "none", "loopscope": "none", "ls_nometrics": "none", "ls_nosyncs": "none",
            "ls_syncs_only": "none", "ls_notrace": "none", "ls_counters": "none",
            "ls_counters_syncs": "none", "none_2": "none_2",
            "torch_cuda": "none_2", "none_3": "none_3", "ls_after_kineto": "none_3"}


def timed(fn) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter_ns() - t0) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--graph", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()

    model, x = build()
    if args.graph:
        replay = graph_loop_factory(model, x)
        loop = lambda prof=None: replay(10, prof)  # noqa: E731
    else:
        loop = lambda prof=None: eager_loop(model, x, 10, prof)  # noqa: E731
    for _ in range(5):
        loop()
    warnings.filterwarnings("ignore")  # trace=False and Kineto's notices, once per round

    times: dict[str, list[float]] = {k: [] for k in (
        "none", "loopscope", "ls_nometrics", "ls_nosyncs", "ls_syncs_only", "ls_notrace",
        "ls_counters", "ls_counters_syncs", "none_2", "torch_cuda",
        "none_3", "ls_after_kineto")}
    session_ms: list[float] = []
    summary_ms: list[float] = []
    counters_error: list[str] = []
    # Phase 1: loopscope owns CUPTI (launch calls through callbacks).
    for _ in range(args.rounds):
        times["none"].append(timed(loop))
        t0 = time.perf_counter_ns()
        with loopscope.profile() as prof:
            times["loopscope"].append(timed(lambda: loop(prof)))
        t1 = time.perf_counter_ns()
        summary = prof.summary()
        t2 = time.perf_counter_ns()
        session_ms.append((t1 - t0) / 1e6)
        summary_ms.append((t2 - t1) / 1e6)
        assert summary["source"] == "cupti" and summary["cupti_note"] is None, summary
        assert summary["syncs"] is not None, summary["syncs_error"]
        with loopscope.profile(metrics=False) as prof_nm:
            times["ls_nometrics"].append(timed(lambda: loop(prof_nm)))
        with loopscope.profile(syncs=False, metrics=False) as prof_ns:
            times["ls_nosyncs"].append(timed(lambda: loop(prof_ns)))
        with loopscope.profile(trace=False, metrics=False) as prof_so:
            times["ls_syncs_only"].append(timed(lambda: loop(prof_so)))
        with loopscope.profile(trace=False, syncs=False, metrics=False) as prof_nt:
            times["ls_notrace"].append(timed(lambda: loop(prof_nt)))
        with loopscope.profile(trace=False, syncs=False, metrics=True) as prof_c:
            times["ls_counters"].append(timed(lambda: loop(prof_c)))
        if prof_c.summary()["sm"] is None:
            counters_error.append(prof_c.summary()["metrics_error"])
        with loopscope.profile(trace=False, metrics=True) as prof_cs:
            times["ls_counters_syncs"].append(timed(lambda: loop(prof_cs)))
    # Phase 2: torch.profiler, CUDA activity only.  Kineto keeps CUPTI's
    # callback slot afterwards, so it runs after loopscope's own phase.
    for _ in range(args.rounds):
        times["none_2"].append(timed(loop))
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
            times["torch_cuda"].append(timed(loop))
    # Phase 3: loopscope after Kineto took the slot (activity-record fallback).
    for _ in range(args.rounds):
        times["none_3"].append(timed(loop))
        with loopscope.profile() as prof_k:
            times["ls_after_kineto"].append(timed(lambda: loop(prof_k)))
        assert prof_k.summary()["cupti_note"], "expected the activity fallback"

    med = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "device": torch.cuda.get_device_name(),
        "loop": "graph" if args.graph else "eager",
        "rounds": args.rounds,
        "median_ms": med,
        "ratio_vs_none": {k: round(med[k] / med[base], 3) for k, base in BASELINE.items()},
        "loopscope_session_ms_median": statistics.median(session_ms),
        "loopscope_summary_ms_median": statistics.median(summary_ms),
        "kernels_per_loop": summary["gpu"]["kernels"],
        "verdict": summary["diagnosis"]["verdict"],
        "syncs_seen": summary["syncs"]["count"],
        "sm": summary["sm"],
        "dram": summary["dram"],
        "metrics_error": summary["metrics_error"],
        "counters_only_errors": sorted(set(counters_error)),
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(f"{'variant':<16} {'median ms':>10} {'ratio':>7}   ({result['loop']}, {args.rounds} rounds, "
          f"{result['kernels_per_loop']} kernels/loop, {result['device']})")
    for k in times:
        base = BASELINE[k]
        print(f"{k:<16} {med[k]:>10.3f} {result['ratio_vs_none'][k]:>7.3f}  (vs {base})")
    if counters_error:
        print(f"WARNING: counters-only rounds had no counters: {sorted(set(counters_error))}")
    print(f"loopscope whole session (start+loop+stop) median {result['loopscope_session_ms_median']:.3f} ms; "
          f"summary() median {result['loopscope_summary_ms_median']:.3f} ms")


if __name__ == "__main__":
    main()
