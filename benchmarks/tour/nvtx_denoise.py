"""The demo denoise loop marked with NVTX ranges the way seed-style code
marks it: a `Denoise_Step_N` range per step, `Step_N/Layer_i` and
`Step_N/Layer_i/MLP` below it, and a planted `.item()` sync in step 1.
The workload of benchmarks/tour/record_nsys_fixture.sh (run under nsys); without
a GPU it says so and exits 0.

    python benchmarks/tour/nvtx_denoise.py --steps 3 --depth 4
"""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--depth", type=int, default=4, help="MLP blocks")
    args = parser.parse_args(argv)
    from loopscope.demo import build, gpu_available

    ok, detail = gpu_available()
    if not ok:
        print(f"nvtx_denoise: no GPU here ({detail}); nothing to record")
        return 0
    import torch
    import torch.cuda.nvtx as nvtx

    model, x = build(depth=args.depth)
    with torch.no_grad():
        for _ in range(3):  # warm-up outside the recorded steps
            x = x - 0.1 * model(x)
        torch.cuda.synchronize()
        for s in range(args.steps):
            nvtx.range_push(f"Denoise_Step_{s}")
            h = x
            for i, block in enumerate(model):
                nvtx.range_push(f"Step_{s}/Layer_{i}")
                nvtx.range_push(f"Step_{s}/Layer_{i}/MLP")
                h = block(h)
                nvtx.range_pop()
                nvtx.range_pop()
            x = x - 0.1 * h
            if s == 1:
                x.float().sum().item()  # the planted sync
            nvtx.range_pop()
        torch.cuda.synchronize()
    print(f"nvtx_denoise: {args.steps} steps on {detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
