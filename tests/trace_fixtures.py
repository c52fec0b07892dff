"""Synthetic Kineto traces for the trace-reader tests, and the figures they
should give, computed here by plain Python (independent of the C reader and
the C analysis): busy intervals merged per device, the idle gaps between
them, their classes, and per step the gaps whose next op was launched inside
the step."""
from __future__ import annotations

import gzip
import json
import random
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

GPU_CATS = {"kernel": "kernels", "gpu_memcpy": "memcpys", "gpu_memset": "memsets"}
OLD_CATS = {"memcpy": "gpu_memcpy", "memset": "gpu_memset", "runtime": "cuda_runtime"}


def us(ns: int) -> float:
    """ns -> a microsecond float with 3 decimals, as Kineto writes times."""
    return round(ns / 1000, 3)


def make_events(seed: int = 0, steps: int = 4, ops_per_step: int = 12, devices: int = 1,
                with_stack: bool = True, syncs: bool = True) -> list[dict[str, Any]]:
    """A loop of `steps` ProfilerStep ranges on one CPU thread; each step
    launches ops (kernels, some copies and sets) round-robin over the
    devices, with random launch delays (some over 50 us), a stream sync at
    the end of some steps, python_function frames around the syncs."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    t = 5_000  # ns; relative to baseTimeNanoseconds
    corr = 100
    gpu_free = [0] * devices
    for s in range(steps):
        step_start = t
        step_events = []
        for k in range(ops_per_step):
            t += rng.choice([800, 2_000, 9_000, 30_000, 70_000])
            corr += 1
            dev = k % devices
            cat = rng.choices(["kernel", "gpu_memcpy", "gpu_memset"], [8, 1, 1])[0]
            launch = {"ph": "X", "cat": "cuda_runtime", "pid": 10, "tid": 10,
                      "name": {"kernel": "cudaLaunchKernel", "gpu_memcpy": "cudaMemcpyAsync",
                               "gpu_memset": "cudaMemsetAsync"}[cat],
                      "ts": us(t), "dur": us(1_500), "args": {"correlation": corr, "cbid": 211}}
            start = max(t + 4_000, gpu_free[dev]) + rng.choice([0, 0, 123, 7])
            dur = rng.choice([1_000, 3_333, 12_001, 40_000])
            gpu_free[dev] = start + dur
            name = {"kernel": f"void k{k % 5}<float>(float*)",
                    "gpu_memcpy": "Memcpy HtoD (Pinned -> Device)",
                    "gpu_memset": "Memset (Device)"}[cat]
            op = {"ph": "X", "cat": cat, "name": name, "pid": dev, "tid": 7 + dev,
                  "ts": us(start), "dur": us(dur),
                  "args": {"correlation": corr, "device": dev, "stream": 7 + dev}}
            if cat != "kernel":
                op["args"]["bytes"] = 4096
            step_events += [launch, op,
                            {"ph": "s", "cat": "ac2g", "id": corr, "pid": 10, "tid": 10, "ts": us(t)},
                            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 10,
                             "ts": us(t - 500), "dur": us(2_500)}]
            t += 1_500
        if syncs and s % 2 == 1:
            t += 3_000
            wait = max(gpu_free) - t + 2_000 if max(gpu_free) > t else 2_000
            corr += 1
            step_events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize",
                                "pid": 10, "tid": 10, "ts": us(t), "dur": us(wait),
                                "args": {"correlation": corr}})
            if with_stack:
                step_events.append({"ph": "X", "cat": "python_function", "pid": 10, "tid": 10,
                                    "name": "<built-in method item of Tensor object at 0x7f0011>",
                                    "ts": us(t - 100), "dur": us(wait + 200)})
            t += wait + 1_000
        t += 2_000
        if with_stack:
            step_events.append({"ph": "X", "cat": "python_function", "pid": 10, "tid": 10,
                                "name": "loop.py(21): denoise", "ts": us(step_start + 10),
                                "dur": us(t - step_start - 20)})
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}",
                       "pid": 10, "tid": 10, "ts": us(step_start), "dur": us(t - step_start)})
        events += step_events
        t += 4_000
    rng.shuffle(events)  # readers must not rely on file order
    events.append({"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}})
    return events


def trace_doc(events, base_ns: int | None = 1_700_000_000_000_000_000, devices: int = 1):
    doc: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": [
        {"id": d, "name": f"Test GPU {d}", "numSms": 132} for d in range(devices)]}
    if base_ns is not None:
        doc["baseTimeNanoseconds"] = base_ns
    doc["traceEvents"] = events
    doc["traceName"] = "synthetic"
    return doc


def write(path: Path, doc, gz: bool = False, indent: int | None = None) -> Path:
    text = json.dumps(doc, indent=indent).encode()
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(text)
    else:
        path.write_bytes(text)
    return path


# -- the independent figures ---------------------------------------------------
def _ns(value) -> int:
    return int((Decimal(str(value)) * 1000).to_integral_value(ROUND_HALF_UP))


def expected(text: bytes | str, thresholds_us=(20.0, 50.0), device=None,
             step_pattern=r"^ProfilerStep#\d+$") -> dict[str, Any]:
    """Figures of a Kineto trace by plain Python: gaps per device between
    merged busy intervals; per step (outermost matching annotations, in
    start order) the gaps whose next op was launched inside the step.  The
    file's times have 1 ns resolution: an idle ns is no gap (merge_upto_ns)."""
    import re

    doc = json.loads(text, parse_float=Decimal)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    ops, launches, driver, steps, replays = [], {}, {}, [], set()
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat = str(e.get("cat")).lower()
        cat = OLD_CATS.get(cat, cat)
        if cat in GPU_CATS:
            dev = e["args"]["device"]
            if device is None or dev == device:
                start = _ns(e["ts"])
                ops.append((dev, start, start + _ns(e["dur"]), cat, e["args"].get("correlation")))
        elif cat in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}) \
                and e.get("name") in ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"):
            replays.add(e["args"]["correlation"])
            (launches if cat == "cuda_runtime" else driver).setdefault(
                e["args"]["correlation"], _ns(e["ts"]))
        elif cat == "cuda_runtime" and "correlation" in e.get("args", {}):
            launches.setdefault(e["args"]["correlation"], _ns(e["ts"]))
        elif cat == "cuda_driver" and "correlation" in e.get("args", {}):
            driver.setdefault(e["args"]["correlation"], _ns(e["ts"]))
        elif cat == "user_annotation" and isinstance(e.get("name"), str) \
                and re.search(step_pattern, e["name"]):
            start = _ns(e["ts"])
            steps.append((start, start + _ns(e["dur"]), e["name"]))
    for corr, start in driver.items():  # a runtime call is the launch when both exist
        launches.setdefault(corr, start)
    return figures(ops, launches, steps, thresholds_us, merge_upto_ns=1, replays=replays)


def figures(ops, launches, steps, thresholds_us=(20.0, 50.0), merge_upto_ns=0,
            replays=frozenset()) -> dict[str, Any]:
    """ops: (device, start_ns, end_ns, cat, correlation); launches:
    {correlation: launch start ns}; steps: (start_ns, end_ns, name) of the
    ranges that match the step pattern (the outermost become the steps).
    An idle interval of at most merge_upto_ns is no gap (counted merged).
    replays: the correlations of graph launch calls: idle between two ops of
    one of them (the op that reached the busy end and the next) lies inside
    one replay: no gap, not merged, and not busy either (mostly the tracer's
    own timestamps between nodes, issue 39): summed as replay_idle_ns."""
    steps = sorted(steps, key=lambda s: (s[0], -s[1]))
    outer = []
    for s in steps:
        if not any(o[0] <= s[0] and s[1] <= o[1] for o in outer):
            outer.append(s)
    gaps = []  # (duration ns, step index or None)
    busy = merged = replay_idle = 0
    counts = {v: 0 for v in GPU_CATS.values()}
    for dev in sorted({o[0] for o in ops}):
        mine = sorted(o for o in ops if o[0] == dev)
        cur_start, cur_end, last = mine[0][1], mine[0][2], mine[0][4]
        for o in mine:
            counts[GPU_CATS[o[3]]] += 1
        for o in mine[1:]:
            if o[1] > cur_end and o[4] == last and o[4] in replays:
                replay_idle += o[1] - cur_end
                busy += cur_end - cur_start
                cur_start = o[1]
            elif o[1] > cur_end and o[1] - cur_end <= merge_upto_ns:
                merged += 1
            elif o[1] > cur_end:
                launch = launches.get(o[4])
                step = next((i for i, s in enumerate(outer)
                             if launch is not None and s[0] <= launch <= s[1]), None)
                gaps.append((o[1] - cur_end, step))
                busy += cur_end - cur_start
                cur_start = o[1]
            if o[2] > cur_end:
                cur_end, last = o[2], o[4]
        busy += cur_end - cur_start
    normal_ns, severe_ns = (round(t * 1000) for t in thresholds_us)

    def classes(ds):
        return {"count": len(ds), "normal": sum(d < normal_ns for d in ds),
                "severe": sum(d > severe_ns for d in ds),
                "warning": sum(normal_ns <= d <= severe_ns for d in ds),
                "idle_ns": sum(ds), "max_ns": max(ds, default=0)}

    return {
        "gaps": dict(classes([g[0] for g in gaps]), merged=merged),
        "busy_ns": busy,
        "replay_idle_ns": replay_idle,
        "counts": counts,
        "steps": [dict(classes([g[0] for g in gaps if g[1] == i]), name=s[2])
                  for i, s in enumerate(outer)],
    }


def check_summary(summary: dict[str, Any], exp: dict[str, Any]) -> None:
    """Asserts that a summary shows the independent figures."""
    gaps = summary["gaps"]
    for key in ("count", "normal", "warning", "severe"):
        assert gaps[key] == exp["gaps"][key], (key, gaps[key], exp["gaps"][key])
    assert gaps["idle_ms"] == round(exp["gaps"]["idle_ns"] / 1e6, 6)
    assert gaps["max_us"] == round(exp["gaps"]["max_ns"] / 1e3, 3)
    if "merged_below_resolution" in gaps:
        assert gaps["merged_below_resolution"] == exp["gaps"]["merged"]
    assert gaps["busy_ms"] == round(exp["busy_ns"] / 1e6, 6)
    if "replay_idle_ms" in summary["gpu"]:
        assert summary["gpu"]["replay_idle_ms"] == round(exp["replay_idle_ns"] / 1e6, 6)
    for key, n in exp["counts"].items():
        assert summary["gpu"][key] == n, (key, summary["gpu"][key], n)
    assert [s["name"] for s in summary["steps"]] == [s["name"] for s in exp["steps"]]
    for got, want in zip(summary["steps"], exp["steps"]):
        for key in ("count", "normal", "warning", "severe"):
            assert got["gaps"][key] == want[key], (got["name"], key, got["gaps"][key], want[key])
