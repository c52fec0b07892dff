"""Nsight Systems SQLite exports (`nsys export --type sqlite`), read with the
standard library's sqlite3 into the C records (ls_tbuild.c) in batches of
rows: no Python object per event is kept.

Tables read (all times in ns; each is optional: nsys creates a table only
when it has rows, and the summary names those that were missing):
  CUPTI_ACTIVITY_KIND_KERNEL / _MEMCPY / _MEMSET   GPU operations (kernels:
      gridX/Y/Z, blockX/Y/Z, registersPerThread, static + dynamic
      SharedMemory: their launch geometry)
  CUPTI_ACTIVITY_KIND_RUNTIME / _DRIVER            API calls (launches, syncs)
  CUPTI_ACTIVITY_KIND_SYNCHRONIZATION              host sync intervals
  NVTX_EVENTS (eventType 59 push/pop, 60 start/end) ranges and steps
  StringIds                                        names (required when rows are
      named through it: missing or empty, the export is refused naming it)
  GPU_METRICS + TARGET_INFO_GPU_METRICS            SM / DRAM / GR / tensor %
  TARGET_INFO_GPU                                  device names; smCount,
      maxWarpsPerSm x threadsPerWarp, maxBlocksPerSm, maxRegistersPerSm,
      maxShmemPerSm: what a kernel's fill is judged against
  META_DATA_EXPORT                                 EXPORT_SCHEMA_VERSION

SQLite keeps whatever a row holds, whatever the column's declared type: a
value of another type (text or a real where an integer id or time belongs,
a blob where a name belongs) in a column read for times, ids, names, kinds
or metric values is a TraceError naming the file, the table, the column and
the value; the rows are not checked up front (that would be a second pass
over every table) but when the C reader refuses one, or, for an id column
that only joins a name, through a marker the query puts in the row.  A
kernel's launch geometry and a device's SM figures that are not integers
are counted as unusable instead (summary["trace"]["kernel_geometry"],
"device_facts_not_understood"): the kernel or device is still read.

A gzip-compressed export (report.sqlite.gz) is decompressed into a
temporary file first (SQLite reads files only), which is removed after."""
from __future__ import annotations

import gzip
import os
import sqlite3
import tempfile
import zlib
from pathlib import Path
from typing import Any

from .. import _core
from ..files._inputs import max_trace_bytes, open_input, trace_cap_error
from ._kineto import fact_value
from ._sniff import fail

BATCH = 200_000
ACTIVITY_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                   "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_RUNTIME",
                   "CUPTI_ACTIVITY_KIND_DRIVER", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                   "NVTX_EVENTS", "GPU_METRICS")
NVTX_RANGES = (59, 60)  # ENUM_NSYS_EVENT_TYPE: NvtxPushPopRange, NvtxStartEndRange

# GPU metric names (TARGET_INFO_GPU_METRICS.metricName, before " [") -> figures.
FIGURES = {
    "SMs Active": "sm_active_pct", "SM Active": "sm_active_pct",
    "GR Active": "gr_active_pct",
    "Tensor Active": "tensor_active_pct", "Tensor Pipe Active": "tensor_active_pct",
    "Compute Warps In Flight": "warp_occupancy_pct", "Compute Warps in Flight": "warp_occupancy_pct",
}
DRAM_PARTS = ("DRAM Read Bandwidth", "DRAM Write Bandwidth")  # summed: DRAM throughput %
# a kernel's launch geometry (items 9..16 of a "kernel" row; shared memory
# per block is static + dynamic)
GEOMETRY = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread")
SHARED = ("staticSharedMemory", "dynamicSharedMemory")
# TARGET_INFO_GPU: SMs, warps per SM (x threadsPerWarp: threads per SM),
# blocks, registers and shared bytes per SM
DEVICE_FACTS = ("smCount", "maxWarpsPerSm", "maxBlocksPerSm", "maxRegistersPerSm",
                "maxShmemPerSm")
WARP = 32  # threads per warp where the table does not say
# SQLite storage classes a column read here may hold (typeof())
Classes = tuple[str, ...]
INTEGER: Classes = ("integer", "null")
TEXT: Classes = ("text", "null")
NUMBER: Classes = ("integer", "real", "null")
EXPECTED = {INTEGER: "an integer", TEXT: "text", NUMBER: "a number"}
# A row item no reader takes (a blob where an int or a str belongs): put in
# a row when a column that is not itself an item holds a wrong-typed value.
MARKER = "X''"


def cut(expr: str) -> str:
    """A name column's value, cut at _core.TRACE_MAX_NAME characters with a
    note of its length (the Kineto reader cuts at as many bytes); a value
    of another type passes as it is, to be refused by name (see pump)."""
    n = _core.TRACE_MAX_NAME
    return (f"CASE WHEN typeof({expr}) = 'text' AND length({expr}) > {n} THEN "
            f"substr({expr}, 1, {n}) || ' [name cut: ' || length({expr}) || ' characters]' "
            f"ELSE {expr} END")


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f'PRAGMA table_info("{table}")')}


class _Reader:
    def __init__(self, db: sqlite3.Connection, reader, path: Path) -> None:
        self.db, self.reader, self.path = db, reader, path
        self.tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        self.strings = "StringIds" in self.tables
        # ids held by more than one StringIds row (never in an export nsys
        # makes): each is joined once, to its least value, so no event is
        # read twice through the join
        self.duplicate_ids = db.execute(
            "SELECT COUNT(*) FROM (SELECT id FROM StringIds GROUP BY id HAVING COUNT(*) > 1)"
        ).fetchone()[0] if self.strings else 0
        self.string_table = ("(SELECT id, MIN(value) AS value FROM StringIds GROUP BY id)"
                             if self.duplicate_ids else "StringIds")

    def check_strings(self) -> None:
        """TraceError naming StringIds when it is missing or empty while rows
        are named through it: API calls without names are neither launches
        nor syncs ('0 host-device syncs' with the calls there), ranges
        without names make no steps, and a gate would pass on that."""
        if self.strings and self.db.execute("SELECT 1 FROM StringIds LIMIT 1").fetchone():
            return
        named = []
        for table, column in (("CUPTI_ACTIVITY_KIND_RUNTIME", "nameId"),
                              ("CUPTI_ACTIVITY_KIND_DRIVER", "nameId"),
                              ("CUPTI_ACTIVITY_KIND_KERNEL", "shortName"),
                              ("CUPTI_ACTIVITY_KIND_KERNEL", "demangledName"),
                              ("NVTX_EVENTS", "textId")):
            if table not in self.tables or table in named \
                    or column not in _columns(self.db, table):
                continue
            plain = " AND text IS NULL" if table == "NVTX_EVENTS" and "text" in _columns(
                self.db, table) else ""
            if self.db.execute(f"SELECT 1 FROM {table} WHERE {column} IS NOT NULL{plain} "
                               "LIMIT 1").fetchone():
                named.append(table)
        if named:
            state = "has an empty StringIds table" if self.strings else "has no StringIds table"
            raise fail(self.path, f"{state}, which names the rows of {', '.join(named)}: "
                                  "without it API calls are neither launches nor syncs, kernels "
                                  "and ranges have no names and steps cannot be found; export "
                                  "the report again (`nsys export --type sqlite`)")

    def need(self, table: str, *columns: str) -> set[str]:
        have = _columns(self.db, table)
        missing = [c for c in columns if c not in have]
        if missing:
            raise fail(self.path, f"table {table} has no column {', '.join(missing)}: an "
                                  "Nsight Systems export schema loopscope does not know")
        return have

    def name(self, expr: str) -> tuple[str, str]:
        """(select expression, join clause) for a StringIds id column; an id
        that is not an integer gives the marker (see pump)."""
        if not self.strings:
            return "NULL", ""
        return (f"CASE WHEN typeof({expr}) IN {INTEGER} THEN {cut('s.value')} ELSE {MARKER} END",
                f" LEFT JOIN {self.string_table} s ON s.id = {expr}")

    def pump(self, kind: str, sql: str, checks: list[tuple[str, str, Classes]]) -> int:
        """Rows of `sql` into the C reader.  `checks`: (table, column,
        storage classes) of every column the rows are made of; when the C
        reader refuses a row for an item's type, the first value of another
        class among them is the TraceError."""
        cur = self.db.execute(sql)
        n = 0
        while True:
            rows = cur.fetchmany(BATCH)
            if not rows:
                return n
            try:
                n += _core._trace_add(self.reader, kind, rows)
            except TypeError:
                self.wrong_type(checks)
                raise  # no value of another class: not the file's fault

    def wrong_type(self, checks: list[tuple[str, str, Classes]]) -> None:
        """Raises TraceError for the first value in `checks`' columns whose
        storage class is not one of the column's; returns if none is."""
        for table, column, classes in checks:
            row = self.db.execute(
                f'SELECT typeof("{column}"), CAST(quote("{column}") AS BLOB) FROM "{table}" '
                f'WHERE typeof("{column}") NOT IN {classes} LIMIT 1').fetchone()
            if row is not None:  # shown on one line, whatever bytes it holds
                shown = row[1][:40].decode("utf-8", "replace").encode("unicode_escape").decode()
                shown += "..." if len(row[1]) > 40 else ""
                article = "an" if row[0][0] in "aeiou" else "a"
                raise fail(self.path, f"table {table} column {column} holds {article} {row[0]} value "
                                      f"({shown}) where {EXPECTED[classes]} is expected: not an "
                                      "Nsight Systems export loopscope can read")

    def string_checks(self) -> list[tuple[str, str, Classes]]:
        return [("StringIds", "value", TEXT)] if self.strings else []

    def op_checks(self, table: str, more: list[str],
                  strings: bool = True) -> list[tuple[str, str, Classes]]:
        """The checks of a GPU operation table's rows: its times and ids,
        `more` columns (a name id when strings), StringIds."""
        cols = ["start", "end", "deviceId", "streamId", "correlationId"] + more
        return [(table, c, INTEGER) for c in cols] + (self.string_checks() if strings else [])

    def ops(self) -> None:
        t = "CUPTI_ACTIVITY_KIND_KERNEL"
        if t in self.tables:
            have = self.need(t, "start", "end", "deviceId", "streamId", "correlationId")
            col = next((c for c in ("demangledName", "shortName", "mangledName") if c in have), None)
            sel, join = self.name(f"k.{col}") if col else ("NULL", "")
            geometry = [_int_or_bad(f"k.{c}") if c in have else "NULL" for c in GEOMETRY]
            shared = [_int_or_bad(f"k.{c}") for c in SHARED if c in have]
            # one part of the shared memory missing: the sum is unknown (NULL);
            # a part unusable (-1): the sum is unusable
            geometry.append(f"CASE WHEN {shared[0]} < 0 OR {shared[1]} < 0 THEN -1 ELSE "
                            f"{shared[0]} + {shared[1]} END" if len(shared) == 2 else "NULL")
            self.pump("kernel", f"SELECT k.start, k.end, k.deviceId, k.streamId, k.correlationId, "
                                f"{sel}, NULL, NULL, NULL, {', '.join(geometry)} FROM {t} k{join}",
                      self.op_checks(t, [col] if col else []))
        t = "CUPTI_ACTIVITY_KIND_MEMCPY"
        if t in self.tables:
            have = self.need(t, "start", "end", "deviceId", "streamId", "correlationId")
            nbytes = "bytes" if "bytes" in have else "NULL"
            kind = "copyKind" if "copyKind" in have else "NULL"
            sides = ["srcKind", "dstKind"] if {"srcKind", "dstKind"} <= have else []
            host = (f"CASE WHEN typeof(srcKind) NOT IN {INTEGER} OR typeof(dstKind) NOT IN "
                    f"{INTEGER} THEN {MARKER} WHEN srcKind IN (1, 2) THEN srcKind "
                    "WHEN dstKind IN (1, 2) THEN dstKind ELSE 0 END") if sides else "NULL"
            self.pump("memcpy", f"SELECT start, end, deviceId, streamId, correlationId, NULL, "
                                f"{nbytes}, {kind}, {host} FROM {t}",
                      self.op_checks(t, [c for c in ("bytes", "copyKind") if c in have] + sides,
                                     strings=False))
        t = "CUPTI_ACTIVITY_KIND_MEMSET"
        if t in self.tables:
            have = self.need(t, "start", "end", "deviceId", "streamId", "correlationId")
            nbytes = "bytes" if "bytes" in have else "NULL"
            self.pump("memset", f"SELECT start, end, deviceId, streamId, correlationId, NULL, "
                                f"{nbytes}, NULL, NULL FROM {t}",
                      self.op_checks(t, ["bytes"] if "bytes" in have else [], strings=False))

    def apis(self) -> None:
        for t, kind in (("CUPTI_ACTIVITY_KIND_RUNTIME", "runtime"),
                        ("CUPTI_ACTIVITY_KIND_DRIVER", "driver")):
            if t in self.tables:
                self.need(t, "start", "end", "globalTid", "correlationId", "nameId")
                sel, join = self.name("a.nameId")
                self.pump(kind, f"SELECT a.start, a.end, a.globalTid, a.correlationId, {sel} "
                                f"FROM {t} a{join}",
                          [(t, c, INTEGER) for c in ("start", "end", "globalTid", "correlationId",
                                                     "nameId")] + self.string_checks())
        t = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
        if t in self.tables:
            have = self.need(t, "start", "end")
            cols = [c if c in have else "NULL" for c in ("streamId", "correlationId", "syncType")]
            self.pump("sync", f"SELECT start, end, {', '.join(cols)} FROM {t}",
                      [(t, c, INTEGER) for c in ["start", "end"] + cols if c != "NULL"])

    def ranges(self) -> None:
        t = "NVTX_EVENTS"
        if t not in self.tables:
            return
        have = self.need(t, "start", "end", "eventType", "globalTid")
        text = "n.text" if "text" in have else "NULL"
        if "textId" in have and self.strings:
            sel = cut(f"COALESCE({text}, s.value)")
            join = f" LEFT JOIN {self.string_table} s ON s.id = n.textId"
        else:
            sel, join = cut(text), ""
        types = ", ".join(map(str, NVTX_RANGES))
        # an eventType of another class is no event type: the row comes
        # with the marker for its start
        start = f"CASE WHEN typeof(n.eventType) IN {INTEGER} THEN n.start ELSE {MARKER} END"
        checks = [(t, c, INTEGER) for c in ("eventType", "start", "end", "globalTid")]
        checks += [(t, "text", TEXT)] if "text" in have else []
        if "textId" in have and self.strings:
            sel = (f"CASE WHEN typeof(n.textId) IN {INTEGER} THEN {sel} ELSE {MARKER} END")
            checks += [(t, "textId", INTEGER)] + self.string_checks()
        self.pump("range", f"SELECT {start}, n.end, n.globalTid, {sel} FROM {t} n{join} "
                           f"WHERE n.eventType IN ({types}) OR typeof(n.eventType) NOT IN {INTEGER}",
                  checks)

    def metrics(self, device_of) -> None:
        if not {"GPU_METRICS", "TARGET_INFO_GPU_METRICS"} <= self.tables:
            return
        self.need("GPU_METRICS", "timestamp", "typeId", "metricId", "value")
        info = self.need("TARGET_INFO_GPU_METRICS", "metricId", "metricName")
        # a typeId of another class joins (its row is then refused by name)
        on = "t.metricId = m.metricId" + (f" AND (t.typeId = m.typeId OR typeof(m.typeId) NOT IN "
                                          f"{INTEGER})" if "typeId" in info else "")
        names = {row[0]: row[1] for row in self.db.execute(
            "SELECT DISTINCT metricId, metricName FROM TARGET_INFO_GPU_METRICS")}
        wanted = {}
        for metric_id, name in names.items():
            base = str(name).split(" [")[0].strip()
            if base in FIGURES:
                wanted[metric_id] = FIGURES[base]
        for metric_id, figure in wanted.items():
            rows = self.db.execute(
                "SELECT timestamp, typeId, value FROM GPU_METRICS WHERE metricId = ?", (metric_id,))
            self._points(rows, figure, device_of)
        dram = [i for i, n in names.items() if str(n).split(" [")[0].strip() in DRAM_PARTS]
        if dram:
            marks = ", ".join("?" * len(dram))
            # a value of another class makes the sum's row a marker: SUM
            # would take text as 0
            rows = self.db.execute(
                f"SELECT m.timestamp, m.typeId, CASE WHEN MAX(typeof(m.value) NOT IN {NUMBER}) "
                f"THEN {MARKER} ELSE SUM(m.value) END FROM GPU_METRICS m JOIN "
                f"TARGET_INFO_GPU_METRICS t ON {on} WHERE m.metricId IN ({marks}) "
                f"GROUP BY m.timestamp, m.typeId", dram)
            self._points(rows, "dram_throughput_pct", device_of)

    def _points(self, cursor, figure: str, device_of) -> None:
        checks = [("GPU_METRICS", "timestamp", INTEGER), ("GPU_METRICS", "typeId", INTEGER),
                  ("GPU_METRICS", "value", NUMBER)]
        while True:
            rows = cursor.fetchmany(BATCH)
            if not rows:
                return
            for ts, type_id, value in rows:
                if not (_int_or_none(ts) and _int_or_none(type_id) and (
                        value is None or _int_or_none(value) or isinstance(value, float))):
                    self.wrong_type(checks)
                    raise fail(self.path, f"GPU_METRICS holds a row loopscope cannot read "
                                          f"({ts!r:.40}, {type_id!r:.40}, {value!r:.40})")
            _core._trace_add(self.reader, "point", [
                (ts, device_of(type_id), f"{type_id}|{figure}", figure, float(value))
                for ts, type_id, value in rows if ts is not None and value is not None])

    def _gpu_key(self) -> tuple[str | None, set[str]]:
        """TARGET_INFO_GPU's CUDA device column (None: no such table or
        column) and its columns."""
        if "TARGET_INFO_GPU" not in self.tables:
            return None, set()
        have = _columns(self.db, "TARGET_INFO_GPU")
        return next((c for c in ("cuDevice", "cudaId", "id") if c in have), None), have

    def device_names(self) -> dict[int, str]:
        key, have = self._gpu_key()
        if key is None or "name" not in have:
            return {}
        return {int(k): str(v) for k, v in self.db.execute(
            f"SELECT {key}, name FROM TARGET_INFO_GPU") if isinstance(k, int) and v is not None}

    def devices(self) -> None:
        """The devices' SM figures (what a kernel's fill is judged against)
        as "device" rows; threads per SM are warps per SM x the warp size."""
        key, have = self._gpu_key()
        if key is None:
            return
        cols = [c if c in have else "NULL" for c in DEVICE_FACTS]
        warp = "threadsPerWarp" if "threadsPerWarp" in have else "NULL"
        rows = []
        for k, sms, warps, warp_size, blocks, regs, shared in self.db.execute(
                f"SELECT {key}, {cols[0]}, {cols[1]}, {warp}, {', '.join(cols[2:])} "
                f"FROM TARGET_INFO_GPU"):
            if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k <= 0xFFFF:
                continue
            rows.append((k, fact_value(sms), _threads_per_sm(warps, warp_size),
                         fact_value(blocks), fact_value(regs), fact_value(shared)))
        _core._trace_add(self.reader, "device", rows)

    def schema_version(self) -> str | None:
        if "META_DATA_EXPORT" not in self.tables:
            return None
        row = self.db.execute(
            "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION'").fetchone()
        return None if row is None else str(row[0])


def read_gzip(reader, path: Path) -> dict[str, Any]:
    """read() of a gzip-compressed export, through a temporary copy; errors
    name `path`, never the copy."""
    handle, tmp = tempfile.mkstemp(prefix="loopscope-", suffix=".sqlite")
    try:
        cap, copied = max_trace_bytes(), 0  # a bomb stops at the cap, not a full disk
        with os.fdopen(handle, "wb") as out, open_input(path) as raw, \
                gzip.GzipFile(fileobj=raw, mode="rb") as src:
            while chunk := src.read(1 << 20):
                copied += len(chunk)
                if copied > cap:
                    raise trace_cap_error(path, cap)
                out.write(chunk)
        return read(reader, Path(tmp), shown_as=path)
    except (OSError, EOFError, zlib.error) as error:
        raise fail(path, f"is a gzip-compressed SQLite file that cannot be decompressed into "
                         f"{tempfile.gettempdir()} ({error})") from None
    finally:
        os.unlink(tmp)


def read(reader, path: Path, shown_as: Path | None = None) -> dict[str, Any]:
    """Reads an export into the C reader; returns what the summary says
    about it.  TraceError for a database that is not an Nsight Systems
    export, or that cannot be read; errors name `shown_as` when given (the
    file the user named, of which `path` is a decompressed copy)."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as error:
        raise fail(shown_as or path, f"cannot be opened as SQLite ({error})") from None
    path = shown_as or path
    try:
        r = _Reader(db, reader, path)
        known = set(ACTIVITY_TABLES) | {"StringIds", "META_DATA_EXPORT", "TARGET_INFO_GPU_METRICS"}
        if not r.tables & known:
            shown = ", ".join(sorted(r.tables)[:6]) or "no tables"
            raise fail(path, f"is an SQLite database but not an Nsight Systems export (it has "
                             f"{shown}; `nsys export --type sqlite` makes one)")
        version = r.schema_version()
        r.check_strings()
        r.ops()
        r.apis()
        r.ranges()
        r.metrics(_device_of)
        r.devices()
        return {
            "schema_version": version,
            "tables_read": sorted(r.tables & set(ACTIVITY_TABLES)),
            "missing_tables": [t for t in ACTIVITY_TABLES if t not in r.tables],
            "device_names": r.device_names(),
            "duplicate_string_ids": r.duplicate_ids,
        }
    except sqlite3.DatabaseError as error:
        raise fail(path, f"cannot be read as SQLite ({error})") from None
    except MemoryError:  # the records of a very large export: say which file
        raise fail(path, "ran out of memory while reading it") from None
    finally:
        db.close()


def _int_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def _int_or_bad(column: str) -> str:
    """A column as a row item the C reader takes: its integer, NULL, or -1
    for any other value (SQLite keeps whatever was stored: text, reals)."""
    return f"CASE WHEN typeof({column}) IN ('integer', 'null') THEN {column} ELSE -1 END"


def _threads_per_sm(warps: Any, warp_size: Any) -> int | None:
    """maxWarpsPerSm x threadsPerWarp as a "device" row item: None where
    unknown, -1 where unusable (see fact_value)."""
    w = fact_value(warps)
    size = fact_value(WARP if warp_size is None else warp_size)
    if w is None or w == 0:
        return None
    return w * size if w > 0 and size is not None and size > 0 else -1


def _device_of(type_id: int) -> int:
    """The GPU a GPU_METRICS typeId belongs to: its low byte, as nsys numbers
    the GPUs it samples (not documented by NVIDIA: a reading of real exports
    and of other tools that parse them)."""
    return int(type_id) & 0xFF if isinstance(type_id, int) else 0
