"""Cost of summary() on a loop of about 1,100 kernels (the demo loop), and
the same from synthetic records (no GPU needed).  --layers adds per-layer
ranges as loopscope.instrument() makes them on the demo model (the model,
18 blocks, 4 leaves each: 91 ranges a step, names prefixed by the step).

summary() caches, and so does the capture its analysed model: each run
drops the model (Capture.forget_models) and builds the summary again, so it
times what the first summary() of a profile costs.
Usage: python benchmarks/bench_summary.py [--synthetic] [--layers] [--kernels 1100] [--repeat 50]
"""
from __future__ import annotations

import argparse
import statistics
import time

import loopscope
from loopscope import _core
from loopscope._summary import build_summary


LEAVES = ("norm", "up", "act", "down")


def synthetic_profile(kernels: int, steps: int = 10, layers: bool = False):
    """A launch-bound loop made of synthetic records: each step's launch
    records fall inside that step, 3 us kernels, 18 us gaps, 60 us between
    steps, so the per-step projection does real work.  With layers, one
    kernel is launched inside each leaf range of the demo model's tree, the
    rest of the step's kernels after it."""
    per_step = kernels // steps
    corr, gpu_t = 1, 1_000_000
    with loopscope.profile(trace=False) as prof:
        for step_index in range(steps):
            with prof.step():
                launches = []
                if layers:
                    s = f"Step_{step_index}"
                    with loopscope.range(f"{s}/Sequential"):
                        for b in range(18):
                            with loopscope.range(f"{s}/{b}"):
                                for leaf in LEAVES:
                                    with loopscope.range(f"{s}/{b}/{leaf}"):
                                        launches.append(_core.now_ns())
                host_t = _core.now_ns()
                launches += [host_t] * (per_step - len(launches))
                apis, kern = [], []
                for i, launch_t in enumerate(launches):
                    gpu_t += 60_000 if i == 0 else 18_000
                    apis.append((launch_t, launch_t + 100, corr))
                    kern.append((gpu_t, gpu_t + 3_000, 0, 7, corr, f"kernel_{i % 5}"))
                    gpu_t += 3_000
                    corr += 1
                _core._inject("api", apis)
                _core._inject("kernel", kern)
    return prof


def gpu_profile(layers: bool = False):
    import torch
    from loopscope.demo import build, eager_loop

    model, x = build()
    if layers:
        loopscope.instrument(model)
    for _ in range(3):
        eager_loop(model, x)
    torch.cuda.synchronize()
    with loopscope.profile() as prof:
        eager_loop(model, x, 10, prof)
    return prof


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--synthetic", action="store_true")
    parser.add_argument("--layers", action="store_true", help="per-layer ranges, as instrument()")
    parser.add_argument("--kernels", type=int, default=1100)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    prof = (synthetic_profile(args.kernels, layers=args.layers) if args.synthetic
            else gpu_profile(args.layers))
    first = prof.summary()
    times = []
    for _ in range(args.repeat):
        prof.capture.forget_models()
        t0 = time.perf_counter_ns()
        build_summary(prof.capture, prof._state, prof._thresholds, prof._host_ns, None)
        times.append((time.perf_counter_ns() - t0) / 1e6)
    print(f"summary() over {first['gpu']['kernels']} kernels, {len(first['steps'])} steps, "
          f"{first['overhead']['ranges'] - len(first['steps'])} ranges in "
          f"{len(first['ranges'])} names "
          f"({'synthetic' if args.synthetic else first['gpu']['device']}): median "
          f"{statistics.median(times):.3f} ms, min {min(times):.3f} ms, max {max(times):.3f} ms "
          f"({args.repeat} runs)")


if __name__ == "__main__":
    main()
