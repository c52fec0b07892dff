"""What PM sampling costs, and how its buffers must be sized.

Parts (each runs on its own; a failure prints its reason and the next goes on):
  setup     whole profile sessions (enter, a 10-step demo loop, exit) with metrics on and
            off; the host time of each set-up step (summary["metrics"]["setup_ms"]) for
            the first profile of the process and for later ones (config image and the
            enabled sampler reused)
  sizing    counters-only profiles of a ~0.6 s matmul loop with no steps or ranges, over
            sampling intervals x hardware buffer sizes x decode periods: samples, samples
            expected, overflows (each one a stop and start), where decoding time goes
  overhead  paired A/B/B/A rounds on the eager demo loop (and its CUDA-graph replay):
            each round times the loop without a profiler and inside an already running
            profile (start and stop outside the timed region), in alternating order; the
            median of the per-round ratios, with its 10th-90th percentile
  kineto    after torch.profiler ran: one metrics profile session, its host time and
            loop ratio (runs last: Kineto keeps CUPTI's callback slot)
Usage: python benchmarks/counters/bench_counters.py [--rounds 40] [--only part,part] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
import warnings

import torch

import loopscope
from loopscope.demo import build, eager_loop, graph_loop_factory

# timed() is benchmarks/cost/bench_overhead.py's, imported by path
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cost"))
from bench_overhead import timed  # noqa: E402

RESULTS: dict[str, object] = {}
PARTS = []


def part(fn):
    def run(args):
        print(f"\n=== {fn.__name__} ===", flush=True)
        t0 = time.perf_counter()
        try:
            RESULTS[fn.__name__] = fn(args)
        except Exception as error:  # report and go on
            RESULTS[fn.__name__] = {"error": f"{type(error).__name__}: {error}"}
            traceback.print_exc()
        print(f"--- {fn.__name__}: {time.perf_counter() - t0:.1f} s", flush=True)
    run.__name__ = fn.__name__
    PARTS.append(run)
    return run


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


@part
def setup(args):
    model, x = build()
    for _ in range(3):
        eager_loop(model, x, 10)
    out = {}
    for metrics in (True, False):
        wall, phases = [], []
        for _ in range(8):
            t0 = time.perf_counter_ns()
            with loopscope.profile(metrics=metrics) as prof:
                eager_loop(model, x, 10, prof)
            wall.append((time.perf_counter_ns() - t0) / 1e6)
            m = prof.summary()["metrics"]
            if metrics:
                assert prof.summary()["sm"] is not None, prof.summary()["metrics_error"]
                phases.append({"config_reused": m["config_reused"],
                               "sampler_reused": m["sampler_reused"], **m["setup_ms"],
                               "samples": m["samples"], "overflows": m["overflows"],
                               "decodes": m["decodes"], "decode_ms": m["decode_ms"],
                               "decode_cupti_ms": m["decode_cupti_ms"],
                               "evaluate_ms": m["evaluate_ms"],
                               "counter_data_mb": m["counter_data_mb"],
                               "hw_buffer_mb": m["hw_buffer_mb"]})
        key = "metrics_on" if metrics else "metrics_off"
        out[key] = {"session_ms_first": wall[0], "session_ms_median_rest": statistics.median(wall[1:]),
                    "session_ms": wall}
        if phases:
            out["phases_first"] = phases[0]
            out["phases_later"] = phases[-1]
    print(f"session ms (enter + 10-step loop + exit): metrics on first {out['metrics_on']['session_ms_first']:.1f}, "
          f"later median {out['metrics_on']['session_ms_median_rest']:.1f}; metrics off median "
          f"{out['metrics_off']['session_ms_median_rest']:.1f}")
    print("set-up steps, first profile:", out["phases_first"])
    print("set-up steps, a later one:  ", out["phases_later"])
    return out


def matmul_burst(seconds: float) -> float:
    n = 4096
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    c = torch.empty_like(a)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(20):
            torch.mm(a, a, out=c)
        torch.cuda.synchronize()
    return time.perf_counter() - t0


@part
def sizing(args):
    rows = []
    for interval_us, buffer_mb, decode_ms in args.sizing:
                t0 = time.perf_counter_ns()
                with loopscope.profile(trace=False, syncs=False, metrics=True,
                                       metrics_interval_us=interval_us, metrics_buffer_mb=buffer_mb,
                                       metrics_decode_ms=decode_ms) as prof:
                    seconds = matmul_burst(0.6)
                session_ms = (time.perf_counter_ns() - t0) / 1e6
                s = prof.summary()
                m = s["metrics"] or {}
                expected = seconds * 1e6 / interval_us
                row = {"interval_us": interval_us, "buffer_mb": buffer_mb, "decode_ms": decode_ms,
                       "samples": m.get("samples"), "expected": round(expected),
                       "overflows": m.get("overflows"), "restarts": m.get("restarts"),
                       "reconfigures": m.get("reconfigures"), "pm_error": m.get("error"),
                       "counter_data_full": m.get("counter_data_full"),
                       "decode_cupti_ms": m.get("decode_cupti_ms"), "evaluate_ms": m.get("evaluate_ms"),
                       "decodes": m.get("decodes"), "decode_ms_total": m.get("decode_ms"),
                       "set_config_ms": (m.get("setup_ms") or {}).get("set_config"),
                       "counter_data_mb": m.get("counter_data_mb"), "session_ms": round(session_ms, 1),
                       "sm": (s["sm"] or {}).get("active_pct"), "error": s["metrics_error"]}
                rows.append(row)
                print(row, flush=True)
    return rows


@part
def overflow(args):
    """Where the samples of a run with overflows lie and what they read."""
    with loopscope.profile(trace=False, syncs=False, metrics=True, metrics_interval_us=100.0,
                           metrics_buffer_mb=4, metrics_decode_ms=50.0) as prof:
        seconds = matmul_burst(0.6)
    info = prof.capture.info()
    samples = prof.capture.samples()
    t0 = info["pm"]["started_ns"]
    rows = [((s - t0) / 1e6, (e - s) / 1e3, v.get("sm_active_pct"), v.get("gr_active_pct"))
            for s, e, v in samples]
    zero = [r for r in rows if r[2] is not None and r[2] < 1]
    out = {"seconds": seconds, "samples": len(rows), "sm_below_1pct": len(zero),
           "first": rows[:5], "last": rows[-5:], "zero_first": zero[:5],
           "pm": {k: info["pm"][k] for k in ("overflows", "restarts", "reconfigures", "error",
                                              "clock_delta_ns", "clock_shift_ns", "incomplete")},
           "gaps_ms": [(round(a[0], 3), round(b[0], 3)) for a, b in zip(rows, rows[1:])
                       if b[0] - a[0] > 1.0][:10]}
    print(json.dumps(out, indent=1, default=str))
    return out


def paired(loop, profile_kwargs, rounds):
    """Per-round ratio profiled/unprofiled, order alternating A B / B A.
    profile_kwargs["steps"] False: the loop runs inside the profile without
    step ranges (what the running profile costs by itself); "settle" True:
    one untimed loop inside the profile first (what it costs once running,
    apart from the first loop after the start, whose caches are cold)."""
    profile_kwargs = dict(profile_kwargs)
    steps = profile_kwargs.pop("steps", True)
    settle = profile_kwargs.pop("settle", False)
    ratios, base, prof_ms = [], [], []
    for i in range(rounds):
        def profiled():
            with loopscope.profile(**profile_kwargs) as prof:
                if settle:  # one untimed loop first: the steady state, not the start-up
                    loop(prof if steps else None)
                t = timed(lambda: loop(prof if steps else None))
            return t, prof
        if i % 2 == 0:
            t_none = timed(loop)
            t_prof, prof = profiled()
        else:
            t_prof, prof = profiled()
            t_none = timed(loop)
        if profile_kwargs.get("metrics"):
            assert prof.summary()["sm"] is not None, prof.summary()["metrics_error"]
        ratios.append(t_prof / t_none)
        base.append(t_none)
        prof_ms.append(t_prof)
    return {"ratio_median": round(statistics.median(ratios), 4),
            "ratio_p10": round(pct(ratios, 0.1), 4), "ratio_p90": round(pct(ratios, 0.9), 4),
            "ratio_p25": round(pct(ratios, 0.25), 4), "ratio_p75": round(pct(ratios, 0.75), 4),
            "none_ms_median": round(statistics.median(base), 3),
            "profiled_ms_median": round(statistics.median(prof_ms), 3),
            "ratio_of_medians": round(statistics.median(prof_ms) / statistics.median(base), 4)}


VARIANTS = {
    "counters_only": dict(trace=False, syncs=False, metrics=True),
    "counters_only_1ms": dict(trace=False, syncs=False, metrics=True, metrics_interval_us=1000.0),
    "counters_no_steps": dict(trace=False, syncs=False, metrics=True, steps=False),
    "counters_only_settled": dict(trace=False, syncs=False, metrics=True, settle=True),
    "ranges_only": dict(trace=False, syncs=False, metrics=False),
    "ranges_only_settled": dict(trace=False, syncs=False, metrics=False, settle=True),
    "nothing_no_steps": dict(trace=False, syncs=False, metrics=False, steps=False),
    "default_with_metrics": dict(metrics=True),
    "default_without_metrics": dict(metrics=False),
}


@part
def overhead(args):
    model, x = build()
    replay = graph_loop_factory(model, x)
    loops = {"eager": lambda prof=None: eager_loop(model, x, 10, prof),
             "graph": lambda prof=None: replay(10, prof)}
    out = {}
    wanted = set(filter(None, args.variants.split(",")))
    for name, loop in loops.items():
        for _ in range(5):
            loop()
        for variant, kwargs in VARIANTS.items():
            if wanted and variant not in wanted:
                continue
            r = paired(loop, kwargs, args.rounds)
            out[f"{name}/{variant}"] = r
            print(f"{name:<6} {variant:<24} ratio {r['ratio_median']:.4f} "
                  f"[p25 {r['ratio_p25']:.4f}, p75 {r['ratio_p75']:.4f}; p10 {r['ratio_p10']:.4f}, "
                  f"p90 {r['ratio_p90']:.4f}]  none {r['none_ms_median']:.3f} ms",
                  flush=True)
    return out


@part
def kineto(args):
    model, x = build()
    loop = lambda prof=None: eager_loop(model, x, 10, prof)  # noqa: E731
    for _ in range(3):
        loop()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
        loop()
    out = {}
    for metrics in (True, False):
        wall, ratio = [], []
        for _ in range(5):
            t_none = timed(loop)
            t0 = time.perf_counter_ns()
            with loopscope.profile(metrics=metrics) as prof:
                t = timed(lambda: loop(prof))
            wall.append((time.perf_counter_ns() - t0) / 1e6)
            ratio.append(t / t_none)
        s = prof.summary()
        out["metrics_on" if metrics else "metrics_off"] = {
            "session_ms_median": statistics.median(wall), "loop_ratio_median": statistics.median(ratio),
            "cupti_note": s["cupti_note"], "sm": s["sm"], "metrics_error": s["metrics_error"],
            "setup_ms": (s["metrics"] or {}).get("setup_ms")}
        print(("metrics on " if metrics else "metrics off"), out["metrics_on" if metrics else "metrics_off"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--only", default="")
    parser.add_argument("--json")
    parser.add_argument("--variants", default="", help="overhead variants, comma separated "
                        f"(default: all of {', '.join(VARIANTS)})")
    parser.add_argument("--sizing", default="", help="interval_us:buffer_mb:decode_ms,... "
                        "(default: 100 and 10 us x 4, 16, 64 MiB x 10, 50 ms)")
    args = parser.parse_args()
    args.sizing = [tuple(float(v) for v in item.split(":")) for item in args.sizing.split(",") if item] or [
        (i, b, d) for i in (100.0, 10.0) for b in (4, 16, 64) for d in (10.0, 50.0)]
    warnings.filterwarnings("ignore")
    wanted = set(filter(None, args.only.split(",")))
    RESULTS["device"] = torch.cuda.get_device_name()
    for run in PARTS:
        if not wanted or run.__name__ in wanted:
            run(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(RESULTS, f, indent=1, default=str)


if __name__ == "__main__":
    main()
