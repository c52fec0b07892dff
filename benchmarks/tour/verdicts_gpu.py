"""Issue 15 on a GPU: verdicts that say what to change, projections, steps
without markers.  One call, a few minutes; a short table printed last and
the figures as JSON.

Checks (each one's figures are printed; a check that cannot run says why):
  under_filled     the demo loop (10 steps x 18 blocks, bf16, 1x50 tokens)
                   replayed from a CUDA graph reads UNDER_FILLED; its kernels'
                   fill, SM active and warp occupancy while busy, top kernels.
  replay_floor     the mean gap between kernels of that replay, against the
                   REPLAY_GAP_FLOOR_US the projections use (0.65 us).
  graph_advice     torch.compile(mode="reduce-overhead") on 8 small Linear
                   layers: CPU_LAUNCH_BOUND with the graph-aware action (the
                   steps already replay CUDA graphs; host us between replays).
  projection       the eager demo's launch-gap projection against the
                   measured time of the same loop replayed from a CUDA graph
                   (median wall time, no profiler): within 20%.
  generate_steps   GPT-2 (GPT2Config(), random weights, no download)
                   generate(max_new_tokens=32) under profile(steps=model): 32
                   steps, and the per-token sync sites (the stopping check in
                   transformers/generation/utils.py, the padding-mask check in
                   masking_utils.py or wherever this version has them) each
                   in all 32 steps.  Every site is printed.

Usage: python benchmarks/tour/verdicts_gpu.py [--json OUT] [--rounds 30] [--skip NAME ...]
Without a GPU it says so and exits 0 (nothing to measure)."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from typing import Any, Callable

PROJECTION_TOLERANCE = 0.20  # the issue: the projection within 20% of the measured replay
TOKENS = 32
CHECKS = ("under_filled", "replay_floor", "graph_advice", "projection", "generate_steps")


def _site(s: dict[str, Any]) -> str:
    from loopscope.figures._syncs import format_site

    return format_site(s)


def check_under_filled(state: dict[str, Any]) -> dict[str, Any]:
    import torch

    import loopscope
    from loopscope.demo import build, graph_loop_factory

    model, x = build()
    loop = graph_loop_factory(model, x)
    for _ in range(3):
        loop(10)
    torch.cuda.synchronize()
    with loopscope.profile() as prof:
        loop(10, prof)
    s = prof.summary()
    state["graph_summary"] = s
    print(prof.report())
    d, gpu, sm = s["diagnosis"], s["gpu"], s["sm"] or {}
    return {
        "ok": d["verdict"] == "UNDER_FILLED",
        "verdict": d["verdict"],
        "action": d["actions"][0],
        "busy_pct": s["gaps"]["busy_pct"],
        "fill_pct": gpu["fill_pct"],
        "fill_known_pct": gpu["fill_known_pct"],
        "devices": gpu["devices"],
        "sm_active_busy_pct": sm.get("active_busy_pct"),
        "warp_occupancy_busy_pct": sm.get("warp_occupancy_busy_pct"),
        "top_kernels": [{k: t[k] for k in ("name", "count", "total_ms", "grid", "block",
                                           "registers", "shared_bytes", "fill_pct")}
                        for t in s["top_kernels"][:6]],
        "graphs": s["graphs"],
    }


def check_replay_floor(state: dict[str, Any]) -> dict[str, Any]:
    from loopscope.figures._projections import REPLAY_GAP_FLOOR_US

    s = state.get("graph_summary")
    if s is None:
        return {"ok": None, "why": "under_filled did not run"}
    gaps, steps = s["gaps"], s["steps"]
    inside = [st["gaps"] for st in steps if st["gaps"]]
    count = sum(g["count"] for g in inside)
    idle_us = sum(g["idle_ms"] for g in inside) * 1e3
    mean = idle_us / count if count else None
    # between kernels inside the steps (the first gap of a replay after the
    # host's copy_ is the step's own): the floor a replay leaves
    return {"ok": mean is not None and 0.5 * REPLAY_GAP_FLOOR_US <= mean <= 2 * REPLAY_GAP_FLOOR_US,
            "constant_us": REPLAY_GAP_FLOOR_US, "mean_gap_in_steps_us": mean,
            "mean_gap_us": gaps["mean_us"], "p50_gap_us": gaps["p50_us"],
            "gaps_in_steps": count}


def check_graph_advice(state: dict[str, Any]) -> dict[str, Any]:
    import torch
    from torch import nn

    import loopscope

    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(8)]).cuda().eval()
    compiled = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(8, 256, device="cuda")
    t0 = time.perf_counter()
    with torch.no_grad():
        for _ in range(5):  # compile, record the graph, warm up
            compiled(x)
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        with loopscope.profile() as prof:
            for _ in range(20):
                with prof.step():
                    compiled(x)
    s = prof.summary()
    print(prof.report())
    d = s["diagnosis"]
    graph_aware = d["actions"][0].startswith("the steps already replay CUDA graphs")
    return {"ok": d["verdict"] == "CPU_LAUNCH_BOUND" and graph_aware,
            "verdict": d["verdict"], "action": d["actions"][0], "graphs": s["graphs"],
            "kernels_per_step": [st["kernels"] for st in s["steps"]][:3],
            "mean_gap_us": s["gaps"]["mean_us"], "compile_s": round(compile_s, 1),
            "projections": [p["text"] for p in d["projections"]]}


def check_projection(state: dict[str, Any], rounds: int) -> dict[str, Any]:
    import torch

    import loopscope
    from loopscope.demo import build, eager_loop, graph_loop_factory

    model, x = build()
    for _ in range(3):
        eager_loop(model, x, 10)
    torch.cuda.synchronize()
    with loopscope.profile() as prof:
        eager_loop(model, x, 10, prof)
    s = prof.summary()
    print(prof.report())
    (launch,) = [p for p in s["diagnosis"]["projections"] if p["kind"] == "launch_gaps"]
    loop = graph_loop_factory(model, x)
    for _ in range(3):
        loop(10)
    times = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        loop(10)
        torch.cuda.synchronize()
        times.append((time.perf_counter_ns() - t0) / 1e6)
    measured = statistics.median(times)
    error = (launch["projected_ms"] - measured) / measured
    return {"ok": abs(error) <= PROJECTION_TOLERANCE, "eager_verdict": s["diagnosis"]["verdict"],
            "eager_loop_ms": launch["current_ms"], "projected_ms": launch["projected_ms"],
            "graph_measured_ms": round(measured, 4), "error_pct": round(100 * error, 1),
            "basis": launch["basis"], "text": launch["text"],
            "graph_min_ms": round(min(times), 4), "graph_max_ms": round(max(times), 4)}


def check_generate_steps(state: dict[str, Any]) -> dict[str, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    import loopscope

    try:
        import transformers
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError as error:
        return {"ok": None, "why": f"transformers is not installed: {error}"}
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).cuda().eval()
    ids = torch.randint(0, 50257, (1, 8), device="cuda")
    mask = torch.ones_like(ids)
    kwargs = dict(attention_mask=mask, max_new_tokens=TOKENS, min_new_tokens=TOKENS,
                  do_sample=False, pad_token_id=model.config.eos_token_id)
    with torch.no_grad():
        model.generate(ids, **kwargs)  # warm-up
        torch.cuda.synchronize()
        with loopscope.profile(steps=model) as prof:
            out = model.generate(ids, **kwargs)
    s = prof.summary()
    print(prof.report())
    steps = s["steps"]
    every = set(range(len(steps)))
    sites = (s["syncs"] or {}).get("sites", [])
    per_token = [x for x in sites if set(x["steps"]) >= every and x["count"] >= len(steps)]
    for x in sites:
        print("  site:", _site(x))
    return {"ok": len(steps) == TOKENS and len(per_token) >= 2,
            "transformers": transformers.__version__, "tokens": int(out.shape[1] - ids.shape[1]),
            "steps": len(steps), "syncs_per_step": [st["syncs"] for st in steps][:4],
            "per_token_sites": [_site(x) for x in per_token],
            "all_sites": [_site(x) for x in sites],
            "module_steps": s.get("module_steps"), "verdict": s["diagnosis"]["verdict"],
            "readiness": s["graph_readiness"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="OUT", help="write the figures as JSON")
    parser.add_argument("--rounds", type=int, default=30,
                        help="timed rounds of the graph loop (default 30)")
    parser.add_argument("--skip", nargs="*", default=[], choices=CHECKS, metavar="NAME",
                        help=f"checks to leave out: {', '.join(CHECKS)}")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("verdicts_gpu: PyTorch is not installed; nothing to measure")
        return 0
    if not torch.cuda.is_available():
        print("verdicts_gpu: no CUDA GPU is visible to PyTorch; nothing to measure")
        return 0
    state: dict[str, Any] = {}
    runs: dict[str, Callable[[], dict[str, Any]]] = {
        "under_filled": lambda: check_under_filled(state),
        "replay_floor": lambda: check_replay_floor(state),
        "graph_advice": lambda: check_graph_advice(state),
        "projection": lambda: check_projection(state, args.rounds),
        "generate_steps": lambda: check_generate_steps(state),
    }
    results: dict[str, dict[str, Any]] = {"device": {"name": torch.cuda.get_device_name(),
                                                     "torch": torch.__version__}}
    for name in CHECKS:
        if name in args.skip:
            continue
        print(f"\n===== {name} =====", flush=True)
        t0 = time.perf_counter()
        try:
            results[name] = runs[name]()
        except Exception as error:  # one check's failure must not hide the others
            traceback.print_exc()
            results[name] = {"ok": None, "why": f"{type(error).__name__}: {error}"}
        results[name]["seconds"] = round(time.perf_counter() - t0, 1)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    print("\n===== issue 15 on", results["device"]["name"], "=====")
    print(f"{'check':<16} {'result':<7} figures")
    for name in CHECKS:
        r = results.get(name)
        if r is None:
            continue
        ok = {True: "PASS", False: "FAIL", None: "NOT RUN"}[r["ok"]]
        figures = {
            "under_filled": lambda: f"{r['verdict']}, fill {r['fill_pct']}%, SM busy "
                                    f"{r['sm_active_busy_pct']}%, warps {r['warp_occupancy_busy_pct']}%",
            "replay_floor": lambda: f"mean gap in steps {r['mean_gap_in_steps_us']:.3f} us vs "
                                    f"constant {r['constant_us']} us",
            "graph_advice": lambda: f"{r['verdict']}, replays {(r['graphs'] or {}).get('replays')}, "
                                    f"host between {(r['graphs'] or {}).get('host_between_replays_us')} us",
            "projection": lambda: f"projected {r['projected_ms']:.3f} ms vs graph "
                                  f"{r['graph_measured_ms']:.3f} ms ({r['error_pct']:+.1f}%)",
            "generate_steps": lambda: f"{r['steps']} steps, {len(r['per_token_sites'])} per-token "
                                      f"sites",
        }[name]
        try:
            text = figures() if r["ok"] is not None else r.get("why", "")
        except (KeyError, TypeError, ValueError):
            text = r.get("why", "")
        print(f"{name:<16} {ok:<7} {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
