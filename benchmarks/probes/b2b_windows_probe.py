"""Back-to-back windows on the one running sampler, profile by profile
(issue 43): what each profile of two alternations reads, to tell a wrong
window from a noisy one when tests/gpu/test_gpu_back_to_back.py fails.
That test runs the same two alternations (it imports them from here:
mem_compute_rows, alternating_rows) and asserts on what this prints.

  mem/compute: 8 profiles, device copies and fp32 matmuls in turn, each
  bracketed by CUDA events: SM, DRAM, the samples' coverage and count, busy
  against the events.
  traced/counters: 8 profiles, traced and counters-only in turn, no sync
  between them: each traced one's kernels, invalid records and what its
  finish put before its start or after its stop.

  restarts (--restarts N): N copy profiles back to back, each at another
  interval than the last, so each start waits for the sampler's restart.

  python benchmarks/probes/b2b_windows_probe.py [--repeat 2] [--restarts N]
"""
from __future__ import annotations

import argparse

import torch

import loopscope

SLEEP_CYCLES = 200_000  # ~0.1 ms a kernel at H100 clocks


def launch_pairs(x, n):
    """n pairs of a ~0.1 ms torch.cuda._sleep and an add: the GPU lags the
    host, so the last ones run after the profile's exit."""
    for _ in range(n):
        torch.cuda._sleep(SLEEP_CYCLES)
        x.add_(1)


def mem_compute_rows(profiles: int = 8) -> list:
    """`profiles` profiles back to back, device copies (DRAM-bound, ~21 ms)
    and fp32 matmuls (compute-bound) in turn, each bracketed by CUDA events
    and synced: [(name, prof, events_ms)].  tests/gpu/test_gpu_back_to_back.py
    asserts on these rows; this probe prints them."""
    src = torch.empty(256 << 20, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    a = torch.randn(4096, 4096, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False

    def mem():  # ~21 ms of copies (0.5 ms each): a slow first launch is noise against it
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
    for i in range(profiles):
        f = (mem, compute)[i % 2]
        with loopscope.profile() as prof:
            begin.record()
            with prof.step():
                f()
            end.record()
            torch.cuda.synchronize()
        rows.append((f.__name__, prof, begin.elapsed_time(end)))
    return rows


def alternating_rows(pairs=(5, 9, 2, 14, 7, 11, 4, 6)) -> list:
    """Traced and counters-only profiles in turn (traced first), each of
    launch_pairs(n) for n in `pairs`, no sync between them:
    [(traced, n, prof)]."""
    x = torch.zeros(1 << 20, device="cuda")
    launch_pairs(x, 3)
    torch.cuda.synchronize()
    with loopscope.profile() as warm:  # the first profile's set-up
        launch_pairs(x, 2)
    warm.summary()
    torch.cuda.synchronize()
    rows = []
    for k, n in enumerate(pairs):
        prof = loopscope.profile(trace=k % 2 == 0)
        with prof:
            with prof.step():
                launch_pairs(x, n)
        rows.append((k % 2 == 0, n, prof))
    torch.cuda.synchronize()
    return rows


def print_mem_compute() -> None:
    for name, prof, events_ms in mem_compute_rows():
        s = prof.summary()
        m = s["metrics"]
        # A window without samples has sm/dram None: printed as such, with metrics_error.
        sm, dram = s.get("sm") or {}, s.get("dram") or {}
        print(f"  {name:7s} sm {sm.get('active_pct')} dram {dram.get('throughput_pct')} "
              f"cov {sm.get('coverage_pct')} samples {sm.get('samples')} busy "
              f"{s['gpu']['busy_ms']:.3f} events {events_ms:.3f} shift {m.get('clock_shift_ns')} "
              f"delta_us {m.get('clock_delta_us')} err {s.get('metrics_error')} restarts "
              f"{m.get('restarts')} overflows {m.get('overflows')} full {m.get('counter_data_full')} "
              f"skipped {m.get('skipped_samples')}")


def print_alternating() -> None:
    for traced, n, prof in alternating_rows():
        s = prof.summary()
        o = s["overhead"]
        print(f"  {'traced ' if traced else 'counters'} launched {2 * n:3d} kernels "
              f"{(s.get('gpu') or {}).get('kernels')} sm {(s.get('sm') or {}).get('active_pct')} cov "
              f"{(s.get('sm') or {}).get('coverage_pct')} err {s.get('metrics_error')} invalid "
              f"{o.get('invalid_records')} after {o.get('ops_after_stop')} start "
              f"{o.get('enter_ms')}")


def print_restarts(profiles: int = 12, verbose: bool = False) -> None:
    """Device copies (~22 ms) profiled back to back, each asking for another
    interval than the one before (500 / 1000 us): each start waits for the
    sampler's restart while the last profile's finish decodes, the case
    where a window got samples of its wait (H200 2026-11-29)."""
    src = torch.empty(256 << 20, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    for k in range(profiles):
        with loopscope.profile(metrics_interval_us=500 if k % 2 else 1000) as prof:
            for _ in range(50):
                dst.copy_(src)
            # Inside: samples are the profile's up to its exit, and the GPU
            # runs the copies ~20 ms after their launches (synced after the
            # exit, every profile read 3-7%: H200 2026-11-29 15:43Z).
            torch.cuda.synchronize()
        s = prof.summary()
        sm, m = s.get("sm") or {}, s["metrics"]
        print(f"  restart sm {sm.get('active_pct')} cov {sm.get('coverage_pct')} reused "
              f"{m.get('sampler_reused')} interval {m.get('interval')} samples {sm.get('samples')} "
              f"skipped {m.get('skipped_samples')} incomplete {m.get('incomplete_samples')} "
              f"outside {m.get('samples_outside')} delta_us {m.get('clock_delta_us')} shift "
              f"{m.get('clock_shift_ns')} err {s.get('metrics_error')}")
        if verbose:
            # Where sampling began and the window's samples lie against the
            # profile (ms from its start), and how long the enter waited.
            info = prof.capture.info()
            t0, t1 = info["start_ns"], info["stop_ns"]
            spans = [(a, b) for a, b, _ in prof.capture.samples()]
            print(f"    stop {(t1 - t0) / 1e6:.3f} ms, sampling began "
                  f"{(info['pm']['began_ns'] - t0) / 1e6:.3f} ms, set-up wait "
                  f"{s['overhead'].get('metrics_setup_wait_ms')} ms (timed out "
                  f"{s['overhead'].get('metrics_setup_wait_timed_out')}), samples kept at "
                  f"{[round((a - t0) / 1e6, 3) for a, _ in spans][:6]}")
            # the sampler's set-up steps that took 1 ms or more (where a
            # restart's wait goes)
            print("    set-up ms", {k: v for k, v in (m.get("setup_ms") or {}).items() if v >= 1})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--restarts", type=int, default=0, metavar="N",
                   help="only N copy profiles back to back, each at another interval")
    args = p.parse_args()
    if args.restarts:
        print_restarts(args.restarts, verbose=True)
        return
    for r in range(args.repeat):
        print(f"traced/counters, round {r + 1}")
        print_alternating()
        print(f"mem/compute, round {r + 1}")
        print_mem_compute()


if __name__ == "__main__":
    main()
