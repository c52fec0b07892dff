"""Probe (issue 27): does a host sync wait for loopscope's PM decode on its
worker?  Each iteration enqueues a few 2048^2 matmuls between two CUDA
events, then syncs one of three ways: the device (torch.cuda.synchronize,
cudaDeviceSynchronize), the stream (cudaStreamSynchronize) or the end event
(cudaEventSynchronize).  "excess" = the iteration's host time (first enqueue
to the sync's return) minus the GPU time between the events: what the host
waited beyond the GPU's work.  Rows: no profile, metrics=False, counters
only (trace=False) and the default profile, one profile of --iterations
around each sync kind, in this one process (the first profile sets the
sampler up, untimed).

Usage (GPU machine): python benchmarks/probes/sync_beside_decode.py
    [--iterations 150] [--matmuls 4]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import loopscope

SYNCS = ("device", "stream", "event")
PROFILES = {"none": None, "metrics_off": {"metrics": False},
            "counters_only": {"trace": False}, "default": {}}


def run(x, begin, end, matmuls: int, sync: str, iterations: int) -> list[float]:
    excess = []
    stream = torch.cuda.current_stream()
    for _ in range(iterations):
        t0 = time.perf_counter()
        begin.record()
        for _ in range(matmuls):
            x @ x
        end.record()
        if sync == "device":
            torch.cuda.synchronize()
        elif sync == "stream":
            stream.synchronize()
        else:
            end.synchronize()
        host_ms = (time.perf_counter() - t0) * 1e3
        excess.append(host_ms - begin.elapsed_time(end))
    return excess


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", type=int, default=150)
    p.add_argument("--matmuls", type=int, default=4)
    args = p.parse_args()
    x = torch.randn(2048, 2048, device="cuda")
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    run(x, begin, end, args.matmuls, "device", 20)
    with loopscope.profile():  # the sampler's set-up, untimed
        run(x, begin, end, args.matmuls, "device", 5)
    print(f"{'profile':14} {'sync':7} {'excess ms: median':>18} {'p90':>7} {'max':>7} "
          f"{'> 1 ms':>7} {'syncs seen':>10} {'samples':>8}")
    for name, options in PROFILES.items():
        for sync in SYNCS:
            if options is None:
                excess, seen, samples = run(x, begin, end, args.matmuls, sync, args.iterations), "", ""
            else:
                with loopscope.profile(**options) as prof:
                    excess = run(x, begin, end, args.matmuls, sync, args.iterations)
                info = prof.capture.info()
                calls = prof.capture.calls()
                seen, samples = len(calls), info.get("samples")
            q = statistics.quantiles(excess, n=10)
            print(f"{name:14} {sync:7} {statistics.median(excess):18.3f} {q[-1]:7.3f} "
                  f"{max(excess):7.3f} {sum(e > 1.0 for e in excess):7d} {seen!s:>10} {samples!s:>8}",
                  flush=True)


if __name__ == "__main__":
    main()
