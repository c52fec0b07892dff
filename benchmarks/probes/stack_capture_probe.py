"""What reading a sync's Python stack costs a kept call (ls_pystack), on the
CPU: fake stream syncs through the real switchboard
(`_testhooks._inject_calls`, a C callable, so the frames are real) from a
recursion `--depth` frames deep in a function of `--lines` lines, inside a
light profile.  Printed: µs a call, the median of `--rounds` profiles of
`--calls` calls each.  A frame's source position is found by walking its
code's location table from the start (~3 us at the end of a 400-line
function before 2026-11-30); the positions found are now kept per
(code, offset), so the function's size should no longer show.

  python benchmarks/probes/stack_capture_probe.py --lines 10,400 --depth 0,20
"""
from __future__ import annotations

import argparse
import functools
import statistics
import time


def function_of(lines: int):
    """big(depth, n): recurses `depth` times, then syncs n times; `lines`
    statements come before the recursion, so its location table is long."""
    from loopscope import _testhooks

    body = ["def big(depth, n):", "    x = 0", *[f"    x += {i}" for i in range(lines)],
            "    if depth > 0:", "        return big(depth - 1, n)",
            "    for _ in range(n):", "        sync()", "    return x"]
    namespace = {"sync": functools.partial(_testhooks._inject_calls,
                                           [("cudaStreamSynchronize", 0)])}
    exec(compile("\n".join(body) + "\n", f"<{lines} lines>", "exec"), namespace)
    return namespace["big"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lines", default="10,400")
    p.add_argument("--depth", default="0,20")
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    import loopscope

    print("| lines | depth | µs a kept call |")
    print("|---|---|---|")
    for lines in (int(x) for x in args.lines.split(",")):
        big = function_of(lines)
        for depth in (int(x) for x in args.depth.split(",")):
            times = []
            for _ in range(args.rounds):
                with loopscope.profile(trace=False, metrics=False):
                    t = time.perf_counter_ns()
                    big(depth, args.calls)
                    times.append((time.perf_counter_ns() - t) / args.calls / 1e3)
            print(f"| {lines} | {depth} | {statistics.median(times):.2f} |")


if __name__ == "__main__":
    main()
