"""Chrome / Perfetto JSON trace of finished profiles (`prof.export_trace`,
`python -m loopscope run --trace OUT`).  Open it at ui.perfetto.dev or
chrome://tracing; `loopscope.analyze()` reads it back (see below).

What it holds, on the profile's own clock (microseconds from the first
profile's start, which is `baseTimeNanoseconds`):
- process "host", one track per thread: its steps and ranges (category
  user_annotation; a step's args carry "step"), its launch calls (category
  cuda_runtime / cuda_driver, named by the API call), and its host syncs
  (category sync: every wait of the summary's syncs, named by its kind and
  Python site; args: site `file:line function`, kind, code, call,
  blocked_us, calls, wait class, step) with the calls that made them inside,
  and the other calls the capture recorded (allocations and frees, copies
  that did not wait: what a CUDA graph capture refuses), each with its
  Python site (args.call_site, an index into otherData.call_sites);
  a track "CUDA sync records" with CUPTI's synchronization records
  (category cuda_sync);
- one process per GPU: its kernels (shown by their short name, the
  signature and mangled name in the args, and, as Kineto writes them, the
  launch geometry: grid, block, registers per thread, shared memory),
  memcpys and memsets (named as Kineto names them, "Memcpy DtoH (Device
  -> Pageable)"), whole CUDA-graph replays of graph-level mode (category
  cuda_graph, named by their graph; loopscope.analyze reads them back as
  replays),
  one track per stream, a "gaps" track with every gap above the normal threshold
  (category gap, named with its class and length), and on the sampled GPU
  one counter track per PM figure ("SM active %", "DRAM throughput %",
  "DRAM read GB/s", ...; figures not collected are left out; a counter
  holds its value until its next event, so where sampling paused or the
  next sample lacks the figure, an instant "no sample: ..." of category
  counter_end ends that series);
- flow arrows from each launch call to the ops it launched ("s" at the
  call, "f" with bp "e" at the op's start, one id per correlation id);
- on rank 0 of a gathered torch.distributed profile, one process per other
  rank with its steps on this clock (aligned, see _ranks.py).

The events of the records themselves are written by the C core from the
analysed model (Model.write_trace_events, ls_trace_json.c), in pieces: a
trace of millions of ops costs no Python object per op.

pid and tid are small ints, as Chrome's format wants, whatever the ids they
stand for (device, stream and thread ids are any 64-bit values): the host
is pid 1, GPUs are pids 100, 101, ... in order of their ids; on the host,
tid 2 is the sync records' lane, tid 1 the thread of records whose thread
is unknown, the other threads follow from 3 in order of appearance; a GPU's
streams are numbered from 1 and its gaps lane is tid 0; the real ids are in
the process and thread names and the events' args.

The devices are in Kineto's top-level deviceProperties: id, name, numSms,
maxThreadsPerMultiprocessor, regsPerMultiprocessor,
sharedMemPerMultiprocessor and maxBlocksPerMultiProcessor (cudaDeviceProp's
name: Kineto writes no blocks per SM), each where known.

Reading it back.  The events use Kineto's categories and args (ops: cat
kernel / gpu_memcpy / gpu_memset with args device, stream, correlation and
a kernel's geometry; launch calls: cuda_runtime / cuda_driver with
args.correlation), so the Kineto reader (_kineto, ls_kineto.c) reads them
like a torch.profiler trace, device facts included.
`otherData.producer == "loopscope"` tells it the file is loopscope's own,
and then it also takes what only this export carries:
the steps as recorded (args.step of ranges), the profile's span
(otherData.span_ns), the waits of each sync tagged with the sync, its site
and the launches before it (so the syncs group as they did live), the
sites themselves (otherData.sync_sites), the recorded calls outside syncs
(args.launches_before without args.sync) with their sites
(otherData.call_sites) and why syncs or SM/DRAM were
missing (otherData.syncs_error / metrics_error), and the counters' sampling interval
(otherData.metrics_interval_us).  So `loopscope.analyze()`
of the export gives the live summary's gaps (count, class, cause, step),
GPU busy time, kernel fill, syncs, each step's graph readiness (its
allocations and pageable copies at their lines) and SM/DRAM figures again; thread ids
come back as their tids, and two profiles in one file come back as one
time line."""
from __future__ import annotations

import json
import os
from typing import Any, Callable

from ..files._inputs import check_output
from ..figures._names import demangled_name, display_path, kernel_name
from ..distributed._ranks_view import rank_trace_events

HOST_PID = 1
GPU_PID = 100
EXPORT_VERSION = 1

# the model's device facts (Model.devices()) -> Kineto's deviceProperties
# keys; Kineto writes no blocks per SM: that key is cudaDeviceProp's name
DEVICE_PROPERTIES = (("sm_count", "numSms"), ("max_threads_per_sm", "maxThreadsPerMultiprocessor"),
                     ("max_blocks_per_sm", "maxBlocksPerMultiProcessor"),
                     ("registers_per_sm", "regsPerMultiprocessor"),
                     ("shared_bytes_per_sm", "sharedMemPerMultiprocessor"))

UNKNOWN_THREAD_TID, SYNC_RECORD_TID, GAP_TID = 1, 2, 0
SYNC_RECORD_LANE, GAP_LANE = "CUDA sync records", "gaps"
SITE_FIELDS = ("file", "line", "function", "code", "call", "kind")


def _metadata(devices: dict[int, str | None], gpu_pids: dict[int, int],
              stream_tids: dict[tuple[int, int], int], threads: dict[int, int],
              sync_records: bool) -> list[dict[str, Any]]:
    """Names of the GPU processes, streams, lanes and host threads."""
    events: list[dict[str, Any]] = []
    for device, pid in gpu_pids.items():
        name = devices.get(device)
        events.append({"ph": "M", "name": "process_name", "pid": pid,
                       "args": {"name": f"GPU {device}" + (f" {name}" if name else "")}})
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": GAP_TID,
                       "args": {"name": GAP_LANE}})
    for (device, stream), tid in stream_tids.items():
        events.append({"ph": "M", "name": "thread_name", "pid": gpu_pids[device], "tid": tid,
                       "args": {"name": f"stream {stream}"}})
    if sync_records:
        events.append({"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": SYNC_RECORD_TID,
                       "args": {"name": SYNC_RECORD_LANE}})
    for thread, tid in threads.items():
        events.append({"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": tid,
                       "args": {"name": "unknown thread" if thread == 0 else f"thread {thread}"}})
    return events


def _op_name(raw: str) -> tuple[str, str | None, str | None]:
    """An op's event name (its short name, see _names) and its whole name in
    the args: the demangled signature and the raw mangled name, where they
    differ from what is shown."""
    short = kernel_name(raw) or raw
    full = demangled_name(raw)
    return (short, full if full and full != short else None,
            raw if full and raw != full else None)


def _site_slice(site: dict[str, Any]) -> tuple[str, str]:
    """A sync slice's name and its args' site members (JSON, no braces)."""
    kind = site.get("kind") or "other"
    where = None
    if site.get("file") is not None:
        where = f"{display_path(site['file'])}:{site['line']}"
    name = f"sync {kind}" + (f" {where}" if where else "")
    args: dict[str, Any] = {
        "site": (f"{site['file']}:{site['line']} {site['function']}"
                 if site.get("file") is not None else None),
        "kind": kind, "code": site.get("code"), "call": site.get("call")}
    text = json.dumps({k: v for k, v in args.items() if v is not None}, separators=(",", ":"))
    return name, text[1:-1]


def _sync_sites(summary: dict[str, Any], sync_count: int
                ) -> tuple[list[dict[str, Any]], tuple | None]:
    """The summary's sync sites (as the export carries them) and the
    sync_sites argument of write_trace_events, None when the summary
    cannot name each sync's site (a summary restored from a recording)."""
    syncs = summary.get("syncs") or {}
    sites = syncs.get("sites") or []
    site_of = getattr(syncs, "site_of", None)
    if site_of is None or len(site_of) != sync_count:
        return [], None
    slices = [_site_slice(s) for s in sites]
    return ([{k: s.get(k) for k in SITE_FIELDS} for s in sites],
            (site_of, [n for n, _ in slices], [a for _, a in slices]))


def _call_sites(summary: dict[str, Any], calls: list[dict[str, Any]], model: Any,
                known: dict[tuple, int]) -> list[int] | None:
    """Per recorded call, the index of its site in the file's call site
    list (`known`: site fields -> index, extended here), -1 for a call of a
    sync (its sync names it); None when the summary cannot name sites (a
    summary restored from a recording).  Only the calls outside syncs are
    resolved: the allocations and the copies that did not wait."""
    resolver = getattr(summary.get("syncs"), "resolver", None)
    if resolver is None or not calls:
        return None
    in_syncs = {i for *_, ids in model.syncs() for i in ids}
    out = []
    for i, call in enumerate(calls):
        if i in in_syncs:
            out.append(-1)
            continue
        site = resolver.site(call)
        key = tuple(getattr(site, f) for f in SITE_FIELDS)
        out.append(known.setdefault(key, len(known)))
    return out


def _model(prof: Any, summary: dict[str, Any]) -> Any:
    """The analysed model `summary` was made from: the profile's own, or
    the one whose steps are ranges chosen after the fact (run --steps)."""
    steps = getattr(summary, "range_steps", None)
    if steps is None:
        return prof.model
    return prof.capture.model(*prof.thresholds, steps=steps.ranges)


def write_trace_events(profiles: list[Any], write: Callable[[str], Any],
                       summaries: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Writes the events of finished profiles as the inside of a JSON array;
    returns what the file's otherData must say for the reader (the span,
    the sync sites, the devices).  `summaries`: the summary shown for each
    profile, when not its own (steps from ranges).  The events of ranges,
    syncs, launch calls, ops, sync records, gaps and PM samples come from
    the C core (Model.write_trace_events): no Python loop per record."""
    write(json.dumps({"ph": "M", "name": "process_name", "pid": HOST_PID,
                      "args": {"name": "host"}}, separators=(",", ":")))
    shown = summaries if summaries is not None else [p.summary() for p in profiles]
    pairs = [(p, s) for p, s in zip(profiles, shown) if p.capture is not None]
    captured = [p for p, _ in pairs]
    other: dict[str, Any] = {"t0_ns": 0, "span_ns": None, "sync_sites": [], "call_sites": [],
                             "devices": {}, "facts": {}}
    if not captured:
        return other
    infos = [p.capture.info() for p in captured]
    # time 0: the first profile's start, or an earlier op (injected test
    # records keep their own time line) or PM sample (the first profile of a
    # process starts sampling before its window: the sample in progress at
    # the start began before it), so no event lies before 0
    t0 = min(min([info["start_ns"]] + ([p.model.total()["first_ns"]] if p.model.op_count else [])
                 + [s[0] for s in p.capture.samples()[:1]])
             for p, info in zip(captured, infos))
    threads: dict[int, int] = {}
    devices: dict[int, str | None] = {}
    facts: dict[int, dict[str, int]] = {}
    streams: set[tuple[int, int]] = set()
    for prof in captured:
        for d in (prof.summary()["gpu"] or {}).get("devices", []):
            devices[d["id"]] = d["name"]
        for d in prof.model.devices():
            known = {key: d[fact] for fact, key in DEVICE_PROPERTIES if d.get(fact)}
            if known:
                facts[d["device"]] = known
        streams.update((s["device"], s["stream"]) for s in prof.model.streams())
    gpu_pids = {device: GPU_PID + k
                for k, device in enumerate(sorted({d for d, _ in streams} | set(devices)))}
    stream_tids: dict[tuple[int, int], int] = {}
    for device, stream in sorted(streams):
        stream_tids[device, stream] = 1 + sum(d == device for d, _ in stream_tids)
    sites: list[dict[str, Any]] = []
    call_sites: dict[tuple, int] = {}  # site fields -> index in otherData.call_sites
    sync_base = 0
    for n, (prof, summary) in enumerate(pairs):
        # torch.distributed, rank 0: the other ranks' steps
        for event in rank_trace_events(summary, t0, n):
            write("," + json.dumps(event, separators=(",", ":")))
        model = _model(prof, summary)
        sync_count = len(model.syncs())
        own_sites, sync_sites = _sync_sites(summary, sync_count)
        call_site_of = _call_sites(summary, prof.capture.calls(), model, call_sites)
        model.write_trace_events(write, t0, n, threads, HOST_PID, GPU_PID, names=_op_name,
                                 gpu_pids=gpu_pids, stream_tids=stream_tids,
                                 lanes=(SYNC_RECORD_TID, GAP_TID), sync_sites=sync_sites,
                                 sync_base=sync_base, site_base=len(sites),
                                 call_sites=call_site_of)
        sites += own_sites
        sync_base += sync_count
    for event in _metadata(devices, gpu_pids, stream_tids, threads,
                           any(info["sync_records"] for info in infos)):
        write("," + json.dumps(event, separators=(",", ":")))
    other["t0_ns"] = t0
    other["span_ns"] = [min(info["start_ns"] for info in infos) - t0,
                        max(info["stop_ns"] for info in infos) - t0]
    other["sync_sites"] = sites
    other["call_sites"] = [dict(zip(SITE_FIELDS, key)) for key in call_sites]
    other["devices"] = devices
    other["facts"] = facts
    return other


def _unsampled(profiles: list[Any], summaries: list[dict[str, Any]]) -> str | None:
    """Why a profile with SM/DRAM figures has no counter tracks: a
    recording whose file keeps no samples."""
    for prof, summary in zip(profiles, summaries):
        if summary.get("sm") is not None and prof.capture is not None \
                and not prof.capture.info().get("samples"):
            return ("the SM/DRAM figures came from a recording that keeps no samples "
                    "(made before recordings kept them): no counter tracks")
    return None


def export_trace(profiles: list[Any], path: str | os.PathLike,
                 summaries: list[dict[str, Any]] | None = None) -> str:
    """Writes the trace of finished profiles (FinishedProfile values) to
    `path`; returns the path.
    `summaries`: the summary shown for each profile when it is not the
    profile's own (`run --steps`: steps from ranges); the trace then marks
    those steps."""
    if summaries is None:
        summaries = [p.summary() for p in profiles]
    elif len(summaries) != len(profiles):
        raise ValueError(f"export_trace: {len(summaries)} summaries for {len(profiles)} profiles")
    check_output(path)  # a FIFO would block the open, a folder fail it late
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"traceEvents":[')
        written = write_trace_events(profiles, f.write, summaries)
        other = {
            "producer": "loopscope",
            "export_version": EXPORT_VERSION,
            "verdicts": [s["diagnosis"]["verdict"] for s in summaries],
            "sources": [s["source"] for s in summaries],
            "span_ns": written["span_ns"],
            "sync_sites": written["sync_sites"],
            "call_sites": written["call_sites"],
            # why a section was empty live: the reader says the same
            "syncs_error": next((s["syncs_error"] for s in summaries if s.get("syncs_error")),
                                None),
            "metrics_error": next((s["metrics_error"] for s in summaries
                                   if s.get("metrics_error")), None) or _unsampled(profiles, summaries),
            # the counters' sampling interval: the samples' own lengths only
            # approach it (a sample's clock is the GPU's)
            "metrics_interval_us": next((s["sm"]["interval_us"] for s in summaries
                                         if (s.get("sm") or {}).get("interval_us")), None),
            # what the capture added inside the loop, as the live profiles
            # estimated it from their own counts (the reader cannot recount
            # them: an export holds the window's records only)
            "in_loop_estimate_ms": round(sum((s.get("overhead") or {}).get(
                "in_loop_estimate_ms") or 0.0 for s in summaries), 3),
        }
        # Kineto's members: the time origin of `ts`, the devices' names and
        # what decides how much of them a kernel can fill
        properties = []
        for d in sorted(set(written["devices"]) | set(written["facts"])):
            entry: dict[str, Any] = {"id": d}
            if written["devices"].get(d):
                entry["name"] = written["devices"][d]
            entry.update(written["facts"].get(d, {}))
            if len(entry) > 1:
                properties.append(entry)
        f.write('],"baseTimeNanoseconds":' + str(written["t0_ns"]) + ',"deviceProperties":'
                + json.dumps(properties, separators=(",", ":")) + ',"displayTimeUnit":"ms",'
                '"otherData":' + json.dumps(other, separators=(",", ":")) + "}")
    return str(path)
