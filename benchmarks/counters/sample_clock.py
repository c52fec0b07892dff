"""Where PM samples sit against the kernels, profile after profile (issue 27).

A burst of bf16 matmuls between two idle spells, profiled at a 20 us interval;
for each profile: how far the first sample with SM active > 50% starts from the
first kernel's start ("rise") and the last one ends from the last kernel's end
("fall"), the samples dropped as partial, holes in the sample sequence, and the
samples around the rise.  Each variant runs in its own process:

  default     profiles one after another, summary() after each (the defaults)
  ready       the GPU test's order: a counters-only profile and its summary(),
              then the measured one
  keep        profiles 0.3 s apart: one sampler across every profile, as every
              variant has since issue 43 (a clock that drifts from the
              kernels' shows as a rise that grows with the time since the
              sampler started)

GPU only.  Prints one JSON line a profile, then a table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

INTERVAL_US = 20

INTERNAL = {"default": "", "ready": "", "keep": ""}  # LOOPSCOPE_INTERNAL of each variant


def burst(torch, a, c, n: int) -> None:
    time.sleep(0.005)
    for _ in range(n):
        torch.mm(a, a, out=c)
    torch.cuda.synchronize()
    time.sleep(0.005)


def measure(prof) -> dict:
    cap = prof.capture
    kernels = [o for o in cap.ops() if o[0] == "kernel"]
    samples = sorted(cap.samples(), key=lambda x: x[0])
    info = cap.info()
    pm = info.get("pm") or {}
    row = {"kernels": len(kernels), "samples": len(samples), "incomplete": pm.get("incomplete"),
           "clock_delta_ns": pm.get("clock_delta_ns"), "clock_shift_ns": pm.get("clock_shift_ns"),
           "started_ns": pm.get("started_ns"), "sampler_reused": pm.get("sampler_reused"),
           "timestamp_source": info.get("timestamp_source"),
           "continued_tracing": info.get("continued_tracing"), "error": pm.get("error"),
           "stopped_ns": pm.get("stopped_ns"), "latest_ns": pm.get("clock_latest_ns"),
           "stop_ns": info.get("stop_ns"), "samples_outside": info.get("samples_outside"),
           "tail_samples": pm.get("tail_samples"), "overflows": pm.get("overflows"),
           "restarts": pm.get("restarts"), "reconfigures": pm.get("reconfigures"),
           "metrics_reason": info.get("metrics_reason"),
           "metrics_error": prof.summary().get("metrics_error")}
    if not kernels or not samples:
        return row
    start, end = min(k[1] for k in kernels), max(k[2] for k in kernels)
    hot = [(s, e) for s, e, v in samples if v.get("sm_active_pct", 0) > 50]
    interval = INTERVAL_US * 1000
    holes = [(b[0] - a[1]) / 1e3 for a, b in zip(samples, samples[1:]) if b[0] - a[1] > interval // 2]
    around = [((s - start) / 1e3, (e - start) / 1e3, round(v.get("sm_active_pct", -1), 1))
              for s, e, v in samples if -3 * interval <= s - start <= 3 * interval]
    row.update({"rise_us": (hot[0][0] - start) / 1e3 if hot else None,
                "fall_us": (hot[-1][1] - end) / 1e3 if hot else None,
                "holes_us": holes[:8], "hole_count": len(holes), "around_rise": around,
                "window_ms": ((info.get("stop_ns") or 0) - (info.get("start_ns") or 0)) / 1e6,
                "first_sample_after_start_us": (samples[0][0] - (info.get("start_ns") or 0)) / 1e3,
                "latest_after_stop_ms": ((pm.get("clock_latest_ns") or 0) - (info.get("stop_ns") or 0)) / 1e6,
                "checked_stop_after_stop_ms": ((pm.get("stopped_ns") or 0) - (info.get("stop_ns") or 0)) / 1e6})
    return row


def child(variant: str, profiles: int, matmuls: int) -> None:
    internal = INTERNAL[variant]
    if internal:
        os.environ["LOOPSCOPE_INTERNAL"] = internal
    import torch

    import loopscope

    n = 8192
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    c = torch.empty_like(a)
    torch.mm(a, a, out=c)
    torch.cuda.synchronize()
    options = {"metrics": True, "metrics_interval_us": INTERVAL_US}
    with loopscope.profile(trace=False, syncs=False, **options) as warm:
        pass
    warm.summary()
    t0 = time.perf_counter()
    for i in range(profiles):
        if variant.startswith("ready"):
            with loopscope.profile(trace=False, syncs=False, **options) as r:
                pass
            r.summary()
        if variant == "keep":
            time.sleep(0.3)
        with loopscope.profile(**options) as prof:
            burst(torch, a, c, matmuls)
        prof.summary()
        row = measure(prof)
        row.update({"variant": variant, "profile": i, "since_first_s": time.perf_counter() - t0})
        print(json.dumps(row), flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variants", default="default,ready,keep",
                   help="comma-separated: " + ", ".join(INTERNAL))
    p.add_argument("--profiles", type=int, default=6, help="profiles a variant")
    p.add_argument("--matmuls", type=int, default=30, help="8192^2 bf16 matmuls a burst")
    p.add_argument("--json", help="write every row here")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child, args.profiles, args.matmuls)
        return 0
    rows = []
    for variant in args.variants.split(","):
        if variant not in INTERNAL:
            p.error(f"--variants: unknown variant {variant!r} (known: {', '.join(INTERNAL)})")
        cmd = [sys.executable, __file__, "--child", variant, "--profiles", str(args.profiles),
               "--matmuls", str(args.matmuls)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        got = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
        if proc.returncode != 0:
            print(f"{variant}: exit {proc.returncode}\n{proc.stderr[-2000:]}", flush=True)
        for row in got:
            print(json.dumps(row), flush=True)
        rows += got
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print(f"\n{'variant':14} {'#':>2} {'t s':>5} {'rise us':>8} {'fall us':>8} {'samples':>7} "
          f"{'partial':>7} {'holes':>5} {'delta us':>10} {'shift us':>9} {'latest-stop ms':>14} "
          f"{'checked stop ms':>15} {'outside':>7} reused ts")
    for r in rows:
        def us(v):
            return f"{v:8.1f}" if isinstance(v, (int, float)) else f"{'-':>8}"
        print(f"{r['variant']:14} {r['profile']:2d} {r['since_first_s']:5.2f} {us(r.get('rise_us'))} "
              f"{us(r.get('fall_us'))} {r.get('samples', 0):7d} {r.get('incomplete') or 0:7d} "
              f"{r.get('hole_count', 0):5d} {(r.get('clock_delta_ns') or 0) / 1e3:10.1f} "
              f"{(r.get('clock_shift_ns') or 0) / 1e3:9.1f} {r.get('latest_after_stop_ms') or 0:14.3f} "
              f"{r.get('checked_stop_after_stop_ms') or 0:15.3f} {r.get('samples_outside') or 0:7d} "
              f"{r.get('sampler_reused')} "
              f"{r.get('timestamp_source')}")
    for r in rows:
        if r.get("metrics_error") or r.get("metrics_reason"):
            print(f"{r['variant']} #{r['profile']}: {r.get('metrics_error') or r.get('metrics_reason')}")
    for variant in args.variants.split(","):
        rises = [r["rise_us"] for r in rows if r["variant"] == variant and r.get("rise_us") is not None]
        if rises:
            print(f"{variant}: rise median {statistics.median(rises):.1f} us, "
                  f"range {min(rises):.1f}..{max(rises):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
