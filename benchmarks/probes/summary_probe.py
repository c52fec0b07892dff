"""Where summary() spends its time on the real demo loop (issue 11: <= 10 ms).
Runs the eager demo loop under a default profile a few times (the first
profile of a process reads no counters), then for the last one prints the
finish wait, the C finish phases, and a cProfile of building the summary
again from the same capture (Capture.forget_models, as bench_summary.py).
Asserts nothing about time.

Usage (GPU machine): python benchmarks/probes/summary_probe.py [--loop eager|graph|gpt2] [--top 25]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cost"))
from overhead import build_loop  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loop", default="eager", choices=("eager", "graph", "gpt2"))
    parser.add_argument("--profiles", type=int, default=6)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import torch

    import loopscope
    from loopscope._summary import build_summary

    _, _, loop = build_loop(args.loop)
    rows = []
    prof = None
    for _ in range(args.profiles):
        prof = loopscope.profile()
        with prof:
            loop(prof)
            torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        s = prof.summary()
        total = (time.perf_counter_ns() - t0) / 1e6
        o = s["overhead"]
        rows.append((total, o["finish_wait_ms"], o.get("tail_samples"), o.get("tail_decode_ms"),
                     o["finish_ms"], s["metrics_error"]))
        time.sleep(0.05)
    print("summary ms | finish wait ms | tail samples | tail decode ms | finish ms | metrics_error")
    for row in rows:
        print(" | ".join(str(round(v, 2)) if isinstance(v, float) else str(v) for v in row))
    print("finish phases (last):", prof.summary()["overhead"]["finish_phases_ms"])
    done = prof.finished
    builds = []
    for _ in range(5):
        prof.capture.forget_models()
        t0 = time.perf_counter_ns()
        build_summary(done.capture, done.state, done.thresholds, done.host_ns, None)
        builds.append((time.perf_counter_ns() - t0) / 1e6)
    print(f"build_summary again: median {statistics.median(builds):.2f} ms "
          f"(min {min(builds):.2f}, max {max(builds):.2f})")
    prof.capture.forget_models()
    profiler = cProfile.Profile()
    profiler.enable()
    build_summary(done.capture, done.state, done.thresholds, done.host_ns, None)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(args.top)
    print(text.getvalue())
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(args.top)
    print(text.getvalue())
    enter_probe(torch, loopscope, args.top)


def enter_probe(torch, loopscope, top: int) -> None:
    """Enter's cost outside the C start (issue 11: it decides the CUDA-graph
    loop's whole block): 60 empty default profiles, then a cProfile of 60."""
    outside = []
    for i in range(120):
        torch.cuda.synchronize()
        prof = loopscope.profile()
        t0 = time.perf_counter_ns()
        prof.__enter__()
        t1 = time.perf_counter_ns()
        prof.__exit__(None, None, None)
        o = prof.summary()["overhead"]
        if i >= 60:
            outside.append((t1 - t0) / 1e6 - o["start_ms"])
    print(f"enter outside the C start: median {statistics.median(outside):.3f} ms")
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(60):
        prof = loopscope.profile()
        prof.__enter__()
        prof.__exit__(None, None, None)
        prof.summary()  # waits for the finish
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    print(text.getvalue())


if __name__ == "__main__":
    main()
