"""Back-to-back windows on the one running sampler, profile by profile
(issue 43): what each profile of two alternations reads, to tell a wrong
window from a noisy one when tests/gpu/test_gpu_back_to_back.py fails.

  mem/compute: 8 profiles, device copies and fp32 matmuls in turn, each
  bracketed by CUDA events: SM, DRAM, the samples' coverage and count, busy
  against the events.
  traced/counters: 8 profiles, traced and counters-only in turn, no sync
  between them: each traced one's kernels, invalid records and what its
  finish put before its start or after its stop.

  python benchmarks/probes/b2b_windows_probe.py [--repeat 2]
"""
from __future__ import annotations

import argparse

import torch

import loopscope


def mem_compute() -> None:
    src = torch.empty(256 << 20, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    a = torch.randn(4096, 4096, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False

    def mem():
        for _ in range(40):
            dst.copy_(src)

    def compute():
        for _ in range(6):
            a @ a

    for f in (mem, compute):
        f()
    torch.cuda.synchronize()
    with loopscope.profile() as warm:
        compute()
    warm.summary()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    rows = []
    for i in range(8):
        f = (mem, compute)[i % 2]
        with loopscope.profile() as prof:
            begin.record()
            with prof.step():
                f()
            end.record()
            torch.cuda.synchronize()
        rows.append((f.__name__, prof, begin.elapsed_time(end)))
    for name, prof, events_ms in rows:
        s = prof.summary()
        m = s["metrics"]
        print(f"  {name:7s} sm {s['sm']['active_pct']:6.2f} dram {s['dram']['throughput_pct']:6.2f} "
              f"cov {s['sm']['coverage_pct']} samples {s['sm']['samples']} busy "
              f"{s['gpu']['busy_ms']:.3f} events {events_ms:.3f} shift {m.get('clock_shift_ns')} "
              f"delta_us {m.get('clock_delta_us')} tail {m.get('tail_samples')} "
              f"err {s.get('metrics_error')} restarts {m.get('restarts')} overflows "
              f"{m.get('overflows')} full {m.get('counter_data_full')} skipped {m.get('skipped_samples')}")
        if s["sm"]["active_pct"] is not None and s["sm"]["active_pct"] < 1:
            info = prof.capture.info()
            samples = prof.capture.samples()
            print("    info", {k: v for k, v in info.items() if any(t in k for t in ("sample", "pm", "start", "stop", "clock"))})
            print("    samples", [(s0, e0) for s0, e0, _ in samples[:3]], "...", [(s0, e0) for s0, e0, _ in samples[-2:]])


def alternating() -> None:
    x = torch.zeros(1 << 20, device="cuda")

    def pairs(n):
        for _ in range(n):
            torch.cuda._sleep(200_000)
            x.add_(1)

    pairs(3)
    torch.cuda.synchronize()
    with loopscope.profile() as warm:
        pairs(2)
    warm.summary()
    torch.cuda.synchronize()
    counts = [5, 9, 2, 14, 7, 11, 4, 6]
    profiles = []
    for k, n in enumerate(counts):
        prof = loopscope.profile(trace=k % 2 == 0)
        with prof:
            with prof.step():
                pairs(n)
        profiles.append(prof)
    torch.cuda.synchronize()
    for k, (n, prof) in enumerate(zip(counts, profiles)):
        s = prof.summary()
        o = s["overhead"]
        print(f"  {'traced ' if k % 2 == 0 else 'counters'} launched {2 * n:3d} kernels "
              f"{(s.get('gpu') or {}).get('kernels')} sm {(s.get('sm') or {}).get('active_pct')} cov "
              f"{(s.get('sm') or {}).get('coverage_pct')} err {s.get('metrics_error')} invalid {o.get('invalid_records')} before "
              f"{o.get('ops_before_start')} after {o.get('ops_after_stop')} start wait "
              f"{o.get('enter_ms')}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args()
    for r in range(args.repeat):
        print(f"traced/counters, round {r + 1}")
        alternating()
        print(f"mem/compute, round {r + 1}")
        mem_compute()


if __name__ == "__main__":
    main()
