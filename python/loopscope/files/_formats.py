"""The trace formats loopscope reads, each declared once (STYLE rule 15):
its kind, how its first bytes are told, its reader, what a file of it can
measure and the words the report and the CLI use for it.

The readers register theirs (readers/_builtin.py); the views, the checks and
the CLI read the declarations here, by the kind a summary names
(summary["source"], summary["trace"]["format"]), so none of them compares a
kind string of its own.  A new format is one register() call.

Sniffing tries the formats in the order they were registered; a format's
sniff claims only its own files (kineto claims every JSON file that is not a
loopscope recording, so a new JSON-based format needs a sniff of its own
before kineto's: register it and move it ahead with `first=True`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class TraceRead:
    """What a records reader hands back once its records are in the C trace
    reader: `meta` (the format's own facts, for its trace_fields), the file's
    time base, device names by GPU id and, for a Kineto trace, how its
    devices were matched and loopscope's own export data (readers/_analyze)."""
    meta: dict[str, Any]
    names: dict[int, str]
    base_ns: int = 0
    device_match: dict[str, Any] | None = None
    own: dict[str, Any] | None = None
    merge_idle_upto_ns: int = 0  # idle intervals this short are below the file's resolution


def _no_fields(meta: dict[str, Any], stats: dict[str, Any]) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class TraceFormat:
    kind: str   # summary["source"] and summary["trace"]["format"]
    name: str   # the report's words for a file of it: "Trace: <name> <path>"
    noun: str   # the CLI's command list: "report on <noun>, <noun> or <noun>"
    help: str   # `analyze --help`'s words for it (the file names it comes in)
    # The file's first bytes (decompressed when gzip) are of this format.
    sniff: Callable[[bytes], bool]
    # Records reader: read(reader, path, gz, progress) -> TraceRead, its
    # records fed into the C trace reader (_core._trace_reader()) ...
    read: Callable[..., TraceRead] | None = None
    # ... or the whole finished profile: load(path, thresholds, steps
    # pattern, device) -> Profile (a saved loopscope recording).
    load: Callable[..., Any] | None = None
    # What a file of it can measure: why a figure is missing from one, and
    # what to record it with (summary gpu_error, syncs_error, metrics_error,
    # syncs sites_unknown).
    no_gpu: str = ""
    no_apis: str = ""
    no_counters: str = ""
    no_stacks: str = ""
    counters: str | None = None      # summary["metrics"]["source"] when it has GPU counters
    device_facts: str | None = None  # the part of a file that gives a GPU's SM figures
    site_lines: str | None = None    # what a sync site's line is, when it has stacks
    host_clock: str | None = None    # the host clock its times are on (ranks aligned by it)
    suffixes: tuple[str, ...] = ()   # the file names a folder of per-rank traces is read for
    # summary["trace"]'s entries of this format, from its meta and the reader's stats
    trace_fields: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] = field(
        default=_no_fields)


_FORMATS: dict[str, TraceFormat] = {}  # by kind, in sniffing order


def register(fmt: TraceFormat, *, first: bool = False) -> TraceFormat:
    """Adds a format (`first`: sniffed before those registered already);
    ValueError for a kind registered already or one with neither reader."""
    global _FORMATS
    if fmt.kind in _FORMATS:
        raise ValueError(f"a trace format {fmt.kind!r} is registered already")
    if (fmt.read is None) == (fmt.load is None):
        raise ValueError(f"trace format {fmt.kind!r} needs one of read= and load=")
    _FORMATS = {fmt.kind: fmt, **_FORMATS} if first else {**_FORMATS, fmt.kind: fmt}
    return fmt


def unregister(kind: str) -> None:
    del _FORMATS[kind]


def registered() -> list[TraceFormat]:
    """Every format, in sniffing order."""
    return list(_FORMATS.values())


def suffixes() -> tuple[str, ...]:
    """Every format's file name endings, each once, in registration order."""
    return tuple(dict.fromkeys(s for fmt in _FORMATS.values() for s in fmt.suffixes))


def of(kind: str) -> TraceFormat:
    """The format of a kind sniff() gave (KeyError for any other)."""
    return _FORMATS[kind]


def get(kind: Any) -> TraceFormat | None:
    """The format of a summary's source or trace format; None for any other
    (a live profile's "cupti", "injected", or a kind this version lacks)."""
    return _FORMATS.get(kind) if isinstance(kind, str) else None
