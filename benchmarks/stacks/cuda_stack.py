"""One process on one CUDA stack, profiled as a user would (issue "Every stack
a PyTorch user has"): a kernel library (kstack.cu, built by build.sh against
the CUDA 12 runtime of NVIDIA's wheels, or CUDA 13's with torch) driven with
ctypes, under loopscope.profile().

It shows, against CUDA events recorded around every kernel of a timed burst:
kernel durations and a planted launch gap; the blocking copy at its Python
line, once per step; the steps; then SM and DRAM with the verdict on a
streaming-copy loop (MEMORY_BOUND) and an FMA loop (COMPUTE_BOUND). It prints
loopscope.doctor() of this process and which CUPTI the profile loaded.

    python benchmarks/stacks/cuda_stack.py --stack 12 --lib /tmp/k12 --json out12.json
    python benchmarks/stacks/cuda_stack.py --stack 13 --lib /tmp/k13 --json out13.json
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import tempfile
import time

STEPS, BURST, GAP_AT, GAP_S = 5, 20, 9, 0.003


def load(stack: int, lib: str):
    if stack == 12:
        sys.path.insert(0, lib)  # NVIDIA's wheels unpacked there: nvidia/cuda_cupti/lib
        ctypes.CDLL(os.path.join(lib, "nvidia/cuda_runtime/lib/libcudart.so.12"),
                    mode=ctypes.RTLD_GLOBAL)
    else:
        import torch  # its CUDA 13 runtime and CUPTI, as in a user's process
        torch.cuda.init()
    k = ctypes.CDLL(os.path.join(lib, "libkstack.so"))
    k.elapsed.restype = ctypes.c_float
    return k


def diff_quantiles(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    return ordered[len(ordered) // 2], ordered[int(len(ordered) * 0.95)], ordered[-1]


def kernels_of(prof) -> list[dict]:
    path = os.path.join(tempfile.mkdtemp(), "t.json")
    prof.export_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    return sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", type=int, choices=(12, 13), required=True)
    parser.add_argument("--lib", required=True, help="build.sh's OUT_DIR")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    k = load(args.stack, args.lib)
    import loopscope

    out: dict = {"stack": args.stack, "runtime_version": k.runtime_version()}
    assert k.setup(256 << 20, 1 << 22) == 0
    k.fmas(3, 200), k.copies(3), k.sync_all()  # warm-up
    out["doctor"] = loopscope.doctor(torch=args.stack == 13, gpus=False)

    # 1. a timed burst: 20 small kernels a step, events around each, a planted
    #    0.5 ms host gap after the 10th, and a blocking copy back at one line.
    with loopscope.profile() as prof:
        for s in range(STEPS):
            with prof.step():
                for j in range(BURST):
                    k.timed_fma(s * BURST + j, 200)
                    if j == GAP_AT:
                        time.sleep(GAP_S)
                copy_line = sys._getframe().f_lineno + 1
                k.copy_back()
    k.sync_all()
    summary = prof.summary()
    seen = kernels_of(prof)
    n = STEPS * BURST
    durs_ev = [k.elapsed(2 * i, 2 * i + 1) * 1e3 for i in range(n)]
    durs_ls = [e["dur"] for e in seen]
    gaps_ev = [k.elapsed(2 * (s * BURST + GAP_AT) + 1, 2 * (s * BURST + GAP_AT + 1)) * 1e3
               for s in range(STEPS)]
    gaps_ls = []
    for s in range(STEPS):
        a, b = seen[s * BURST + GAP_AT], seen[s * BURST + GAP_AT + 1]
        gaps_ls.append(b["ts"] - (a["ts"] + a["dur"]))
    site = [x for x in summary["syncs"]["sites"]
            if x["file"].endswith("cuda_stack.py") and x["line"] == copy_line]
    out["burst"] = {
        "kernels": len(seen), "kernels_expected": n,
        "kernel_us_events_median": round(statistics.median(durs_ev), 2),
        "kernel_us_loopscope_median": round(statistics.median(durs_ls), 2),
        "kernel_us_abs_diff_p50_p95_max": [round(v, 2) for v in diff_quantiles(
            [abs(a - b) for a, b in zip(durs_ev, durs_ls)])] if len(seen) == n else None,
        "gap_us_events": [round(g, 1) for g in gaps_ev],
        "gap_us_loopscope": [round(g, 1) for g in gaps_ls],
        "steps": len(summary["steps"]),
        "sync_site": {"line": copy_line, "count": site[0]["count"] if site else 0,
                      "kind": site[0]["kind"] if site else None},
        "syncs": summary["syncs"]["count"],
    }
    out["cupti"] = loopscope._core.cupti_load(())

    # 2. SM, DRAM and the verdict on a memory-bound and a compute-bound loop.
    for name, run in (("copy", lambda: k.copies(200)), ("fma", lambda: k.fmas(10, 20000))):
        t0 = time.perf_counter()
        with loopscope.profile() as prof:
            with prof.step():
                run()
                k.sync_all()
        wall = (time.perf_counter() - t0) * 1e3
        s = prof.summary()
        out[name] = {"verdict": s["diagnosis"]["verdict"], "sm_active_pct": s["sm"]["active_pct"]
                     if s.get("sm") else None,
                     "dram_pct": s["dram"]["throughput_pct"] if s.get("dram") else None,
                     "dram_read_gbps": s["dram"]["read_gbps"] if s.get("dram") else None,
                     "tensor_active_pct": s["sm"].get("tensor_active_pct") if s.get("sm") else None,
                     "busy_pct": s["gpu"]["busy_pct"], "block_ms": round(wall, 1),
                     "metrics_error": s.get("metrics_error"),
                     "dropped_metrics": (s.get("metrics") or {}).get("dropped_metrics")}
    text = json.dumps(out, indent=1, default=str)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    b = out["burst"]
    print(f"CUDA {args.stack} stack: runtime {out['runtime_version']}, CUPTI {out['cupti']['path']} "
          f"(API {out['cupti']['version']})")
    print(f"  kernels {b['kernels']}/{b['kernels_expected']}; kernel us median events "
          f"{b['kernel_us_events_median']} loopscope {b['kernel_us_loopscope_median']}, |diff| "
          f"p50/p95/max {b['kernel_us_abs_diff_p50_p95_max']}; planted gaps events {b['gap_us_events']} loopscope "
          f"{b['gap_us_loopscope']}")
    print(f"  steps {b['steps']}; copy-back sync at line {b['sync_site']['line']}: "
          f"{b['sync_site']['count']}x ({b['sync_site']['kind']}), syncs {b['syncs']}")
    for name in ("copy", "fma"):
        r = out[name]
        print(f"  {name}: {r['verdict']} SM {r['sm_active_pct']}% DRAM {r['dram_pct']}% "
              f"({r['dram_read_gbps']} GB/s read) tensor {r['tensor_active_pct']} busy "
              f"{r['busy_pct']}% dropped [{r['dropped_metrics']}] {r['metrics_error'] or ''}")
    print("  doctor problems:", out["doctor"]["problems"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
