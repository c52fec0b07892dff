"""What a light profile's CUPTI callbacks cost a host-bound loop, and whether
every runtime-API launch reaches the driver-API callbacks (issue 40: GPT-2
generate() watched at <= 1.05x).  Light profiles counted launches from the
driver API alone from 8d091c7, and count none since eb6c9db (2-3% of
generate(), H200 2026-11-29): --check is the record of the first step.

--check: one traced profile (both API domains recorded) of GPT-2 generate()
and of a loop of tiny torch kernels.  For each runtime-API launch record: is
there a driver-API launch record on the same thread after it and before that
thread's next runtime launch?  Counting launches in the driver domain only
was right when every one has (0 "without").

--cost: in one process, `bare` and profile variants alternate round by round
(each round runs every variant once, in a rotated order): `light`
(trace=False, metrics=False: callbacks for the calls that wait, and for
launches before eb6c9db), `nosync` (syncs=False too: no callback at all).  Loops: `tiny`
(--launches x.add_(1)) and `gpt2` (one greedy generate() of 64 tokens, GPT-2
small, random weights).  Printed: the median of each variant's time over the
median bare, the loop alone inside the block and the whole block, and of
the loop's thread CPU time (on an H200 it equalled the wall time: the thread
spins in the sync, so it is no shield from a busy host); for tiny
also the added µs a launch; the blocking calls a light profile kept.

--syncs: the syncs a light and a traced profile find in each loop (count,
kinds, sites, calls kept), which must agree.

  python benchmarks/probes/light_callbacks_probe.py --check --cost --rounds 20
  python benchmarks/probes/light_callbacks_probe.py --syncs --loops gpt2
  python benchmarks/probes/light_callbacks_probe.py --dispatch --loops tiny --rounds 10

--dispatch: a CUDA call no callback watches (cudaGetDevice, cuCtxGetCurrent,
through ctypes), bare and inside each variant: the ns a light profile's
sync callbacks add to every other API call.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RUNTIME, DRIVER = 0, 1
VARIANTS = {"light": {"trace": False, "metrics": False},
            "nosync": {"trace": False, "metrics": False, "syncs": False}}


def nesting(apis: list[tuple]) -> dict:
    """apis: (start, end, correlation, thread, cbid, domain) launch records."""
    by_thread: dict[int, list[tuple]] = {}
    for a in apis:
        by_thread.setdefault(a[3], []).append(a)
    runtime = without = driver_only = 0
    for records in by_thread.values():
        records.sort(key=lambda a: (a[0], a[2]))
        pending = False  # a runtime launch waiting for its driver launch
        for a in records:
            if a[5] == RUNTIME:
                runtime += 1
                without += pending
                pending = True
            elif pending:
                pending = False
            else:
                driver_only += 1
        without += pending
    return {"runtime_launches": runtime, "without_driver_launch": without,
            "driver_launches_alone": driver_only}


def build(torch, kind: str, launches: int):
    if kind == "tiny":
        x = torch.zeros(16, device="cuda")

        def loop():
            for _ in range(launches):
                x.add_(1)
            torch.cuda.synchronize()
        return loop
    sys.path.insert(0, os.path.join(HERE, "..", "cost"))
    from overhead import build_gpt2

    _model, generate = build_gpt2(torch)

    def loop():
        generate()
        torch.cuda.synchronize()
    return loop


def check(torch, loopscope, loops: dict) -> dict:
    out = {}
    for kind, loop in loops.items():
        with loopscope.profile(metrics=False) as prof:
            loop()
        info = prof.capture.info()
        out[kind] = dict(nesting(prof.capture.apis()), ops=info.get("ops"),
                         calls=info.get("calls"))
        print(f"check {kind}: {out[kind]}", flush=True)
    return out


def syncs(loopscope, loops: dict) -> dict:
    """The syncs a light and a traced profile find in one loop: a light
    profile counts no kernel launch, so the two agree unless one C call
    copies, launches and then waits (docs/syncs.md)."""
    out = {}
    for kind, loop in loops.items():
        for trace in (False, True):
            with loopscope.profile(trace=trace, metrics=False) as prof:
                loop()
            s = prof.summary()["syncs"]
            out[f"{kind}_{'traced' if trace else 'light'}"] = row = {
                "count": s.get("count"), "by_kind": s.get("by_kind"),
                "sites": len(s.get("sites") or ()), "calls": prof.capture.info().get("calls")}
            print(f"syncs {kind} {'traced' if trace else 'light'}: {row}", flush=True)
    return out


def cost(torch, loopscope, loops: dict, rounds: int, launches: int) -> dict:
    names = ["bare", *VARIANTS]
    out = {}
    for kind, loop in loops.items():
        block: dict[str, list[float]] = {n: [] for n in names}
        inner: dict[str, list[float]] = {n: [] for n in names}
        cpu: dict[str, list[float]] = {n: [] for n in names}  # the loop's thread CPU time
        kept = []
        for r in range(rounds if kind == "tiny" else max(2, rounds // 2)):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                t0 = time.perf_counter()
                if name == "bare":
                    c1 = time.thread_time()
                    loop()
                    c2 = time.thread_time()
                    t1 = t2 = time.perf_counter()
                else:
                    with loopscope.profile(**VARIANTS[name]) as prof:
                        t1 = time.perf_counter()
                        c1 = time.thread_time()
                        loop()
                        c2 = time.thread_time()
                        t2 = time.perf_counter()
                cpu[name].append(c2 - c1)
                t3 = time.perf_counter()
                if name == "light":  # after the timing: info() waits for the finish
                    kept.append(prof.capture.info().get("calls", 0))
                block[name].append(t3 - t0)
                inner[name].append(t2 - t1 if name != "bare" else t3 - t0)
        bare = statistics.median(block["bare"])
        bare_cpu = statistics.median(cpu["bare"])
        row = {"bare_ms": round(bare * 1e3, 3), "bare_cpu_ms": round(bare_cpu * 1e3, 3),
               "kept_calls": statistics.median(kept)}
        for name in VARIANTS:
            row[f"{name}_loop_x"] = round(statistics.median(inner[name]) / bare, 4)
            row[f"{name}_block_x"] = round(statistics.median(block[name]) / bare, 4)
            row[f"{name}_cpu_x"] = round(statistics.median(cpu[name]) / bare_cpu, 4)
            if kind == "tiny":
                row[f"{name}_us_per_launch"] = round(
                    (statistics.median(inner[name]) - bare) * 1e6 / launches, 3)
                row[f"{name}_cpu_us_per_launch"] = round(
                    (statistics.median(cpu[name]) - bare_cpu) * 1e6 / launches, 3)
        qc = statistics.quantiles(cpu["bare"], n=4)
        row["bare_cpu_q1_q3_x"] = [round(qc[0] / bare_cpu, 4), round(qc[2] / bare_cpu, 4)]
        # the spread of bare itself: its rounds' lower and upper quartiles over the median
        q = statistics.quantiles(block["bare"], n=4)
        row["bare_q1_q3_x"] = [round(q[0] / bare, 4), round(q[2] / bare, 4)]
        out[kind] = row
        print(f"cost {kind}: {row}", flush=True)
    return out


def dispatch(loopscope, rounds: int, calls: int) -> dict:
    """What a light profile's sync callbacks cost a CUDA call they do not
    watch (issue 40: is it CUPTI's dispatch on every API call, not the
    calls kept?): `calls` x cudaGetDevice (runtime) and cuCtxGetCurrent
    (driver) through ctypes, bare, in a light profile (its sync callbacks
    on) and in one with syncs off, alternating, `rounds` rounds.  Printed:
    the median ns a call over bare's, each API."""
    import ctypes
    import glob
    import torch
    lib = os.path.dirname(torch.__file__)
    found = sorted(glob.glob(os.path.join(lib, "..", "nvidia", "*", "lib", "libcudart.so*"))
                   + glob.glob(os.path.join(lib, "lib", "libcudart*.so*")))
    cudart = None
    for name in [*found, "libcudart.so.13", "libcudart.so.12", "libcudart.so"]:
        try:
            cudart = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if cudart is None:
        raise SystemExit("--dispatch: no libcudart found beside torch")
    cuda = ctypes.CDLL("libcuda.so.1")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    apis = {"cudaGetDevice": lambda: cudart.cudaGetDevice(ctypes.byref(dev)),
            "cuCtxGetCurrent": lambda: cuda.cuCtxGetCurrent(ctypes.byref(ctx))}
    times: dict[str, dict[str, list[float]]] = {v: {a: [] for a in apis} for v in ("bare", *VARIANTS)}

    def run(variant: str) -> None:
        for name, call in apis.items():
            t = time.perf_counter_ns()
            for _ in range(calls):
                call()
            times[variant][name].append((time.perf_counter_ns() - t) / calls)

    for r in range(rounds):
        for variant in (["bare", *VARIANTS] if r % 2 == 0 else [*VARIANTS, "bare"]):
            if variant == "bare":
                run(variant)
                continue
            with loopscope.profile(**VARIANTS[variant]) as prof:
                run(variant)
            if variant == "light" and r == 0:
                assert prof.summary()["syncs_error"] is None, prof.summary()["syncs_error"]
    out = {}
    for name in apis:
        bare = statistics.median(times["bare"][name])
        out[name] = {"bare_ns": round(bare, 1), **{f"{v}_added_ns": round(
            statistics.median(times[v][name]) - bare, 1) for v in VARIANTS}}
    print(f"dispatch ({rounds} rounds of {calls} calls): {out}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--cost", action="store_true")
    parser.add_argument("--syncs", action="store_true")
    parser.add_argument("--dispatch", action="store_true",
                        help="a CUDA call the light profile's callbacks do not watch: its cost")
    parser.add_argument("--dispatch-calls", type=int, default=200000)
    parser.add_argument("--loops", default="tiny,gpt2")
    parser.add_argument("--rounds", type=int, default=20, help="tiny's; gpt2 runs half")
    parser.add_argument("--launches", type=int, default=10000)
    parser.add_argument("--json")
    args = parser.parse_args()
    import torch

    import loopscope

    loops = {k: build(torch, k, args.launches) for k in args.loops.split(",")}
    for loop in loops.values():
        for _ in range(3):
            loop()
    with loopscope.profile(metrics=False):  # CUPTI loaded and set up before any timing
        next(iter(loops.values()))()
    result = {"device": torch.cuda.get_device_name(), "loopscope": loopscope.__file__}
    if args.check:
        result["check"] = check(torch, loopscope, loops)
    if args.syncs:
        result["syncs"] = syncs(loopscope, loops)
    if args.dispatch:
        result["dispatch"] = dispatch(loopscope, args.rounds, args.dispatch_calls)
    if args.cost:
        result["cost"] = cost(torch, loopscope, loops, args.rounds, args.launches)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
