"""Cost of the notebook view (prof._repr_html_()) of a big profile, beside
the summary() it reads: the bound is "the HTML bounded at any size: <= 1 s,
<= 200 MB" (issue 14).  Synthetic records, no GPU needed:

    python benchmarks/scale/bench_html.py --kernels 10000000 --steps 10
    python benchmarks/scale/bench_html.py --kernels 1000000 --steps 1000000
    python benchmarks/scale/bench_html.py --kernels 10000000 --layout bench_summary

Layout "host" (default): each step's kernels run inside its host time on
the device (3 us kernels, 2 us apart, a 60 us gap into each step), the
host clock scripted so a step lasts as long as its device work.  Layout
"bench_summary": bench_summary.py's synthetic profile (device times far
from the host clock, so the time line spans hours).

Times are wall clock and this process's CPU time (on a shared machine the
CPU time is the steadier one).  The HTML is timed cold (the first view of the process: imports matplotlib
and loads its fonts) and warm (the median of --repeat more views, the
summary cached as in a notebook).  Memory: the peak of Python allocations
during one view (tracemalloc, numpy included) and the growth of the
process's peak RSS over the cold view."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

import loopscope
from loopscope import _core

from _memory import reset_peak_rss, rss_mb  # benchmarks/scale/_memory.py

KERNEL_NS, GAP_NS, STEP_GAP_NS = 3_000, 2_000, 60_000


def host_layout(kernels: int, steps: int):
    """Steps whose device work lies inside their host time."""
    per_step = max(kernels // steps, 1)
    step_ns = STEP_GAP_NS + per_step * (KERNEL_NS + GAP_NS)
    # reads: profile start, then per step its enter, one launch read, its exit
    _core._set_test_clock(1_000_000_000, step_ns // 2)
    corr = 1
    try:
        with loopscope.profile(trace=False) as prof:
            for _ in range(steps):
                with prof.step():
                    t = _core.now_ns() + STEP_GAP_NS // 2
                    apis, ops = [], []
                    for _ in range(per_step):
                        apis.append((t - 1_000, t - 900, corr))
                        ops.append((t, t + KERNEL_NS, 0, 7, corr, "kernel"))
                        t += KERNEL_NS + GAP_NS
                        corr += 1
                    _core._inject("api", apis)
                    _core._inject("kernel", ops)
    finally:
        _core._set_test_clock(0, 0)
    return prof


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", type=int, default=10_000_000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--layout", choices=("host", "bench_summary"), default="host")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    t = time.perf_counter()
    if args.layout == "host":
        prof = host_layout(args.kernels, args.steps)
    else:
        sys.path.insert(0, str(Path(__file__).parent))
        from bench_summary import synthetic_profile

        prof = synthetic_profile(args.kernels, steps=args.steps)
    made = time.perf_counter() - t
    t, c = time.perf_counter(), time.process_time()
    summary = prof.summary()
    summary_s, summary_cpu = time.perf_counter() - t, time.process_time() - c
    before = rss_mb("VmRSS")
    fresh_peak = reset_peak_rss()
    t, c = time.perf_counter(), time.process_time()
    view = prof._repr_html_()
    cold, cold_cpu = time.perf_counter() - t, time.process_time() - c
    grown = rss_mb("VmHWM") - before
    warm, warm_cpu = [], []
    for _ in range(args.repeat):
        t, c = time.perf_counter(), time.process_time()
        prof._repr_html_()
        warm.append(time.perf_counter() - t)
        warm_cpu.append(time.process_time() - c)
    tracemalloc.start()
    prof._repr_html_()
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"{summary['gpu']['kernels']:,} kernels, {len(summary['steps']):,} steps "
          f"({args.layout} layout; records made in {made:.1f} s); summary() {summary_s:.2f} s "
          f"(CPU {summary_cpu:.2f} s)")
    print(f"HTML: {len(view):,} characters, {view.count('<img')} pictures; cold {cold:.2f} s "
          f"(CPU {cold_cpu:.2f} s; matplotlib imported), warm median {statistics.median(warm):.2f}"
          f" s (CPU {statistics.median(warm_cpu):.2f} s; min {min(warm):.2f}, max "
          f"{max(warm):.2f}, {args.repeat} runs)")
    print(f"load average while it ran: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")
    print(f"memory: Python peak during one warm view {traced_peak / 2**20:.1f} MiB; the cold "
          f"view's peak RSS {'' if fresh_peak else '(of the whole process) '}{grown:.1f} MiB "
          f"above the RSS before it ({before:.0f} MiB)")


if __name__ == "__main__":
    main()
