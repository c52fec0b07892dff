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
- flow arrows from each launch call to the op it launched.
SM/DRAM counter tracks come with PM sampling (not collected yet).

pid and tid are small ints, as Chrome's format wants, whatever the ids they
stand for (device and stream ids are any 32-bit values): the host is pid 1,
GPUs are pids 100, 101, ... in order of first appearance; host lanes and
GPU streams are numbered from 1 within their process (a GPU's gaps lane is
tid 0); the real ids are in the process and thread names."""
from __future__ import annotations

import json
import os
from typing import Any

from ._html import merge_intervals

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
    threads: dict[int | str, int] = {}  # host thread id or lane name -> tid
    devices: dict[int, str | None] = {}
    gpu_pids: dict[int, int] = {}       # device id -> pid
    streams: dict[tuple[int, int], int] = {}  # (device, stream) -> tid

    def gpu_pid(device: int) -> int:
        return gpu_pids.setdefault(device, GPU_PID + len(gpu_pids))

    def stream_tid(device: int, stream: int) -> int:
        if (device, stream) not in streams:
            streams[device, stream] = 1 + sum(d == device for d, _ in streams)
        return streams[device, stream]

    def host_tid(key: int | str) -> int:
        return threads.setdefault(key, len(threads) + 1)

    events.append({"ph": "M", "name": "process_name", "pid": HOST_PID, "args": {"name": "host"}})
    for n, prof in enumerate(captured):
        capture = prof._capture
        summary = prof.summary()
        normal_ns, severe_ns = (v * 1000 for v in prof._thresholds)
        for d in (summary["gpu"] or {}).get("devices", []):
            if d["id"] is not None:
                devices[d["id"]] = d["name"]
        analysis = capture.analyze(*prof._thresholds)
        for r in analysis["ranges"]:
            tid = host_tid(r["thread"])
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
            pid, tid = gpu_pid(device), stream_tid(device, stream)
            args: dict[str, Any] = {"correlation": corr}
            if nbytes:
                args["bytes"] = nbytes
            events.append({"ph": "X", "pid": pid, "tid": tid,
                           "name": name or kind, "cat": kind, "ts": _us(start, t0),
                           "dur": _us(end, start), "args": args})
            if corr in called:  # an arrow only where both ends exist
                launched.add(corr)
                events.append({"ph": "f", "bp": "e", "pid": pid, "tid": tid,
                               "name": "launch", "cat": "launch", "id": corr,
                               "ts": _us(start, t0)})
        for start, end, corr, thread, _cbid, _domain in apis:
            events.append({"ph": "X", "pid": HOST_PID, "tid": host_tid("CUDA API"),
                           "name": "launch",
                           "cat": "api", "ts": _us(start, t0), "dur": _us(end, start),
                           "args": {"correlation": corr, "thread": thread}})
            if corr in launched:
                events.append({"ph": "s", "pid": HOST_PID, "tid": host_tid("CUDA API"),
                               "name": "launch",
                               "cat": "launch", "id": corr, "ts": _us(start, t0)})
        for start, end, stream, _corr, _type in capture.syncs():
            events.append({"ph": "X", "pid": HOST_PID, "tid": host_tid("host syncs"),
                           "name": f"sync (stream {stream})", "cat": "sync",
                           "ts": _us(start, t0), "dur": _us(end, start)})
        for device, start, end in _merged_gaps(ops, normal_ns) if ops else []:
            length = end - start
            severe = length > severe_ns
            events.append({
                "ph": "X", "pid": gpu_pid(device), "tid": 0,
                "name": f"{'SEVERE' if severe else 'warning'} gap {length / 1000:.1f} us",
                "cat": "gap", "cname": "terrible" if severe else "bad",
                "ts": _us(start, t0), "dur": _us(end, start),
            })
    for device, pid in gpu_pids.items():
        name = devices.get(device)
        events.append({"ph": "M", "name": "process_name", "pid": pid,
                       "args": {"name": f"GPU {device}" + (f" {name}" if name else "")}})
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 0,
                       "args": {"name": "gaps"}})
    for (device, stream), tid in streams.items():
        events.append({"ph": "M", "name": "thread_name", "pid": gpu_pid(device), "tid": tid,
                       "args": {"name": f"stream {stream}"}})
    for key, tid in threads.items():
        events.append({"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": tid,
                       "args": {"name": key if isinstance(key, str) else f"thread {key}"}})
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
