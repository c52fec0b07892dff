"""Probe: does starting a profile put a bubble before the first kernels?
Prints profile-enter time and the gaps of a tiny loop, with and without the
start-up warm-up (a 1-byte memset and a sync at profile start)."""
import argparse
import time

import torch

import loopscope

argparse.ArgumentParser(description=__doc__).parse_args()
x = torch.zeros(16, device="cuda")
x.add_(1)
torch.cuda.synchronize()
for attempt in range(6):
    warm = attempt % 2 == 1
    t0 = time.perf_counter_ns()
    prof = loopscope.profile(warm_up=warm)
    prof.__enter__()
    t1 = time.perf_counter_ns()
    for _ in range(5):
        x.add_(1)
    torch.cuda.synchronize()
    prof.__exit__(None, None, None)
    ops = sorted(prof.capture.ops(), key=lambda o: o[1])
    gaps = [round((b[1] - a[2]) / 1e3, 1) for a, b in zip(ops, ops[1:])]
    print(f"attempt {attempt} warm_up={warm}: enter {(t1 - t0) / 1e6:.3f} ms, "
          f"{len(ops)} ops, gaps us {gaps}")
