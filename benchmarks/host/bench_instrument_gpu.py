"""Per-layer GPU times of the demo loop with loopscope.instrument(), on a GPU.

Prints, for the 10-step eager demo loop (18 blocks of LayerNorm-Linear-
GELU-Linear, width 1024, bf16, 1x50 tokens) instrumented with Nsight-style
names (Layer_<i>/LN, Layer_<i>/MLP_Up, ...):
  - the per-layer table: GPU busy ms (total over the steps), kernels, share
    of the steps' GPU busy time; the sum of the layers against the steps;
  - the leaves over all layers (LN, MLP_Up, GELU, MLP_Down);
  - the report's range tree;
  - the same loop replayed from a CUDA graph: kernels per step, ranges seen;
  - wall time of the eager loop: plain, instrumented, instrumented inside a
    profile (medians of --rounds rounds, alternating).
Usage: python benchmarks/host/bench_instrument_gpu.py [--rounds 20] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch

import loopscope
from loopscope.demo import build, eager_loop, graph_loop_factory

# timed() is benchmarks/cost/bench_overhead.py's, imported by path
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cost"))
from bench_overhead import timed  # noqa: E402

BLOCKS = 18
LEAVES = {"norm": "LN", "up": "MLP_Up", "act": "GELU", "down": "MLP_Down"}


def nsight_names() -> dict[str, str]:
    names = {"": "Denoiser"}
    for i in range(BLOCKS):
        names[str(i)] = f"Layer_{i}"
        for leaf, label in LEAVES.items():
            names[f"{i}.{leaf}"] = f"Layer_{i}/{label}"
    return names


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--json")
    args = parser.parse_args()
    model, x = build()
    eager_loop(model, x, 3)

    handle = loopscope.instrument(model, names=nsight_names())
    eager_loop(model, x, 2)
    torch.cuda.synchronize()
    with loopscope.profile() as prof:
        eager_loop(model, x, 10, prof)
    s = prof.summary()
    r = {e["name"]: e for e in s["ranges"]}
    step_busy = sum(st["gpu_ms"] for st in s["steps"])
    print(f"{torch.cuda.get_device_name()}: eager demo loop, 10 steps, "
          f"{s['gpu']['kernels']} kernels, steps' GPU busy {step_busy:.3f} ms")
    print(f"{'layer':<10} {'GPU ms':>8} {'kernels':>8} {'% of steps':>10}")
    layer_sum = 0.0
    for i in range(BLOCKS):
        e = r[f"Layer_{i}"]
        layer_sum += e["gpu_ms"]
        print(f"{e['name']:<10} {e['gpu_ms']:>8.3f} {e['kernels']:>8} "
              f"{100 * e['gpu_ms'] / step_busy:>9.1f}%")
    print(f"{'sum':<10} {layer_sum:>8.3f} {'':>8} {100 * layer_sum / step_busy:>9.1f}%  "
          f"(steps {step_busy:.3f} ms; model range {r['Denoiser']['gpu_ms']:.3f} ms)")
    leaves = {label: sum(r[f"Layer_{i}/{label}"]["gpu_ms"] for i in range(BLOCKS))
              for label in LEAVES.values()}
    print("leaves over all layers, GPU ms: " + ", ".join(f"{k} {v:.3f}" for k, v in leaves.items()))
    report = prof.report()
    print(report[report.index("Ranges ("):])

    graph_loop = graph_loop_factory(model, x)
    graph_loop(3)
    with loopscope.profile() as gprof:
        graph_loop(10, gprof)
    g = gprof.summary()
    print(f"CUDA graph replay: kernels per step {[st['kernels'] for st in g['steps']]}, "
          f"in steps {sum(st['kernels'] for st in g['steps'])} of {g['gpu']['kernels']}, "
          f"ranges seen {len(g['ranges'])}")

    plain_model, _ = build()
    eager_loop(plain_model, x, 3)
    times: dict[str, list[float]] = {"plain": [], "instrumented": [], "instrumented_in_profile": []}
    for _ in range(args.rounds):
        times["plain"].append(timed(lambda: eager_loop(plain_model, x, 10)))
        times["instrumented"].append(timed(lambda: eager_loop(model, x, 10)))
        with loopscope.profile() as p:
            times["instrumented_in_profile"].append(timed(lambda: eager_loop(model, x, 10, p)))
    med = {k: statistics.median(v) for k, v in times.items()}
    calls = 10 * len(handle)
    print(f"eager 10-step loop wall time, median of {args.rounds} rounds "
          f"({len(handle)} instrumented modules, {calls} module calls a loop):")
    for k, v in med.items():
        added = (v - med["plain"]) * 1e3 / calls
        print(f"  {k:<24} {v:8.3f} ms  x{v / med['plain']:.3f}  (+{added:.2f} us per module call)")
    handle.remove()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "steps_gpu_ms": step_busy,
                       "layers_gpu_ms": layer_sum, "leaves_gpu_ms": leaves,
                       "graph_kernels_per_step": [st["kernels"] for st in g["steps"]],
                       "graph_ranges": len(g["ranges"]), "loop_ms": med,
                       "summary": s}, f, indent=1)


if __name__ == "__main__":
    main()
