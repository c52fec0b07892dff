"""What a light profile's CUPTI callbacks cost a host-bound loop, and whether
every runtime-API launch reaches the driver-API callbacks (issue 40: GPT-2
generate() watched at <= 1.05x).  Light profiles counted launches from the
driver API alone from 8d091c7, and count none since eb6c9db (2-3% of
generate(), H200 2026-11-29): --check is the record of the first step.

--check: one traced profile (both API domains recorded) of GPT-2 generate()
and of a loop of tiny torch kernels.  For each runtime-API launch record: is
there a driver-API launch record on the same thread after it and before that
thread's next runtime launch?  Counting launches in the driver domain only
was right when every one has (0 "without").  The same for the calls kept
for syncs ("waits"): is every runtime call that can wait (or allocates)
watched again by a driver call inside it?  (If so, a light profile could
watch waits in the driver domain alone.)

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

--c-dispatch: the same from a C loop (compiled here with `cc`, the CUDA
functions passed in as pointers torch's own libraries resolve), so ctypes'
~0.6-0.9 us a call no longer hides a few ns: cudaGetDevice and
cudaStreamQuery (no callback watches them), cuCtxGetCurrent (driver), and
cudaStreamSynchronize on an idle stream, a call the light profile does
watch (its callback pair, both domains, and the stack kept); and launches,
which no light callback watches: cuLaunchKernel of an empty kernel (PTX the
driver compiles) and cudaMemsetAsync of 4 bytes, in batches of 256 with the
stream synchronized, untimed, between them.  Printed: ns a call, bare, and
what each variant adds.

  python benchmarks/probes/light_callbacks_probe.py --c-dispatch --loops tiny --rounds 10
"""
from __future__ import annotations

import argparse
import bisect
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


def wait_nesting(calls: list[dict]) -> dict:
    """calls: a profile's kept calls (capture.calls(): those that can wait,
    and memory calls, from the callbacks of both API domains).  For each
    runtime-API call: is there a driver-API call on its thread inside it
    (enter and exit within the runtime call's)?  A light profile could watch
    the driver domain alone when none is without (the runtime domain's
    callbacks then all off)."""
    driver_by_thread: dict[int, list[tuple[int, int]]] = {}
    for c in calls:
        if c["driver"]:
            driver_by_thread.setdefault(c["thread_id"], []).append((c["enter_ns"], c["exit_ns"]))
    for spans in driver_by_thread.values():
        spans.sort()
    runtime = without = 0
    inside = 0  # driver calls inside a runtime call
    apis_without: dict[str, int] = {}
    for c in calls:
        if c["driver"]:
            continue
        runtime += 1
        spans = driver_by_thread.get(c["thread_id"], [])
        lo = bisect.bisect_left(spans, (c["enter_ns"], 0))
        nested = [sp for sp in spans[lo:lo + 8] if sp[0] >= c["enter_ns"] and sp[1] <= c["exit_ns"]]
        if nested:
            inside += len(nested)
        else:
            without += 1
            apis_without[c["api"]] = apis_without.get(c["api"], 0) + 1
    driver = sum(len(v) for v in driver_by_thread.values())
    return {"runtime_kept_calls": runtime, "without_driver_call": without,
            "runtime_apis_without": apis_without, "driver_kept_calls": driver,
            "driver_calls_alone": driver - inside}


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
                         calls=info.get("calls"), waits=wait_nesting(prof.capture.calls()))
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


def _cudart():
    """The CUDA runtime torch loaded (its wheel's, or the toolkit's)."""
    import ctypes
    import glob
    import torch
    lib = os.path.dirname(torch.__file__)
    found = sorted(glob.glob(os.path.join(lib, "..", "nvidia", "*", "lib", "libcudart.so*"))
                   + glob.glob(os.path.join(lib, "lib", "libcudart*.so*")))
    for name in [*found, "libcudart.so.13", "libcudart.so.12", "libcudart.so"]:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise SystemExit("--dispatch: no libcudart found beside torch")


def dispatch(loopscope, rounds: int, calls: int) -> dict:
    """What a light profile's sync callbacks cost a CUDA call they do not
    watch (issue 40: is it CUPTI's dispatch on every API call, not the
    calls kept?): `calls` x cudaGetDevice (runtime) and cuCtxGetCurrent
    (driver) through ctypes, bare, in a light profile (its sync callbacks
    on) and in one with syncs off, alternating, `rounds` rounds.  Printed:
    the median ns a call over bare's, each API."""
    import ctypes
    cudart = _cudart()
    cuda = ctypes.CDLL("libcuda.so.1")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    apis = {"cudaGetDevice": lambda: cudart.cudaGetDevice(ctypes.byref(dev)),
            "cuCtxGetCurrent": lambda: cuda.cuCtxGetCurrent(ctypes.byref(ctx))}

    def run(times: dict[str, list[float]]) -> None:
        for name, call in apis.items():
            t = time.perf_counter_ns()
            for _ in range(calls):
                call()
            times.setdefault(name, []).append((time.perf_counter_ns() - t) / calls)

    out = _alternate(loopscope, rounds, run)
    print(f"dispatch ({rounds} rounds of {calls} calls): {out}", flush=True)
    return out


def _alternate(loopscope, rounds: int, run) -> dict:
    """`run(times)` bare and inside each of VARIANTS' profiles, the order
    turned each round, `rounds` rounds; run appends the ns a call of each
    API to times[api].  The light profile must watch syncs (else it
    measures nothing).  Returns, each API: bare's median and quartiles,
    and the median ns each variant adds."""
    times: dict[str, dict[str, list[float]]] = {v: {} for v in ("bare", *VARIANTS)}
    for r in range(rounds):
        for variant in (["bare", *VARIANTS] if r % 2 == 0 else [*VARIANTS, "bare"]):
            if variant == "bare":
                run(times[variant])
                continue
            with loopscope.profile(**VARIANTS[variant]) as prof:
                run(times[variant])
            if variant == "light" and r == 0:
                assert prof.summary()["syncs_error"] is None, prof.summary()["syncs_error"]
    out = {}
    for name, bare_ns in times["bare"].items():
        bare = statistics.median(bare_ns)
        out[name] = {"bare_ns": round(bare, 1), **{f"{v}_added_ns": round(
            statistics.median(times[v][name]) - bare, 1) for v in VARIANTS},
            "bare_q1_q3_ns": [round(q, 1) for q in statistics.quantiles(bare_ns, n=4)[::2]]}
    return out


C_LOOPS = r"""
#include <stddef.h>
#include <stdint.h>
#include <time.h>
typedef int (*one_ptr)(void *);
static uint64_t now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
/* ns a call of fn(arg), n times; arg is the call's one argument */
double loop_one(void *fn, void *arg, long n)
{
    one_ptr f = (one_ptr)fn;
    int bad = 0;
    uint64_t t0 = now();
    for (long i = 0; i < n; i++) {
        int r = f(arg);
        bad |= r != 0 && r != 600; /* 600: cudaErrorNotReady, a stream query's answer */
    }
    uint64_t t1 = now();
    return bad ? -1.0 : (double)(t1 - t0) / (double)n;
}
typedef int (*launch_ptr)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned shmem, void *stream, void **params,
                          void **extra);
typedef int (*memset_ptr)(void *dst, int value, size_t count, void *stream);
/* ns a launch: cuLaunchKernel(kernel) when memset is NULL, else
 * cudaMemsetAsync(dst, 0, 4): n of them in batches of 256, the stream
 * synchronized (untimed) after each batch so the GPU's queue never fills */
double loop_launch(void *launch, void *kernel, void *memset, void *dst, void *sync,
                   void *stream, long n)
{
    uint64_t spent = 0;
    int bad = 0;
    for (long done = 0; done < n; done += 256) {
        uint64_t t0 = now();
        for (long i = 0; i < 256; i++)
            bad |= memset ? ((memset_ptr)memset)(dst, 0, 4, stream) != 0
                          : ((launch_ptr)launch)(kernel, 1, 1, 1, 32, 1, 1, 0, stream, 0, 0) != 0;
        spent += now() - t0;
        bad |= ((one_ptr)sync)(stream) != 0;
    }
    return bad ? -1.0 : (double)spent / (double)((n + 255) / 256 * 256);
}
"""
# an empty kernel, JIT-compiled by the driver (no nvcc needed)
NOOP_PTX = b""".version 7.0
.target sm_80
.address_size 64
.visible .entry noop()
{
    ret;
}
\0"""


def c_dispatch(torch, loopscope, rounds: int, calls: int) -> dict:
    """--c-dispatch: what a light profile's callbacks cost CUDA calls from a
    C loop, watched (cudaStreamSynchronize) and not (the others)."""
    import ctypes
    import subprocess
    import tempfile
    cudart = _cudart()
    cuda = ctypes.CDLL("libcuda.so.1")
    folder = tempfile.mkdtemp(prefix="c-dispatch-")
    src, so = os.path.join(folder, "loops.c"), os.path.join(folder, "loops.so")
    with open(src, "w") as f:
        f.write(C_LOOPS)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", so, src], check=True)
    loops = ctypes.CDLL(so)
    loops.loop_one.restype = ctypes.c_double
    loops.loop_one.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    loops.loop_launch.restype = ctypes.c_double
    loops.loop_launch.argtypes = [ctypes.c_void_p] * 6 + [ctypes.c_long]
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    stream = torch.cuda.Stream()
    torch.cuda.synchronize()

    def pointer(lib, name: str) -> int:
        return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value

    module, kernel = ctypes.c_void_p(), ctypes.c_void_p()
    if cuda.cuModuleLoadData(ctypes.byref(module), NOOP_PTX) != 0 or \
            cuda.cuModuleGetFunction(ctypes.byref(kernel), module, b"noop") != 0:
        raise SystemExit("--c-dispatch: the empty kernel did not load")
    scratch = torch.zeros(4, device="cuda")
    sync = pointer(cudart, "cudaStreamSynchronize")
    launches = {
        "cuLaunchKernel (empty kernel)": (pointer(cuda, "cuLaunchKernel"), kernel.value, None, None),
        "cudaMemsetAsync (4 bytes)": (None, None, pointer(cudart, "cudaMemsetAsync"),
                                      scratch.data_ptr())}
    apis = {"cudaGetDevice": (pointer(cudart, "cudaGetDevice"), ctypes.addressof(dev)),
            "cudaStreamQuery": (pointer(cudart, "cudaStreamQuery"), stream.cuda_stream),
            "cuCtxGetCurrent": (pointer(cuda, "cuCtxGetCurrent"), ctypes.addressof(ctx)),
            "cudaStreamSynchronize (watched)": (pointer(cudart, "cudaStreamSynchronize"),
                                                stream.cuda_stream)}

    def run(times: dict[str, list[float]]) -> None:
        for name, (fn, arg) in apis.items():
            ns = loops.loop_one(fn, arg, calls if "watched" not in name else calls // 10)
            if ns < 0:
                raise SystemExit(f"--c-dispatch: {name} failed")
            times.setdefault(name, []).append(ns)
        for name, (launch, kern, memset, dst) in launches.items():
            ns = loops.loop_launch(launch, kern, memset, dst, sync, stream.cuda_stream, calls // 10)
            if ns < 0:
                raise SystemExit(f"--c-dispatch: {name} failed")
            times.setdefault(name, []).append(ns)

    out = _alternate(loopscope, rounds, run)
    print(f"c-dispatch ({rounds} rounds of {calls} calls; the watched call and the launches "
          f"a tenth): {out}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--cost", action="store_true")
    parser.add_argument("--syncs", action="store_true")
    parser.add_argument("--dispatch", action="store_true",
                        help="a CUDA call the light profile's callbacks do not watch: its cost")
    parser.add_argument("--dispatch-calls", type=int, default=200000)
    parser.add_argument("--c-dispatch", action="store_true",
                        help="--dispatch from a C loop, with a watched call beside")
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
    if args.c_dispatch:
        result["c_dispatch"] = c_dispatch(torch, loopscope, args.rounds, args.dispatch_calls)
    if args.cost:
        result["cost"] = cost(torch, loopscope, loops, args.rounds, args.launches)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
