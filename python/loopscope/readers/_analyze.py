"""`loopscope.analyze()` and `loopscope.load()`: the summary of a trace a
user already has, on any machine, from the same C analysis as a live
profile.

    summary = loopscope.analyze("run.pt.trace.json.gz")   # torch.profiler / Kineto
    summary = loopscope.analyze("report.sqlite")          # nsys export --type sqlite
    prof = loopscope.load("run.loopscope.json.gz")        # a saved loopscope profile
    print(prof.report())

The format is told from the content (_sniff) and read by the reader its
registration names (files/_formats; the built-in ones in _builtin).  A
Kineto trace or an Nsight Systems export is read into the C records
(_kineto, _nsys, ls_tbuild.c) and wrapped in the Capture type a live profile
ends with; the FinishedProfile around it gives summary(), report(), HTML
and export_trace().

Steps: the outermost ranges whose names match `steps` (a regular
expression, re.search); by default DEFAULT_STEPS, which takes torch's
ProfilerStep#N, loopscope's own Step_N and seed-style Denoise_Step_N.
Step choice is made once, in steps_from_ranges().

loopscope's own trace export (prof.export_trace, otherData.producer ==
"loopscope") is a Kineto trace that also carries what the live summary
was made from: its steps as recorded (used unless `steps` is given), the
profile's span, each wait tagged with its sync and site (so syncs group
as they did live; ExportResolver gives the sites back) and why syncs or
SM/DRAM were missing.  Reading it back gives the live summary's figures."""
from __future__ import annotations

import os
import re
import sysconfig
import time
from pathlib import Path
from typing import Any

from .. import _core
from ..files import _formats
from ..live._options import check_thresholds
from .._profile import FinishedProfile, provide
from ._sniff import check_path, fail, sniff
from ..figures._checks import step_markers, trace_checks
from .._summary import build_summary
from ..figures._syncs import _CLASS_KINDS, _METHOD_KINDS, Frame, Resolver, Site

DEFAULT_STEPS = r"^(ProfilerStep#\d+|([^/]*_)?[Ss]tep_?\d+)$"

def steps_from_ranges(ranges: list[tuple[Any, ...]], pattern: re.Pattern[str]) -> list[int]:
    """The step index of each range (-1: not a step), ranges given as
    (name, parent, start_ns, end_ns, thread) in the order they began: the
    outermost ranges whose names match `pattern`, numbered in that order.

    The one place where a trace's steps are chosen (today as the records'
    step marks, as prof.step() makes them; the C analysis' steps-from-ranges
    input can take this over in one place)."""
    chosen = [pattern.search(r[0]) is not None for r in ranges]
    inside = [False] * len(ranges)  # a chosen range encloses it
    step_of = [-1] * len(ranges)
    count = 0
    for i, (_name, parent, *_rest) in enumerate(ranges):
        if 0 <= parent < i:
            inside[i] = chosen[parent] or inside[parent]
        if chosen[i] and not inside[i]:
            step_of[i] = count
            count += 1
    return step_of


# -- sync sites from a trace's stacks ---------------------------------------
_BUILTIN = re.compile(r"^<built-in (?:method (\w+) of (\w+) object|function (\w+))>$")
_ATEN_KINDS = {
    "aten::item": "item", "aten::_local_scalar_dense": "item", "aten::nonzero": "nonzero",
    "aten::unique": "nonzero", "aten::_unique2": "nonzero", "aten::masked_select": "nonzero",
    "aten::is_nonzero": "bool", "aten::tolist": "tolist",
}
_stdlib_cache: dict[str, bool] = {}


def _in_stdlib(relative: str) -> bool:
    """A file name as Kineto writes it ("typing.py", "json/decoder.py")
    that this interpreter's standard library also has."""
    if relative not in _stdlib_cache:
        root = sysconfig.get_paths().get("stdlib") or ""
        _stdlib_cache[relative] = bool(root) and os.path.isfile(os.path.join(root, relative))
    return _stdlib_cache[relative]


class TraceResolver(Resolver):
    """Sites from a trace's stacks.  Kineto names a frame "file(line): func",
    the file relative to sys.path of the machine that recorded it and the
    line the function's first one (the call's own line is not recorded);
    built-in calls and CPU ops are frames with no file, and name the call."""

    def _is_internal(self, file: str | None) -> bool:
        if not file or file.startswith("<"):
            return True
        f = file.replace("\\", "/")
        if f.startswith("torch/") or "/site-packages/torch/" in f or "/dist-packages/torch/" in f:
            return True
        if os.path.isabs(f):
            return super()._is_internal(file)
        return _in_stdlib(f)

    def _resolve(self, call: dict[str, Any]) -> Site:
        frames = [Frame.of(f) for f in call["frames"]]
        user = next((f for f in frames if not self._is_internal(f.file)), None)
        kind, call_text, op_text = None, None, None
        for f in frames:  # innermost first, up to the user's frame
            if user is not None and f is user:
                break
            name = f.function or ""
            m = _BUILTIN.match(name) if f.file is None else None
            if m:  # the Python call the user made: Tensor.item(), print()
                call_text = call_text or (f"{m[2]}.{m[1]}()" if m[1] else f"{m[3]}()")
                kind = kind or (_METHOD_KINDS.get(m[1]) if m[1] else
                                ("print" if m[3] in ("print", "repr", "str", "format") else None))
            elif f.file is None and name.startswith("aten::"):
                op_text = op_text or name
                kind = kind or _ATEN_KINDS.get(name)
            elif f.file and f.file.replace("\\", "/").startswith("torch/"):
                if f.file.endswith("_tensor_str.py") or name in ("__repr__", "__format__", "__str__"):
                    kind = kind or "print"
                elif f.file.endswith("cuda/__init__.py") and name == "synchronize":
                    kind = kind or "synchronize"
                    call_text = "torch.cuda.synchronize()"
        text = call_text or op_text
        kind = kind or _CLASS_KINDS.get(call["wait_class"], "other")
        if user is None:
            return Site(None, None, None, None, text, kind)
        return Site(user.file, user.line if user.line > 0 else None, user.function, None, text, kind)


_EXPORT_FRAME = re.compile(r"^<loopscope (?:sync \d+(?: site (\d+))?|call(?: site (\d+))?)>$")


class ExportResolver(Resolver):
    """Sites of loopscope's own export: each wait in it names its sync's
    site, an index into the file's otherData.sync_sites (the reader gives
    the wait a frame "<loopscope sync N site K>"), and each other recorded
    call its own, an index into otherData.call_sites (frame "<loopscope
    call site K>"); the site is taken as the live summary resolved it."""

    def __init__(self, sites: list[dict[str, Any]],
                 call_sites: list[dict[str, Any]] | None = None) -> None:
        super().__init__()
        self._sites = sites
        self._call_sites = call_sites or []

    def _resolve(self, call: dict[str, Any]) -> Site:
        frames = [Frame.of(f) for f in call["frames"]]
        m = _EXPORT_FRAME.match(frames[0].function or "") if frames else None
        listed, k = self._sites, -1
        if m and m[1] is not None:
            k = int(m[1])
        elif m and m[2] is not None:
            listed, k = self._call_sites, int(m[2])
        if not 0 <= k < len(listed):
            return Site(None, None, None, None, None,
                        _CLASS_KINDS.get(call["wait_class"], "other"))
        s = listed[k]
        return Site(s.get("file"), s.get("line"), s.get("function"), s.get("code"),
                    s.get("call"), s.get("kind") or _CLASS_KINDS.get(call["wait_class"], "other"))


# -- reading -------------------------------------------------------------------
def _pattern(steps: Any) -> re.Pattern[str] | None:
    if steps is None:
        return None
    if isinstance(steps, re.Pattern):
        return steps
    if not isinstance(steps, str):
        raise TypeError(f"steps must be a regular expression (str), got {steps!r}")
    try:
        return re.compile(steps)
    except re.error as error:
        raise ValueError(f"steps {steps!r} is not a valid regular expression: {error}") from None


def _check_device(device: Any) -> int | None:
    if device is None:
        return None
    if isinstance(device, bool) or not isinstance(device, int) or device < 0 or device > 0xFFFF:
        raise ValueError(f"device must be a GPU index (an int >= 0), got {device!r}")
    return device


def load(path: str | os.PathLike[str], *, steps: str | None = None, device: int | None = None,
         gap_thresholds_us: tuple[float, float] = (20.0, 50.0), progress: bool = True
         ) -> FinishedProfile:
    """A FinishedProfile (summary(), report(), HTML, export_trace()) from a
    trace file: a torch.profiler / Kineto JSON trace (plain or gzip), an
    Nsight Systems SQLite export, or a saved loopscope profile.

    steps:  regular expression (re.search) over range names; the outermost
            matching ranges are the steps (default DEFAULT_STEPS).
    device: analyse only this GPU (default: every GPU, each its own time line).
    progress: a progress bar on stderr for files that take over 2 s (on a
            terminal only).
    Raises TraceError (a ValueError) naming the file and the problem."""
    thresholds = check_thresholds(gap_thresholds_us)
    pattern = _pattern(steps)
    device = _check_device(device)
    p = check_path(path)
    kind, gz = sniff(p)
    fmt = _formats.of(kind)
    if fmt.load is not None:  # the whole profile at once (a saved recording)
        whole: FinishedProfile = fmt.load(p, thresholds, pattern, device)
        return whole
    if _core.active():
        raise RuntimeError(f"cannot analyse {path} while a loopscope profile is running")
    t0 = time.perf_counter()
    reader = _core._trace_reader()
    assert fmt.read is not None  # register(): a format has read= or load=
    got = fmt.read(reader, p, gz, progress)
    meta, names, device_match, merge = got.meta, got.names, got.device_match, got.merge_idle_upto_ns
    own = got.own  # otherData of loopscope's own export
    span = own["span_ns"] if own is not None else None
    _core._trace_settle(reader, got.base_ns, -1 if device is None else device,
                        own_export=own is not None,
                        span=(span[0], span[1]) if span is not None else None,
                        merge_idle_upto_ns=merge)
    stats = _core._trace_stats(reader)
    if device is not None and device not in stats["devices"]:
        raise fail(p, f"device {device} ran no GPU operation in this trace (devices with "
                      f"operations: {', '.join(map(str, stats['devices'])) or 'none'})")
    ranges = _core._trace_ranges(reader)
    if own is not None and pattern is None:  # loopscope's export: the steps it recorded
        step_of = [r[5] for r in ranges]
    else:
        step_of = steps_from_ranges(ranges, pattern or re.compile(DEFAULT_STEPS))
    has_apis = bool(stats["seen"].get("cuda_runtime") or stats["seen"].get("cuda_driver"))
    reason = fmt.no_gpu if not stats["ops"] else None
    syncs_reason = None if has_apis else fmt.no_apis
    metrics_reason = None if stats["samples"] else fmt.no_counters
    if own is not None:  # why the exported profile had none
        syncs_reason = own["syncs_error"] or (None if has_apis else syncs_reason)
        metrics_reason = None if stats["samples"] else (own["metrics_error"] or metrics_reason)
    # loopscope_capture: a loopscope export's loop paid loopscope's capture
    # (summary overhead's in_loop_captured); another profiler's, its own
    state: dict[str, Any] = {"reason": reason, "syncs_reason": syncs_reason,
                             "metrics_reason": metrics_reason, "instrument_mismatches": 0,
                             "loopscope_capture": own is not None,
                             "in_loop_estimate_ms": own["in_loop_estimate_ms"] if own else None}
    capture = _core._trace_capture(reader, step_of, reason, syncs_reason, metrics_reason, None)
    step_count = sum(1 for s in step_of if s >= 0)
    # The range tuples and step numbers are in the capture now: given back
    # before the summary's rows are made, so a million steps never hold both
    # (~300 MB at a million ProfilerStep#N ranges).
    markers = step_markers(ranges) if pattern is None else None
    del ranges, step_of
    read_s = time.perf_counter() - t0
    info = capture.info()
    host_ns = max(0, info["stop_ns"] - info["start_ns"])
    resolver = (ExportResolver(own["sync_sites"], own["call_sites"]) if own is not None
                else TraceResolver())
    resolver.thread_names = stats.get("thread_names") or {}
    summary = build_summary(capture, state, thresholds, host_ns, None, source=kind,
                            resolver=resolver)
    if own is not None and summary["sm"] is not None:  # the interval the export recorded
        summary["sm"]["interval_us"] = own["metrics_interval_us"]
    _shape(summary, kind=kind, path=p, gz=gz, meta=meta, stats=stats, names=names,
           pattern=pattern, device=device, read_s=read_s, steps=step_count,
           own=own is not None)
    summary["trace"]["device_match"] = device_match
    summary["trace"]["merge_idle_upto_ns"] = merge
    summary["checks"] += trace_checks(summary, stats, (), pattern, markers)
    return FinishedProfile(capture, state=state, thresholds=thresholds, host_ns=host_ns,
                           summary=summary)


provide("load", load)  # FinishedProfile.load(), on the floor below (see _profile.provide)


def analyze(path: str | os.PathLike[str], *, steps: str | None = None, device: int | None = None,
            gap_thresholds_us: tuple[float, float] = (20.0, 50.0), progress: bool = True
            ) -> dict[str, Any]:
    """The summary dict of a trace file, the same as a live profile's
    (summary["source"] says "kineto", "nsys" or "recording";
    summary["trace"] says what was read and skipped).  See load()."""
    return load(path, steps=steps, device=device, gap_thresholds_us=gap_thresholds_us,
                progress=progress).summary()


def _shape(summary: dict[str, Any], *, kind: str, path: Path, gz: bool, meta: dict[str, Any],
           stats: dict[str, Any], names: dict[int, str], pattern: re.Pattern[str] | None,
           device: int | None, read_s: float, steps: int, own: bool = False) -> None:
    """What the summary says about the file; device names from it."""
    fmt = _formats.of(kind)
    gpu = summary.get("gpu")
    if gpu is not None:
        for d in gpu["devices"]:
            d["name"] = names.get(d["id"])
        listed = [d["name"] for d in gpu["devices"]]
        gpu["device"] = listed[0] if len(set(listed)) == 1 else listed or None
    stacks = bool(stats["seen"].get("python_function"))
    syncs = summary.get("syncs")
    if syncs is not None:
        syncs["sites_from"] = "trace stacks" if stacks else None
        syncs["sites_unknown"] = None if stacks else fmt.no_stacks
        if stacks and fmt.site_lines:
            syncs["site_lines"] = fmt.site_lines
        if own:
            syncs["sites_from"] = "loopscope export"
            syncs["sites_unknown"] = None
        if stats["frames_dropped"]:
            syncs["sites_unknown"] = (
                f"the trace has more Python frames than loopscope keeps ({stats['frames_dropped']:,} "
                "past the first 8,388,608 were not kept): syncs late in the trace may show no site")
    dist = meta.get("distributedInfo")
    if isinstance(dist, dict) and isinstance(dist.get("rank"), int):
        summary["rank"] = dist["rank"]
        size = dist.get("world_size")  # absent or not a count: unknown, never shown as None
        summary["world_size"] = size if isinstance(size, int) and not isinstance(size, bool) \
            and size > dist["rank"] else None
    if stats["samples"]:
        summary["metrics"] = {"source": fmt.counters, "samples": stats["samples"]}
    if pattern is not None:
        summary["steps_from"] = "ranges"
    trace: dict[str, Any] = {
        "format": kind,
        "path": str(path),
        "gzip": gz,
        "bytes": path.stat().st_size,
        "read_s": round(read_s, 3),
        "events": sum(stats["seen"].values()),  # or as the format counts them (trace_fields)
        "seen": stats["seen"],
        "skipped": stats["skipped"],
        "skip_reasons": stats["why"],
        "devices": stats["devices"],
        "device": device,
        "steps": pattern.pattern if pattern is not None else DEFAULT_STEPS,
        "steps_found": steps,
        "python_stacks": stacks,
        "frames_dropped": stats["frames_dropped"],
        "time_offset_ns": stats["offset_ns"],
        "counter_values_not_understood": stats["counter_unknown"],
        # kernels whose fill stays unknown for want of a usable launch geometry
        "kernel_geometry": stats["kernel_geometry"],
        "device_facts_not_understood": stats["facts_bad"],
        "producer": "loopscope" if own else None,
    }
    trace.update(fmt.trace_fields(meta, stats))
    summary["trace"] = trace
