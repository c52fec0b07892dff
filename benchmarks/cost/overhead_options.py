"""loopscope's internal alternatives side by side, to choose its defaults on
measurement (issue 11).  Each row is loopscope.profile() on the demo loop in
its own process, with one internal switch (LOOPSCOPE_INTERNAL, see
python/loopscope/live/_settings.py) or profile option changed from today's
defaults; rounds alternate with bare rounds as in benchmarks/cost/overhead.py.

  default                  today's defaults (worker finish, zeroed buffers, warm-up
                           once per process, one PM sampler for the life of the
                           process, samples decoded every 10 ms)
  decode_10ms              the worker decodes every 10 ms (the default period)
  decode_2ms               the worker decodes every 2 ms
  decode_5ms               the worker decodes every 5 ms
  decode_1ms               the worker decodes every 1 ms
  hw_buffer_16mb           a 16 MiB hardware buffer for the samples (default 64 MiB)
  hw_buffer_8mb            an 8 MiB hardware buffer
  interval_200us           a sample every 200 us (half the decode work)
  trace_only               syncs=False, metrics=False
  activity_floor           trace_only without any CUPTI callback: what the
                           activity records alone cost the loop (the floor)
  counters_only            trace=False, syncs=False

Columns: block x and loop x (time / bare loop), enter, exit, summary (incl.
its wait for the worker), warm-up, step 0's largest gap against the other
steps' (a fake bubble from CUPTI's lazy set-up shows there), PM samples per
step, coverage of the loop by samples, the worker's decode time, and the
bare loop (to see sampling kept running between profiles).

Usage (GPU machine, ~2.5 min for both loops):
  python benchmarks/cost/overhead_options.py [--rounds 12] [--loops eager,graph]
                                        [--variants a,b] [--json OUT.json]
  python benchmarks/cost/overhead_options.py --dry   # lists the runs; no torch, no GPU
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _block import timed_block  # noqa: E402
from overhead import DEMO_LOOPS, build_loop, timed_bare  # noqa: E402

# The alternatives that lost (warm-up at every start or none, CUPTI clearing its
# own buffers, the finish inside exit, the sampler stopped and started per
# profile, smaller counter data images) were deleted with their switches
# (issue 43); RESULTS.md and benchmarks/history keep what they measured.
OPTIONS: dict[str, tuple[str, dict]] = {
    "default": ("", {}),
    "decode_10ms": ("", {"metrics_decode_ms": 10}),
    "decode_1ms": ("", {"metrics_decode_ms": 1}),
    "decode_2ms": ("", {"metrics_decode_ms": 2}),
    "decode_5ms": ("", {"metrics_decode_ms": 5}),
    "hw_buffer_16mb": ("", {"metrics_buffer_mb": 16}),
    "hw_buffer_8mb": ("", {"metrics_buffer_mb": 8}),
    "interval_200us": ("", {"metrics_interval_us": 200}),
    "trace_only": ("", {"syncs": False, "metrics": False}),
    "activity_floor": ("callbacks=0", {"syncs": False, "metrics": False}),
    "counters_only": ("", {"trace": False, "syncs": False}),
}
CHILD_TIMEOUT_S = 120


def profiled_round(torch, loop, options: dict) -> dict:
    import loopscope

    prof, t = timed_block(loopscope, torch, loop, options)
    s = prof.summary()
    o = s["overhead"]
    steps = s["steps"] or []
    max_gaps = [st["gaps"]["max_us"] for st in steps if st.get("gaps")]
    pm = (s["metrics"] or {})
    return {
        "enter": t["enter"], "loop": t["loop"], "exit": t["exit"], "block": t["block"],
        "summary": t["summary"],
        "warm_up": o["start_phases_ms"].get("warm_up", 0.0),
        "finish_wait": o["finish_wait_ms"], "finish": o["finish_ms"], "decode": o["decode_ms"],
        "tail_samples": o.get("tail_samples"), "tail_decode": o.get("tail_decode_ms"),
        "summary_build": t["summary"] - o["finish_wait_ms"],
        "python_enter": t["enter"] - o["start_ms"],
        "step0_gap_us": max_gaps[0] if max_gaps else None,
        "other_gap_us": statistics.median(max_gaps[1:]) if len(max_gaps) > 1 else None,
        "samples_per_step": (statistics.median(st["samples"] for st in steps) if steps else None),
        "coverage_pct": (s["sm"] or {}).get("coverage_pct"),
        "metrics_error": s["metrics_error"],
        "start_phases": o["start_phases_ms"], "stop_phases": o["stop_phases_ms"],
        "finish_phases": o["finish_phases_ms"],
        "setup_phases": pm.get("setup_ms"), "sampler_setup_ms": o.get("metrics_setup_ms"),
        "sampler_start_delay_ms": o.get("metrics_start_delay_ms"),
        "counter_data_mb": pm.get("counter_data_mb"), "decodes": pm.get("decodes"),
        "kernels": (s["gpu"] or {}).get("kernels"), "busy_pct": (s["gpu"] or {}).get("busy_pct"),
        "gpu_error": s["gpu_error"],
        "decode_cupti": pm.get("decode_cupti_ms"), "evaluate": pm.get("evaluate_ms"),
        "pm_decodes": pm.get("decodes"), "pm_samples": pm.get("samples"),
        "pm_stop": (pm.get("setup_ms") or {}).get("stop"),
    }


def run_child(name: str, loop_kind: str, rounds: int) -> dict:
    warnings.filterwarnings("ignore")
    torch, _model, loop = build_loop(loop_kind)
    options = OPTIONS[name][1]
    first = profiled_round(torch, loop, options)
    bare, rows = [], []
    for _ in range(rounds):
        bare.append(timed_bare(torch, loop))
        rows.append(profiled_round(torch, loop, options))
    bare_ms = statistics.median(bare)
    med = {}
    for key in rows[0]:
        values = [r[key] for r in rows if isinstance(r[key], (int, float))]
        if values:
            med[key] = statistics.median(values)
    return {"variant": name, "loop": loop_kind, "device": torch.cuda.get_device_name(),
            "bare_ms": bare_ms, "block_x": med["block"] / bare_ms, "loop_x": med["loop"] / bare_ms,
            "median": med, "first": first, "rows": rows}


def spawn(name: str, loop_kind: str, rounds: int) -> dict:
    env = dict(os.environ)
    internal = OPTIONS[name][0]
    env["LOOPSCOPE_INTERNAL"] = ",".join(x for x in (env.get("LOOPSCOPE_INTERNAL", ""), internal) if x)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--loops", loop_kind,
           "--rounds", str(rounds)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"variant": name, "loop": loop_kind, "error": f"timed out after {CHILD_TIMEOUT_S} s"}
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"variant": name, "loop": loop_kind,
                "error": (done.stderr or done.stdout)[-800:] or f"exit {done.returncode}"}


def fmt(value, spec: str) -> str:
    """value in `spec`, or a dash as wide."""
    if isinstance(value, (int, float)):
        return format(value, spec)
    width = spec.split(".")[0]
    return format("-", ">" + width) if width else "-"


def table(results: list[dict]) -> list[str]:
    lines = [f"{'variant':<24} {'loop':<5} {'block x':>7} {'loop x':>6} {'enter':>6} {'exit':>6} "
             f"{'summ':>6} {'warm':>5} {'gap0us':>7} {'gapNus':>7} {'smp/st':>6} {'cov%':>5} "
             f"{'dec ms':>6} {'bare':>7} {'kern':>5} {'busy%':>5}"]
    for r in results:
        if "error" in r:
            lines.append(f"{r['variant']:<24} {r['loop']:<5} ERROR {r['error'].splitlines()[-1][:90]}")
            continue
        m = r["median"]
        lines.append(
            f"{r['variant']:<24} {r['loop']:<5} {r['block_x']:>7.3f} {r['loop_x']:>6.3f} "
            f"{fmt(m.get('enter'), '6.3f')} {fmt(m.get('exit'), '6.3f')} {fmt(m.get('summary'), '6.2f')} "
            f"{fmt(m.get('warm_up'), '5.2f')} {fmt(m.get('step0_gap_us'), '7.1f')} "
            f"{fmt(m.get('other_gap_us'), '7.1f')} {fmt(m.get('samples_per_step'), '6.1f')} "
            f"{fmt(m.get('coverage_pct'), '5.1f')} {fmt(m.get('decode'), '6.2f')} {r['bare_ms']:>7.3f} "
            f"{fmt(m.get('kernels'), '5.0f')} {fmt(m.get('busy_pct'), '5.1f')}"
            + (f"  gpu_error: {r['first']['gpu_error'][:60]}" if r.get("first", {}).get("gpu_error")
               else ""))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--loops", default=",".join(DEMO_LOOPS))
    parser.add_argument("--variants", default=",".join(OPTIONS))
    parser.add_argument("--json", help="write every figure here")
    parser.add_argument("--dry", action="store_true", help="list the runs and exit (no GPU)")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="start no new process after this many seconds (the rest is "
                             "reported as skipped), so one device call is never cut short")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    loops = [x for x in args.loops.split(",") if x]
    variants = [x for x in args.variants.split(",") if x]
    for name in variants:
        if name not in OPTIONS:
            parser.error(f"unknown variant {name!r}; known: {', '.join(OPTIONS)}")
    for name in loops:
        if name not in DEMO_LOOPS:
            parser.error(f"unknown loop {name!r}; known: {', '.join(DEMO_LOOPS)}")
    if args.child:
        print(json.dumps(run_child(args.child, loops[0], args.rounds)))
        return
    if args.dry:
        for loop_kind in loops:
            for name in variants:
                internal, options = OPTIONS[name]
                print(f"{loop_kind:<6} {name:<24} LOOPSCOPE_INTERNAL={internal!r} profile({options})")
        return
    started = time.time()
    results = []
    # Variant by variant, both loops each, so a budget cuts the last variants
    # of both loops rather than the whole second loop.
    for name in variants:
        for loop_kind in loops:
            if args.budget_s is not None and time.time() - started > args.budget_s:
                results.append({"variant": name, "loop": loop_kind,
                                "error": f"skipped: past the {args.budget_s:.0f} s budget"})
                continue
            result = spawn(name, loop_kind, args.rounds)
            results.append(result)
            done = "error" if "error" in result else f"block {result['block_x']:.3f}x"
            print(f"[{time.time() - started:6.1f} s] {loop_kind} {name}: {done}", flush=True)
    results.sort(key=lambda r: (loops.index(r["loop"]), variants.index(r["variant"])))
    out = {"date": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), "rounds": args.rounds,
           "results": results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    print()
    for r in results:
        if "error" in r:
            continue
        f, m = r["first"], r["median"]
        print(f"{r['variant']} / {r['loop']}: first profile enter {f['enter']:.1f} ms exit "
              f"{f['exit']:.1f} ms summary {f['summary']:.1f} ms, sampler set-up "
              f"{f['sampler_setup_ms']} ms {f['setup_phases']}")
        print(f"    median start phases {r['rows'][len(r['rows']) // 2]['start_phases']}; finish "
              f"{fmt(m.get('finish'), '.3f')} ms (waited {fmt(m.get('finish_wait'), '.3f')}); "
              f"sampler start delay {fmt(m.get('sampler_start_delay_ms'), '.3f')} ms; image "
              f"{fmt(m.get('counter_data_mb'), '.2f')} MiB, {fmt(m.get('decodes'), '.0f')} decodes")
        print(f"    tail {fmt(m.get('tail_samples'), '.0f')} samples decoded by the finish in "
              f"{fmt(m.get('tail_decode'), '.3f')} ms; summary built in "
              f"{fmt(m.get('summary_build'), '.3f')} ms after its wait; enter outside the C "
              f"start {fmt(m.get('python_enter'), '.3f')} ms")
        print(f"    counters: {fmt(m.get('pm_samples'), '.0f')} samples in "
              f"{fmt(m.get('pm_decodes'), '.0f')} decodes; CUPTI's decode "
              f"{fmt(m.get('decode_cupti'), '.2f')} ms, evaluation {fmt(m.get('evaluate'), '.2f')} "
              f"ms; stop (with the last decode) {fmt(m.get('pm_stop'), '.2f')} ms")
    print()
    print("medians; x = time / bare loop; ms unless said; gap0us/gapNus = largest gap in step 0 / "
          "median of the other steps' largest; smp/st = PM samples a step")
    for line in table(results):
        print(line)


if __name__ == "__main__":
    main()
