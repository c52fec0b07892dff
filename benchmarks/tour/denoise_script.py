"""A plain PyTorch denoise loop with no profiling code in it, for the
command line tour: each step is a torch.profiler.record_function block.

    python -m loopscope run --steps denoise_step benchmarks/tour/denoise_script.py --iterations 10
"""
import argparse

import torch

from loopscope.demo import build, denoise_step

parser = argparse.ArgumentParser()
parser.add_argument("--iterations", type=int, default=10)
args = parser.parse_args()

model, x = build()
with torch.inference_mode():
    for _ in range(3):  # warm-up
        denoise_step(model, x)
    torch.cuda.synchronize()
    for _ in range(args.iterations):
        with torch.profiler.record_function("denoise_step"):
            x = denoise_step(model, x)
    torch.cuda.synchronize()
print("done:", tuple(x.shape))
