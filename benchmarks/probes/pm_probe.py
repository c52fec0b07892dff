"""First GPU run of PM sampling: does it start, are the values right, do
sample and kernel timestamps share a clock, what does it cost.

Each part runs on its own; a failure prints its reason and the probe goes on.
  start      one empty profile: sampling on?  chip, trigger, figures, dropped metrics
  copy       streaming copy loop (10 steps x 20 copies of 1 GiB): expect MEMORY_BOUND, DRAM >= 70%
  mm         bf16 8192^3 matmuls (10 steps x 20): expect COMPUTE_BOUND, SM >= 90%, DRAM < 10%
  demo       the eager demo loop (expect CPU_LAUNCH_BOUND) and its CUDA-graph replay (not)
  clock      idle 5 ms, one long matmul chain, idle 5 ms: where SM active rises and falls in
             the samples vs the kernels' own start/end (activity records): the offset, in us
  counters   counters-only mode (trace=False) on the copy loop: busy from GR active
  long       3 s of matmuls with no step or range (decode only at stop): overflow?
  again      a second traced profile after the first stopped: tracing and sampling still work
  interval   metrics_interval_us=1000: ~10x fewer samples
  clocks     a compute-bound kernel timed with sampling off / on (< 1% asked)
Usage: python benchmarks/probes/pm_probe.py [--json OUT] [--only part,part]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
import traceback
import warnings

import torch

import loopscope
from loopscope.demo import build, eager_loop, graph_loop_factory

RESULTS: dict[str, object] = {}


def part(name):
    def wrap(fn):
        def run():
            print(f"\n=== {name} ===", flush=True)
            t0 = time.perf_counter()
            try:
                RESULTS[name] = fn()
            except Exception as error:  # report and go on
                RESULTS[name] = {"error": f"{type(error).__name__}: {error}"}
                traceback.print_exc()
            print(f"--- {name}: {time.perf_counter() - t0:.1f} s", flush=True)
        run.part_name = name
        return run
    return wrap


def brief(s: dict) -> dict:
    """The figures of a summary worth printing."""
    m = s.get("metrics") or {}
    return {
        "verdict": s["diagnosis"]["verdict"],
        "sm": s["sm"],
        "dram": s["dram"],
        "pcie": s.get("pcie"),
        "metrics_error": s["metrics_error"],
        "gpu_busy_pct": (s["gpu"] or {}).get("busy_pct"),
        "kernels": (s["gpu"] or {}).get("kernels"),
        "samples": m.get("samples"),
        "overflows": m.get("overflows"),
        "incomplete": m.get("incomplete_samples"),
        "decodes": m.get("decodes"),
        "decode_ms": m.get("decode_ms"),
        "clock_delta_us": m.get("clock_delta_us"),
        "clock_shift_ns": m.get("clock_shift_ns"),
        "dropped_metrics": m.get("dropped_metrics"),
        "error": m.get("error"),
        "steps": [(st["index"], st["verdict"], st["sm_active_pct"], st["sm_active_busy_pct"],
                   st["dram_pct"], st["dram_busy_pct"]) for st in s["steps"]][:3],
        "reasons": s["diagnosis"]["reasons"],
    }


def show(label: str, prof) -> dict:
    s = prof.summary()
    b = brief(s)
    print(f"[{label}] verdict {b['verdict']}; metrics_error {b['metrics_error']}")
    print(json.dumps({k: v for k, v in b.items() if k != "reasons"}, indent=1, default=str))
    for r in b["reasons"]:
        print("   -", r)
    return b


def sample_stats(prof) -> dict:
    samples = prof.capture.samples()
    if not samples:
        return {"count": 0}
    d = [e - s for s, e, _ in samples]
    return {"count": len(samples), "duration_ns_min": min(d), "duration_ns_median": statistics.median(d),
            "duration_ns_max": max(d), "first": samples[0][:2], "last": samples[-1][:2],
            "first_values": samples[len(samples) // 2][2]}


@part("start")
def start():
    x = torch.ones(1, device="cuda")
    with loopscope.profile(metrics=True) as prof:
        x.add_(1)
    s = prof.summary()
    out = {"metrics_error": s["metrics_error"], "metrics": s["metrics"], "sm": s["sm"],
           "samples": sample_stats(prof)}
    print(json.dumps(out, indent=1, default=str))
    return out


def copy_loop(prof, steps=10, per_step=20):
    src = torch.empty(1 << 29, dtype=torch.bfloat16, device="cuda")  # 1 GiB
    dst = torch.empty_like(src)
    torch.cuda.synchronize()
    for _ in range(steps):
        with prof.step():
            for _ in range(per_step):
                dst.copy_(src)
    torch.cuda.synchronize()


def mm_loop(prof, steps=10, per_step=20, n=8192):
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    c = torch.empty_like(a)
    torch.mm(a, b, out=c)
    torch.cuda.synchronize()
    for _ in range(steps):
        with prof.step():
            for _ in range(per_step):
                torch.mm(a, b, out=c)
    torch.cuda.synchronize()


@part("copy")
def copy_part():
    with loopscope.profile(metrics=True) as prof:
        copy_loop(prof)
    return show("copy", prof)


@part("mm")
def mm_part():
    with loopscope.profile(metrics=True) as prof:
        mm_loop(prof)
    return show("mm", prof)


@part("demo")
def demo_part():
    model, x = build()
    eager_loop(model, x, 3)
    with loopscope.profile(metrics=True) as prof:
        eager_loop(model, x, 10, prof)
    eager = show("demo eager", prof)
    replay = graph_loop_factory(model, x)
    replay(3)
    with loopscope.profile(metrics=True) as prof_g:
        replay(10, prof_g)
    graph = show("demo graph", prof_g)
    return {"eager": eager, "graph": graph}


@part("clock")
def clock_part():
    """Sample edges vs kernel edges: the offset between the two clocks."""
    n = 8192
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    c = torch.empty_like(a)
    torch.mm(a, b, out=c)
    torch.cuda.synchronize()
    with loopscope.profile(metrics=True, metrics_interval_us=20) as prof:
        time.sleep(0.005)
        with loopscope.range("burst"):
            for _ in range(30):  # ~ 30 x 0.7 ms back to back
                torch.mm(a, b, out=c)
        torch.cuda.synchronize()
        time.sleep(0.005)
    ops = [o for o in prof.capture.ops() if o[0] == "kernel"]
    samples = prof.capture.samples()
    k_start, k_end = min(o[1] for o in ops), max(o[2] for o in ops)
    hot = [(s, e) for s, e, v in samples if v.get("sm_active_pct", 0) > 50]
    out = {"kernels": len(ops), "kernel_start": k_start, "kernel_end": k_end,
           "samples": sample_stats(prof), "metrics": prof.summary()["metrics"]}
    if hot:
        # the first hot sample should contain the first kernel's start, the last one its end
        out["rise_offset_us"] = (hot[0][0] - k_start) / 1e3
        out["fall_offset_us"] = (hot[-1][1] - k_end) / 1e3
        out["first_hot_contains_start"] = hot[0][0] <= k_start <= hot[0][1]
        out["last_hot_contains_end"] = hot[-1][0] <= k_end <= hot[-1][1]
        out["hot_samples"] = len(hot)
        out["expected_hot_samples"] = (k_end - k_start) / 20e3
    out["summary"] = brief(prof.summary())
    print(json.dumps({k: v for k, v in out.items() if k != "summary"}, indent=1, default=str))
    print("  (agree when |rise_offset_us| and |fall_offset_us| <= one interval, 20 us)")
    return out


@part("counters")
def counters_part():
    with loopscope.profile(metrics=True, trace=False) as prof:
        copy_loop(prof)
    return show("counters-only copy", prof)


@part("long")
def long_part():
    n = 8192
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    c = torch.empty_like(a)
    torch.cuda.synchronize()
    with loopscope.profile(metrics=True, trace=False, syncs=False) as prof:
        t_end = time.perf_counter() + 3.0
        while time.perf_counter() < t_end:
            for _ in range(50):
                torch.mm(a, a, out=c)
            torch.cuda.synchronize()
    out = show("long, no steps", prof)
    out["sample_stats"] = sample_stats(prof)
    out["expected_samples"] = 30000
    print(json.dumps(out["sample_stats"], default=str))
    return out


@part("again")
def again_part():
    x = torch.ones(1 << 20, device="cuda")
    runs = []
    for i in range(3):
        with loopscope.profile(metrics=True) as prof:
            for _ in range(100):
                x.mul_(1.0001)
            torch.cuda.synchronize()
        s = prof.summary()
        runs.append({"kernels": (s["gpu"] or {}).get("kernels"), "samples": (s["sm"] or {}).get("samples"),
                     "metrics_error": s["metrics_error"], "gpu_error": s["gpu_error"]})
        print(f"  profile {i}: {runs[-1]}")
    return runs


@part("interval")
def interval_part():
    with loopscope.profile(metrics=True, metrics_interval_us=1000) as prof:
        mm_loop(prof, steps=4)
    out = show("interval 1 ms", prof)
    out["sample_stats"] = sample_stats(prof)
    return out


@part("clocks")
def clocks_part():
    """A clock-bound kernel timed with sampling off and on (CUDA events): one
    block of dependent FMAs per SM, whose time is iterations x latency / SM
    clock and which draws too little power to be throttled (a bf16 GEMM,
    used before, varied +-5% round to round from power capping alone)."""
    import triton
    import triton.language as tl

    @triton.jit
    def fma(x_ptr, n, iters: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        for _ in range(iters):
            x = x * 1.0001 + 0.0001
        tl.store(x_ptr + offs, x, mask=offs < n)

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    x = torch.rand(sms * 128, device="cuda")

    def timed() -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(20):
            fma[(sms,)](x, x.numel(), iters=200_000, BLOCK=128)
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    def sampled() -> tuple[float, object]:
        with loopscope.profile(metrics=True, trace=False, syncs=False) as prof:
            t = timed()
        return t, prof

    for _ in range(5):  # to the steady clocks and power of a busy GPU
        timed()
    # Pairs in alternating order (off-on, on-off), so a drift of the
    # clocks under power or heat falls on both sides alike.
    off, on, ratios = [], [], []
    for i in range(16):
        if i % 2 == 0:
            t_off = timed()
            t_on, prof = sampled()
        else:
            t_on, prof = sampled()
            t_off = timed()
        off.append(t_off)
        on.append(t_on)
        ratios.append(t_on / t_off)
    ratio = statistics.median(ratios)
    out = {"off_ms": off, "on_ms": on, "paired_ratio_median": round(ratio, 4),
           "paired_ratio_min_max": [round(min(ratios), 4), round(max(ratios), 4)],
           "ratio_of_medians": round(statistics.median(on) / statistics.median(off), 4),
           "sampling": prof.summary()["sm"] is not None, "metrics_error": prof.summary()["metrics_error"]}
    print(json.dumps(out, indent=1))
    print(f"  median of paired on/off = {ratio:.4f} (asked: within 1%)")
    return out


PARTS = [start, copy_part, mm_part, demo_part, clock_part, counters_part, long_part, again_part,
         interval_part, clocks_part]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--only", help="comma-separated part names")
    args = parser.parse_args()
    warnings.simplefilter("always", loopscope.LoopscopeWarning)
    print("device", torch.cuda.get_device_name(), "torch", torch.__version__)
    wanted = set(args.only.split(",")) if args.only else None
    for run in PARTS:
        if wanted is None or run.part_name in wanted:
            run()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(RESULTS, f, indent=1, default=str)


if __name__ == "__main__":
    main()
