"""Host cost of loopscope.instrument() per module call, on CPU, side by side.

A chain of N leaf modules (nn.Identity) in an nn.Sequential: one forward is
N + 1 module calls.  Each round times `--calls` forwards of every variant, the
variants alternating round by round; the figure is the median over rounds
of ns per module call, and "added" is against the plain chain of the same
rounds; "best" is the fastest round (robust to other processes on a shared
machine).
  plain            no hooks
  empty_hooks      an empty Python forward pre hook + forward hook
                   (always_call=True) on every module: torch's own hook cost
  instrument       loopscope.instrument(), no profile running (NVTX only)
  in_profile       instrument() inside profile(trace=False) and a step: NVTX
                   + a host range record per call, names "Step_0/<path>"
  no_prefix        the same with step_prefix=False
Context: a with-block of contextlib.nullcontext(), loopscope.range() as a
with-block, and the `nvtx` package's context manager and decorator when it
is installed (ns per enter/exit pair, no module call).
A second table times the demo model (18 LayerNorm-Linear-GELU-Linear
blocks) on CPU at a small width, so the forward is overhead bound: ms per
forward plain, with empty hook pairs, and instrumented (91 module calls a
forward), all inside profile(trace=False) and a step.
Usage: python benchmarks/host/bench_instrument.py [--rounds 30] [--calls 200] [--json OUT]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import time
import timeit
import warnings

import torch
from torch import nn

import loopscope
from loopscope.demo import build


DEMO_VARIANTS = ("plain", "empty_hooks", "in_profile")


def chain(n: int) -> nn.Module:
    return nn.Sequential(*[nn.Identity() for _ in range(n)])


def add_empty_hooks(model: nn.Module) -> None:
    def pre(module, args):
        return None

    def post(module, args, output):
        return None

    for m in model.modules():
        m.register_forward_pre_hook(pre, prepend=True)
        m.register_forward_hook(post, always_call=True)


def time_calls(model: nn.Module, x, calls: int) -> int:
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        model(x)
    return time.perf_counter_ns() - t0


def pair_ns(stmt: str, env: dict, number: int = 200_000) -> float:
    """Best of 5 of the mean ns of one statement (an enter/exit pair)."""
    return min(timeit.repeat(stmt, globals=env, number=number, repeat=5)) / number * 1e9


def context_costs() -> dict[str, float | str]:
    env = {"nullcontext": contextlib.nullcontext, "r": loopscope.range("bench")}
    out: dict[str, float | str] = {
        "nullcontext_with": pair_ns("with nullcontext(): pass", env),
        "loopscope_range_with": pair_ns("with r: pass", env),
    }
    try:
        import nvtx  # the `nvtx` package from PyPI
    except ImportError:
        out["nvtx_annotate_with"] = "nvtx package not installed"
        out["nvtx_decorated_call"] = "nvtx package not installed"
    else:
        env.update(nvtx=nvtx, f=nvtx.annotate("bench")(lambda: None), g=lambda: None)
        out["nvtx_annotate_with"] = pair_ns("with nvtx.annotate('bench'): pass", env)
        out["nvtx_decorated_call"] = pair_ns("f()", env) - pair_ns("g()", env)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=200, help="forwards per round and variant")
    parser.add_argument("--modules", type=int, default=100, help="leaf modules in the chain")
    parser.add_argument("--json")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=loopscope.LoopscopeWarning)  # trace=False
    torch.set_num_threads(1)

    x = torch.zeros(4)
    per_forward = args.modules + 1
    plain = chain(args.modules)
    hooked = chain(args.modules)
    add_empty_hooks(hooked)
    inst = chain(args.modules)
    loopscope.instrument(inst)
    inst_np = chain(args.modules)
    loopscope.instrument(inst_np, step_prefix=False)

    def in_profile(model):
        def run(calls):
            with loopscope.profile(trace=False) as prof:
                with prof.step():
                    t = time_calls(model, x, calls)
            return t
        return run

    variants = {
        "plain": lambda calls: time_calls(plain, x, calls),
        "empty_hooks": lambda calls: time_calls(hooked, x, calls),
        "instrument": lambda calls: time_calls(inst, x, calls),
        "in_profile": in_profile(inst),
        "no_prefix": in_profile(inst_np),
    }
    for run in variants.values():  # warm-up: first names, caches
        run(20)
    ns: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.rounds):
        for name, run in variants.items():
            ns[name].append(run(args.calls) / (args.calls * per_forward))
    med = {k: statistics.median(v) for k, v in ns.items()}
    best = {k: min(v) for k, v in ns.items()}  # robust to other processes on a shared CPU

    # The demo model on CPU, small enough to be overhead bound.
    demo = {name: build(device="cpu", width=64, tokens=4)[0] for name in DEMO_VARIANTS}
    dx = build(device="cpu", width=64, tokens=4)[1]
    add_empty_hooks(demo["empty_hooks"])
    handle = loopscope.instrument(demo["in_profile"])
    demo_calls = len(handle)  # the Sequential, 18 blocks, 4 leaves each: 91
    demo_ms: dict[str, list[float]] = {k: [] for k in DEMO_VARIANTS}
    with torch.inference_mode():
        for model in demo.values():
            time_calls(model, dx, 3)
        for _ in range(args.rounds):
            for name, model in demo.items():
                with loopscope.profile(trace=False) as prof:
                    with prof.step():
                        demo_ms[name].append(time_calls(model, dx, 20) / 20 / 1e6)
    demo_med = {k: statistics.median(v) for k, v in demo_ms.items()}
    demo_best = {k: min(v) for k, v in demo_ms.items()}

    result = {
        "machine": f"{platform.processor() or platform.machine()}, {platform.python_implementation()} "
                   f"{platform.python_version()}, torch {torch.__version__}",
        "rounds": args.rounds,
        "calls": args.calls,
        "module_calls_per_forward": per_forward,
        "ns_per_module_call": med,
        "ns_added_per_module_call": {k: med[k] - med["plain"] for k in med},
        "ns_per_module_call_best": best,
        "ns_added_per_module_call_best": {k: best[k] - best["plain"] for k in best},
        "context_ns_per_pair": context_costs(),
        "demo_cpu_ms_per_forward": demo_med,
        "demo_module_calls_per_forward": demo_calls,
        "demo_added_us_per_module_call": {
            k: (demo_med[k] - demo_med["plain"]) * 1e3 / demo_calls for k in DEMO_VARIANTS},
        "demo_cpu_ms_per_forward_best": demo_best,
        "demo_added_us_per_module_call_best": {
            k: (demo_best[k] - demo_best["plain"]) * 1e3 / demo_calls for k in DEMO_VARIANTS},
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(f"{result['machine']}; {args.rounds} rounds x {args.calls} forwards x "
          f"{per_forward} module calls; medians")
    print(f"{'variant':<12} {'ns/call':>9} {'added ns':>9} {'best ns':>9} {'best added':>10}")
    for k in med:
        print(f"{k:<12} {med[k]:>9.0f} {med[k] - med['plain']:>9.0f} {best[k]:>9.0f} "
              f"{best[k] - best['plain']:>10.0f}")
    print("context managers, ns per enter/exit pair:")
    for k, v in result["context_ns_per_pair"].items():
        print(f"  {k:<22} {v if isinstance(v, str) else f'{v:.0f}'}")
    added = result["demo_added_us_per_module_call"]
    added_best = result["demo_added_us_per_module_call_best"]
    print(f"demo model on CPU (width 64, 4 tokens, {demo_calls} module calls a forward), "
          "ms per forward, inside profile(trace=False) and a step, median (best):")
    for k in DEMO_VARIANTS:
        print(f"  {k:<12} {demo_med[k]:.3f} ms ({demo_best[k]:.3f})  +{added[k]:.2f} us "
              f"({added_best[k]:.2f}) per module call")


if __name__ == "__main__":
    main()
