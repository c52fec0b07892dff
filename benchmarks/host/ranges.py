"""Host cost of range markers, ns per enter/exit pair (CPU is enough).

Variants, each a `with` block around `pass` (or one module call):
  nullcontext          contextlib.nullcontext(): the floor of a Python with-block
  range                a loopscope.range(name) object, no profile running (NVTX only)
  range_in_profile     the same inside loopscope.profile()
  step_in_profile      prof.step() inside the profile (a new step each time)
  module_plain         one call of a leaf module (nn.Identity) in a chain of
                       --modules, inside the profile and a step: ns per module call
  module_instrumented  the same chain under loopscope.instrument(): the
                       difference to module_plain is what instrument() adds per call
  layers_plain         the demo model on CPU (18 LayerNorm-Linear-GELU-Linear blocks,
                       width 8, 1 token: overhead bound, 91 module calls a forward),
                       ns per module call
  layers_instrumented  the same under loopscope.instrument()
  torch_nvtx_range     torch.cuda.nvtx.range(name) (needs a CUDA build of torch)
  record_function      torch.profiler.record_function(name), no profiler running
  nvtx_annotate        the `nvtx` package's nvtx.annotate(name) (when installed)
The profile is loopscope.profile() with its defaults (on a machine without a
GPU it records host ranges only; on a GPU machine its clock is CUPTI's).
Each round runs every variant once, in turn; the figure is the median over
rounds, with the best round beside it.  Times are the thread's CPU time
(--clock wall: elapsed time), so other processes on a shared machine
inflate them least.  Nothing here asserts a time.

Usage: python benchmarks/host/ranges.py [--rounds 15] [--pairs 20000] [--modules 50]
                                   [--clock thread|wall] [--json OUT] [--quick]
--quick: 2 rounds of 500 pairs, for CI (seconds; the figures are rough).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import sys
import time
import warnings
from typing import Any, Callable

import loopscope


CLOCKS = {"thread": time.thread_time_ns, "wall": time.perf_counter_ns}
clock = CLOCKS["thread"]


def timed(body: Callable[[int], int], pairs: int) -> float:
    """ns per pair of body(pairs), which returns the pairs it made."""
    t0 = clock()
    done = body(pairs)
    return (clock() - t0) / done


def with_loop(make: Callable[[], Any]) -> Callable[[int], int]:
    """A loop entering and leaving make()'s context manager `n` times (make
    is called each time, as user code calls prof.step())."""
    def run(n: int) -> int:
        for _ in range(n):
            with make():
                pass
        return n
    return run


def torch_variants(modules: int, prof: Any) -> tuple[dict[str, Callable[[int], int]], dict[str, str]]:
    """The variants that need torch, and the reasons for those unavailable."""
    variants: dict[str, Callable[[int], int]] = {}
    missing: dict[str, str] = {}
    try:
        import torch
        from torch import nn
    except ImportError as error:
        for name in ("module_plain", "module_instrumented", "layers_plain",
                     "layers_instrumented", "torch_nvtx_range", "record_function"):
            missing[name] = f"no torch ({error})"
        return variants, missing
    torch.set_num_threads(1)
    x = torch.zeros(4)
    plain = nn.Sequential(*[nn.Identity() for _ in range(modules)])
    instrumented = nn.Sequential(*[nn.Identity() for _ in range(modules)])
    loopscope.instrument(instrumented)
    calls = modules + 1  # the Sequential and its leaves

    def chain(model: Any) -> Callable[[int], int]:
        def run(n: int) -> int:  # about n module calls, in whole forwards, inside one step
            forwards = max(1, n // calls)
            with prof.step():
                for _ in range(forwards):
                    model(x)
            return forwards * calls
        return run

    variants["module_plain"] = chain(plain)
    variants["module_instrumented"] = chain(instrumented)

    from loopscope.demo import build

    def layers(model: Any, x: Any) -> Callable[[int], int]:
        per_forward = sum(1 for _ in model.modules())  # the Sequential, blocks, leaves

        def run(n: int) -> int:
            forwards = max(1, n // per_forward)
            with torch.inference_mode(), prof.step():
                for _ in range(forwards):
                    model(x)
            return forwards * per_forward
        return run

    demo_plain, demo_x = build(device="cpu", width=8, tokens=1)
    demo_instrumented = build(device="cpu", width=8, tokens=1)[0]
    loopscope.instrument(demo_instrumented)
    variants["layers_plain"] = layers(demo_plain, demo_x)
    variants["layers_instrumented"] = layers(demo_instrumented, demo_x)
    try:
        with torch.cuda.nvtx.range("probe"):
            pass
    except Exception as error:  # a CPU build of torch has no NVTX
        missing["torch_nvtx_range"] = f"{type(error).__name__}: {error}"
    else:
        variants["torch_nvtx_range"] = with_loop(lambda: torch.cuda.nvtx.range("bench"))
    record_function = torch.profiler.record_function
    variants["record_function"] = with_loop(lambda: record_function("bench"))
    return variants, missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--pairs", type=int, default=20000, help="pairs per variant and round")
    parser.add_argument("--modules", type=int, default=50, help="leaf modules in the chain")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--quick", action="store_true", help="2 rounds of 500 pairs (CI)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="thread",
                        help="thread: CPU time of this thread (default: other processes on a "
                             "shared machine inflate it least); wall: elapsed time")
    args = parser.parse_args(argv)
    global clock
    clock = CLOCKS[args.clock]
    if args.quick:
        args.rounds, args.pairs = 2, 500
    if args.rounds < 1 or args.pairs < 1 or args.modules < 1:
        parser.error("--rounds, --pairs and --modules must be >= 1")
    warnings.filterwarnings("ignore", category=loopscope.LoopscopeWarning)

    r = loopscope.range("bench")
    variants: dict[str, Callable[[int], int]] = {
        "nullcontext": with_loop(contextlib.nullcontext),
        "range": with_loop(lambda: r),
    }
    missing: dict[str, str] = {}
    ns: dict[str, list[float]] = {}
    with loopscope.profile() as prof:
        variants["range_in_profile"] = with_loop(lambda: r)
        variants["step_in_profile"] = with_loop(prof.step)
        extra, missing = torch_variants(args.modules, prof)
        variants.update(extra)
        try:
            import nvtx  # the `nvtx` package from PyPI
        except ImportError:
            missing["nvtx_annotate"] = "the nvtx package is not installed"
        else:
            variants["nvtx_annotate"] = with_loop(lambda: nvtx.annotate("bench"))
        for run in variants.values():  # warm-up: caches, first names
            run(min(args.pairs, 200))
        ns = {name: [] for name in variants}
        for _ in range(args.rounds):
            for name, run in variants.items():
                ns[name].append(timed(run, args.pairs))
    median = {k: statistics.median(v) for k, v in ns.items()}
    best = {k: min(v) for k, v in ns.items()}
    import_torch = sys.modules.get("torch")
    result = {
        "machine": f"{platform.processor() or platform.machine()}, "
                   f"{platform.python_implementation()} {platform.python_version()}"
                   + (f", torch {import_torch.__version__}" if import_torch else ""),
        "loopscope": loopscope.__version__,
        "rounds": args.rounds,
        "clock": args.clock,
        "pairs": args.pairs,
        "modules": args.modules,
        "tracing": bool(prof.finished and prof.finished.state.get("tracing")),
        "ns_per_pair": median,
        "ns_per_pair_best": best,
        "unavailable": missing,
    }
    if "module_plain" in median:
        for chain_name, key in (("module", "instrument_added_ns_per_module_call"),
                                ("layers", "instrument_added_ns_per_layer_call")):
            result[key] = median[f"{chain_name}_instrumented"] - median[f"{chain_name}_plain"]
            result[f"{key}_best"] = best[f"{chain_name}_instrumented"] - best[f"{chain_name}_plain"]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    print(f"{result['machine']}; {args.rounds} rounds x {args.pairs} pairs; {args.clock} clock; "
          f"profile tracing: {result['tracing']}; ns per enter/exit pair (module_*, layers_*: "
          "per module call)")
    print(f"  {'variant':<22} {'median':>8} {'best':>8}")
    for name in ns:
        print(f"  {name:<22} {median[name]:>8.0f} {best[name]:>8.0f}")
    if "instrument_added_ns_per_module_call" in result:
        print(f"  instrument() adds {result['instrument_added_ns_per_module_call']:.0f} ns per "
              f"identity module call (best rounds: "
              f"{result['instrument_added_ns_per_module_call_best']:.0f}), "
              f"{result['instrument_added_ns_per_layer_call']:.0f} per demo layer call "
              f"({result['instrument_added_ns_per_layer_call_best']:.0f})")
    for name, why in missing.items():
        print(f"  {name:<22} unavailable: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
