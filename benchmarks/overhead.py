"""What a whole profile costs, loopscope beside its peers, in one run (issue 11).

Every row of the table, on the demo denoise loop (10 steps x 18 MLP blocks,
~1,100 kernels) eager and replayed from CUDA graphs:

  loopscope             loopscope.profile() defaults (trace + syncs + counters)
  ls_metrics_off        loopscope.profile(metrics=False)
  ls_counters_only      loopscope.profile(trace=False): PM sampling (+ syncs), no tracing
  ls_instrument         the defaults + loopscope.instrument(model) (made and removed
                        inside the timed block)
  torch_cuda            torch.profiler, CUDA activity only
  torch_cpu_cuda        torch.profiler, CPU + CUDA
  torch_stack           torch.profiler, CPU + CUDA, with_stack=True
  sync_debug            torch.cuda.set_sync_debug_mode("warn") around the loop
  nvtx_steps            torch.cuda.nvtx.range around each step

Each variant runs in its own process (so none inherits another's CUPTI
state, and the first profile of a process is timed too), and alternates
profiled rounds with bare rounds of the same loop in that process.  A round
times, with the GPU idle at its start:
  enter    the profiler's start (loopscope: profile().__enter__())
  loop     the loop inside it, ending in torch.cuda.synchronize()
  exit     the profiler's stop (__exit__)
  post     what a user does next: summary() (which waits for loopscope's
           worker if it is still finishing) or key_averages().table()
  block    enter + loop + exit: what the user's code pays; block/bare is
           the ratio quoted in docs/counters.md ("x"), loop/bare the loop-only one.
Medians over the rounds; the first profiled block of each process is
reported apart ("first").

Usage (GPU machine; both loops take ~3-4 min):
  python benchmarks/overhead.py [--rounds 20] [--loops eager,graph]
                                [--variants a,b] [--json OUT.json]
  python benchmarks/overhead.py --dry      # lists the variants; no torch, no GPU
The short table comes last.  Environment variables pass through to the
children (LOOPSCOPE_INTERNAL: see python/loopscope/_settings.py).
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

VARIANTS = {
    "loopscope": "loopscope default (trace + syncs + counters)",
    "ls_metrics_off": "loopscope metrics=False",
    "ls_counters_only": "loopscope trace=False (counters only)",
    "ls_instrument": "loopscope default + instrument(model)",
    "torch_cuda": "torch.profiler CUDA only",
    "torch_cpu_cuda": "torch.profiler CPU+CUDA",
    "torch_stack": "torch.profiler CPU+CUDA, with_stack=True",
    "sync_debug": 'torch.cuda.set_sync_debug_mode("warn")',
    "nvtx_steps": "torch.cuda.nvtx.range per step",
}
LOOPSCOPE_OPTIONS = {"loopscope": {}, "ls_metrics_off": {"metrics": False},
                     "ls_counters_only": {"trace": False}, "ls_instrument": {}}
LOOPS = ("eager", "graph")
CHILD_TIMEOUT_S = 150


# -- the child: one variant, one loop, one process --------------------------

def build_loop(kind: str):
    """(torch, model, loop(prof=None)): the demo loop, warmed up."""
    import torch

    from loopscope.demo import build, eager_loop, graph_loop_factory

    model, x = build()
    if kind == "graph":
        replay = graph_loop_factory(model, x)
        loop = lambda prof=None: replay(10, prof)  # noqa: E731
    else:
        loop = lambda prof=None: eager_loop(model, x, 10, prof)  # noqa: E731
    for _ in range(5):
        loop()
    torch.cuda.synchronize()
    return torch, model, loop


class NvtxSteps:
    """Stands in for a profile: each step is a torch.cuda.nvtx.range."""

    def __init__(self, torch) -> None:
        self.torch, self.i = torch, 0

    def step(self):
        self.i += 1
        return self.torch.cuda.nvtx.range(f"Step_{self.i - 1}")


def make_profiler(variant: str, torch, model):
    """(enter() -> handle for the loop, exit(), post()) of one variant."""
    import loopscope

    if variant in LOOPSCOPE_OPTIONS:
        state = {}

        def enter():
            if variant == "ls_instrument":
                state["handle"] = loopscope.instrument(model)
            state["prof"] = loopscope.profile(**LOOPSCOPE_OPTIONS[variant]).__enter__()
            return state["prof"]

        def exit_():
            state["prof"].__exit__(None, None, None)
            if "handle" in state:
                state.pop("handle").remove()

        def post():
            return state["prof"].summary()

        return enter, exit_, post
    if variant.startswith("torch_"):
        acts = [torch.profiler.ProfilerActivity.CUDA]
        if variant != "torch_cuda":
            acts.insert(0, torch.profiler.ProfilerActivity.CPU)
        state = {}

        def enter():
            state["p"] = torch.profiler.profile(activities=acts,
                                                with_stack=variant == "torch_stack")
            state["p"].__enter__()
            return None

        def exit_():
            state["p"].__exit__(None, None, None)

        def post():
            return state["p"].key_averages().table(row_limit=20)

        return enter, exit_, post
    if variant == "sync_debug":
        return (lambda: torch.cuda.set_sync_debug_mode("warn"),
                lambda: torch.cuda.set_sync_debug_mode(0), lambda: None)
    if variant == "nvtx_steps":
        return (lambda: NvtxSteps(torch), lambda: None, lambda: None)
    raise SystemExit(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")


def one_round(torch, loop, enter, exit_, post) -> dict:
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    handle = enter()
    t1 = time.perf_counter_ns()
    loop(handle)
    torch.cuda.synchronize()
    t2 = time.perf_counter_ns()
    exit_()
    t3 = time.perf_counter_ns()
    result = post()
    t4 = time.perf_counter_ns()
    row = {"enter": (t1 - t0) / 1e6, "loop": (t2 - t1) / 1e6, "exit": (t3 - t2) / 1e6,
           "block": (t3 - t0) / 1e6, "post": (t4 - t3) / 1e6}
    if isinstance(result, dict) and "overhead" in result:  # a loopscope summary
        o = result["overhead"]
        row["loopscope"] = {
            "finish_wait_ms": o.get("finish_wait_ms"), "finish_ms": o.get("finish_ms"),
            "start_ms": o.get("start_ms"), "stop_ms": o.get("stop_ms"),
            "decode_ms": o.get("decode_ms"), "in_loop_estimate_ms": o.get("in_loop_estimate_ms"),
            "tail_samples": o.get("tail_samples"), "tail_decode_ms": o.get("tail_decode_ms"),
            "summary_build_ms": (t4 - t3) / 1e6 - (o.get("finish_wait_ms") or 0.0),
            "start_phases_ms": o.get("start_phases_ms"), "finish_phases_ms": o.get("finish_phases_ms"),
            "kernels": (result.get("gpu") or {}).get("kernels"),
            "samples": (result.get("sm") or {}).get("samples"),
            "coverage_pct": (result.get("sm") or {}).get("coverage_pct"),
            "metrics_error": result.get("metrics_error"),
            "metrics_setup_ms": o.get("metrics_setup_ms"),
            "setup_phases_ms": (result.get("metrics") or {}).get("setup_ms"),
            "config_source": (result.get("metrics") or {}).get("config_source"),
        }
    return row


def timed_bare(torch, loop) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    loop()
    torch.cuda.synchronize()
    return (time.perf_counter_ns() - t0) / 1e6


def median_of(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def run_child(variant: str, loop_kind: str, rounds: int) -> dict:
    warnings.filterwarnings("ignore")
    torch, model, loop = build_loop(loop_kind)
    enter, exit_, post = make_profiler(variant, torch, model)
    first = one_round(torch, loop, enter, exit_, post)  # the process's first profile
    bare, rows = [], []
    for _ in range(rounds):
        bare.append(timed_bare(torch, loop))
        rows.append(one_round(torch, loop, enter, exit_, post))
    bare_ms = statistics.median(bare)
    out = {"variant": variant, "loop": loop_kind, "rounds": rounds,
           "device": torch.cuda.get_device_name(), "bare_ms": bare_ms, "first": first,
           "median": {k: median_of(rows, k) for k in ("enter", "loop", "exit", "block", "post")},
           "rows": rows}
    out["block_x"] = out["median"]["block"] / bare_ms
    out["loop_x"] = out["median"]["loop"] / bare_ms
    return out


# -- the parent -------------------------------------------------------------

def spawn(variant: str, loop_kind: str, rounds: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", variant, "--loops", loop_kind,
           "--rounds", str(rounds)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"variant": variant, "loop": loop_kind, "error": f"timed out after {CHILD_TIMEOUT_S} s"}
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"variant": variant, "loop": loop_kind,
                "error": (done.stderr or done.stdout)[-800:] or f"exit {done.returncode}"}


def table(results: list[dict]) -> list[str]:
    lines = [f"{'variant':<18} {'loop':<6} {'bare ms':>8} {'block x':>8} {'loop x':>7} "
             f"{'enter':>7} {'exit':>7} {'post ms':>8} {'first blk':>9} {'first ent':>9}"]
    for r in results:
        if "error" in r:
            lines.append(f"{r['variant']:<18} {r['loop']:<6} ERROR {r['error'].splitlines()[-1][:90]}")
            continue
        m, f = r["median"], r["first"]
        lines.append(f"{r['variant']:<18} {r['loop']:<6} {r['bare_ms']:>8.3f} {r['block_x']:>8.3f} "
                     f"{r['loop_x']:>7.3f} {m['enter']:>7.3f} {m['exit']:>7.3f} {m['post']:>8.2f} "
                     f"{f['block']:>9.1f} {f['enter']:>9.1f}")
    return lines


def details(results: list[dict]) -> list[str]:
    """loopscope's own figures: where its time went (medians of the rounds)."""
    lines = []
    for r in results:
        rows = [x["loopscope"] for x in r.get("rows", []) if "loopscope" in x]
        if not rows:
            continue
        med = lambda key: statistics.median((x.get(key) or 0) for x in rows)  # noqa: E731
        phases = lambda key: {k: round(statistics.median(x[key][k] for x in rows), 3)  # noqa: E731
                              for k in (rows[0].get(key) or {})}
        first = r["first"].get("loopscope", {})
        lines.append(f"{r['variant']} / {r['loop']}: summary waited {med('finish_wait_ms'):.3f} ms "
                     f"for the worker (finish {med('finish_ms'):.3f} ms, decode {med('decode_ms'):.3f} "
                     f"ms); start {med('start_ms'):.3f} ms, stop {med('stop_ms'):.3f} ms; in-loop "
                     f"estimate {med('in_loop_estimate_ms'):.3f} ms; kernels {med('kernels')}, "
                     f"samples {med('samples')}, coverage {med('coverage_pct')} %")
        lines.append(f"    finish decoded a tail of {med('tail_samples')} samples in "
                     f"{med('tail_decode_ms'):.3f} ms; summary() built in "
                     f"{med('summary_build_ms'):.3f} ms after its wait")
        lines.append(f"    start phases {phases('start_phases_ms')}")
        lines.append(f"    finish phases {phases('finish_phases_ms')}")
        lines.append(f"    first profile: sampler set-up {first.get('metrics_setup_ms')} ms "
                     f"(config {first.get('config_source')}), {first.get('setup_phases_ms')}; "
                     f"metrics_error {first.get('metrics_error')!r}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--loops", default=",".join(LOOPS))
    parser.add_argument("--variants", default=",".join(VARIANTS))
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
        if name not in VARIANTS:
            parser.error(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
    for name in loops:
        if name not in LOOPS:
            parser.error(f"unknown loop {name!r}; known: {', '.join(LOOPS)}")
    if args.child:
        print(json.dumps(run_child(args.child, loops[0], args.rounds)))
        return
    if args.dry:
        for loop_kind in loops:
            for name in variants:
                print(f"{loop_kind:<6} {name:<18} {VARIANTS[name]}")
        return
    started = time.time()
    results = []
    for loop_kind in loops:
        for name in variants:
            if args.budget_s is not None and time.time() - started > args.budget_s:
                results.append({"variant": name, "loop": loop_kind,
                                "error": f"skipped: past the {args.budget_s:.0f} s budget"})
                continue
            result = spawn(name, loop_kind, args.rounds)
            results.append(result)
            done = "error" if "error" in result else f"block {result['block_x']:.3f}x"
            print(f"[{time.time() - started:6.1f} s] {loop_kind} {name}: {done}", flush=True)
    out = {"date": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), "rounds": args.rounds,
           "device": next((r["device"] for r in results if "device" in r), None),
           "results": results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    print()
    for line in details(results):
        print(line)
    print()
    print(f"{out['device']}, {args.rounds} rounds a variant, medians; x = time / bare loop; "
          f"ms unless said; first = the first profile of a process")
    for line in table(results):
        print(line)


if __name__ == "__main__":
    main()
