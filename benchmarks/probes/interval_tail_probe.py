"""Where a burst's PM samples go at a small explicit interval (issue 40's GPU
runs: at metrics_interval_us=20 an H200 lost a burst's end).

For each idle spell given: a profile that sets the sampler up at the
interval, the idle spell, then a profile of 30 bf16 8192^2 matmuls between
two 5 ms sleeps.  One JSON line a window: how long `summary()` took, how far
the last sample with SM active > 50% ends before the last kernel (fall_ms),
the coverage, and the sampler's counts (samples, skipped, overflows, full
counter-data rounds, decodes, decode time, the interval note) and the checks
that failed.

  python benchmarks/probes/interval_tail_probe.py --interval-us 20 --idle 0,0.1,0.25,0.5,1,2
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

METRIC_KEYS = ("samples", "skipped_samples", "overflows", "counter_data_full", "decodes",
               "decode_ms", "decode_cupti_ms", "counter_data_samples", "interval_note", "restarts")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interval-us", type=int, default=20)
    parser.add_argument("--idle", default="0,0.5,2", help="idle spells in seconds, comma-separated")
    args = parser.parse_args()
    import torch

    import loopscope

    sys.path.insert(0, os.path.join(HERE, "..", "counters"))
    from sample_drift import matmul_burst

    burst = matmul_burst(torch)
    for idle in (float(x) for x in args.idle.split(",")):
        with loopscope.profile(trace=False, syncs=False, metrics_interval_us=args.interval_us) as setup:
            pass
        setup.summary()
        time.sleep(idle)
        with loopscope.profile(metrics=True, metrics_interval_us=args.interval_us) as prof:
            time.sleep(0.005)
            burst(30)
            torch.cuda.synchronize()
            time.sleep(0.005)
        t0 = time.perf_counter()
        s = prof.summary()
        took = time.perf_counter() - t0
        kernels = [o for o in prof.capture.ops() if o[0] == "kernel"]
        end = max(k[2] for k in kernels)
        hot = [(x, e) for x, e, v in prof.capture.samples() if v.get("sm_active_pct", 0) > 50]
        m = s["metrics"] or {}  # None: no counters this window, metrics_error says why
        print(json.dumps({
            "idle_s": idle, "summary_ms": round(took * 1e3, 1),
            "fall_ms": round((hot[-1][1] - end) / 1e6, 3) if hot else None,
            "coverage_pct": (s["sm"] or {}).get("coverage_pct"),
            **{k: m.get(k) for k in METRIC_KEYS}, "metrics_error": s.get("metrics_error"),
            "checks_failed": [ch["name"] for ch in s["checks"] if ch["ok"] is False]}), flush=True)


if __name__ == "__main__":
    main()
