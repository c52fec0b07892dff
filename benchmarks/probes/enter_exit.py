"""Host cost of a profile's enter and exit, and of the C core's start phases,
on any machine (issue 11): the part of `with loopscope.profile()` that is
Python and C bookkeeping, apart from CUPTI.  Without a GPU the default
options find no driver and run host-only, as trace/syncs/metrics=False do.

Each row: the median ns of __enter__, of __exit__, and of the C core's
start phases (summary["overhead"]["start_phases_ms"]) over --rounds
profiles of an empty block, after a few unmeasured ones.  It asserts nothing.
--torch imports torch first, as a user's process has it (loopscope then asks
torch about CUDA and torch.profiler at each enter).
Usage: python benchmarks/probes/enter_exit.py [--rounds 2000] [--torch]
"""
from __future__ import annotations

import argparse
import statistics
import time
import warnings

VARIANTS = {
    "host_only": {"trace": False, "syncs": False, "metrics": False},
    "default": {},
}


def measure(options: dict, rounds: int) -> dict:
    import loopscope

    enters, exits, phases = [], [], {}
    for i in range(rounds + 20):
        prof = loopscope.profile(**options)
        t0 = time.perf_counter_ns()
        prof.__enter__()
        t1 = time.perf_counter_ns()
        prof.__exit__(None, None, None)
        t2 = time.perf_counter_ns()
        if i < 20:
            continue
        enters.append(t1 - t0)
        exits.append(t2 - t1)
        if i % 10 == 0:  # the capture's own phase times (summary() costs more than the pair)
            for name, ms in prof.summary()["overhead"]["start_phases_ms"].items():
                phases.setdefault(name, []).append(ms * 1e6)
    return {"enter_ns": statistics.median(enters), "exit_ns": statistics.median(exits),
            "phases_ns": {k: statistics.median(v) for k, v in phases.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--torch", action="store_true", help="import torch first")
    args = parser.parse_args()
    if args.torch:
        import torch  # noqa: F401
    warnings.filterwarnings("ignore")
    for name, options in VARIANTS.items():
        r = measure(options, args.rounds)
        phases = " ".join(f"{k}={v:.0f}" for k, v in r["phases_ns"].items())
        print(f"{name:<10} enter {r['enter_ns']:>8.0f} ns  exit {r['exit_ns']:>8.0f} ns  "
              f"C start phases (ns): {phases}")


if __name__ == "__main__":
    main()
