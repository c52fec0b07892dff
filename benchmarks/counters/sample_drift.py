"""How far PM sample times drift from the kernels' (activity) times while one
sampler runs on (issue 43): a burst of bf16 matmuls between idle spells, one
profile every 0.4 s for ~12 s on a sampler started once (explicit 50 us
interval, so it is never widened); per profile, the sampler's age and the
"rise": the first sample with SM active > 50% less the first kernel's start.
A rise that grows with the age is drift; a constant one an offset.
Usage (GPU machine): python benchmarks/counters/sample_drift.py [--seconds 12]"""
from __future__ import annotations

import argparse
import time


def matmul_burst(torch, n: int = 8192):
    """burst(count): `count` bf16 n x n matmuls queued on the GPU (warmed up
    once here, so the first burst has no set-up in it)."""
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    c = torch.empty_like(a)

    def burst(count: int) -> None:
        for _ in range(count):
            torch.mm(a, a, out=c)
    burst(1)
    torch.cuda.synchronize()
    return burst


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=12)
    args = p.parse_args()
    import torch

    import loopscope

    burst = matmul_burst(torch)
    opts = {"metrics_interval_us": 50}
    with loopscope.profile(**opts) as warm:
        burst(1)
    warm.summary()
    t0 = time.perf_counter()
    print("age_s rise_us fall_us reused samples started_ns")
    while time.perf_counter() - t0 < args.seconds:
        with loopscope.profile(**opts) as prof:
            time.sleep(0.003)
            burst(10)
            torch.cuda.synchronize()
            time.sleep(0.003)
        prof.summary()
        info = prof.capture.info()
        kernels = [o for o in prof.capture.ops() if o[0] == "kernel"]
        start, end = min(k[1] for k in kernels), max(k[2] for k in kernels)
        hot = [(s, e) for s, e, v in prof.capture.samples() if v.get("sm_active_pct", 0) > 50]
        age = (info["start_ns"] - info["pm"]["started_ns"]) / 1e9
        print(f"{age:6.2f} {((hot[0][0] - start) / 1e3) if hot else float('nan'):9.1f} "
              f"{((hot[-1][1] - end) / 1e3) if hot else float('nan'):9.1f} "
              f"{info['pm']['sampler_reused']} {len(prof.capture.samples())} {info['pm']['started_ns']}",
              flush=True)
        time.sleep(0.4)


if __name__ == "__main__":
    main()
