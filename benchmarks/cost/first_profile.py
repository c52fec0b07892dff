"""Issue 30: what the first profile of a process reads and costs.

Each run is a fresh process, as a user's script is: it builds the demo model,
warms it up, times the bare loop (steps chosen to last about --loop-ms), then
profiles that loop once and prints one JSON line: SM/DRAM present, their
coverage of the loop, the enter's time (and of it the wait for the PM
sampler's set-up), the whole block against the bare loop.  The parent runs
--runs processes for each loop length and prints a table.  Also, with
--run-cli, `loopscope run` on benchmarks/tour/denoise_script.py, and with
--plugin, the pytest plugin's first test with a min_sm_active_pct budget.

    python benchmarks/cost/first_profile.py --loop-ms 20 50 100 --runs 5 --metrics true
    python benchmarks/cost/first_profile.py --child 50 --metrics lazy   (one run)

Needs a CUDA GPU and torch; prints what it measured, asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


VARIANTS = {"default": {}, "trace-only": {"metrics": False}, "counters-only": {"trace": False}}


def child(loop_ms: float, metrics: str, variant: str = "default") -> dict:
    import torch

    import loopscope
    from loopscope.demo import build, denoise_step, eager_loop

    model, x = build()
    with torch.inference_mode():
        for _ in range(5):
            x = denoise_step(model, x)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(10):
            x = denoise_step(model, x)
        torch.cuda.synchronize()
        step_ms = (time.perf_counter() - t0) * 100
        steps = max(3, round(loop_ms / step_ms))

        def loop(prof=None):
            eager_loop(model, x, steps, prof)
            torch.cuda.synchronize()

        bare = []
        for _ in range(3):
            t0 = time.perf_counter()
            loop()
            bare.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        options = dict({"metrics": True if metrics == "true" else metrics}, **VARIANTS[variant])
        prof = loopscope.profile(**options)
        prof.__enter__()
        t1 = time.perf_counter()
        loop(prof)
        t2 = time.perf_counter()
        prof.__exit__(None, None, None)
        t3 = time.perf_counter()
    s = prof.summary()
    sm, dram = s.get("sm"), s.get("dram")
    over = s["overhead"]
    pm = prof.capture.info().get("pm") or {}
    return {
        "availability_cached": pm.get("availability_cached"),
        "config_source": pm.get("config_source"),
        "pm_phases_ms": {k: round(v / 1e6, 1) for k, v in (pm.get("phases_ns") or {}).items() if v},
        "loop_ms": loop_ms, "steps": steps, "metrics": metrics, "variant": variant,
        "bare_ms": round(statistics.median(bare) * 1e3, 2),
        "enter_ms": round((t1 - t0) * 1e3, 1), "loop_in_ms": round((t2 - t1) * 1e3, 2),
        "exit_ms": round((t3 - t2) * 1e3, 1), "block_ms": round((t3 - t0) * 1e3, 1),
        "setup_wait_ms": over.get("metrics_setup_wait_ms"),
        "setup_wait_timed_out": over.get("metrics_setup_wait_timed_out"),
        "metrics_setup_ms": over.get("metrics_setup_ms"),
        "sm_pct": None if sm is None else sm.get("active_pct"),
        "sm_coverage_pct": None if sm is None else sm.get("coverage_pct"),
        "sm_samples": None if sm is None else sm.get("samples"),
        "dram_pct": None if dram is None else dram.get("throughput_pct"),
        "metrics_error": s.get("metrics_error"),
        "gpu": (s.get("gpu") or {}).get("device"),
    }


def run_cli() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run.json")
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "loopscope", "run", "--json", out,
                               os.path.join(HERE, "..", "tour", "denoise_script.py"), "--iterations", "300"],
                              capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0 or not os.path.exists(out):
            return {"case": "loopscope run", "rc": proc.returncode, "stderr": proc.stderr[-800:]}
        with open(out) as f:
            s = json.load(f)
    sm = s.get("sm")
    return {"case": "loopscope run", "rc": proc.returncode, "wall_s": round(wall, 2),
            "sm_pct": None if sm is None else sm.get("active_pct"),
            "sm_coverage_pct": None if sm is None else sm.get("coverage_pct"),
            "dram_pct": None if s.get("dram") is None else s["dram"].get("throughput_pct"),
            "metrics_error": s.get("metrics_error")}


PLUGIN_TEST = '''
import pytest
from loopscope.demo import build, eager_loop

@pytest.mark.loopscope(min_sm_active_pct=1)
def test_first(loopscope_profile):
    model, x = build()
    eager_loop(model, x, 3)
    eager_loop(model, x, 60, loopscope_profile)
'''


def plugin() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "test_first_plugin.py")
        with open(path, "w") as f:
            f.write(PLUGIN_TEST)
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p",
                               "no:cacheprovider", path], capture_output=True, text=True, cwd=tmp)
    tail = proc.stdout.strip().splitlines()[-3 if proc.returncode == 0 else -30:]
    return {"case": "pytest plugin, first test", "rc": proc.returncode, "tail": tail}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loop-ms", type=float, nargs="+", default=[20, 50, 100])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--metrics", default="true", choices=["true", "lazy"])
    parser.add_argument("--variant", default="default", choices=sorted(VARIANTS),
                        help="default, trace-only (metrics=False) or counters-only (trace=False)")
    parser.add_argument("--child", type=float, help="one run in this process (loop ms)")
    parser.add_argument("--run-cli", action="store_true", help="also `loopscope run`")
    parser.add_argument("--plugin", action="store_true", help="also the pytest plugin")
    parser.add_argument("--out", help="write every JSON line here too")
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.metrics, args.variant)))
        return
    rows = []
    for loop_ms in args.loop_ms:
        for _ in range(args.runs):
            proc = subprocess.run([sys.executable, __file__, "--child", str(loop_ms),
                                   "--metrics", args.metrics, "--variant", args.variant],
                                  capture_output=True, text=True)
            line = (proc.stdout.strip().splitlines() or [""])[-1]
            try:
                rows.append(json.loads(line))
            except ValueError:
                rows.append({"loop_ms": loop_ms, "failed": proc.stderr[-600:]})
    extra = []
    if args.run_cli:
        extra.append(run_cli())
    if args.plugin:
        extra.append(plugin())
    if args.out:
        with open(args.out, "w") as f:
            for r in rows + extra:
                f.write(json.dumps(r) + "\n")
    print(f"{'loop':>5} {'bare':>7} {'enter':>7} {'wait':>7} {'in':>7} {'block':>7} {'x':>6} "
          f"{'SM%':>6} {'cov%':>6} {'DRAM%':>6}  error")
    for r in rows:
        if "failed" in r:
            print(f"{r['loop_ms']:>5} FAILED {r['failed'][-200:]}")
            continue
        ratio = r["block_ms"] / r["bare_ms"] if r["bare_ms"] else float("nan")
        print(f"{r['loop_ms']:>5.0f} {r['bare_ms']:>7.1f} {r['enter_ms']:>7.1f} "
              f"{r['setup_wait_ms'] or 0:>7.1f} {r['loop_in_ms']:>7.1f} {r['block_ms']:>7.1f} "
              f"{ratio:>6.2f} "
              f"{r['sm_pct'] if r['sm_pct'] is not None else '-':>6} "
              f"{r['sm_coverage_pct'] if r['sm_coverage_pct'] is not None else '-':>6} "
              f"{r['dram_pct'] if r['dram_pct'] is not None else '-':>6}  "
              f"{(r['metrics_error'] or '')[:60]} avail_cached={r.get('availability_cached')} "
              f"{r.get('pm_phases_ms')}")
    for e in extra:
        print(json.dumps(e))


if __name__ == "__main__":
    main()
