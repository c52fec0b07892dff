"""Probe: does starting a profile put a bubble before the first kernel?
Prints profile-enter time and the first gaps of a tiny loop, three times."""
import time

import torch

import loopscope

x = torch.zeros(16, device="cuda")
x.add_(1)
torch.cuda.synchronize()
for attempt in range(3):
    t0 = time.perf_counter_ns()
    prof = loopscope.profile()
    prof.__enter__()
    t1 = time.perf_counter_ns()
    for _ in range(5):
        x.add_(1)
    torch.cuda.synchronize()
    prof.__exit__(None, None, None)
    ops = sorted(prof._capture.ops(), key=lambda o: o[1])
    gaps = [round((b[1] - a[2]) / 1e3, 1) for a, b in zip(ops, ops[1:])]
    print(f"attempt {attempt}: enter {(t1 - t0) / 1e6:.3f} ms, gaps us {gaps}")
