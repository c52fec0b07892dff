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
SM/DRAM counter tracks come with PM sampling (not collected yet).

The events of the records themselves are written by the C core from the
analysed model (Model.write_trace_events), in pieces: a trace of millions of
ops costs no Python object per op.

pid and tid are small ints, as Chrome's format wants, whatever the ids they
stand for (device and stream ids are any 32-bit values): the host is pid 1,
GPUs are pids 100, 101, ... in order of their ids; on the host, tid 1 is the
launch calls' lane, tid 2 the sync records', range threads follow from 3;
a GPU's streams are numbered from 1 and its gaps lane is tid 0; the real ids
are in the process and thread names."""
from __future__ import annotations

import json
import os
from typing import Any, Callable

from ._names import demangled_name, kernel_name
from ._ranks_view import rank_trace_events

HOST_PID = 1
GPU_PID = 100


API_LANE, SYNC_LANE, GAP_LANE = "CUDA API", "host syncs", "gaps"
LANE_TIDS = (1, 2, 0)  # the API lane, the sync-record lane, each GPU's gaps lane


def _metadata(devices: dict[int, str | None], gpu_pids: dict[int, int],
              stream_tids: dict[tuple[int, int], int],
              threads: dict[int | str, int]) -> list[dict[str, Any]]:
    """Names of the GPU processes, streams, lanes and host threads."""
    events = []
    for device, pid in gpu_pids.items():
        name = devices.get(device)
        events.append({"ph": "M", "name": "process_name", "pid": pid,
                       "args": {"name": f"GPU {device}" + (f" {name}" if name else "")}})
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": LANE_TIDS[2],
                       "args": {"name": GAP_LANE}})
    for (device, stream), tid in stream_tids.items():
        events.append({"ph": "M", "name": "thread_name", "pid": gpu_pids[device], "tid": tid,
                       "args": {"name": f"stream {stream}"}})
    for thread, tid in threads.items():
        events.append({"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": tid,
                       "args": {"name": thread if isinstance(thread, str) else f"thread {thread}"}})
    return events


def _op_name(raw: str) -> tuple[str, str | None, str | None]:
    """An op's event name (its short name, see _names) and its whole name in
    the args: the demangled signature and the raw mangled name, where they
    differ from what is shown."""
    short = kernel_name(raw) or raw
    full = demangled_name(raw)
    return (short, full if full and full != short else None,
            raw if full and raw != full else None)


def write_trace_events(profiles: list[Any], write: Callable[[str], Any]) -> None:
    """Writes the events of finished profiles as the inside of a JSON array.
    The events of ranges, ops, launch calls, sync records and gaps come from
    the C core (Model.write_trace_events): no Python loop per record."""
    write(json.dumps({"ph": "M", "name": "process_name", "pid": HOST_PID,
                      "args": {"name": "host"}}, separators=(",", ":")))
    captured = [p for p in profiles if p.capture is not None]
    if not captured:
        return
    # time 0: the first profile's start, or an earlier op (injected test
    # records keep their own time line)
    t0 = min(min([p.capture.info()["start_ns"]]
                 + ([p.model.total()["first_ns"]] if p.model.op_count else []))
             for p in captured)
    # the host's lanes first, so range threads number from 3 (C adds them)
    threads: dict[int | str, int] = {API_LANE: LANE_TIDS[0], SYNC_LANE: LANE_TIDS[1]}
    devices: dict[int, str | None] = {}
    streams: set[tuple[int, int]] = set()
    for prof in captured:
        for d in (prof.summary()["gpu"] or {}).get("devices", []):
            devices[d["id"]] = d["name"]
        streams.update((s["device"], s["stream"]) for s in prof.model.streams())
    gpu_pids = {device: GPU_PID + k
                for k, device in enumerate(sorted({d for d, _ in streams} | set(devices)))}
    stream_tids: dict[tuple[int, int], int] = {}
    for device, stream in sorted(streams):
        stream_tids[device, stream] = 1 + sum(d == device for d, _ in stream_tids)
    for n, prof in enumerate(captured):
        # torch.distributed, rank 0: the other ranks' steps
        for event in rank_trace_events(prof.summary(), t0, n):
            write("," + json.dumps(event, separators=(",", ":")))
        prof.model.write_trace_events(write, t0, n, threads, HOST_PID, GPU_PID, names=_op_name,
                                      gpu_pids=gpu_pids, stream_tids=stream_tids,
                                      lanes=LANE_TIDS)
    for event in _metadata(devices, gpu_pids, stream_tids, threads):
        write("," + json.dumps(event, separators=(",", ":")))


def export_trace(profiles: list[Any], path: str | os.PathLike) -> str:
    """Writes the trace of finished profiles to `path`; returns the path."""
    for prof in profiles:
        prof._require_finished()
    summaries = [p.summary() for p in profiles]
    other = {
        "producer": "loopscope",
        "verdicts": [s["diagnosis"]["verdict"] for s in summaries],
        "sources": [s["source"] for s in summaries],
    }
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"traceEvents":[')
        write_trace_events(profiles, f.write)
        f.write('],"displayTimeUnit":"ms","otherData":' + json.dumps(other, separators=(",", ":"))
                + "}")
    return str(path)
