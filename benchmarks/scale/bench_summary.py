"""Cost of summary() on a loop of about 1,100 kernels (the demo loop), and
the same from synthetic records (no GPU needed).  --layers adds per-layer
ranges as loopscope.instrument() makes them on the demo model (the model,
18 blocks, 4 leaves each: 91 ranges a step, names prefixed by the step).

summary() caches, and so does the capture its analysed model: each run
drops the model (Capture.forget_models) and builds the summary again, so it
times what the first summary() of a profile costs.
--recording FILE: a loopscope recording (benchmarks/data/gpt2_generate64.json.gz:
GPT-2, random weights, generate(max_new_tokens=64) on an H100, 17,380 kernels,
133 syncs, 8,650 PM samples) replayed as a live capture: its records go in
through the test hooks with syncs watched, and at each of its recorded syncs
the blocking calls it recorded are made from a 16-frame Python stack ending in
large generated modules (a library's 5,000- and 1,300-line files), so
summary() resolves the sites as a live one does (Capture.calls(), the source
parse, build_syncs).  It prints the process's first summary() (which parses
those modules) and the median of --repeat rebuilds, with the main pieces.

--sync-steps N,...: light profiles of N steps with one sync each (a watch's
block of generate()), the first summary() of each.

Usage: python benchmarks/scale/bench_summary.py [--synthetic] [--layers] [--kernels 1100] [--repeat 50]
       python benchmarks/scale/bench_summary.py --sync-steps 400,1600,3200,6400
       python benchmarks/scale/bench_summary.py --recording benchmarks/data/gpt2_generate64.json.gz
              [--repeat 7]
"""
from __future__ import annotations

import argparse
import functools
import importlib
import itertools
import os
import re
import statistics
import sys
import tempfile
import time

import loopscope
from loopscope import _core, _testhooks
from loopscope._summary import build_summary


LEAVES = ("norm", "up", "act", "down")


def synthetic_profile(kernels: int, steps: int = 10, layers: bool = False):
    """A launch-bound loop made of synthetic records: each step's launch
    records fall inside that step, 3 us kernels, 18 us gaps, 60 us between
    steps, so the per-step projection does real work.  With layers, one
    kernel is launched inside each leaf range of the demo model's tree, the
    rest of the step's kernels after it."""
    per_step = kernels // steps
    corr, gpu_t = 1, 1_000_000
    with loopscope.profile(trace=False) as prof:
        for step_index in range(steps):
            with prof.step():
                launches = []
                if layers:
                    s = f"Step_{step_index}"
                    with loopscope.range(f"{s}/Sequential"):
                        for b in range(18):
                            with loopscope.range(f"{s}/{b}"):
                                for leaf in LEAVES:
                                    with loopscope.range(f"{s}/{b}/{leaf}"):
                                        launches.append(_core.now_ns())
                host_t = _core.now_ns()
                launches += [host_t] * (per_step - len(launches))
                apis, kern = [], []
                for i, launch_t in enumerate(launches):
                    gpu_t += 60_000 if i == 0 else 18_000
                    apis.append((launch_t, launch_t + 100, corr))
                    kern.append((gpu_t, gpu_t + 3_000, 0, 7, corr, f"kernel_{i % 5}"))
                    gpu_t += 3_000
                    corr += 1
                _core._inject("api", apis)
                _core._inject("kernel", kern)
    return prof


def gpu_profile(layers: bool = False):
    import torch
    from loopscope.demo import build, eager_loop

    model, x = build()
    if layers:
        loopscope.instrument(model)
    for _ in range(3):
        eager_loop(model, x)
    torch.cuda.synchronize()
    with loopscope.profile() as prof:
        eager_loop(model, x, 10, prof)
    return prof


# A library module's shape: filler functions of ordinary code (their syntax
# trees cost what a real module's do), then a 16-frame chain and the sites.
_FILLER = """
def filler_{i}(a, b, items=None):
    \"\"\"Filler {i}: a docstring of a library's usual length, so the module
    has a library's share of text to code (about 4 syntax nodes a line, as
    transformers' generation/utils.py and the standard library's modules).

    Args:
        a: the first value, compared with `b`.
        b: the second value.
        items: mappings whose "size" raises the first value.

    Returns:
        A short description, or the larger of the values.

    Raises:
        ValueError: when an item has no usable size.
    \"\"\"
    if a > b and not items:
        values = [v * 2 for v in range(a) if v % 3]
        table = {{k: str(k) for k in values}}
        return f"{{a}}-{{b}}: {{len(table)}}"
    for k, v in enumerate(items or ()):
        try:
            a = max(a, v.get("size", k)) + sum(x for x in (b, k) if x)
        except (KeyError, TypeError) as error:
            raise ValueError(f"bad item {{k}}: {{error}}") from None
    return a if a is not None else (b or 0)
"""
_DEPTH = 16  # frames a call keeps (csrc/common/ls_records.h: LS_CALL_FRAMES)


def _module(lines: int, sites: list[tuple[str, str]]) -> str:
    parts = ["# generated by benchmarks/scale/bench_summary.py --recording"]
    i = 0
    while sum(p.count("\n") + 1 for p in parts) < lines:
        parts.append(_FILLER.format(i=i))
        i += 1
    for k in range(_DEPTH - 1):
        call = f"level_{k + 1}(t, leaf)" if k + 2 < _DEPTH else "leaf(t)"
        parts.append(f"def level_{k}(t, leaf):\n    return {call}\n")
    for name, body in sites:
        parts.append(f"def {name}(t):\n{body}\n")
    return "\n".join(parts) + "\n"


def _c_callable(calls, *then):
    """A callable with no Python frame of its own that makes `calls`
    through the real switchboard (as tests/capture/test_syncs.py's fakes)."""
    results = map(_testhooks._inject_calls, itertools.repeat(calls))
    for f in then:
        results = map(f, results)
    return functools.partial(next, results)


def _api_calls(apis: dict[str, int], count: int, duration_ns: int) -> list[tuple]:
    """The calls of one sync of a recorded site: each API its share of times,
    a driver call (cu...) inside the runtime call before it (shorter, and
    the fake clock ticks 1 ns a read), as the driver serves the runtime."""
    out = []
    for api, n in apis.items():
        driver = not api.startswith("cuda")
        for _ in range(max(n // max(count, 1), 1)):
            out.append((api, duration_ns // 2 if driver else duration_ns))
    return out


def recording_profile(path: str, folder: str):
    """A finished live profile made from a recording (see the module doc)."""
    from loopscope.files._recording import load
    from loopscope.readers._replay import _rows, _samples, inject_records

    data = load(path)
    ops, apis, sync_records, ranges = _rows(data)
    samples = _samples(data)
    sites = data["sections"]["syncs"]["sites"] if data["sections"].get("syncs") else []
    # one module per recorded site file, the sites' lines as `if t:` / t.item()
    modules: dict[str, list] = {}
    for k, site in enumerate(sites):
        body = "    if t:\n        return 1\n    return 0" if site["kind"] == "bool" else (
            "    return t.item()")
        modules.setdefault(os.path.basename(site["file"] or "none.py"), []).append(
            (f"site_{k}", body))
    sys.path.insert(0, folder)
    loaded = {}
    for k, (name, bodies) in enumerate(sorted(modules.items())):
        module_name = f"bench_site_module_{k}"
        lines = 5000 if len(bodies) > 1 else 1300
        with open(os.path.join(folder, module_name + ".py"), "w", encoding="utf-8") as f:
            f.write(_module(lines, bodies))
        loaded[name] = importlib.import_module(module_name)
    estimate = re.search(r"(\d+) blocking calls", data["profile"]["overhead"].get(
        "in_loop_estimate") or "")
    base = data["profile"]["start_ns"]
    starts = sorted(s for s, _, _ in sync_records) or [base]
    prof = loopscope.profile(trace=False, metrics=False, gather=False,
                             gap_thresholds_us=tuple(data["profile"]["thresholds_us"]))
    _core._set_test_clock(base, 1)
    try:
        prof.__enter__()
        try:
            inject_records(data, ops, apis, sync_records, samples)
            made, at = 0, 0
            plan = []
            for k, site in enumerate(sites):
                module = loaded[os.path.basename(site["file"] or "none.py")]
                calls = _api_calls(site.get("apis") or {"cudaStreamSynchronize": 1},
                                   site["count"], 1000)
                tensor = type("T", (), {"__bool__": _c_callable(calls, bool),
                                        "item": _c_callable(calls)})()
                plan += [(module, getattr(module, f"site_{k}"), tensor, len(calls))] * site["count"]
            # the rest of the recorded blocking calls: async copies no record judges
            extra = max(int(estimate.group(1)) - sum(p[3] for p in plan), 0) if estimate else 0
            # (function_param 2: device to host, which is recorded)
            copies = [("cudaMemcpyAsync", 1000, 0, 2)]
            copy = type("T", (), {"__bool__": _c_callable(copies, bool),
                                  "item": _c_callable(copies)})()
            per_sync = -(-extra // len(plan)) if plan else 0
            for module, leaf, tensor, _ in plan:
                _core._set_test_clock(starts[at % len(starts)], 1)
                module.level_0(tensor, leaf)
                for _ in range(min(per_sync, extra - made)):
                    module.level_0(copy, leaf)
                    made += 1
                at += 1
        finally:
            _core._set_test_clock(base + data["profile"]["stop_ns"], 1)
            prof.__exit__(None, None, None)
    finally:
        _core._set_test_clock(0, 0)
    return prof


def bench_recording(path: str, repeat: int) -> None:
    from loopscope.figures import _syncs

    folder = tempfile.mkdtemp(prefix="loopscope-bench-")
    prof = recording_profile(path, folder)
    t0 = time.perf_counter_ns()
    first = prof.summary()
    first_ms = (time.perf_counter_ns() - t0) / 1e6
    done = prof.finished
    capture = done.capture
    runs: dict[str, list[float]] = {"summary": [], "model": [], "calls": [], "build_syncs": []}
    for _ in range(repeat):
        capture.forget_models()
        t0 = time.perf_counter_ns()
        build_summary(capture, done.state, done.thresholds, done.host_ns, None)
        runs["summary"].append((time.perf_counter_ns() - t0) / 1e6)
        capture.forget_models()
        t0 = time.perf_counter_ns()
        model = capture.model(*done.thresholds)
        t1 = time.perf_counter_ns()
        calls = capture.calls()
        t2 = time.perf_counter_ns()
        _syncs.build_syncs(calls, model.syncs(), model.unknown_copies, model.sync_gaps(),
                           _syncs.Resolver())
        t3 = time.perf_counter_ns()
        for key, ns in (("model", t1 - t0), ("calls", t2 - t1), ("build_syncs", t3 - t2)):
            runs[key].append(ns / 1e6)
    info = capture.info()
    med = {k: statistics.median(v) for k, v in runs.items()}
    syncs = first["syncs"] or {"count": 0, "sites": []}  # None: the recording has no sync
    print(f"summary() of {os.path.basename(path)} replayed live: {first['gpu']['kernels']} kernels, "
          f"{syncs['count']} syncs in {len(syncs['sites'])} sites, "
          f"{info['calls']} blocking calls, {info['samples']} samples")
    print(f"  first summary() of the process (parses the site modules): {first_ms:.2f} ms")
    print(f"  summary() again (model dropped), median of {repeat}: {med['summary']:.3f} ms "
          f"(min {min(runs['summary']):.3f}); of it model() {med['model']:.3f}, calls() "
          f"{med['calls']:.3f}, build_syncs {med['build_syncs']:.3f} ms")
    print(f"  the finish's record phase on the worker: "
          f"{info['finish_phases_ns']['records'] / 1e6:.3f} ms")


def bench_sync_steps(counts: list[int], repeat: int) -> None:
    """A light profile (trace=False, metrics=False) of N steps with one sync
    each (a copy and a stream sync, from one line: one site), as a watch's
    block of GPT-2 generate() holds (~1 sync a step at a few sites); the
    first summary() of each, median of `repeat` profiles.  Linear in the
    steps since 2026-11-30 (a site's step list was searched per sync)."""
    sync = functools.partial(_testhooks._inject_calls,
                             [("cudaMemcpyAsync", 1_000, 7), ("cudaStreamSynchronize", 1_000)])
    print("| steps | syncs | summary() | µs a step |")
    print("|---|---|---|---|")
    for n in counts:
        times = []
        for _ in range(repeat):
            with loopscope.profile(trace=False, metrics=False) as prof:
                for _ in range(n):
                    with prof.step():
                        sync()
            t0 = time.perf_counter_ns()
            s = prof.summary()
            times.append((time.perf_counter_ns() - t0) / 1e6)
        ms = statistics.median(times)
        print(f"| {n} | {s['syncs']['count']} | {ms:.1f} ms | {ms * 1e3 / n:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--synthetic", action="store_true")
    parser.add_argument("--layers", action="store_true", help="per-layer ranges, as instrument()")
    parser.add_argument("--kernels", type=int, default=1100)
    parser.add_argument("--repeat", type=int, default=None, help="50, or 7 with --recording")
    parser.add_argument("--recording", help="a loopscope recording, replayed as a live capture")
    parser.add_argument("--sync-steps", help="e.g. 400,1600,3200: light profiles of that many "
                        "steps with one sync each (a watch's block)")
    args = parser.parse_args()
    if args.sync_steps:
        bench_sync_steps([int(n) for n in args.sync_steps.split(",")], args.repeat or 5)
        return
    if args.recording:
        bench_recording(args.recording, args.repeat or 7)
        return
    args.repeat = args.repeat or 50
    prof = (synthetic_profile(args.kernels, layers=args.layers) if args.synthetic
            else gpu_profile(args.layers))
    first = prof.summary()
    done = prof.finished
    times = []
    for _ in range(args.repeat):
        done.capture.forget_models()
        t0 = time.perf_counter_ns()
        build_summary(done.capture, done.state, done.thresholds, done.host_ns, None)
        times.append((time.perf_counter_ns() - t0) / 1e6)
    print(f"summary() over {first['gpu']['kernels']} kernels, {len(first['steps'])} steps, "
          f"{first['overhead']['ranges'] - len(first['steps'])} ranges in "
          f"{len(first['ranges'])} names "
          f"({'synthetic' if args.synthetic else first['gpu']['device']}): median "
          f"{statistics.median(times):.3f} ms, min {min(times):.3f} ms, max {max(times):.3f} ms "
          f"({args.repeat} runs)")


if __name__ == "__main__":
    main()
