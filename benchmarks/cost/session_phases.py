"""Where a whole profile's time goes: enter, loop, exit and summary, and the
host time of each step of the C core's start and stop on the user's thread
and of the finish on loopscope's worker thread (the capture's
`start_phases_ns` / `stop_phases_ns` / `finish_phases_ns`, the finish's whole
time and how long summary() waited for it, PM sampling's own phases).

Variants alternate round by round with bare rounds, in one process; the first
profile of a process is timed in fresh subprocesses (`--first VARIANT`).
Usage: python benchmarks/cost/session_phases.py [--rounds 15] [--graph] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _block import timed_block  # noqa: E402  (a sibling module, by path)

VARIANTS = {
    "default": {},
    "metrics_off": {"metrics": False},
    "metrics_off_no_warm_up": {"metrics": False, "warm_up": False},
    "counters_only": {"trace": False},
}


def setup(graph: bool):
    import torch

    from loopscope.demo import build, eager_loop, graph_loop_factory

    model, x = build()
    if graph:
        replay = graph_loop_factory(model, x)
        loop = lambda prof=None: replay(10, prof)  # noqa: E731
    else:
        loop = lambda prof=None: eager_loop(model, x, 10, prof)  # noqa: E731
    for _ in range(5):
        loop()
    torch.cuda.synchronize()
    return torch, loop


def one_profile(torch, loop, options):
    import loopscope

    prof, t = timed_block(loopscope, torch, loop, options)
    summary = prof.summary()
    info = prof.capture.info()
    return {**t,
            "start_phases": {k: v / 1e6 for k, v in info["start_phases_ns"].items()},
            "stop_phases": {k: v / 1e6 for k, v in info["stop_phases_ns"].items()},
            "finish_phases": {k: v / 1e6 for k, v in info["finish_phases_ns"].items()},
            "finish_ms": info["finish_ns"] / 1e6, "finish_wait_ms": info["finish_wait_ns"] / 1e6,
            "pm_phases": ((info.get("pm") or {}).get("phases_ns") or {}),
            "pm_decode_ms": ((info.get("pm") or {}).get("decode_ns") or 0) / 1e6,
            "samples": (info.get("pm") or {}).get("samples"),
            "metrics_error": summary.get("metrics_error"), "kernels": (summary["gpu"] or {}).get("kernels")}


def med(rows, key, sub=None):
    vals = [r[key][sub] if sub else r[key] for r in rows if (r[key].get(sub) if sub else r[key]) is not None]
    return round(statistics.median(vals), 4) if vals else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--graph", action="store_true")
    parser.add_argument("--first", choices=sorted(VARIANTS))
    parser.add_argument("--json")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch, loop = setup(args.graph)
    if args.first:
        row = one_profile(torch, loop, VARIANTS[args.first])
        print(json.dumps(row))
        return
    bare, rows = [], {k: [] for k in VARIANTS}
    for _ in range(args.rounds):
        for name, options in VARIANTS.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
            loop()
            torch.cuda.synchronize()
            bare.append((time.perf_counter_ns() - t0) / 1e6)
            rows[name].append(one_profile(torch, loop, options))
    # torch.profiler CUDA-only, whole block, last (Kineto keeps CUPTI's callback slot).
    kineto, kineto_post = [], []
    for _ in range(args.rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
            loop()
            torch.cuda.synchronize()
        t1 = time.perf_counter_ns()
        p.key_averages().table()
        kineto.append((time.perf_counter_ns() - t0) / 1e6)
        kineto_post.append((time.perf_counter_ns() - t1) / 1e6)
    firsts = {}
    for name in VARIANTS:
        runs = []
        for _ in range(2):
            cmd = [sys.executable, __file__, "--first", name] + (["--graph"] if args.graph else [])
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            try:
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                runs.append({"error": out.stderr[-500:]})
        firsts[name] = runs
    bare_ms = statistics.median(bare)
    result = {"device": torch.cuda.get_device_name(), "loop": "graph" if args.graph else "eager",
              "rounds": args.rounds, "bare_ms": bare_ms, "variants": {}, "first": firsts,
              "torch_cuda_block_ms": statistics.median(kineto),
              "torch_cuda_post_ms": statistics.median(kineto_post)}
    print(f"{result['device']}, {result['loop']} loop, bare {bare_ms:.3f} ms, {args.rounds} rounds")
    print(f"torch.profiler CUDA-only whole block {result['torch_cuda_block_ms']:.3f} ms "
          f"({result['torch_cuda_block_ms'] / bare_ms:.3f}x), key_averages().table() "
          f"{result['torch_cuda_post_ms']:.1f} ms")
    for name, rs in rows.items():
        v = {k: med(rs, k) for k in ("enter", "loop", "exit", "block", "summary", "pm_decode_ms",
                                     "finish_ms", "finish_wait_ms")}
        v["start_phases"] = {k: med(rs, "start_phases", k) for k in rs[0]["start_phases"]}
        v["stop_phases"] = {k: med(rs, "stop_phases", k) for k in rs[0]["stop_phases"]}
        v["finish_phases"] = {k: med(rs, "finish_phases", k) for k in rs[0]["finish_phases"]}
        v["pm_phases_ms"] = {k: round(statistics.median([r["pm_phases"].get(k, 0) for r in rs]) / 1e6, 4)
                             for k in (rs[0]["pm_phases"] or {})}
        v["samples"] = statistics.median([r["samples"] or 0 for r in rs])
        v["metrics_error"] = rs[0]["metrics_error"]
        result["variants"][name] = v
        print(f"{name:<24} block {v['block']:.3f} ms ({v['block'] / bare_ms:.3f}x) enter {v['enter']:.3f}"
              f" loop {v['loop']:.3f} ({v['loop'] / bare_ms:.3f}x) exit {v['exit']:.3f} summary "
              f"{v['summary']:.3f}; samples {v['samples']}")
        print(f"   start {v['start_phases']}\n   stop  {v['stop_phases']}\n   finish "
              f"{v['finish_phases']} (whole {v['finish_ms']}, summary waited {v['finish_wait_ms']})"
              f"\n   pm    {v['pm_phases_ms']} decode {v['pm_decode_ms']}")
    for name, runs in firsts.items():
        print(f"first profile, {name}: " + ", ".join(
            f"block {r['block']:.1f} ms (enter {r['enter']:.1f}, exit {r['exit']:.1f})" if "block" in r
            else f"error {r['error']!r}" for r in runs))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, **result}, f, indent=1)


if __name__ == "__main__":
    main()
