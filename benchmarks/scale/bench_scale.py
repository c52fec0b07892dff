"""summary() and the notebook view at scale (issue 14, condition 12), from
synthetic records (no GPU needed).  Prints time and peak memory; asserts
nothing about time.  The bounds it is read against: summary() of 1M steps
<= 2 s; of 10M kernel records <= 3 s and <= 1 GB above the records; the
HTML <= 1 s and <= 200 MB at any size.

    python benchmarks/scale/bench_scale.py                  # every case below
    python benchmarks/scale/bench_scale.py --case steps     # 1M host-only steps
    python benchmarks/scale/bench_scale.py --case gpu_steps --steps 1000000
    python benchmarks/scale/bench_scale.py --case kernels --kernels 10000000 [--shuffled] [--streams 4]
    python benchmarks/scale/bench_scale.py --case graph --kernels 10000000

Cases: "steps": --steps host-only steps (prof.step() with nothing in it,
as a loop without a GPU); "gpu_steps": --steps steps of one kernel each;
"kernels": --kernels kernels in 10 steps (each with its launch record, 3 us
kernels 2 us apart); "graph": the live 10M run's shape, CUDA-graph launches
of 10,000 kernels sharing one correlation id, 100 steps.  The host clock is scripted (_core._set_test_clock) so
each step lasts as long as its device work; records go in through
_core._inject in chunks of 100k, so the Python lists that carry them stay
small and the RSS after the profile is the records' own.

Each case runs in a fresh process (peak RSS is per process).  Figures:
wall clock and this process's CPU time (on a shared machine the CPU time
is the steadier one); "records": the RSS the profile added; "peak above":
the peak RSS during the call above the RSS before it (the peak is reset
through /proc/self/clear_refs).  summary() is timed cold: the analysed
model is built inside it.  The HTML is timed after a small profile's view,
so matplotlib is imported and its fonts loaded beforehand, and after one
gc.collect() (timed too: the summary's dicts are new long-lived objects, and
the first full collection after summary() walks them all once, in whatever
code allocates next)."""
from __future__ import annotations

import argparse
import gc
import os
import random
import subprocess
import sys
import time
import warnings

from _memory import reset_peak_rss, rss_mb  # benchmarks/scale/_memory.py

CHUNK = 100_000
KERNEL_NS, GAP_NS, STEP_GAP_NS = 3_000, 2_000, 60_000


def host_steps(steps: int):
    import loopscope

    with loopscope.profile(trace=False) as prof:
        for _ in range(steps):
            with prof.step():
                pass
    return prof


def inject(apis: list, ops: list, rng: random.Random | None = None) -> None:
    """Hands a chunk of launch and kernel records to the profile (in a
    random order with `rng`) and empties the lists."""
    from loopscope import _core

    if rng is not None:
        rng.shuffle(apis)
        rng.shuffle(ops)
    _core._inject("api", apis)
    _core._inject("kernel", ops)
    apis.clear()
    ops.clear()


def device_steps(steps: int, kernels: int, shuffled: bool = False, streams: int = 1):
    """`steps` steps holding `kernels` kernels between them, each step's
    device work inside its host time (the clock is scripted: reads are
    the profile's start, then per step its enter, one read here, its exit,
    half a step apart).  Shuffled: each chunk's records injected in a random
    order (records out of time order: the analysis's sorts all run)."""
    import loopscope
    from loopscope import _core

    per_step = max(kernels // steps, 1)
    step_ns = STEP_GAP_NS + per_step * (KERNEL_NS + GAP_NS)
    _core._set_test_clock(1_000_000_000, step_ns // 2)
    corr = 1
    apis: list[tuple] = []
    ops: list[tuple] = []

    rng = random.Random(14) if shuffled else None

    try:
        with loopscope.profile(trace=False) as prof:
            for _ in range(steps):
                with prof.step():
                    t = _core.now_ns() - step_ns // 2 + STEP_GAP_NS // 2
                    for _ in range(per_step):
                        apis.append((t - 1_000, t - 900, corr))
                        ops.append((t, t + KERNEL_NS, 0, 7 + corr % streams, corr, "kernel"))
                        t += KERNEL_NS + GAP_NS
                        corr += 1
                        if len(ops) >= CHUNK:
                            inject(apis, ops, rng)
            inject(apis, ops, rng)
    finally:
        _core._set_test_clock(0, 0)
    return prof


def graph_steps(kernels: int, per_launch: int = 10_000, steps: int = 100):
    """The live 10M-kernel run's shape (tests/hostile/test_hostile_gpu.py,
    row G4): CUDA-graph replays, each one launch record whose correlation id
    all `per_launch` kernels of the replay share, `steps` steps, kernels back
    to back on one stream (1 us each, 1 us apart)."""
    import loopscope
    from loopscope import _core

    launches = max(kernels // per_launch, 1)
    per_step = max(launches // steps, 1)
    step_ns = STEP_GAP_NS + per_step * per_launch * 2_000
    _core._set_test_clock(1_000_000_000, step_ns // 2)
    corr = 1
    apis: list[tuple] = []
    ops: list[tuple] = []
    try:
        with loopscope.profile(trace=False) as prof:
            for _ in range(steps):
                with prof.step():
                    t = _core.now_ns() - step_ns // 2 + STEP_GAP_NS // 2
                    for _ in range(per_step):
                        apis.append((t - 1_000, t - 900, corr))
                        for _ in range(per_launch):
                            ops.append((t, t + 1_000, 0, 7, corr, "graph_kernel"))
                            t += 2_000
                        corr += 1
                        if len(ops) >= CHUNK:
                            inject(apis, ops)
            inject(apis, ops)
    finally:
        _core._set_test_clock(0, 0)
    return prof


def measure(label: str, fn):
    before = rss_mb()
    fresh = reset_peak_rss()
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    peak = rss_mb("VmHWM") - before
    print(f"  {label}: {wall:.2f} s wall, {cpu:.2f} s CPU; peak "
          f"{'' if fresh else '(whole process) '}{peak:.0f} MiB above the RSS before it "
          f"({before:.0f} MiB)", flush=True)
    return out


def run_case(case: str, steps: int, kernels: int, html: bool, shuffled: bool,
             streams: int = 1) -> None:
    warnings.simplefilter("ignore")
    import loopscope

    if html:  # import matplotlib and load its fonts outside the measured view
        loopscope.Profile._repr_html_(device_steps(2, 4))
    base = rss_mb()
    t = time.perf_counter()
    if case == "steps":
        prof = host_steps(steps)
        what = f"{steps:,} host-only steps"
    elif case == "graph":
        prof = graph_steps(kernels)
        what = f"{kernels:,} kernels from CUDA-graph launches of 10,000 in 100 steps"
    elif case == "gpu_steps":
        prof = device_steps(steps, steps)
        what = f"{steps:,} steps of one kernel each"
    else:
        prof = device_steps(10, kernels, shuffled, streams)
        what = (f"{kernels:,} kernels in 10 steps{', shuffled' if shuffled else ''}"
                f"{f', taking turns on {streams} streams' if streams > 1 else ''}")
    made = time.perf_counter() - t
    print(f"{what}: records made in {made:.1f} s; the profile holds {rss_mb() - base:.0f} MiB "
          f"(RSS growth)", flush=True)
    summary = measure("summary()", prof.summary)
    print(f"    {summary['gpu']['kernels'] if summary['gpu'] else 0:,} kernels, "
          f"{len(summary['steps']):,} steps, {summary['gaps']['count'] if summary['gaps'] else 0:,}"
          f" gaps; summary_ms {summary['overhead']['summary_ms']:.0f}", flush=True)
    # The summary's dicts are new long-lived objects: the next full collection
    # of the cyclic GC walks them all once, whoever allocates next; timed
    # here apart so the view below is charged only its own cost.
    measure("the first full GC over them (gc.collect())", gc.collect)
    if html:
        view = measure("HTML (_repr_html_)", prof._repr_html_)
        print(f"    {len(view):,} characters, {view.count('<img')} pictures", flush=True)
    print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=("all", "steps", "gpu_steps", "kernels", "graph"),
                        default="all")
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--kernels", type=int, default=10_000_000)
    parser.add_argument("--no-html", action="store_true", help="summary() only")
    parser.add_argument("--streams", type=int, default=1,
                        help="kernels: the kernels take turns on this many streams")
    parser.add_argument("--shuffled", action="store_true",
                        help="kernels: records injected out of time order (in chunks of 100k)")
    args = parser.parse_args()
    if args.case != "all":
        run_case(args.case, args.steps, args.kernels, not args.no_html, args.shuffled,
                 args.streams)
        return
    for case in ("steps", "gpu_steps", "kernels"):  # each in its own process
        cmd = [sys.executable, __file__, "--case", case, "--steps", str(args.steps),
               "--kernels", str(args.kernels)] + (["--no-html"] if args.no_html else [])
        subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
