"""What a `steps=module` step costs the host, on the CPU: a profile
(`trace=False, metrics=False`) over `--calls` top-level calls of
torch.nn.Identity from a decode-like loop, under each rule for where a step
ends: `caller_return` (Python 3.12+: the step also ends when the function
that called the module returns; each call finds that function's frame) and
`next_call` (the rule of Python 3.10/3.11, forced here).  Printed: µs a
call, the median of `--rounds` alternating profiles, and the bare call.

  python benchmarks/probes/module_step_probe.py --calls 2000 --rounds 8
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=8)
    args = p.parse_args()
    import warnings

    import torch

    import loopscope
    from loopscope.live import _module_steps

    warnings.simplefilter("ignore")  # no GPU on the CPU box: said once, not timed
    model, x = torch.nn.Identity(), torch.zeros(1)

    def decode(n: int) -> None:
        for _ in range(n):
            model(x)

    def one(rule: str) -> float:
        monitoring = getattr(sys, "monitoring", None) if rule == "caller_return" else None
        _module_steps.RETURNS = _module_steps.CallerReturns(monitoring)
        t = time.perf_counter()
        with loopscope.profile(steps=model, trace=False, metrics=False) as prof:
            decode(args.calls)
        took = (time.perf_counter() - t) / args.calls * 1e6
        ends = prof.summary()["module_steps"]["ends"]
        if not ends.startswith(rule):
            raise SystemExit(f"{rule}: the profile's steps ended by {ends!r}")
        return took

    rules = ["next_call"] + (["caller_return"] if hasattr(sys, "monitoring") else [])
    times: dict[str, list[float]] = {r: [] for r in rules}
    for _ in range(args.rounds):
        for rule in rules:
            times[rule].append(one(rule))
    t = time.perf_counter()
    for _ in range(args.calls):
        model(x)
    bare = (time.perf_counter() - t) / args.calls * 1e6
    print(f"Python {sys.version.split()[0]}, {args.calls} calls x {args.rounds} rounds; bare call {bare:.2f} us")
    for rule in rules:
        print(f"| {rule} | {statistics.median(times[rule]):.2f} us a call | "
              f"{[round(v, 2) for v in times[rule]]} |")
    if "caller_return" not in rules:
        print("caller_return: Python < 3.12 has no sys.monitoring")
    return 0


if __name__ == "__main__":
    sys.exit(main())
