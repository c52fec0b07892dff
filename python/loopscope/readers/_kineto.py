"""Kineto (torch.profiler) Chrome traces: the file is streamed, in chunks,
into the C reader (ls_kineto.c), which keeps compact records and never the
whole file.  Gzip is inflated by zlib in a second thread while the reader
parses, so the two cores work at once.

Top-level members other than traceEvents come back as raw JSON and are
decoded here: baseTimeNanoseconds (the origin of relative timestamps),
deviceProperties (device names, and the SM figures a kernel's fill is
judged against), distributedInfo, schemaVersion."""
from __future__ import annotations

import json
import queue
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Any

from .. import _core
from ..files._inputs import max_trace_bytes, open_input, trace_cap_error
from ._sniff import TraceError, fail

# Kineto writes times in microseconds with 3 decimals: 1 ns is the file's
# resolution, and ts and dur are each rounded to it, so two ops 1 ns apart
# may have touched.  ROCm traces are full of them (consecutive kernels 0-1 ns
# apart, below the GPU clock's tick): an idle interval of at most this is
# merged, not a gap (summary["gaps"]["merged_below_resolution"] counts them);
# 2 ns and more is a gap.
MERGE_IDLE_UPTO_NS = 1

CHUNK = 8 << 20          # plain files: bytes per read
GZIP_CHUNK = 1 << 20     # gzip files: compressed bytes per read
PROGRESS_AFTER_S = 2.0


class Progress:
    """A one-line progress bar on stderr, shown only on a terminal and only
    once the work has taken PROGRESS_AFTER_S."""

    def __init__(self, label: str, total: int, stream=None) -> None:
        self.label, self.total = label, max(total, 1)
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.monotonic()
        self.shown = False
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())

    def update(self, done: int) -> None:
        if not self.enabled or time.monotonic() - self.start < PROGRESS_AFTER_S:
            return
        frac = min(done / self.total, 1.0)
        bar = "#" * int(frac * 30)
        self.stream.write(f"\rloopscope: reading {self.label} [{bar:<30}] {frac * 100:5.1f}% "
                          f"of {self.total / 1e9:.2f} GB")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r" + " " * 100 + "\r")
            self.stream.flush()


def _read_plain(path: Path, out: queue.Queue, stop: threading.Event) -> None:
    """Producer thread for plain files: the file in chunks into `out`, then
    None (the kernel's copy of each chunk overlaps the parse of the last)."""
    try:
        with open_input(path) as f:
            done, cap = 0, max_trace_bytes()
            while not stop.is_set():
                chunk = f.read(CHUNK)
                if not chunk:
                    break
                done += len(chunk)
                if done > cap:
                    raise trace_cap_error(path, cap)
                out.put((chunk, done))
        out.put(None)
    except OSError as error:
        out.put(fail(path, f"cannot be read ({error.strerror or error})"))
    except BaseException as error:
        out.put(error)


def _inflate(path: Path, out: queue.Queue, stop: threading.Event) -> None:
    """Producer thread: decompressed chunks into `out`, then None; an
    exception instead when the gzip stream is damaged or cut short."""
    try:
        with open_input(path) as f:
            d = zlib.decompressobj(wbits=31)
            in_member = False  # bytes of a gzip member were read, its end not yet
            done, inflated, cap = 0, 0, max_trace_bytes()
            while not stop.is_set():
                raw = f.read(GZIP_CHUNK)
                done += len(raw)
                if not raw:
                    if in_member:
                        raise fail(path, "the gzip stream ends early: the file is truncated")
                    break
                while raw and not stop.is_set():  # a bomb: 1 MiB may inflate to GBs
                    in_member = True
                    chunk = d.decompress(raw, CHUNK)  # bounded: memory stays flat
                    inflated += len(chunk)
                    if inflated > cap:
                        raise trace_cap_error(path, cap)
                    if chunk:
                        out.put((chunk, done))
                    if d.unconsumed_tail:
                        raw = d.unconsumed_tail
                        continue
                    if d.eof:  # a next gzip member may follow (concatenated files)
                        raw = d.unused_data
                        d = zlib.decompressobj(wbits=31)
                        in_member = False
                        if raw and raw[:2] != b"\x1f\x8b":
                            raise fail(path, "has data after the end of its gzip stream")
                    else:
                        raw = b""
        out.put(None)
    except zlib.error as error:
        out.put(fail(path, f"the gzip data is damaged ({error})"))
    except OSError as error:
        out.put(fail(path, f"cannot be read ({error.strerror or error})"))
    except BaseException as error:  # a TraceError above, or anything unforeseen
        out.put(error)


def _chunks(path: Path, gz: bool, progress: Progress):
    """The content's chunks, made by a producer thread (zlib and file reads
    release the GIL, so it runs beside the C parser on the other core)."""
    out: queue.Queue = queue.Queue(maxsize=4)
    stop = threading.Event()
    worker = threading.Thread(target=_inflate if gz else _read_plain, args=(path, out, stop),
                              daemon=True, name="loopscope-read")
    worker.start()
    try:
        while True:
            item = out.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            chunk, done = item
            progress.update(done)
            yield chunk
    finally:
        stop.set()
        while worker.is_alive():  # unblock a producer waiting on a full queue
            try:
                out.get_nowait()
            except queue.Empty:
                worker.join(0.05)


def feed(reader, path: Path, gz: bool, progress: Progress) -> None:
    """Streams the file into the C reader; TraceError for unreadable content."""
    chunks = _chunks(path, gz, progress)
    try:
        for chunk in chunks:
            _core._trace_feed(reader, chunk, False)
        _core._trace_feed(reader, b"", True)
    except TraceError:
        raise
    except ValueError as error:  # the C reader's one-line reason
        raise fail(path, str(error)) from None
    except OSError as error:
        raise fail(path, f"cannot be read ({error.strerror or error})") from None
    except MemoryError:  # the records of a very large trace: say which file
        raise fail(path, "ran out of memory while reading it") from None


def members(reader, path: Path) -> dict[str, Any]:
    """The top-level members the summary uses, decoded and checked."""
    raw = _core._trace_members(reader)
    out: dict[str, Any] = {}
    for key in ("baseTimeNanoseconds", "deviceProperties", "distributedInfo", "schemaVersion",
                "traceName", "displayTimeUnit", "otherData"):
        if key in raw:
            try:
                out[key] = json.loads(raw[key])
            except ValueError:
                out[key] = None
    base = out.get("baseTimeNanoseconds")
    if base is not None and (isinstance(base, bool) or not isinstance(base, int) or base < 0
                             or base >= 1 << 61):
        raise fail(path, f"baseTimeNanoseconds is {base!r}: not a time in nanoseconds")
    return out


def own_export(meta: dict[str, Any]) -> dict[str, Any] | None:
    """What loopscope's own export (otherData.producer == "loopscope" and
    export_version >= 1, see _trace_export) carries for its reader: {"span_ns": [start, end] or
    None, "sync_sites": [...], "call_sites": [...], "syncs_error", "metrics_error",
    "metrics_interval_us" and "in_loop_estimate_ms": a positive number or None}; None for
    any other trace.  Members that are missing or malformed read as absent."""
    other = meta.get("otherData")
    # exports before export_version 1 carried none of it: read as any trace
    if not isinstance(other, dict) or other.get("producer") != "loopscope" or \
            not isinstance(other.get("export_version"), int) or other["export_version"] < 1:
        return None
    span = other.get("span_ns")
    if not (isinstance(span, list) and len(span) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and abs(v) < 1 << 61
                    for v in span) and span[0] <= span[1]):
        span = None
    sites, call_sites = (
        [s if isinstance(s, dict) else {} for s in listed] if isinstance(listed, list) else []
        for listed in (other.get("sync_sites"), other.get("call_sites")))
    return {"span_ns": span, "sync_sites": sites, "call_sites": call_sites,
            "syncs_error": _text_or_none(other.get("syncs_error")),
            "metrics_error": _text_or_none(other.get("metrics_error")),
            "metrics_interval_us": _positive_or_none(other.get("metrics_interval_us")),
            "in_loop_estimate_ms": _positive_or_none(other.get("in_loop_estimate_ms"))}


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _positive_or_none(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e9
    return float(value) if ok else None


# deviceProperties keys of the facts ls_device_facts holds, in its order
# (Kineto spells "Multiprocessor"; cudaDeviceProp, and so loopscope's
# export for blocks per SM, which Kineto does not write, "MultiProcessor")
FACT_KEYS = (("numSms",), ("maxThreadsPerMultiprocessor", "maxThreadsPerMultiProcessor"),
             ("maxBlocksPerMultiProcessor", "maxBlocksPerMultiprocessor"),
             ("regsPerMultiprocessor", "regsPerMultiProcessor"),
             ("sharedMemPerMultiprocessor", "sharedMemPerMultiProcessor"))


def fact_value(value: Any) -> int | None:
    """A device property as a "device" row item of _trace_add: the int, None
    when absent, -1 when it is not an int (counted as unusable there)."""
    if value is None:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def device_facts(meta: dict[str, Any]) -> list[tuple]:
    """The "device" rows of _trace_add from deviceProperties: (id, SMs,
    threads, blocks, registers, shared bytes per SM).  Entries without an
    int id are left out; the C builder checks the values."""
    rows = []
    props = meta.get("deviceProperties")
    for p in props if isinstance(props, list) else []:
        if isinstance(p, dict) and isinstance(p.get("id"), int) and \
                not isinstance(p["id"], bool) and 0 <= p["id"] <= 0xFFFF:
            rows.append((p["id"],) + tuple(
                fact_value(next((p[k] for k in keys if k in p), None)) for keys in FACT_KEYS))
    return rows


def device_names(meta: dict[str, Any]) -> dict[int, str]:
    """{device index: name} from deviceProperties (an empty name, as some
    ROCm traces write, is no name)."""
    names: dict[int, str] = {}
    props = meta.get("deviceProperties")
    if isinstance(props, list):
        for p in props:
            if isinstance(p, dict) and isinstance(p.get("id"), int) and \
                    isinstance(p.get("name"), str) and p["name"].strip():
                names[p["id"]] = p["name"]
    return names


def match_devices(meta: dict[str, Any], seen: list[int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """deviceProperties matched to the devices the GPU ops ran on, by what
    the trace says: an entry whose id is the device's; else, when the trace
    lists exactly one entry and its ops ran on exactly one device (ROCm
    traces list id 0 for a process that sees one GPU while its ops say
    device 2 or 9), that entry is the device's.  Any other device is left
    unmatched (no name, no SM figures), never guessed.
    Returns (meta with the matched entries' ids set to their devices,
    {"by_id", "only_entry", "unmatched"}) for summary["trace"]["device_match"]."""
    props = meta.get("deviceProperties")
    entries = [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []
    listed = {p["id"] for p in entries if isinstance(p.get("id"), int)}
    by_id = [d for d in seen if d in listed]
    rest = [d for d in seen if d not in listed]
    only = None
    if len(entries) == 1 and len(seen) == 1 and rest:
        only = {"device": rest[0], "entry_id": entries[0].get("id")}
        meta = dict(meta, deviceProperties=[dict(entries[0], id=rest[0])])
        rest = []
    return meta, {"by_id": by_id, "only_entry": only, "unmatched": rest,
                  "listed": sorted(listed)}
