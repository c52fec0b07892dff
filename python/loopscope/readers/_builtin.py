"""The trace formats loopscope reads out of the box, each registered once
(files/_formats): torch.profiler / Kineto JSON (_kineto), Nsight Systems
SQLite (_nsys) and saved loopscope recordings (_replay), each with how its
first bytes are told, the reader that feeds it to the C analysis and what
a file of it can measure.  Registered when the readers package is imported;
the order is the CLI's and the report's."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .. import _core
from ..files._formats import TraceFormat, TraceRead, register
from . import _kineto
from ._sniff import RECORDING_KEY, SQLITE_MAGIC, TraceError, content_start, fail


class _NoTerminal:
    def isatty(self) -> bool:
        return False


def _is_recording(head: bytes) -> bool:
    return content_start(head)[:1] == b"{" and RECORDING_KEY in head.replace(b" ", b"")


def _read_kineto(reader, path: Path, gz: bool, progress: bool) -> TraceRead:
    bar = _kineto.Progress(path.name, path.stat().st_size,
                           stream=None if progress else _NoTerminal())
    try:
        _kineto.feed(reader, path, gz, bar)
    finally:
        bar.close()
    meta = _kineto.members(reader, path)
    matched, device_match = _kineto.match_devices(meta, _core._trace_stats(reader)["devices"])
    names = _kineto.device_names(matched)
    _core._trace_add(reader, "device", _kineto.device_facts(matched))
    own = _kineto.own_export(meta)
    # loopscope's own export holds its live ns times: every idle ns is a gap there
    return TraceRead(meta, names, base_ns=meta.get("baseTimeNanoseconds") or 0,
                     device_match=device_match, own=own,
                     merge_idle_upto_ns=_kineto.MERGE_IDLE_UPTO_NS if own is None else 0)


def _kineto_fields(meta: dict[str, Any], stats: dict[str, Any]) -> dict[str, Any]:
    return {"events": stats["events"], "schema_version": meta.get("schemaVersion"),
            "base_time_ns": meta.get("baseTimeNanoseconds"),
            "distributed": meta.get("distributedInfo"),
            "members_too_large": stats["members_dropped"]}


def _read_nsys(reader, path: Path, gz: bool, progress: bool) -> TraceRead:
    from . import _nsys  # sqlite3 only when an export is read

    meta = _nsys.read_gzip(reader, path) if gz else _nsys.read(reader, path)
    return TraceRead(meta, meta["device_names"])


def _nsys_fields(meta: dict[str, Any], stats: dict[str, Any]) -> dict[str, Any]:
    return {k: meta[k] for k in ("schema_version", "missing_tables", "tables_read",
                                 "duplicate_string_ids")}


def _load_recording(path: Path, thresholds: tuple[float, float], steps: re.Pattern[str] | None,
                    device: int | None):
    from ..files._recording import RecordingError, load as load_recording
    from ._replay import replay

    if steps is not None or device is not None:
        raise fail(path, "is a loopscope recording: its steps and device are the recorded "
                         "ones (steps= and device= apply to Kineto and Nsight Systems traces)")
    try:
        data = load_recording(path)
        data["profile"]["thresholds_us"] = list(thresholds)
        return replay(data)
    except RecordingError as error:
        raise TraceError(str(error)) from None
    except RuntimeError as error:  # a profile is running: replay needs the core to itself
        raise RuntimeError(f"cannot load {path} now: {error}") from None


register(TraceFormat(
    kind="kineto", name="torch.profiler (Kineto) trace", noun="a torch.profiler trace",
    help="a torch.profiler (Kineto) Chrome trace (.json or .json.gz)",
    # every JSON file that is not a recording (a bare list of events: an old trace)
    sniff=lambda head: content_start(head)[:1] in (b"{", b"[") and not _is_recording(head),
    read=_read_kineto,
    no_gpu="the trace has no GPU operations (kernels, copies, sets): record it with "
           "torch.profiler.ProfilerActivity.CUDA",
    no_apis="the trace has no CUDA runtime or driver calls, so host syncs cannot be seen "
            "(Kineto records them with ProfilerActivity.CUDA)",
    no_counters="the trace has no GPU counter events (SM/DRAM come from a loopscope profile, or "
                "Kineto's GPU counter tracks when it records them)",
    no_stacks="the trace has no Python stacks: record it with torch.profiler.profile("
              "with_stack=True) to see the line of each sync",
    counters="kineto_counters", device_facts="deviceProperties",
    site_lines="the first line of the function that made the call (Kineto records no "
               "call-site line)",
    host_clock="kineto host clock", suffixes=(".json", ".json.gz"), trace_fields=_kineto_fields))

register(TraceFormat(
    kind="nsys", name="Nsight Systems export", noun="an Nsight Systems SQLite export",
    help="an Nsight Systems SQLite export (nsys export --type sqlite)",
    sniff=lambda head: head.startswith(SQLITE_MAGIC),
    read=_read_nsys,
    no_gpu="the export has no GPU operations (no kernel, memcpy or memset rows): profile with "
           "`nsys profile --trace=cuda`",
    no_apis="the export has no CUPTI_ACTIVITY_KIND_RUNTIME rows, so host syncs cannot be seen "
            "(`nsys profile --trace=cuda`)",
    no_counters="the export has no GPU_METRICS rows (`nsys profile --gpu-metrics-devices=all`)",
    no_stacks="Nsight Systems exports keep no Python stacks loopscope can read",
    counters="nsys_gpu_metrics", device_facts="TARGET_INFO_GPU", suffixes=(".sqlite",),
    trace_fields=_nsys_fields))

# A recording is replayed whole (its summary says so in summary["recording"]):
# what it measured is what the live profile did.  Its files (.loopscope.json.gz)
# end like a Kineto trace's.
register(TraceFormat(
    kind="recording", name="loopscope recording", noun="a saved loopscope profile",
    help="a saved loopscope profile", sniff=_is_recording, load=_load_recording))
