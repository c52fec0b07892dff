"""A long run of profiles back to back (issue 27): how long each profile's
loop takes inside its window, and its finish on loopscope's worker, profile
after profile.  The loop is a burst of 2048^2 matmuls ending in synchronize;
each variant runs in a process of its own: the bare loop, the default
profile, counters only (trace=False), tracing only (metrics=False).

issue_ms (host time to enqueue the matmuls, before the synchronize),
max_launch_ms (the longest single enqueue) and gpu_ms (CUDA events around
the matmuls) tell a blocked host thread or a slower GPU from a window that
holds something else.  On an H100 (2026-11-27 22:59Z) the windows of a 14 ms
loop grew to 40 ms by the 8th of 24 profiles; on 2026-11-28 (00:33Z) gpu_ms
stayed 13.7 ms and issue_ms under 1.2 ms in 28 ms windows: the window held a
start's wait for the worker (fixed since; they now stay flat).

Usage (GPU machine): python benchmarks/counters/chain_windows.py
    [--profiles 24] [--matmuls 40] [--variants bare,default,counters_only,trace_only]
    [--options JSON]  (LOOPSCOPE_INTERNAL passes through to each process)
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

OPTIONS = {"default": {}, "counters_only": {"trace": False}, "trace_only": {"metrics": False}}


def child(args: argparse.Namespace) -> dict:
    import torch

    import loopscope

    x = torch.randn(2048, 2048, device="cuda")
    issue_ms: list[float] = []      # host time to enqueue the matmuls
    max_launch_ms: list[float] = [] # the longest single enqueue
    gpu_ms: list[float] = []        # CUDA events around the matmuls
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def loop() -> None:
        t0 = t = time.perf_counter()
        begin.record()
        longest = 0.0
        for _ in range(args.matmuls):
            x @ x
            now = time.perf_counter()
            longest, t = max(longest, now - t), now
        end.record()
        issue_ms.append(round((t - t0) * 1e3, 3))
        max_launch_ms.append(round(longest * 1e3, 3))
        if args.sync == "device":
            torch.cuda.synchronize()
        elif args.sync == "stream":
            torch.cuda.current_stream().synchronize()
        else:
            end.synchronize()
        gpu_ms.append(round(begin.elapsed_time(end), 3))

    for _ in range(3):
        loop()
    if args.variant == "bare":
        times = []
        for _ in range(args.profiles):
            t0 = time.perf_counter()
            loop()
            times.append((time.perf_counter() - t0) * 1e3)
        return {"variant": "bare", "loop_ms": times, "issue_ms": issue_ms[3:],
                "max_launch_ms": max_launch_ms[3:], "gpu_ms": gpu_ms[3:]}
    options = {**OPTIONS[args.variant], **json.loads(args.options)}
    with loopscope.profile(**options) as warm:  # the sampler's set-up
        loop()
    warm.summary()
    del issue_ms[:], max_launch_ms[:], gpu_ms[:]
    profiles, t0 = [], time.perf_counter()
    for _ in range(args.profiles):
        with loopscope.profile(**options) as prof:
            loop()
        profiles.append(prof)
    chain_ms = (time.perf_counter() - t0) * 1e3
    infos = [p.capture.info() for p in profiles]
    return {"variant": args.variant, "chain_ms": chain_ms,
            "window_ms": [round((i["stop_ns"] - i["start_ns"]) / 1e6, 2) for i in infos],
            "finish_ms": [round(i["finish_ns"] / 1e6, 2) for i in infos],
            "tail_samples": [(i.get("pm") or {}).get("tail_samples") for i in infos],
            "samples": [i.get("samples") for i in infos],
            "issue_ms": issue_ms, "max_launch_ms": max_launch_ms, "gpu_ms": gpu_ms}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--profiles", type=int, default=24)
    p.add_argument("--matmuls", type=int, default=40)
    p.add_argument("--variants", default="bare,default,counters_only,trace_only")
    p.add_argument("--options", default="{}",
                   help='profile options for every variant, as JSON (e.g. \'{"metrics_interval_us": 1000}\')')
    p.add_argument("--sync", choices=("device", "stream", "event"), default="device",
                   help="how the loop ends: torch.cuda.synchronize(), the stream's or the end event's")
    p.add_argument("--variant", help=argparse.SUPPRESS)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)), flush=True)
        return 0
    rows = []
    for variant in args.variants.split(","):
        if variant not in OPTIONS and variant != "bare":
            p.error(f"--variants: {variant!r} is not one of bare, {', '.join(OPTIONS)}")
        done = subprocess.run([sys.executable, __file__, "--child", "--variant", variant,
                               "--profiles", str(args.profiles), "--matmuls", str(args.matmuls),
                               "--sync", args.sync,
                               "--options", args.options],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            print(f"{variant}: exit {done.returncode}\n{done.stderr[-2000:]}", flush=True)
            continue
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    bare = next((r for r in rows if r["variant"] == "bare"), None)
    bare_ms = statistics.median(bare["loop_ms"]) if bare else None
    print(f"\n{'variant':14} {'first 4 windows ms':>18} {'last 8 windows ms':>17} "
          f"{'max window':>10} {'median finish ms':>16} {'chain / bare':>12} "
          f"{'issue ms (last 8)':>17} {'max launch ms':>13}")
    for r in rows:
        if r["variant"] == "bare":
            print(f"{'bare':14} {bare_ms:18.2f} {'':17} {'':10} {'':16} {'':12} "
                  f"{statistics.median(r['issue_ms'][-8:]):17.2f} {max(r['max_launch_ms']):13.2f}")
            continue
        w = r["window_ms"]
        ratio = r["chain_ms"] / (bare_ms * len(w)) if bare_ms else float("nan")
        print(f"{r['variant']:14} {statistics.median(w[:4]):18.2f} {statistics.median(w[-8:]):17.2f} "
              f"{max(w):10.2f} {statistics.median(r['finish_ms']):16.2f} {ratio:12.2f} "
              f"{statistics.median(r['issue_ms'][-8:]):17.2f} {max(r['max_launch_ms']):13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
