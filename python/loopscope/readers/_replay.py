"""A FinishedProfile from a recording (see _recording for the format): the
records go back in through the test hooks, so the normal C analysis turns
them into a full summary again; what no record can rebuild is put back as
recorded."""
from __future__ import annotations

from typing import Any, Iterator, Sequence

from .. import _core
from ..live import _settings
from ..figures._checks import LIVE_SOURCES, timeline_check
from ..figures._diagnosis import capture_verdicts, diagnose, diagnose_step
from ..files._inputs import cut_name
from .._profile import FinishedProfile, Profile
from ..figures._readiness import add_sync_blockers, overview
from ..files._recording import (OPTIONAL_API_COLUMNS, OPTIONAL_OP_COLUMNS, OP_KINDS, RANGE_FIELDS,
                         STEP_FIELDS, TOP_SECTIONS, RecordingError, check_shape, columns)

OP_COLUMNS = ("kind", "start", "duration", "device", "stream", "correlation", "name", "bytes",
              "shape", "copy_kind", "host_memory")
API_COLUMNS = ("start", "duration", "correlation", "thread", "domain", "cbid")
from ..files._schema import SchemaError


class OpRows:
    """A recording's ops, decoded, checked and made into _inject's rows a
    chunk of INJECT_CHUNK at a time (chunks()): a replay of millions of ops
    never holds their rows all at once.  A damaged row raises ValueError
    (replay() turns it into RecordingError) when its chunk is made."""

    def __init__(self, data: dict[str, Any], names: list[Any], shapes: list[tuple[int, ...]],
                 base: int) -> None:
        table = data["ops"]
        self.columns = [table[k] if k in table or k not in OPTIONAL_OP_COLUMNS else None
                        for k in OP_COLUMNS]  # KeyError: a column the file must have
        lengths = {len(c) for c in self.columns if c is not None}
        if len(lengths) > 1:
            raise RecordingError(f"the recording's columns differ in length: {sorted(lengths)}")
        self.length = lengths.pop() if lengths else 0
        self.names, self.shapes, self.base = names, shapes, base

    def __len__(self) -> int:
        return self.length

    def chunks(self, size: int) -> Iterator[list[tuple[Any, ...]]]:
        """The rows (kind, start, end, ...) in the recorded order, `size` at a time."""
        defaults = [OPTIONAL_OP_COLUMNS.get(k) for k in OP_COLUMNS]
        delta = [k in ("start", "correlation") for k in OP_COLUMNS]
        acc = [0] * len(OP_COLUMNS)  # the delta columns' running sums
        for i in range(0, self.length, size):
            n = min(size, self.length - i)
            parts = []
            for j, column in enumerate(self.columns):
                part: list[Any] = column[i:i + n] if column is not None else [defaults[j]] * n
                if delta[j]:
                    decoded, total = [], acc[j]
                    for v in part:
                        total += v  # TypeError for a value that is no number: damaged
                        decoded.append(total)
                    acc[j], part = total, decoded
                parts.append(part)
            yield [self._op(row) for row in zip(*parts)]

    def _op(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        if len(row) != 11 or not all(isinstance(v, int) for v in row):
            raise ValueError(f"ops record {row!r}: 11 integers expected")
        k, s, d, device, stream, corr, name, nbytes, shape, copy_kind, host_memory = row
        # indices into tables: a negative one would read from the end
        if not 0 <= k < len(OP_KINDS):
            raise ValueError(f"op kind {k} is none of 0-{len(OP_KINDS) - 1} "
                             f"({', '.join(OP_KINDS)})")
        if not -1 <= name < len(self.names):
            raise ValueError(f"op name {name} is no index into the {len(self.names)} names")
        if not -1 <= shape < len(self.shapes):
            raise ValueError(f"op shape {shape} is no index into the {len(self.shapes)} shapes")
        base = self.base
        out = (k, base + s, base + s + d, device, stream, corr,
               self.names[name] if name >= 0 else None, nbytes)
        if OP_KINDS[k] == "kernel" and shape >= 0:
            g = self.shapes[shape]
            return out + (tuple(g[0:3]), tuple(g[3:6]), g[6], g[7])
        if OP_KINDS[k] == "memcpy" and (copy_kind or host_memory):
            return out + (copy_kind, host_memory)
        if OP_KINDS[k] == "graph":  # a replay has no bytes
            return out[:7]
        return out


def _rows(data: dict[str, Any]) -> tuple[OpRows, list[Any], list[Any], list[Any]]:
    """(ops, apis, sync records, ranges) of a recording, decoded and checked
    (the ops as they are injected: OpRows)."""
    try:
        base = data["profile"]["start_ns"]
        if data["version"] == 1:  # no domain: every record was a runtime call
            data["apis"].setdefault("domain", [0] * len(data["apis"].get("start", [])))
        apis = columns(data["apis"], ("start", "correlation"), API_COLUMNS, OPTIONAL_API_COLUMNS)
        sync_records = columns(data["sync_records"], ("start",))
        ranges = columns(data["ranges"], ("start",))
        for table, rows, width in (("apis", apis, 6), ("sync_records", sync_records, 3),
                                   ("ranges", ranges, 6)):
            for row in rows:
                if len(row) != width or not all(isinstance(v, int) for v in row):
                    raise ValueError(f"{table} record {row!r}: {width} integers expected")
        names = [cut_name(n) if isinstance(n, str) else n for n in data["names"]]
        shapes = [tuple(s) for s in data.get("shapes", [])]
        for shape in shapes:
            if len(shape) != 8 or not all(isinstance(v, int) for v in shape):
                raise ValueError(f"shape {list(shape)!r}: 8 integers expected")
        ops = OpRows(data, names, shapes, base)
        for row in ranges:
            if not -1 <= row[2] < len(names):
                raise ValueError(f"range name {row[2]} is no index into the {len(names)} names")

        # Version 1 stored no thread with a launch (0: unknown); its
        # launches were made on the profile's one host thread when its
        # ranges all sit on one, so they go back there.
        range_threads = {row[5] for row in ranges}
        if data["version"] == 1 and len(range_threads) == 1:
            thread_of = range_threads.pop()
            apis = [row[:3] + (row[3] or thread_of,) + row[4:] for row in apis]
        return (
            ops,
            [(base + s, base + s + d, corr, thread, domain) + ((cbid,) if cbid else ())
             for s, d, corr, thread, domain, cbid in apis],
            # a wait that ended before the start is the warm-up's own
            # (recordings made before the finish left it out)
            [(base + s, base + s + d, stream) for s, d, stream in sync_records if s + d >= 0],
            [(base + s, base + s + d, names[name] if name >= 0 else "?", parent, step, thread)
             for s, d, name, parent, step, thread in ranges],
        )
    except RecordingError:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as error:
        raise RecordingError(f"the recording's records are damaged ({type(error).__name__}: "
                             f"{error})") from None


def _samples(data: dict[str, Any]) -> list[tuple]:
    """The recording's PM samples as _inject wants them (start, end,
    {figure: value}, device), none for a file without them."""
    table = data.get("samples")
    if table is None:
        return []
    try:
        base = data["profile"]["start_ns"]
        figures = table["figures"]
        rows = columns({"start": table["start"], "duration": table["duration"],
                        **{f"figure {name}": v for name, v in figures.items()}}, ("start",))
        device = table["device"]
        if not isinstance(device, int) or isinstance(device, bool) or device < 0:
            raise ValueError(f"the sampled device {device!r} is no device number")
        return [(base + s, base + s + d,
                 {name: v for name, v in zip(figures, values) if v is not None}, device)
                for s, d, *values in rows]
    except RecordingError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise RecordingError(f"the recording's samples are damaged ({type(error).__name__}: "
                             f"{error})") from None


def replay(data: dict[str, Any]) -> FinishedProfile:
    """A FinishedProfile whose summary is computed again from a recording
    (see _recording).  No other profile may be running.  A recording whose
    records or sections are damaged raises RecordingError saying what failed;
    no profile is left running."""
    if _core.active():
        raise RuntimeError("a loopscope profile is running: replay the recording after it")
    _settings.internal()  # a bad LOOPSCOPE_INTERNAL is its own ValueError, not a damaged recording
    try:
        check_shape(data)
        return _replay(data)
    except RecordingError:
        raise
    except SchemaError as error:
        raise RecordingError(f"the recording is damaged: {error}") from None
    except (AttributeError, IndexError, KeyError, OverflowError, RuntimeError, TypeError,
            ValueError) as error:  # what damaged data makes the replay raise
        raise RecordingError(f"the recording's records are damaged ({type(error).__name__}: "
                             f"{error})") from None


def _inject_or_refuse(kind: str, rows: list[tuple], what: str) -> None:
    """_inject, with a bad row refused as a damaged recording."""
    try:
        _core._inject(kind, rows)
    except (TypeError, ValueError) as error:
        raise RecordingError(f"the recording's {what} are damaged: {error}") from None


INJECT_CHUNK = 1 << 16  # op rows handed to _inject at a time


def inject_records(data: dict[str, Any], ops: OpRows, apis: list[tuple],
                   sync_records: list[tuple], samples: list[tuple],
                   ranges: Sequence[tuple] = ()) -> tuple[int, int] | None:
    """Puts a recording's records (from _rows and _samples) into the
    running profile; bench_summary.py's live-like replay uses it too.
    Returns the ops' span (first start, last end), None without an op."""
    facts = [(int(device), *values)
             for device, values in data["meta"].get("device_facts", {}).items()]
    if facts:
        _inject_or_refuse("device", facts, "device facts")
    if ranges:
        _inject_or_refuse("range", list(ranges), "ranges")
    # in the recorded order (runs of one kind, a chunk of rows at a time: never all
    # of them at once), so ties sort as they did
    first: int | None = None
    last: int | None = None
    for chunk in ops.chunks(INJECT_CHUNK):
        start = 0
        for i, row in enumerate(chunk):
            if i + 1 == len(chunk) or chunk[i + 1][0] != row[0]:
                _core._inject(OP_KINDS[row[0]], [o[1:] for o in chunk[start:i + 1]])
                start = i + 1
        low, high = min(o[1] for o in chunk), max(o[2] for o in chunk)
        first = low if first is None else min(first, low)
        last = high if last is None else max(last, high)
    if apis:
        _core._inject("api", apis)
    if sync_records:
        _core._inject("sync_record", sync_records)
    if samples:
        _inject_or_refuse("sample", samples, "samples")
    return None if first is None or last is None else (first, last)


def _replay(data: dict[str, Any]) -> FinishedProfile:
    ops, apis, sync_records, ranges = _rows(data)
    samples = _samples(data)
    base = data["profile"]["start_ns"]
    prof = Profile(trace=False, syncs=False, metrics=False, gather=False,
                   gap_thresholds_us=tuple(data["profile"]["thresholds_us"]))
    try:
        _core._set_test_clock(base, 1)
        prof.__enter__()
        try:
            span = inject_records(data, ops, apis, sync_records, samples, ranges)
        finally:
            _core._set_test_clock(base + data["profile"]["stop_ns"], 1)
            prof.__exit__(None, None, None)
    finally:
        _core._set_test_clock(0, 0)
    finished = prof.finished
    assert finished is not None  # the with-block ended
    summary = finished.summary()
    # records of a live profile share its window's clock; injected test records keep their own
    live = data["meta"].get("source") in LIVE_SOURCES | {None}
    _restore(summary, data, _replayed_timeline(span, base, base + data["profile"]["stop_ns"])
             if live and span is not None else None)
    return finished


def _replayed_timeline(span: tuple[int, int], start_ns: int,
                       stop_ns: int) -> dict[str, Any] | None:
    """The timeline check over the replayed ops' span (first start, last
    end) against the recording's own window, when it fails (an op of 10^15
    ns in a 15 ms profile: a damaged or edited file, whose busy time would
    read 10^9 ms); None when it holds."""
    first, last = span
    check = timeline_check(first, last, start_ns, stop_ns)
    if check["ok"]:
        return None
    where = check["detail"].split(") ", 1)[1].split(", outside")[0]
    check["detail"] = (f"the recording's GPU time line ({(last - first) / 1e6:.3f} ms) {where}, "
                       f"outside its profile window ({(stop_ns - start_ns) / 1e6:.3f} ms): the "
                       "recording is damaged or was edited; its GPU times, gaps and busy "
                       "figures are not trustworthy")
    return check


def _restore_checks(summary: dict[str, Any], recorded: list[dict[str, Any]] | None,
                    timeline: dict[str, Any] | None = None) -> None:
    """The self-checks made when the profile was recorded come back, marked
    so: the live ones the replay cannot make (timeline, clock_rate), and any
    recorded failure in place of the replay's check of that name (the
    replay's records were all kept, the recorded profile's were not); a
    failed timeline of the replayed ops (_replayed_timeline) over all."""
    at = {c["name"]: i for i, c in enumerate(summary["checks"])}
    for c in recorded or ():
        entry = {"name": c["name"], "ok": c["ok"], "detail": f"as recorded: {c['detail']}"}
        if c["name"] not in at:
            summary["checks"].append(entry)
        elif not c["ok"]:
            summary["checks"][at[c["name"]]] = entry
    if timeline is not None:
        summary["checks"] = [c for c in summary["checks"] if c["name"] != "timeline"] + [timeline]


def _restore(summary: dict[str, Any], data: dict[str, Any],
             timeline: dict[str, Any] | None = None) -> None:
    """Puts back what the records cannot rebuild (see _recording's doc)."""
    meta, recorded = data["meta"], data["profile"]
    summary["source"] = "recording"
    summary["host_ms"] = recorded["host_ms"]
    summary["cupti_note"] = recorded["cupti_note"]
    summary["dropped_records"] = recorded["dropped_records"]
    _restore_checks(summary, recorded.get("checks"), timeline)
    # the recorded costs; a figure the recording lacks keeps the replay's own
    replayed = summary["overhead"]
    summary["overhead"] = {**replayed, **recorded["overhead"]}
    # What the replay's finish left out as begun after the recorded stop (a
    # stop_ns earlier than some records: damaged) is counted on top of what
    # the live finish left out, where a live profile counts it; a recorded
    # count that is no count is replaced by the replay's own.
    for key in ("ops_after_stop", "records_after_stop"):
        was = recorded["overhead"].get(key)
        live = was if isinstance(was, int) and not isinstance(was, bool) and was >= 0 else 0
        summary["overhead"][key] = live + replayed[key]
    if summary["gpu"] is not None:
        summary["gpu"]["device"] = meta["device"]
        for d in summary["gpu"]["devices"]:
            d["name"] = meta["devices"].get(str(d["id"]))
    sections = data["sections"]
    # the replay's own reasons (it samples and watches nothing) are not the
    # recording's: a reason is the recorded one, or none
    for key in ("syncs_error", "metrics_error"):
        summary[key] = sections.get(key)
    as_recorded = []
    for key in TOP_SECTIONS:
        if sections.get(key) is not None and summary.get(key) != sections[key]:
            summary[key] = sections[key]
            if not key.endswith("_error"):  # a reason follows its section, silently
                as_recorded.append(key)
    by_index = {s["index"]: s for s in sections.get("steps", [])}
    for step in summary["steps"]:
        old = by_index.get(step["index"], {})
        for key in STEP_FIELDS:
            if old.get(key) is not None and step.get(key) != old[key]:
                step[key] = old[key]
                if f"steps.{key}" not in as_recorded:
                    as_recorded.append(f"steps.{key}")
    by_name = {r["name"]: r for r in sections.get("ranges", [])}
    for entry in summary["ranges"]:
        old = by_name.get(entry["name"], {})
        for key in RANGE_FIELDS:
            if old.get(key) is not None and entry.get(key) != old[key]:
                entry[key] = old[key]
                if f"ranges.{key}" not in as_recorded:
                    as_recorded.append(f"ranges.{key}")
    if "syncs" in as_recorded:  # the recorded sync sites block their steps' capture
        add_sync_blockers(summary["steps"], summary["syncs"])
        summary["graph_readiness"] = overview(summary["steps"])
    if as_recorded:  # the verdict may depend on what came back
        traced = [s for s in summary["steps"] if s["gaps"] is not None]
        for step, verdict in zip(traced, capture_verdicts(
                summary.get("loop"), [diagnose_step(s) for s in traced])):
            step["verdict"] = verdict
        summary["diagnosis"] = diagnose(summary)
    summary["recording"] = {
        "device": meta["device"],
        "date": meta["date"],
        "loopscope": meta["loopscope"],
        "command": meta["command"],
        "note": meta["note"],
        "recorded_source": meta["source"],
        "as_recorded": as_recorded,
    }
