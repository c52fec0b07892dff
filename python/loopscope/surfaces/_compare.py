"""Before and after: `loopscope.compare(before, after)` and `loopscope diff
A B` over two summaries, finished Profiles or files (a saved summary JSON,
a loopscope recording, or any trace file `loopscope.analyze` reads).  It
reads the two summaries only: the figures each one's model measured.

What it gives (a plain dict):
- figures: each headline figure before and after, the change and whether
  it got better (lower is better for times, gaps and syncs; higher for
  GPU busy %, SM active % and kernel fill);
- steps: the same per step, paired by name (Step_3 with Step_3) when the
  names allow it, else by index; step_pairing says which, and lists the
  steps of either side left without a partner;
- syncs: the sites added and removed, and those whose count or blocked
  time changed; a site is the same when its file, function and code are
  (its line may move when the file is edited above it; alike sites in one
  function are told apart by their order);
- kernels: the kernel names whose total time changed most (from each
  summary's top_kernels; a kernel outside one side's table counts as
  unknown there, not as 0, unless that table lists every kernel);
- verdict before and after, and the text of the after-side's first
  projection.

Regressions (the pytest baseline and `diff --max-regression-pct`): a
figure of REGRESSION_FIGURES regressed when it got worse by more than the
allowed percentage and by more than its noise floor (a count by at least
one; a time by at least REGRESSION_MIN_MS)."""
from __future__ import annotations

import gzip
import math
import os
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..figures._checks import refusal
from ..files import _schema as schema
from ..files._inputs import TraceError, open_input, read_json
from ..figures._names import clip, demangled_name, display_path, kernel_name
from ..figures._projections import ms_text
from .._profile import provide
from .._summary import TOP_KERNELS

# name -> (what, unit, where in the summary, lower is better)
FIGURES: dict[str, tuple[str, str, tuple[str, ...], bool]] = {
    "loop_ms": ("loop time", " ms", ("loop", "ms"), True),
    "host_ms": ("profiled host time", " ms", ("host_ms",), True),
    "gpu_busy_ms": ("GPU busy time", " ms", ("gpu", "busy_ms"), True),
    "gpu_busy_pct": ("GPU busy", "%", ("gaps", "busy_pct"), False),
    "idle_ms": ("GPU idle time", " ms", ("gaps", "idle_ms"), True),
    "gaps": ("gaps", "", ("gaps", "count"), True),
    "severe_gaps": ("severe gaps", "", ("gaps", "severe"), True),
    "mean_gap_us": ("mean gap", " us", ("gaps", "mean_us"), True),
    "p99_gap_us": ("p99 gap", " us", ("gaps", "p99_us"), True),
    "kernels": ("kernels", "", ("gpu", "kernels"), True),
    # graph-level mode (loopscope.prepare()): replays traced whole, whose
    # kernels the kernel count leaves out
    "graph_replays": ("CUDA-graph replays traced whole", "", ("gpu", "graph_replays"), True),
    "syncs": ("host-device syncs", "", ("syncs", "count"), True),
    "sync_blocked_ms": ("host blocked in syncs", " ms", ("syncs", "blocked_ms"), True),
    "sm_active_pct": ("SM active", "%", ("sm", "active_pct"), False),
    "dram_pct": ("DRAM throughput", "%", ("dram", "throughput_pct"), True),
    "fill_pct": ("kernel fill of the GPU", "%", ("gpu", "fill_pct"), False),
}
STEP_FIGURES = {"host_ms": True, "gpu_ms": True, "kernels": True, "syncs": True}
REGRESSION_FIGURES = ("loop_ms", "idle_ms", "severe_gaps", "syncs", "sync_blocked_ms")
REGRESSION_MIN_MS = 0.01  # time changes below this are timer noise, never a regression
KERNELS_SHOWN = 10
STEPS_SHOWN = 24    # rows of the step table in format_compare
NAMES_LISTED = 24   # names of unpaired steps listed, then a count


class CompareError(TraceError):
    """An input compare() cannot read; the message names it and says why."""


# -- inputs --------------------------------------------------------------------
def _peek(path: Path) -> bytes:
    """The first bytes of a file's JSON text (gzip read through); the path
    checked and opened by _inputs (a FIFO or a folder is refused, never
    waited on)."""
    with open_input(path) as f:
        head = f.read(2)
        f.seek(0)
        if head == b"\x1f\x8b":
            with gzip.GzipFile(fileobj=f) as gz:
                return gz.read(256)
        return f.read(256)


def _summary_head(compact: bytes) -> bool:
    return compact.startswith((b'[{"schema":', b'{"schema":'))


def is_saved_summary(path: str | os.PathLike[str], lists: bool = True) -> bool:
    """Whether a file holds a saved summary (or, with `lists`, a list of
    them), as `run --json`, `analyze --json` or a pytest baseline writes;
    False for a trace, or a file that cannot be read (its reader says why)."""
    try:
        head = _peek(Path(path)).lstrip()
    except (TraceError, OSError, EOFError, zlib.error):
        return False
    compact = head.replace(b" ", b"").replace(b"\n", b"")
    return _summary_head(compact) and (lists or not compact.startswith(b"["))


def load_summary(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The summary of a file: a saved summary (JSON, as `run --json` or a
    pytest baseline writes it) as it is; any other file through
    loopscope.analyze when this loopscope has it, else a loopscope
    recording through its replay."""
    path = Path(path)
    try:
        head = _peek(path).lstrip()
    except TraceError as error:
        raise CompareError(f"cannot read {error}") from None
    except (OSError, EOFError, zlib.error) as error:
        raise CompareError(f"cannot read {path}: {error}") from None
    compact = head.replace(b" ", b"").replace(b"\n", b"")
    if _summary_head(compact):
        try:
            data = read_json(path)  # bounded: a cap on the inflated text, nesting, memory
        except TraceError as error:
            raise CompareError(f"cannot read the summary {error}") from None
        if isinstance(data, list):  # analyze --json of several files: a list
            return _one_summary(path, data)
        if not isinstance(data, dict) or "diagnosis" not in data:
            raise CompareError(f"{path} is not a loopscope summary (no 'diagnosis')")
        return data
    # loopscope.analyze (trace files: Kineto, Nsight Systems, recordings) when this
    # loopscope has it; looked up on the loaded package, not imported (no import circle)
    analyze = getattr(sys.modules.get("loopscope"), "analyze", None)
    if analyze is not None:
        try:
            found: dict[str, Any] = analyze(path)
            return found
        except ValueError as error:  # TraceError: says what the file is and why not
            raise CompareError(f"{path} is neither a loopscope summary nor a trace loopscope "
                               f"reads: {error}") from None
    if not compact.startswith(b'{"format":"loopscope-recording"'):
        raise CompareError(f"{path} is neither a loopscope summary nor a loopscope recording "
                           "(this loopscope reads trace files only through loopscope.analyze)")
    from ..files._recording import RecordingError, load
    from ..readers._replay import replay

    try:
        return replay(load(path)).summary()
    except RecordingError as error:
        raise CompareError(str(error)) from None


def _one_summary(path: Path, data: Any) -> dict[str, Any]:
    """The summary of a file holding a list of them: its only one, or a
    CompareError naming the file and how many it holds."""
    if not isinstance(data, list) or not all(isinstance(x, dict) and "diagnosis" in x
                                             for x in data):
        raise CompareError(f"{path} is not a list of loopscope summaries")
    if len(data) != 1:
        raise CompareError(f"{path} holds {len(data)} summaries (a list, as `analyze --json` of "
                           "several files writes): diff compares one summary with one; write "
                           "each file's summary on its own (analyze --json OUT FILE)")
    first: dict[str, Any] = data[0]
    return first


# A summary's self-checks: None (made before checks) or a list of {name, ok, detail}
# with a real bool `ok`: a tampered list ("ok": "false", 5, junk entries) would
# raise deep in a gate, or pass it.
CHECKS_SHAPE = schema.Optional([{"name": str, "ok": bool, "detail": str}])


# What compare() reads of each step: a baseline's steps of another shape ([{}],
# [1, 2]) are named, never a KeyError or TypeError.
STEP_SHAPE = {"index": schema.COUNT, "name": str, "verdict": schema.Optional(str),
              **{key: schema.Optional(schema.NUM) for key in STEP_FIGURES}}


# ... and of the parts beside the steps (sync sites, the kernel table, projections)
_O = schema.Optional
PARTS_SHAPE = {
    "syncs": _O({"sites": [{"kind": str, "count": schema.COUNT, "blocked_ms": schema.NUM,
                            "file": _O(str), "line": _O(schema.COUNT), "function": _O(str),
                            "call": _O(str), "code": _O(str)}]}),
    "top_kernels": _O([{"name": str, "total_ms": schema.NUM, "count": schema.COUNT}]),
    "diagnosis": {"verdict": str, "projections": _O([{"text": str}])},
}


def check_checks(summary: dict[str, Any], where: str) -> None:
    """CompareError naming `where` and the place when summary["checks"] is
    not a list of {name, ok (a bool), detail}."""
    try:
        schema.check(summary.get("checks"), CHECKS_SHAPE, "summary['checks']")
    except schema.SchemaError as error:
        raise CompareError(f"{where}: its self-checks are damaged, so no gate can trust it: "
                           f"{error}") from None


def _checked(summary: Any, side: str) -> dict[str, Any]:
    """The summary, when it has what compare() reads (a verdict, a step
    list, self-checks of the right shape); else CompareError naming the
    side and what it lacks."""
    if not isinstance(summary, dict):
        raise CompareError(f"compare: {side} is not a loopscope summary (a "
                           f"{type(summary).__name__}, not a dict)")
    check_checks(summary, f"compare: {side}")
    if isinstance(summary.get("steps"), list):
        try:
            schema.check(summary["steps"], [STEP_SHAPE], "summary['steps']")
            if isinstance(summary.get("diagnosis"), dict):
                schema.check(summary, PARTS_SHAPE, "summary")
        except schema.SchemaError as error:
            raise CompareError(f"compare: {side} is a damaged summary: {error}") from None
    diagnosis = summary.get("diagnosis")
    missing = [key for key, ok in (
        ("diagnosis", isinstance(diagnosis, dict) and "verdict" in diagnosis),
        ("steps", isinstance(summary.get("steps"), list))) if not ok]
    if missing:
        have = ", ".join(map(repr, list(summary)[:6])) or "none"
        raise CompareError(f"compare: {side} is not a loopscope summary: no "
                           f"{' and no '.join(map(repr, missing))} (its keys: {have}); pass "
                           "prof.summary(), a finished profile or a file loopscope reads")
    return summary


def as_summary(x: Any, side: str) -> tuple[dict[str, Any], str]:
    """(summary, label) of a summary dict, a finished Profile or a path."""
    if isinstance(x, dict):
        return _checked(x, side), side
    if isinstance(x, (str, os.PathLike)):
        return _checked(load_summary(x), str(x)), str(x)
    summary = getattr(x, "summary", None)
    if callable(summary):
        return _checked(summary(), side), side
    raise TypeError(f"compare: {side} must be a summary dict, a finished loopscope Profile or "
                    f"a file path, got {type(x).__name__}")


# -- the comparison -------------------------------------------------------------
def _get(summary: dict[str, Any], where: tuple[str, ...]) -> float | None:
    value: Any = summary
    for key in where:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _change(before: float | None, after: float | None, lower_is_better: bool
            ) -> dict[str, Any]:
    if before is None or after is None:
        return {"before": before, "after": after, "delta": None, "delta_pct": None,
                "better": None}
    delta = after - before
    pct = round(100.0 * delta / before, 2) if before else None
    better = None if delta == 0 else (delta < 0) == lower_is_better
    return {"before": before, "after": after, "delta": round(delta, 6), "delta_pct": pct,
            "better": better}


def _pairing(old: list[dict[str, Any]], new: list[dict[str, Any]]
             ) -> tuple[str, list[tuple[Any, Any]]]:
    """How the steps of two runs pair up: by name when each side's names
    are unique and the sides share one (Step_3 with Step_3, whatever their
    order or count); else by index.  Returns (how, [(before, after)])."""
    old_names = [s["name"] for s in old]
    new_by_name = {s["name"]: s for s in new}
    if (len(set(old_names)) == len(old) and len(new_by_name) == len(new)
            and not new_by_name.keys().isdisjoint(old_names)):
        return "name", [(s, new_by_name[s["name"]]) for s in old if s["name"] in new_by_name]
    return "index", list(zip(old, new))


def _steps(before: dict[str, Any], after: dict[str, Any]
           ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The steps paired (see _pairing), each figure's change; and how they
    were paired, with the steps of either side that have no partner."""
    how, pairs = _pairing(before["steps"], after["steps"])
    out = []
    for s, t in pairs:
        entry: dict[str, Any] = {"index": s["index"], "after_index": t["index"],
                                 "name": t["name"], "name_before": s["name"]}
        for key, lower in STEP_FIGURES.items():
            entry[key] = _change(s.get(key), t.get(key), lower)
        entry["verdict"] = {"before": s.get("verdict"), "after": t.get("verdict")}
        out.append(entry)
    paired_old = {id(s) for s, _ in pairs}
    paired_new = {id(t) for _, t in pairs}
    pairing = {"by": how,
               "only_before": [s["name"] for s in before["steps"] if id(s) not in paired_old],
               "only_after": [t["name"] for t in after["steps"] if id(t) not in paired_new]}
    return out, pairing


def _site_key(site: dict[str, Any]) -> tuple[Any, ...]:
    file = os.path.basename(site["file"]) if site.get("file") else None
    return (file, site.get("function"), site.get("call") or site.get("code"), site["kind"])


def _sites_by_key(sites: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Sites by (file, function, code, kind, n): the n-th such site by line,
    so two alike calls in one function stay apart and a line that moved
    still matches."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for site in sites:
        groups.setdefault(_site_key(site), []).append(site)
    out = {}
    for key, group in groups.items():
        group.sort(key=lambda x: x.get("line") or 0)
        for n, site in enumerate(group):
            out[key + (n,)] = site
    return out


def _site_view(site: dict[str, Any]) -> dict[str, Any]:
    return {"file": site.get("file"), "line": site.get("line"), "function": site.get("function"),
            "code": site.get("call") or site.get("code"), "kind": site["kind"],
            "count": site["count"], "blocked_ms": site["blocked_ms"]}


def _syncs(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any] | None:
    if before.get("syncs") is None or after.get("syncs") is None:
        return None
    old = _sites_by_key(before["syncs"]["sites"])
    new = _sites_by_key(after["syncs"]["sites"])
    changed = []
    for key in old.keys() & new.keys():
        a, b = old[key], new[key]
        if a["count"] != b["count"] or a["blocked_ms"] != b["blocked_ms"]:
            changed.append(dict(_site_view(b), count_before=a["count"],
                                blocked_ms_before=a["blocked_ms"]))
    changed.sort(key=lambda s: -abs(s["blocked_ms"] - s["blocked_ms_before"]))
    return {"added": [_site_view(s) for k, s in new.items() if k not in old],
            "removed": [_site_view(s) for k, s in old.items() if k not in new],
            "changed": changed}


def kernel_key(name: str) -> str:
    """What makes two kernel names the same kernel whatever the source: the
    demangled text with its spaces normalised (a recording and an Nsight
    export keep mangled names, a torch.profiler trace demangled ones)."""
    text = " ".join((demangled_name(name) or "").split())
    while "> >" in text:  # older demanglers close nested templates "> >", newer ">>"
        text = text.replace("> >", ">>")
    return text.removeprefix("void ")  # a template kernel's return type, not always written


def _kernels(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]] | None:
    a, b = before.get("top_kernels"), after.get("top_kernels")
    if a is None or b is None:
        return None

    def lookup(table: list[dict[str, Any]]) -> Callable[[str], dict[str, Any] | None]:
        complete = len(table) < TOP_KERNELS
        by_key: dict[str, dict[str, Any]] = {}
        for k in table:  # two spellings of one kernel on one side: one entry
            key = kernel_key(k["name"])
            seen = by_key.get(key)
            by_key[key] = k if seen is None else {
                "name": seen["name"], "total_ms": round(seen["total_ms"] + k["total_ms"], 6),
                "count": seen["count"] + k["count"]}
        return lambda key: by_key.get(key) or ({"total_ms": 0.0, "count": 0} if complete
                                               else None)

    old, new = lookup(a), lookup(b)
    names: dict[str, str] = {}  # key -> the name shown: the after side's spelling, else before's
    for k in b + a:
        names.setdefault(kernel_key(k["name"]), k["name"])
    out: list[dict[str, Any]] = []
    for key, name in names.items():
        x, y = old(key), new(key)
        out.append({"name": name,
                    "before_ms": x["total_ms"] if x else None,
                    "after_ms": y["total_ms"] if y else None,
                    "count_before": x["count"] if x else None,
                    "count_after": y["count"] if y else None,
                    "delta_ms": round(y["total_ms"] - x["total_ms"], 6) if x and y else None})
    out.sort(key=lambda k: -abs(k["delta_ms"]) if k["delta_ms"] is not None else 0.0)
    return out[:KERNELS_SHOWN]


def compare(before: Any, after: Any) -> dict[str, Any]:
    """Before and after (see the module doc): each side a summary dict, a
    finished Profile, or a path (saved summary, recording, trace file)."""
    b, b_label = as_summary(before, "before")
    a, a_label = as_summary(after, "after")
    figures = {name: _change(_get(b, where), _get(a, where), lower)
               for name, (_, _, where, lower) in FIGURES.items()}
    projections = (a.get("diagnosis") or {}).get("projections") or []
    steps, pairing = _steps(b, a)
    return {
        "before": {"label": b_label, "verdict": b["diagnosis"]["verdict"],
                   "steps": len(b["steps"])},
        "after": {"label": a_label, "verdict": a["diagnosis"]["verdict"],
                  "steps": len(a["steps"])},
        "figures": figures,
        "steps": steps,
        "step_pairing": pairing,
        "syncs": _syncs(b, a),
        "kernels": _kernels(b, a),
        "next": projections[0]["text"] if projections else None,
        # each side's self-checks (summary["checks"]; None: a summary made before them)
        "checks": {"before": b.get("checks"), "after": a.get("checks")},
    }


provide("compare", compare)  # FinishedProfile.compare(), on the floor below (_profile.provide)


# -- regressions ------------------------------------------------------------------
@dataclass
class Regressions:
    """The regression check of one comparison against a baseline."""

    max_pct: float
    failed: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    unavailable: list[str] = field(default_factory=list)

    def message(self, label: str = "the baseline") -> str:
        lines = [f"loopscope: {len(self.failed)} figure{'s' if len(self.failed) != 1 else ''} "
                 f"regressed by more than {self.max_pct:g}% against {label}"]
        lines += ["  REGRESSED " + x for x in self.failed]
        lines += ["  ok        " + x for x in self.checked]
        lines += ["  not measured: " + x for x in self.unavailable]
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {"max_regression_pct": self.max_pct, "failed": self.failed,
                "checked": self.checked, "unavailable": self.unavailable}


def _finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)


def _number(value: float, unit: str) -> str:
    return (ms_text(value) if unit == " ms" else f"{value:g}") + unit


def _not_here(name: str, here: dict[str, Any] | None) -> str | None:
    """Why the after side (this run, `here`) could not measure a figure:
    the reason its summary gives for the section the figure is read from
    (no driver, tracing off), or None."""
    if here is None:
        return None
    section = FIGURES[name][2][0]
    reason = here.get("syncs_error") if section == "syncs" else here.get("gpu_error")
    return reason if isinstance(reason, str) and reason else None


def regressions(result: dict[str, Any], max_pct: float,
                here: dict[str, Any] | None = None) -> Regressions:
    """Which of REGRESSION_FIGURES got worse by more than max_pct (and more
    than its noise floor) from before to after.  `here`: the after side's
    summary when it is this run (a pytest baseline): a figure it could not
    measure, with the reason its summary gives (no GPU here), is not
    measured, not failed, so the caller skips when nothing else was
    compared; without `here` (diff) a gate that compared nothing fails."""
    out = Regressions(max_pct)
    checks = result.get("checks") or {}
    not_here: dict[str, list[str]] = {}  # reason -> figures: each reason said once
    for name in REGRESSION_FIGURES:
        what, unit, _, _ = FIGURES[name]
        c = result["figures"][name]
        reason = _not_here(name, here) if c["after"] is None else None
        if reason is not None:
            not_here.setdefault(reason, []).append(name)
            continue
        refused = [f"{side}: {why}" for side in ("before", "after")
                   if (why := refusal({"checks": checks.get(side)}, name)) is not None]
        if refused:  # a figure a failed self-check cannot vouch for never passes
            out.failed.append(f"{name}: {what} refused, " + "; ".join(refused))
            continue
        bad = [side for side in ("before", "after")
               if c[side] is not None and not _finite_number(c[side])]
        if bad:  # NaN or Infinity compares false with anything: it would pass every gate
            out.failed.append(f"{name}: {what} is not a finite number in "
                              f"{' and '.join(bad)} ({c['before']!r} -> {c['after']!r})")
            continue
        if (c["before"] is None) != (c["after"] is None):  # a gate must not pass on nothing
            out.failed.append(f"{name}: {what} measured {'after' if c['before'] is None else 'before'}"
                              f" only ({c['before']!r} -> {c['after']!r}), so it cannot be compared")
            continue
        if c["before"] is None:
            out.unavailable.append(f"{name} ({what})")
            continue
        floor = REGRESSION_MIN_MS if unit == " ms" else 1
        worse = c["after"] - c["before"]
        line = (f"{name}: {what} {_number(c['before'], unit)} -> {_number(c['after'], unit)}"
                + (f" ({c['delta_pct']:+.1f}%)" if c["delta_pct"] is not None else ""))
        if worse >= floor and c["after"] > c["before"] * (1 + max_pct / 100.0):
            out.failed.append(line)
        else:
            out.checked.append(line)
    out.unavailable += [f"{', '.join(names)} here ({reason})" for reason, names in not_here.items()]
    if not out.checked and not out.failed and not (here is not None and out.unavailable):
        # a gate that compared nothing must not pass (a pytest baseline skips instead)
        out.failed.append("no figure was measured on both sides: nothing was compared")
    return out


# -- text ----------------------------------------------------------------------------
def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)


def _site_text(s: dict[str, Any]) -> str:
    where = (f"{display_path(s['file'])}:{s['line']} in {s['function']}()" if s.get("file")
             else "<no Python frame>")
    code = f": {s['code']}" if s.get("code") else ""
    return f"{where}{code}  [{s['kind']}] x{s['count']}, blocked {s['blocked_ms']:.3f} ms"


def _names_text(names: list[str]) -> str:
    shown = ", ".join(clip(n, 40) for n in names[:NAMES_LISTED])
    return shown + (f" and {len(names) - NAMES_LISTED} more" if len(names) > NAMES_LISTED else "")


def _verdict_change(v: dict[str, Any]) -> str:
    before, after = v["before"] or "(none)", v["after"] or "(none)"
    return after if before == after else f"{before} -> {after}"


def _step_lines(result: dict[str, Any]) -> list[str]:
    """How the steps were paired, those without a partner, and the table
    of the paired steps that changed."""
    b, a = result["before"], result["after"]
    pairing = result.get("step_pairing") or {"by": "index", "only_before": [], "only_after": []}
    out: list[str] = []
    if b["steps"] or a["steps"]:
        how = ("by name" if pairing["by"] == "name" else
               "by index" + (" (their names differ)" if any(
                   s["name"] != s["name_before"] for s in result["steps"]) else ""))
        out += ["", f"steps: {b['steps']} before, {a['steps']} after, "
                    f"{len(result['steps'])} paired {how}"]
        for side in ("before", "after"):
            names = pairing[f"only_{side}"]
            if names:
                out.append(f"  only {side} ({len(names)}): {_names_text(names)}")
    changed = [s for s in result["steps"] if any(s[k]["delta"] for k in STEP_FIGURES)
               or s["verdict"]["before"] != s["verdict"]["after"]]
    if changed:
        out.append(f"{'step':>5} {'name':<18} {'host ms':>17} {'GPU ms':>17} {'syncs':>9}  "
                   "verdict")
        for s in changed[:STEPS_SHOWN]:
            cells = [f"{_fmt(s[k]['before'])}->{_fmt(s[k]['after'])}"
                     for k in ("host_ms", "gpu_ms", "syncs")]
            name = s["name"] if s["name"] == s["name_before"] else \
                f"{s['name_before']}/{s['name']}"
            out.append(f"{s['index']:>5} {clip(name, 18):<18} {cells[0]:>17} {cells[1]:>17} "
                       f"{cells[2]:>9}  {_verdict_change(s['verdict'])}")
        if len(changed) > STEPS_SHOWN:
            out.append(f"  ... {len(changed) - STEPS_SHOWN} more steps changed")
    return out


def format_compare(result: dict[str, Any]) -> str:
    """The comparison as text: verdicts, figures, syncs, kernels, steps."""
    b, a = result["before"], result["after"]
    out = [f"loopscope diff: {b['label']} -> {a['label']}",
           f"verdict: {b['verdict']} -> {a['verdict']}"]
    if result.get("next"):
        out.append(f"next: {result['next']}")
    out.append("")
    out.append(f"{'figure':<26} {'before':>12} {'after':>12} {'change':>12}")
    for name, (what, unit, _, _) in FIGURES.items():
        c = result["figures"][name]
        if c["before"] is None and c["after"] is None:
            continue
        change = "-" if c["delta"] is None else (
            f"{c['delta_pct']:+.1f}%" if c["delta_pct"] is not None else f"{c['delta']:+g}")
        mark = {True: "  better", False: "  worse", None: ""}[c["better"]]
        out.append(f"{what + unit.replace(' ', ' '):<26} {_fmt(c['before']):>12} "
                   f"{_fmt(c['after']):>12} {change:>12}{mark}")
    syncs = result.get("syncs")
    if syncs is not None:
        out.append("")
        out.append(f"sync sites: {len(syncs['added'])} added, {len(syncs['removed'])} removed, "
                   f"{len(syncs['changed'])} changed")
        out += [f"  + {_site_text(s)}" for s in syncs["added"]]
        out += [f"  - {_site_text(s)}" for s in syncs["removed"]]
        out += [f"  ~ {_site_text(s)} (was x{s['count_before']}, "
                f"{s['blocked_ms_before']:.3f} ms)" for s in syncs["changed"]]
    kernels = [k for k in result.get("kernels") or [] if k["delta_ms"]]
    if kernels:
        out.append("")
        out.append("kernels whose time changed most (ms):")
        for k in kernels:
            out.append(f"  {k['delta_ms']:+10.3f}  {_fmt(k['before_ms']):>9} -> "
                       f"{_fmt(k['after_ms']):>9}  {clip(kernel_name(k['name']) or '?', 60)}")
    out += _step_lines(result)
    return "\n".join(out)
