"""Chrome / Perfetto JSON trace of finished profiles (`prof.export_trace`,
`python -m loopscope run --trace OUT`).  Open it at ui.perfetto.dev or
chrome://tracing.

What it holds, on the profile's own clock (microseconds from the first
profile's start):
- process "host": steps and ranges per thread (category step / range), the
  launch calls (category api), and the host syncs (category sync);
- one process per GPU: its kernels, memcpys and memsets, one track per
  stream, and a "gaps" track with every gap above the normal threshold
  (category gap, named with its class and length);
- flow arrows from each launch call to the op it launched;
- on rank 0 of a gathered torch.distributed profile, one process per other
  rank with its steps on this clock (aligned, see _ranks.py).
SM/DRAM counter tracks come with PM sampling (not collected yet)."""
from __future__ import annotations

import json
import os
from typing import Any

from ._html import merge_intervals
from ._ranks_view import rank_trace_events

HOST_PID = 1
GPU_PID = 100


def _us(ns: int, t0: int) -> float:
    return round((ns - t0) / 1000.0, 3)


def _merged_gaps(ops: list[tuple], normal_ns: float) -> list[tuple[int, int, int]]:
    """(device, start_ns, end_ns) of the idle intervals between merged busy
    intervals, per device, longer than `normal_ns`."""
    by_device: dict[int, list[tuple[int, int]]] = {}
    for o in ops:
        by_device.setdefault(o[3], []).append((o[1], o[2]))
    gaps = []
    for device, intervals in by_device.items():
        busy = merge_intervals(intervals)
        gaps += [(device, end, start) for (_, end), (start, _) in zip(busy, busy[1:])
                 if start - end >= normal_ns]
    return gaps


def trace_events(profiles: list[Any]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    captured = [p for p in profiles if p._capture is not None]
    if not captured:
        return events
    # time 0: the first profile's start, or an earlier record (injected
    # test records keep their own time line)
    t0 = min(min([p._capture.info()["start_ns"]] + [o[1] for o in p._capture.ops()])
             for p in captured)
    threads: dict[int, int] = {}
    devices: dict[int, str | None] = {}
    streams: set[tuple[int, int]] = set()
    events.append({"ph": "M", "name": "process_name", "pid": HOST_PID, "args": {"name": "host"}})
    for n, prof in enumerate(captured):
        capture = prof._capture
        summary = prof.summary()
        normal_ns, severe_ns = (v * 1000 for v in prof._thresholds)
        for d in (summary["gpu"] or {}).get("devices", []):
            devices[d["id"]] = d["name"]
        analysis = capture.analyze(*prof._thresholds)
        events += rank_trace_events(summary, t0, n)  # torch.distributed, rank 0: the other ranks
        for r in analysis["ranges"]:
            tid = threads.setdefault(r["thread"], len(threads) + 1)
            is_step = r["step"] is not None
            events.append({
                "ph": "X", "pid": HOST_PID, "tid": tid, "name": r["name"] or "?",
                "cat": "step" if is_step else "range", "ts": _us(r["start_ns"], t0),
                "dur": _us(r["end_ns"], r["start_ns"]),
                "args": {"step": r["step"], "kernels": r["kernels"], "profile": n}
                if is_step else {"kernels": r["kernels"], "profile": n},
            })
        ops = capture.ops()
        apis = capture.apis()
        called = {a[2] for a in apis}
        launched = set()
        for kind, start, end, device, stream, corr, name, nbytes in ops:
            streams.add((device, stream))
            args: dict[str, Any] = {"correlation": corr}
            if nbytes:
                args["bytes"] = nbytes
            events.append({"ph": "X", "pid": GPU_PID + device, "tid": stream,
                           "name": name or kind, "cat": kind, "ts": _us(start, t0),
                           "dur": _us(end, start), "args": args})
            if corr in called:  # an arrow only where both ends exist
                launched.add(corr)
                events.append({"ph": "f", "bp": "e", "pid": GPU_PID + device, "tid": stream,
                               "name": "launch", "cat": "launch", "id": corr,
                               "ts": _us(start, t0)})
        for start, end, corr, thread, _cbid, _domain in apis:
            events.append({"ph": "X", "pid": HOST_PID, "tid": "CUDA API", "name": "launch",
                           "cat": "api", "ts": _us(start, t0), "dur": _us(end, start),
                           "args": {"correlation": corr, "thread": thread}})
            if corr in launched:
                events.append({"ph": "s", "pid": HOST_PID, "tid": "CUDA API", "name": "launch",
                               "cat": "launch", "id": corr, "ts": _us(start, t0)})
        for start, end, stream, _corr, _type in capture.syncs():
            events.append({"ph": "X", "pid": HOST_PID, "tid": "host syncs",
                           "name": f"sync (stream {stream})", "cat": "sync",
                           "ts": _us(start, t0), "dur": _us(end, start)})
        for device, start, end in _merged_gaps(ops, normal_ns) if ops else []:
            length = end - start
            severe = length > severe_ns
            events.append({
                "ph": "X", "pid": GPU_PID + device, "tid": "gaps",
                "name": f"{'SEVERE' if severe else 'warning'} gap {length / 1000:.1f} us",
                "cat": "gap", "cname": "terrible" if severe else "bad",
                "ts": _us(start, t0), "dur": _us(end, start),
            })
    for device, name in sorted(devices.items()):
        events.append({"ph": "M", "name": "process_name", "pid": GPU_PID + device,
                       "args": {"name": f"GPU {device}" + (f" {name}" if name else "")}})
    for device, stream in sorted(streams):
        if device not in devices:
            events.append({"ph": "M", "name": "process_name", "pid": GPU_PID + device,
                           "args": {"name": f"GPU {device}"}})
            devices[device] = None
        events.append({"ph": "M", "name": "thread_name", "pid": GPU_PID + device, "tid": stream,
                       "args": {"name": f"stream {stream}"}})
    for thread, tid in threads.items():
        events.append({"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": tid,
                       "args": {"name": f"thread {thread}"}})
    return events


def export_trace(profiles: list[Any], path: str | os.PathLike) -> str:
    """Writes the trace of finished profiles to `path`; returns the path."""
    for prof in profiles:
        prof._require_finished()
    summaries = [p.summary() for p in profiles]
    data = {
        "traceEvents": trace_events(profiles),
        "displayTimeUnit": "ms",
        "otherData": {
            "producer": "loopscope",
            "verdicts": [s["diagnosis"]["verdict"] for s in summaries],
            "sources": [s["source"] for s in summaries],
        },
    }
    with open(path, "w") as f:
        json.dump(data, f, separators=(",", ":"))
    return str(path)
