"""Recordings: the raw records of one finished profile in a compact JSON(.gz)
file, and their replay through the test hooks so the normal C analysis turns
them into a full summary again.  The bundled demo recording
(data/demo_recording.json.gz, made on a GPU by benchmarks/record_demo.py) is
how `python -m loopscope demo` shows a real loop on a machine without a GPU.

What a recording holds, and how it comes back:
- GPU ops (kernels, memcpys, memsets), host API calls (launch records) and
  host sync intervals: replayed with `_core._inject`, so gaps, causes, busy
  time, per-step and per-range figures are computed again, exactly.
- Steps and ranges: replayed as real enter/exit pairs on a scripted clock
  (`_core._set_test_clock` set to each recorded time), so nesting, names and
  step indices are the recorded ones.  Ranges of several threads are
  replayed one thread after another.
- Sections whose raw records cannot be injected (sync sites with their
  Python lines, SM/DRAM samples) are stored as the summary had them and put
  back as recorded; `summary["recording"]["as_recorded"]` names them.
- The host time, the profiler's own costs and the device names are the
  recorded ones.

Columns are stored delta-encoded (times as differences to the previous
record), which gzip shrinks to a few bytes a record."""
from __future__ import annotations

import datetime
import gzip
import json
import os
import threading
from pathlib import Path
from typing import Any

from . import _core

FORMAT = "loopscope-recording"
VERSION = 1
OP_KINDS = ("kernel", "memcpy", "memset")
DEMO_RECORDING = Path(__file__).with_name("data") / "demo_recording.json.gz"

# Summary sections that no raw record in the file can rebuild.
_TOP_SECTIONS = ("syncs", "syncs_error", "sm", "dram", "metrics_error")
_STEP_FIELDS = ("syncs", "sm_active_pct", "dram_pct")
_RANGE_FIELDS = ("sm_active_pct", "dram_pct")


class RecordingError(ValueError):
    """A recording file that cannot be read or replayed; the message says why."""


def _deltas(values: list[int]) -> list[int]:
    out, prev = [], 0
    for v in values:
        out.append(v - prev)
        prev = v
    return out


def _undeltas(values: list[int]) -> list[int]:
    out, acc = [], 0
    for v in values:
        acc += v
        out.append(acc)
    return out


def _launch_apis(apis: list[tuple]) -> list[tuple]:
    """The API records the analysis uses, in a form _inject takes back.

    _inject cannot set an API record's domain, and the analysis prefers a
    runtime call over a driver call with the same correlation id; so driver
    calls shadowed by a runtime call are left out, which keeps the replayed
    analysis identical."""
    runtime = {a[2] for a in apis if a[5] == 0}
    return [a for a in apis if a[5] == 0 or a[2] not in runtime]


def record(prof, *, command: str | None = None, note: str | None = None) -> dict[str, Any]:
    """The recording of a finished Profile, as a JSON-ready dict."""
    from . import __version__

    prof._require_finished()
    capture = prof._capture
    if capture is None:
        raise RecordingError("this profile has no records to save: " + str(prof._stop_error))
    summary = prof.summary()
    info = capture.info()
    analysis = capture.analyze(*prof._thresholds)
    base = info["start_ns"]
    names: dict[str, int] = {}

    def name_id(name: str | None) -> int:
        if name is None:
            return -1
        return names.setdefault(name, len(names))

    ops = capture.ops()
    apis = _launch_apis(capture.apis())
    syncs = capture.syncs()
    ranges = analysis["ranges"]
    gpu = summary["gpu"] or {}
    sections: dict[str, Any] = {k: summary.get(k) for k in _TOP_SECTIONS}
    sections["steps"] = [{k: s.get(k) for k in ("index",) + _STEP_FIELDS} for s in summary["steps"]]
    sections["ranges"] = [{k: r.get(k) for k in ("name",) + _RANGE_FIELDS} for r in summary["ranges"]]
    return {
        "format": FORMAT,
        "version": VERSION,
        "meta": {
            "device": gpu.get("device"),
            "devices": {str(d["id"]): d["name"] for d in gpu.get("devices", [])},
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "loopscope": __version__,
            "command": command,
            "note": note,
            "source": summary["source"],
        },
        "profile": {
            "start_ns": base,
            "stop_ns": info["stop_ns"] - base,
            "thresholds_us": list(prof._thresholds),
            "host_ms": summary["host_ms"],
            "cupti_note": summary.get("cupti_note"),
            "dropped_records": summary["dropped_records"],
            "overhead": summary["overhead"],
        },
        "ops": {
            "kind": [OP_KINDS.index(o[0]) for o in ops],
            "start": _deltas([o[1] - base for o in ops]),
            "duration": [o[2] - o[1] for o in ops],
            "device": [o[3] for o in ops],
            "stream": [o[4] for o in ops],
            "correlation": _deltas([o[5] for o in ops]),
            "name": [name_id(o[6]) for o in ops],
            "bytes": [o[7] for o in ops],
        },
        "apis": {
            "start": _deltas([a[0] - base for a in apis]),
            "duration": [a[1] - a[0] for a in apis],
            "correlation": _deltas([a[2] for a in apis]),
            "thread": [a[3] for a in apis],
        },
        "syncs": {
            "start": _deltas([s[0] - base for s in syncs]),
            "duration": [s[1] - s[0] for s in syncs],
            "stream": [s[2] for s in syncs],
        },
        "ranges": {
            "start": _deltas([r["start_ns"] - base for r in ranges]),
            "duration": [r["end_ns"] - r["start_ns"] for r in ranges],
            "name": [name_id(r["name"]) for r in ranges],
            "parent": [r["parent"] for r in ranges],
            "step": [-1 if r["step"] is None else r["step"] for r in ranges],
            "thread": [r["thread"] for r in ranges],
        },
        "names": list(names),
        "sections": sections,
    }


def save(prof, path: str | os.PathLike, *, command: str | None = None,
         note: str | None = None) -> Path:
    """Writes the recording of a finished Profile; gzip when the name ends
    in .gz.  Returns the path."""
    data = json.dumps(record(prof, command=command, note=note), separators=(",", ":"))
    path = Path(path)
    if path.suffix == ".gz":
        with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", compresslevel=9,
                                                 mtime=0) as gz:
            gz.write(data.encode())
    else:
        path.write_text(data)
    return path


def load(path: str | os.PathLike) -> dict[str, Any]:
    """Reads and checks a recording file (plain or gzip JSON)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        data = json.loads(raw)
    except (OSError, EOFError, ValueError) as error:
        raise RecordingError(f"cannot read the recording {path}: {error}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RecordingError(f"{path} is not a loopscope recording (no format {FORMAT!r})")
    if data.get("version") != VERSION:
        raise RecordingError(
            f"{path} is a recording of format version {data.get('version')!r}; "
            f"this loopscope reads version {VERSION}"
        )
    missing = [k for k in ("meta", "profile", "ops", "apis", "syncs", "ranges", "names", "sections")
               if k not in data]
    if missing:
        raise RecordingError(f"{path}: the recording lacks {', '.join(missing)}")
    return data


def _columns(table: dict[str, list], delta: tuple[str, ...]) -> list[tuple]:
    cols = {k: (_undeltas(v) if k in delta else v) for k, v in table.items()}
    lengths = {len(v) for v in cols.values()}
    if len(lengths) > 1:
        raise RecordingError(f"the recording's columns differ in length: {sorted(lengths)}")
    return list(zip(*cols.values())) if cols else []


def _replay_ranges(rows: list[dict[str, Any]], names: list[str]) -> None:
    """Enters and exits each range at its recorded times, in the recorded
    nesting: before a range opens, the open ranges that are not its
    ancestors close."""
    objects: dict[int, Any] = {}
    stack: list[int] = []

    def close_top() -> None:
        i = stack.pop()
        _core._set_test_clock(rows[i]["end"], 1)
        objects[i].__exit__(None, None, None)

    for i, r in enumerate(rows):
        while stack and stack[-1] != r["parent"]:
            close_top()
        name = names[r["name"]] if r["name"] >= 0 else "?"
        objects[i] = _core.step(name, r["step"]) if r["step"] >= 0 else _core.range(name)
        _core._set_test_clock(r["start"], 1)
        objects[i].__enter__()
        stack.append(i)
    while stack:
        close_top()


def replay(data: dict[str, Any]):
    """A finished Profile whose summary is computed again from a recording
    (see the module doc).  No other profile may be running."""
    from ._profile import Profile

    try:
        base = data["profile"]["start_ns"]
        names = data["names"]
        ops = _columns(data["ops"], ("start", "correlation"))
        apis = _columns(data["apis"], ("start", "correlation"))
        syncs = _columns(data["syncs"], ("start",))
        range_rows = [
            {"start": base + start, "end": base + start + duration, "name": name,
             "parent": parent, "step": step, "thread": thread}
            for start, duration, name, parent, step, thread in _columns(data["ranges"], ("start",))
        ]
        for table, rows, width in (("ops", ops, 8), ("apis", apis, 4), ("syncs", syncs, 3)):
            for row in rows:
                if len(row) != width or not all(isinstance(v, int) for v in row):
                    raise ValueError(f"{table} record {row!r}: {width} integers expected")
    except RecordingError:
        raise
    except (KeyError, TypeError, ValueError) as error:
        raise RecordingError(f"the recording's records are damaged ({type(error).__name__}: "
                             f"{error})") from None
    prof = Profile(trace=False, syncs=False, metrics=False, gather=False,
                   gap_thresholds_us=tuple(data["profile"]["thresholds_us"]))
    try:
        _core._set_test_clock(base, 1)
        prof.__enter__()
        try:
            by_thread: dict[int, list[int]] = {}
            for i, r in enumerate(range_rows):
                by_thread.setdefault(r["thread"], []).append(i)
            for indices in by_thread.values():
                # parents are indices into the whole list; renumber per thread
                local = {g: k for k, g in enumerate(indices)}
                rows = [dict(range_rows[g], parent=local.get(range_rows[g]["parent"], -1))
                        for g in indices]
                worker = threading.Thread(target=_replay_ranges, args=(rows, names))
                worker.start()
                worker.join()
            # in the recorded order (runs of one kind), so ties sort as they did
            run: list[tuple] = []
            for i, (k, start, duration, device, stream, corr, name, nbytes) in enumerate(ops):
                run.append((base + start, base + start + duration, device, stream, corr,
                            names[name] if name >= 0 else None, nbytes))
                if i + 1 == len(ops) or ops[i + 1][0] != k:
                    _core._inject(OP_KINDS[k], run)
                    run = []
            if apis:
                _core._inject("api", [(base + s, base + s + d, corr, thread)
                                      for s, d, corr, thread in apis])
            if syncs:
                _core._inject("sync", [(base + s, base + s + d, stream) for s, d, stream in syncs])
        finally:
            _core._set_test_clock(base + data["profile"]["stop_ns"], 1)
            prof.__exit__(None, None, None)
    finally:
        _core._set_test_clock(0, 0)
    summary = prof.summary()
    _restore(summary, data)
    return prof


def _restore(summary: dict[str, Any], data: dict[str, Any]) -> None:
    """Puts back what the records cannot rebuild (see the module doc)."""
    from ._diagnosis import diagnose, diagnose_step

    meta, recorded = data["meta"], data["profile"]
    summary["source"] = "recording"
    summary["host_ms"] = recorded["host_ms"]
    summary["cupti_note"] = recorded["cupti_note"]
    summary["dropped_records"] = recorded["dropped_records"]
    summary["overhead"] = dict(recorded["overhead"])
    if summary["gpu"] is not None:
        summary["gpu"]["device"] = meta["device"]
        for d in summary["gpu"]["devices"]:
            d["name"] = meta["devices"].get(str(d["id"]))
    sections = data["sections"]
    as_recorded = []
    for key in _TOP_SECTIONS:
        if sections.get(key) is not None and summary.get(key) != sections[key]:
            summary[key] = sections[key]
            if not key.endswith("_error"):  # a reason follows its section, silently
                as_recorded.append(key)
    by_index = {s["index"]: s for s in sections.get("steps", [])}
    for step in summary["steps"]:
        old = by_index.get(step["index"], {})
        for key in _STEP_FIELDS:
            if old.get(key) is not None and step.get(key) != old[key]:
                step[key] = old[key]
                if f"steps.{key}" not in as_recorded:
                    as_recorded.append(f"steps.{key}")
    by_name = {r["name"]: r for r in sections.get("ranges", [])}
    for entry in summary["ranges"]:
        old = by_name.get(entry["name"], {})
        for key in _RANGE_FIELDS:
            if old.get(key) is not None and entry.get(key) != old[key]:
                entry[key] = old[key]
                if f"ranges.{key}" not in as_recorded:
                    as_recorded.append(f"ranges.{key}")
    if as_recorded:  # the verdict may depend on what came back
        for step in summary["steps"]:
            if step["gaps"] is not None:
                step["verdict"] = diagnose_step(step)
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


def describe(summary: dict[str, Any]) -> str | None:
    """One plain line saying that a summary comes from a recording, or None."""
    rec = summary.get("recording")
    if not rec:
        return None
    what = f"`{rec['command']}`" if rec.get("command") else "a loopscope profile"
    device = rec.get("device") or "an unnamed device"
    return (f"RECORDING: this report analyses the records of {what}, made on {device} "
            f"on {rec['date']} with loopscope {rec['loopscope']}; nothing ran on a GPU now.")


def bundled_demo() -> dict[str, Any] | None:
    """The bundled demo recording, or None when the package has none."""
    if not DEMO_RECORDING.is_file():
        return None
    return load(DEMO_RECORDING)
