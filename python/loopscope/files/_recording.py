"""Recordings: the raw records of one finished profile in a compact JSON(.gz)
file (this module), and their replay through the test hooks so the normal C
analysis turns them into a full summary again (_replay).  The bundled demo
recording (data/demo_recording.json.gz, made on a GPU by
benchmarks/tour/record_demo.py) is how `python -m loopscope demo` shows a real
loop on a machine without a GPU.

What a recording holds, and how it comes back:
- GPU ops (kernels, memcpys, memsets, whole CUDA-graph replays: ops "kind"
  3, in files of format version 3, which a loopscope older than graph-level
  mode refuses by their version), API
  records (launch calls, with
  their thread and domain) and sync records: replayed with `_core._inject`,
  so gaps, causes, busy time, per-step and per-range figures are computed
  again, exactly.
- Steps and ranges, with their nesting, names, step indices and threads:
  replayed with `_core._inject("range", ...)`.
- Sections whose raw records cannot be injected (sync sites with their
  Python lines, SM/DRAM samples) are stored as the summary had them and put
  back as recorded; `summary["recording"]["as_recorded"]` names them.
- The host time, the profiler's own costs and the device names are the
  recorded ones.

Columns are stored delta-encoded (times as differences to the previous
record), which gzip shrinks to a few bytes a record.

Versions: 2 stores the API records' domain (runtime or driver) and names the
sync records "sync_records"; version 1 files (the bundled demo recording)
had neither: their API records are runtime calls, their "syncs" are sync
records.  Optional columns, absent from older files of either version
(their records then replay as before, those facts unknown): ops "shape"
(an index into "shapes", each [grid x, y, z, block x, y, z, registers,
shared bytes] of a kernel; -1 unknown), ops "copy_kind" and "host_memory"
(memcpys), apis "cbid" (the call's CUPTI callback id: graph launches), and
meta "device_facts" ({device: [SMs, threads/SM, blocks/SM, registers/SM,
shared bytes/SM]}), and "samples" (the PM samples: start, duration, the
sampled device and a column per figure; replayed with
`_core._inject("sample", ...)`, so the SM/DRAM figures are computed again
and the trace export draws the counter tracks)."""
from __future__ import annotations

import datetime
import gzip
import json
import os
import re
import zlib
from pathlib import Path
from typing import Any

from ._inputs import TraceError, check_output, open_input, parse_json, read_text
from ._schema import COUNT, NUM, MapOf, OneOf, Optional, SchemaError, check
from .._version import __version__

FORMAT = "loopscope-recording"
VERSION = 2
GRAPH_VERSION = 3  # a recording holding whole graph replays (ops kind 3)
READS = (1, 2, 3)
OP_KINDS = ("kernel", "memcpy", "memset", "graph")  # ls_op_kind; graph: one whole replay
CHECKSUM_TAIL = re.compile(rb',"checksum":"crc32:([0-9a-f]{8})"\}\s*$')
DEMO_RECORDING = Path(__file__).parents[1] / "data" / "demo_recording.json.gz"  # loopscope/data

# The launch shape of a kernel, as op columns of the model, in the stored order.
SHAPE_COLUMNS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers",
                 "shared_bytes")
FACT_KEYS = ("sm_count", "max_threads_per_sm", "max_blocks_per_sm", "registers_per_sm",
             "shared_bytes_per_sm")
# Columns a file may lack (older recordings): their value for every record.
OPTIONAL_OP_COLUMNS = {"shape": -1, "copy_kind": 0, "host_memory": 0}
OPTIONAL_API_COLUMNS = {"cbid": 0}

# Summary sections that no raw record in the file can rebuild.
TOP_SECTIONS = ("syncs", "syncs_error", "sm", "dram", "metrics_error")
STEP_FIELDS = ("syncs", "sm_active_pct", "dram_pct")
RANGE_FIELDS = ("sm_active_pct", "dram_pct")


class RecordingError(TraceError):
    """A recording file that cannot be read or replayed; the message says why."""


# What goes into a summary as recorded must have the summary's own shape.
_SITE = {"file": Optional(str), "line": Optional(COUNT), "function": Optional(str),
         "code": Optional(str), "call": Optional(str), "kind": str, "count": COUNT,
         "blocked_ms": NUM, "steps": [COUNT], "apis": Optional(MapOf(COUNT))}
_SYNCS = {"count": COUNT, "blocked_ms": NUM, "by_kind": MapOf(COUNT), "sites": [_SITE],
          "in_steps": COUNT, "outside_steps": COUNT, "unjudged_async_copies": Optional(COUNT)}
_SM = {**dict.fromkeys(("active_pct", "active_busy_pct", "issue_ipc", "issue_busy_ipc",
                        "warp_occupancy_pct", "gr_active_pct", "tensor_active_pct",
                        "tensor_active_busy_pct", "coverage_pct", "interval_us"), Optional(NUM)),
       "samples": COUNT, "busy_from": Optional(str)}
_DRAM = dict.fromkeys(("throughput_pct", "throughput_busy_pct", "read_gbps", "write_gbps",
                       "read_busy_gbps", "write_busy_gbps"), Optional(NUM))
# summary["overhead"]: figures, and the profile's own phases and notes
# (start/stop/finish phase times, warm_up, the in-loop estimate's sentence).
_OVERHEAD = MapOf(Optional(OneOf((NUM, bool, str, MapOf(NUM)))))
# ... of which only these are maps (the report formats the others as figures).
_OVERHEAD_MAPS = ("start_phases_ms", "stop_phases_ms", "finish_phases_ms", "enter_ms")
SHAPE = {
    "meta": {"device": Optional(OneOf((str, [Optional(str)]))), "devices": MapOf(Optional(str)),
             "date": Optional(str), "loopscope": Optional(str), "command": Optional(str),
             "note": Optional(str), "source": Optional(str)},
    "profile": {"start_ns": COUNT, "stop_ns": COUNT, "thresholds_us": [NUM], "host_ms": NUM,
                "cupti_note": Optional(str), "dropped_records": Optional(COUNT),
                "overhead": _OVERHEAD,
                # the summary's self-checks when recorded (older recordings: none)
                "checks": Optional([{"name": str, "ok": bool, "detail": str}])},
    "names": [str],
    "sections": {"syncs": Optional(_SYNCS), "syncs_error": Optional(str), "sm": Optional(_SM),
                 "dram": Optional(_DRAM), "metrics_error": Optional(str),
                 "steps": [{"index": COUNT, "syncs": Optional(COUNT),
                            "sm_active_pct": Optional(NUM), "dram_pct": Optional(NUM)}],
                 "ranges": [{"name": str, "sm_active_pct": Optional(NUM),
                             "dram_pct": Optional(NUM)}]},
}


def check_shape(data: dict[str, Any]) -> None:
    """Raises _schema.SchemaError naming the first part of a loaded
    recording that does not have the shape the summary needs."""
    check(data, SHAPE, "the recording")
    for key, value in data["profile"]["overhead"].items():
        if isinstance(value, dict) and key not in _OVERHEAD_MAPS:
            raise SchemaError(f"the recording.profile.overhead.{key} is an object: "
                              "a number, true/false, a string or null expected")


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


def _samples(samples: list[tuple], base: int, metrics: dict[str, Any] | None
             ) -> dict[str, Any]:
    """The PM samples as columns: start (delta), duration, and a column per
    figure (null where a sample lacks it); the sampled device."""
    names = sorted({name for *_, values in samples for name in values})
    return {
        "device": (metrics or {}).get("device") or 0,
        "start": _deltas([a - base for a, _, _ in samples]),
        "duration": [b - a for a, b, _ in samples],
        "figures": {name: [values.get(name) for *_, values in samples] for name in names},
    }


def _recorded_overhead(overhead: dict[str, Any], model: Any) -> dict[str, Any]:
    """The overhead section as a recording keeps it.  records_after_stop
    less the records the model ignored: those stay in the file's ops, and a
    replay's model ignores and counts them again (else each save and load
    would add them once more)."""
    ignored = model.ignored_records if model is not None else 0
    if not ignored or not isinstance(overhead.get("records_after_stop"), int):
        return overhead
    return dict(overhead, records_after_stop=max(0, overhead["records_after_stop"] - ignored))


def record(prof, *, command: str | None = None, note: str | None = None) -> dict[str, Any]:
    """The recording of a FinishedProfile, as a JSON-ready dict."""
    capture = prof.capture
    if capture is None:
        raise RecordingError("this profile has no records to save: " + str(prof.stop_error))
    summary = prof.summary()
    info = capture.info()
    base = info["start_ns"]
    names: dict[str, int] = {}

    def name_id(name: str | None) -> int:
        if name is None:
            return -1
        return names.setdefault(name, len(names))

    ops = capture.ops()
    apis = capture.apis()
    model = prof.model
    shape_columns = [list(model.op_column(c)) for c in SHAPE_COLUMNS]
    shapes: dict[tuple, int] = {}
    shape_ids = []
    for i in range(len(ops)):
        shape = tuple(col[i] for col in shape_columns)
        known = all(shape[:6])  # grid and block sides
        shape_ids.append(shapes.setdefault(shape, len(shapes)) if known else -1)
    sync_records = capture.sync_records()
    ranges = model.ranges()
    gpu = summary["gpu"] or {}
    facts = {str(d["device"]): [d.get(k) or 0 for k in FACT_KEYS] for d in model.devices()
             if d.get("sm_count")}
    sections: dict[str, Any] = {k: summary.get(k) for k in TOP_SECTIONS}
    sections["steps"] = [{k: s.get(k) for k in ("index",) + STEP_FIELDS} for s in summary["steps"]]
    sections["ranges"] = [{k: r.get(k) for k in ("name",) + RANGE_FIELDS} for r in summary["ranges"]]
    return {
        "format": FORMAT,
        # 3 only where it holds graph replays: a loopscope older than
        # graph-level mode then says "format version 3", not "damaged"
        "version": GRAPH_VERSION if any(o[0] == "graph" for o in ops) else VERSION,
        "meta": {
            "device": gpu.get("device"),
            "devices": {str(d["id"]): d["name"] for d in gpu.get("devices", [])},
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "loopscope": __version__,
            "command": command,
            "note": note,
            "source": summary["source"],
            "device_facts": facts,
        },
        "profile": {
            "start_ns": base,
            "stop_ns": info["stop_ns"] - base,
            "thresholds_us": list(prof.thresholds),
            "host_ms": summary["host_ms"],
            "cupti_note": summary.get("cupti_note"),
            "dropped_records": summary["dropped_records"],
            "overhead": _recorded_overhead(summary["overhead"], model),
            "checks": summary.get("checks"),
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
            "shape": shape_ids,
            "copy_kind": list(model.op_column("copy_kind")),
            "host_memory": list(model.op_column("host_memory")),
        },
        "apis": {
            "start": _deltas([a[0] - base for a in apis]),
            "duration": [a[1] - a[0] for a in apis],
            "correlation": _deltas([a[2] for a in apis]),
            "thread": [a[3] for a in apis],
            "domain": [a[5] for a in apis],
            "cbid": [a[4] for a in apis],
        },
        "samples": _samples(capture.samples(), base, summary.get("metrics")),
        "sync_records": {
            "start": _deltas([s[0] - base for s in sync_records]),
            "duration": [s[1] - s[0] for s in sync_records],
            "stream": [s[2] for s in sync_records],
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
        "shapes": [list(shape) for shape in shapes],
        "sections": sections,
    }


def save(prof, path: str | os.PathLike, *, command: str | None = None,
         note: str | None = None) -> Path:
    """Writes the recording of a FinishedProfile; gzip when the name ends
    in .gz.  The text ends with its checksum (see with_checksum).  Returns
    the path."""
    path = check_output(path)  # a FIFO would block the open, a folder fail it
    text = with_checksum(json.dumps(record(prof, command=command, note=note),
                                    separators=(",", ":")).encode())
    if path.suffix == ".gz":
        with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", compresslevel=9,
                                                 mtime=0) as gz:
            gz.write(text)
    else:
        path.write_bytes(text)
    return path


def with_checksum(text: bytes) -> bytes:
    """A recording's compact JSON text with its CRC-32 as the last member:
    `...,"checksum":"crc32:<8 hex digits>"}`, the CRC of every byte before
    that member.  Any one flipped bit changes the CRC, so a damaged plain
    file is refused instead of replayed as another loop."""
    body = text.rstrip()[:-1]  # the object without its closing brace
    return body + b',"checksum":"crc32:%08x"}' % zlib.crc32(body)


def _check_checksum(path: Path, raw: bytes, data: dict[str, Any], gz: bool) -> None:
    """RecordingError when the checksum does not match the text, or is
    missing from a plain-JSON file (a gzip file has gzip's own CRC, and
    recordings older than the checksum were written gzip)."""
    tail = raw[-64:]
    found = CHECKSUM_TAIL.search(tail)
    if found is None:
        if gz:  # gzip's CRC covers the text: a gzip file edited by hand is read as it is
            return
        if "checksum" in data:
            raise RecordingError(f"{path}: the recording is damaged: its checksum member is not "
                                 "the last one, where loopscope writes it")
        raise RecordingError(f"{path}: the recording has no checksum, so damage cannot be "
                             "told: refused (loopscope writes one in every recording; save it "
                             "again, or keep it gzip-compressed: gzip carries its own CRC)")
    body = raw[:len(raw) - len(tail) + found.start()]
    if zlib.crc32(body) != int(found.group(1), 16):
        raise RecordingError(f"{path}: the recording is damaged: its checksum (crc32 "
                             f"{found.group(1).decode()}) does not match its content "
                             f"(crc32 {zlib.crc32(body):08x})")


def load(path: str | os.PathLike) -> dict[str, Any]:
    """Reads and checks a recording file (plain or gzip JSON) with the
    bounds of _inputs (a cap on the inflated text, nesting, memory)."""
    path = Path(path)
    try:
        with open_input(path) as f:
            gz = f.read(2) == b"\x1f\x8b"
        raw = read_text(path)
        data = parse_json(path, raw)
    except TraceError as error:
        raise RecordingError(f"cannot read the recording {error}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RecordingError(f"{path} is not a loopscope recording (no format {FORMAT!r})")
    if data.get("version") not in READS:
        raise RecordingError(
            f"{path} is a recording of format version {data.get('version')!r}; "
            f"this loopscope reads versions {', '.join(map(str, READS))}"
        )
    sync_records = "syncs" if data["version"] == 1 else "sync_records"
    missing = [k for k in ("meta", "profile", "ops", "apis", sync_records, "ranges", "names",
                           "sections") if k not in data]
    if missing:
        raise RecordingError(f"{path}: the recording lacks {', '.join(missing)}")
    _check_checksum(path, raw, data, gz)
    data.pop("checksum", None)
    data["sync_records"] = data.pop(sync_records)
    return data


def columns(table: dict[str, list], delta: tuple[str, ...], order: tuple[str, ...] | None = None,
            optional: dict[str, Any] | None = None) -> list[tuple]:
    """The rows of a stored table, its `delta` columns decoded; with `order`,
    those columns in that order, an `optional` one the file lacks filled
    with its default."""
    if order is not None:
        length = max((len(v) for v in table.values()), default=0)
        table = {k: table[k] if k in table or k not in (optional or {})
                 else [optional[k]] * length  # type: ignore[index]
                 for k in order}
    cols = {k: (_undeltas(v) if k in delta else v) for k, v in table.items()}
    lengths = {len(v) for v in cols.values()}
    if len(lengths) > 1:
        raise RecordingError(f"the recording's columns differ in length: {sorted(lengths)}")
    return list(zip(*cols.values())) if cols else []


def bundled_demo() -> dict[str, Any] | None:
    """The bundled demo recording, or None when the package has none."""
    if not DEMO_RECORDING.is_file():
        return None
    return load(DEMO_RECORDING)
