"""summary() of many ranges (issue 25, range-name volume), host only (no
GPU needed).  Prints the figures; asserts nothing.

    python benchmarks/scale/bench_range_volume.py names [--count 1000000] [--no-step]
    python benchmarks/scale/bench_range_volume.py threads [--count 30000000] [--threads 8] [--step]

names:   `count` ranges with distinct names (r0, r1, ...), one after the
         other inside one step (--no-step: outside any step), so summary()
         has `count` range groups to report.  Issue 25's bound: 1M names
         in <= 2 s and <= 500 MB.
threads: `threads` Python threads enter and leave ranges at once, each
         thread its own name (t0, t1, ...), `count` ranges in all, no step
         (--step: the main thread holds one step open meanwhile).
         Issue 25's bound: 30M ranges in <= 10 s, memory linear in the
         ranges (a range's record, 40 B, and no copy beyond it).

The capture is made first (not timed); then summary() is timed cold (the
analysed model is built inside it).  Printed: wall and CPU time (user +
system: on a shared 2-core machine the wall time also holds other
processes' turns and the page faults' waits), RSS before, the peak during
summary() (VmHWM after a reset) and after, and the summary's own check of
the counts (the ranges' counts summed)."""
from __future__ import annotations

import argparse
import gc
import resource
import sys
import threading
import time
import warnings
from pathlib import Path

import loopscope

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _memory import reset_peak_rss, rss_mb  # noqa: E402  (a sibling module, by path)


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def distinct_names(count: int, in_step: bool):
    """A finished profile of `count` ranges named r0, r1, ..."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no GPU here: host ranges only, said once
        with loopscope.profile() as prof:
            if in_step:
                with prof.step():
                    for i in range(count):
                        with loopscope.range(f"r{i}"):
                            pass
            else:
                for i in range(count):
                    with loopscope.range(f"r{i}"):
                        pass
    return prof


def thread_ranges(count: int, threads: int, in_step: bool = False):
    """A finished profile of `count` ranges made by `threads` threads at
    once, thread k's named t<k>; in_step: the main thread holds a step
    open meanwhile (each range then asks which step ran when it began)."""
    def work(k: int, n: int) -> None:
        r = loopscope.range(f"t{k}")
        for _ in range(n):
            with r:
                pass

    share = [count // threads + (k < count % threads) for k in range(threads)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with loopscope.profile() as prof:
            step = prof.step()
            if in_step:
                step.__enter__()
            workers = [threading.Thread(target=work, args=(k, share[k])) for k in range(threads)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            if in_step:
                step.__exit__(None, None, None)
    return prof


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("case", choices=("names", "threads"))
    parser.add_argument("--count", type=int, default=None,
                        help="ranges in all (names: 1,000,000; threads: 30,000,000)")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--no-step", action="store_true", help="names: ranges outside any step")
    parser.add_argument("--step", action="store_true",
                        help="threads: the main thread holds one step open meanwhile")
    args = parser.parse_args()
    if args.count is None:
        args.count = 1_000_000 if args.case == "names" else 30_000_000
    if args.count < 1 or args.threads < 1:
        parser.error("--count and --threads must be at least 1")
    t0 = time.perf_counter()
    prof = (distinct_names(args.count, not args.no_step) if args.case == "names"
            else thread_ranges(args.count, args.threads, args.step))
    capture_s = time.perf_counter() - t0
    gc.collect()
    before = rss_mb()
    reset_peak_rss()
    t0, c0 = time.perf_counter(), cpu_s()
    summary = prof.summary()
    wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    peak, after = rss_mb("VmHWM"), rss_mb()
    counted = sum(r["count"] for r in summary["ranges"])
    print(f"{args.case}: {args.count:,} ranges"
          + (f" from {args.threads} threads" + (" inside a step" if args.step else "")
             if args.case == "threads" else
             (" outside any step" if args.no_step else " in one step"))
          + f" (captured in {capture_s:.1f} s)")
    print(f"  summary() {wall:6.2f} s wall, {cpu:6.2f} s CPU; RSS {before:,.0f} MiB before, "
          f"peak +{peak - before:,.0f} MiB, after +{after - before:,.0f} MiB")
    print(f"  {len(summary['ranges']):,} range entries, counts summing to {counted:,}"
          f" ({'right' if counted == args.count else 'WRONG'})", flush=True)


if __name__ == "__main__":
    main()
