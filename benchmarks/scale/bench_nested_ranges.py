"""summary() of deeply nested ranges (issue 14, condition 3; review item 5),
from synthetic records (no GPU needed).  Prints the time; asserts nothing.

    python benchmarks/scale/bench_nested_ranges.py                       # depths 300, 5,000, 50,000
    python benchmarks/scale/bench_nested_ranges.py --depths 300 5000 --kernels-per-level 2

One step holding `depth` nested ranges, named d0, d1, ... (as issue 14's
condition 3) or, with --names cycle, cycling over three names (each name's
group then holds a third of the chain: every kernel counts once per group);
with --kernels-per-level K, K kernels are launched inside each level
(each with its launch record).  The host clock is scripted
(_core._set_test_clock: 1 us a read) so the figures do not depend on this
machine's speed, only the time does.  summary() is timed cold: the analysed
model (range and group attribution) is built inside it.

Ranges of every level hold the kernels of the levels below them, so the
per-range GPU figures are computed over depth x kernels / 2 op entries:
with kernels at every level the work grows with depth x kernels (before
the review fix, with depth^2 x kernels for distinct names: a kernel's
group was checked against the whole chain below it, for each range of the
chain: 2,000 levels of one kernel each took 22.8 s, 5,000 levels 381 s)."""
from __future__ import annotations

import argparse
import time
import warnings

import loopscope
from loopscope import _core

NAMES = ("attn", "mlp", "norm")
MAX_ENTRIES = 200_000_000  # 800 MB of op indices: a case beyond is skipped, said so


def nested(depth: int, per_level: int, cycle: bool = False):
    """A finished profile: one step, `depth` nested ranges, `per_level`
    kernels launched inside each level (right after its enter)."""
    ranges = [loopscope.range(NAMES[i % 3] if cycle else f"d{i}") for i in range(depth)]
    _core._set_test_clock(1_000_000, 1_000)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with loopscope.profile() as prof:
                with prof.step():  # reads 1 .. 2 * depth + 2; level i entered at read 2 + i
                    for r in ranges:
                        r.__enter__()
                    for r in reversed(ranges):
                        r.__exit__(None, None, None)
                apis, kernels, corr = [], [], 0
                gpu = 10**10
                for i in range(depth):
                    enter = 1_000_000 + (2 + i) * 1_000
                    for k in range(per_level):
                        corr += 1
                        apis.append((enter + 100 + k, enter + 101 + k, corr))
                        kernels.append((gpu, gpu + 1_000, 0, 7, corr, "k"))
                        gpu += 2_000
                for at in range(0, len(apis), 100_000):
                    _core._inject("api", apis[at:at + 100_000])
                    _core._inject("kernel", kernels[at:at + 100_000])
    finally:
        _core._set_test_clock(0, 0)
    return prof


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[300, 5_000, 50_000])
    parser.add_argument("--kernels-per-level", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--names", choices=("distinct", "cycle"), default="distinct")
    args = parser.parse_args()
    for per_level in args.kernels_per_level:
        for depth in args.depths:
            entries = depth * depth * per_level // 2
            if entries > MAX_ENTRIES:
                print(f"depth {depth:>7,}  kernels {depth * per_level:>7,}  skipped: "
                      f"{entries:,} per-range op entries (> {MAX_ENTRIES:,})", flush=True)
                continue
            prof = nested(depth, per_level, args.names == "cycle")
            t0 = time.perf_counter()
            summary = prof.summary()
            took = time.perf_counter() - t0
            kernels = summary["gpu"]["kernels"] if summary["gpu"] else 0
            print(f"depth {depth:>7,}  kernels {kernels:>7,}  summary() {took * 1e3:10.1f} ms  "
                  f"({took / depth * 1e6:.2f} us a range)", flush=True)


if __name__ == "__main__":
    main()
