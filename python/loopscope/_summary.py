"""Shapes the C core's raw figures (integers, ns) into the summary dict of
PRODUCT.md: plain, JSON-serialisable, units in the key names."""
from __future__ import annotations

import bisect
import time
from typing import Any

from ._diagnosis import diagnose, diagnose_step
from ._syncs import build_syncs

SCHEMA_VERSION = 1
METRICS_NOT_COLLECTED = (
    "SM and DRAM counters are not collected by this version of loopscope "
    "(PM sampling is not implemented yet)"
)


def _ms(ns: int) -> float:
    return round(ns / 1e6, 6)


def _us(ns: float) -> float:
    return round(ns / 1e3, 3)


def _pct(part: float, whole: float) -> float | None:
    return round(100.0 * part / whole, 2) if whole > 0 else None


def shape_gaps(raw: dict[str, Any], thresholds_us: tuple[float, float], busy_ns: int) -> dict[str, Any]:
    """Gap figures of one time line (the whole run, a step, a stream)."""
    count = raw["count"]
    return {
        "count": count,
        "normal": raw["normal"],
        "warning": raw["warning"],
        "severe": raw["severe"],
        "mean_us": _us(raw["total_ns"] / count) if count else 0.0,
        "p50_us": _us(raw["p50_ns"]),
        "p99_us": _us(raw["p99_ns"]),
        "max_us": _us(raw["max_ns"]),
        "idle_ms": _ms(raw["total_ns"]),
        "busy_ms": _ms(busy_ns),
        "busy_pct": _pct(busy_ns, busy_ns + raw["total_ns"]),
        "thresholds_us": list(thresholds_us),
        "by_cause": {"host": raw["host"], "sync": raw["sync"], "other": raw["other"]},
        "idle_by_cause_ms": {
            "host": _ms(raw["host_ns"]), "sync": _ms(raw["sync_ns"]), "other": _ms(raw["other_ns"]),
        },
    }


def _histogram(raw: dict[str, Any], edges_ns: list[int]) -> dict[str, Any]:
    return {"edges_us": [_us(e) for e in edges_ns], "counts": list(raw["histogram"])}


def _gpu_section(analysis: dict[str, Any]) -> dict[str, Any]:
    total = analysis["total"]
    devices = analysis["devices"]
    span = sum(d["last_ns"] - d["first_ns"] for d in devices)
    names = [d.get("name") for d in devices]
    return {
        "busy_pct": _pct(total["busy_ns"], span),
        "busy_ms": _ms(total["busy_ns"]),
        "span_ms": _ms(span),
        "kernels": total["kernels"],
        "memcpys": total["memcpys"],
        "memsets": total["memsets"],
        "device": names[0] if len(set(names)) == 1 else names or None,
        "devices": [
            {
                "id": d["device"],
                "name": d.get("name"),
                "busy_pct": _pct(d["busy_ns"], d["last_ns"] - d["first_ns"]),
                "kernels": d["kernels"],
                "memcpys": d["memcpys"],
                "memsets": d["memsets"],
            }
            for d in devices
        ],
        "ops_without_launch_record": analysis["ops_without_launch"],
    }


def _stream_section(analysis: dict[str, Any], thresholds_us) -> list[dict[str, Any]]:
    return [
        {
            "device": s["device"],
            "stream": s["stream"],
            "kernels": s["kernels"],
            "memcpys": s["memcpys"],
            "memsets": s["memsets"],
            "gaps": shape_gaps(s["gaps"], thresholds_us, s["busy_ns"]),
        }
        for s in analysis["streams"]
    ]


def _worst_gaps(analysis: dict[str, Any], step_names: dict[int, str]) -> list[dict[str, Any]]:
    return [
        {
            "duration_us": _us(g["duration_ns"]),
            "cause": g["cause"],
            "step": g["step"],
            "step_name": step_names.get(g["step"]),
            "device": g["device"],
            "stream": g["stream"],
            "after": g["after"],
            "before": g["before"],
            "start_ns": g["start_ns"],
        }
        for g in analysis["worst_gaps"]
    ]


def _steps(ranges, gpu: bool, thresholds_us, syncs_per_step: dict[int, int] | None
           ) -> list[dict[str, Any]]:
    steps = []
    for r in ranges:
        if r is None or r["step"] is None:
            continue
        step = {
            "index": r["step"],
            "name": r["name"],
            "host_ms": _ms(r["end_ns"] - r["start_ns"]),
            "gpu_ms": _ms(r["busy_ns"]) if gpu else None,
            "gpu_span_ms": _ms(r["last_ns"] - r["first_ns"]) if gpu else None,
            "kernels": r["kernels"] if gpu else None,
            "memcpys": r["memcpys"] if gpu else None,
            "gaps": shape_gaps(r["gaps"], thresholds_us, r["busy_ns"]) if gpu else None,
            "syncs": None if syncs_per_step is None else syncs_per_step.get(r["step"], 0),
            "sm_active_pct": None,
            "dram_pct": None,
        }
        step["verdict"] = diagnose_step(step) if gpu else None
        steps.append(step)
    return steps


class _StepTimes:
    """Finds the step running at a time on any thread (for ranges with no
    parent, e.g. backward hooks on autograd's thread)."""

    def __init__(self, records) -> None:
        steps = sorted((r[3], r[4], r[0]) for r in records if r[2] is not None)
        self.starts = [s[0] for s in steps]
        self.steps = steps
        self.max_end = []  # running maximum of the ends: where to stop looking back
        end = 0
        for s in steps:
            end = max(end, s[1])
            self.max_end.append(end)

    def at(self, t: int) -> str | None:
        """The name of the latest-begun step with start <= t <= end, or None."""
        i = bisect.bisect_right(self.starts, t) - 1
        while i >= 0 and self.max_end[i] >= t:
            if self.steps[i][1] >= t:
                return self.steps[i][2]
            i -= 1
        return None


def group_ranges(records) -> tuple[list[int], list[dict[str, Any]]]:
    """Aggregates range records by name, over steps.

    records: [(name, parent, step, start_ns, end_ns)] in the order the ranges
    began (Capture.range_records()).  A range's key is its name without the
    "<step name>/" prefix of the step that encloses it: found through its
    parents, or for a range with no parent (another thread's, e.g. a
    backward hook on autograd's thread) the step running when it began.
    Returns (group_of, groups): group_of[i] is the group of record i (-1 for
    steps); groups, in order of first use, are {name, parent (group index,
    -1 at the top or under a step), depth, step_prefixed}; a name's parent
    is the one it had the first time."""
    steps = _StepTimes(records)
    index: dict[str, int] = {}
    groups: list[dict[str, Any]] = []
    group_of: list[int] = []
    context: list[tuple[str | None, int]] = []  # per record: (enclosing step name, group)
    for i, (name, parent, step, start, _end) in enumerate(records):
        if step is not None:
            context.append((name, -1))
            group_of.append(-1)
            continue
        if 0 <= parent < i:
            step_name, parent_group = context[parent]
        else:
            step_name, parent_group = steps.at(start), -1
        key, prefixed = name, False
        if step_name is not None and len(name) > len(step_name) + 1 \
                and name.startswith(step_name) and name[len(step_name)] == "/":
            key, prefixed = name[len(step_name) + 1:], True
        g = index.get(key)
        if g is None:
            g = index[key] = len(groups)
            depth = groups[parent_group]["depth"] + 1 if parent_group >= 0 else 0
            groups.append({"name": key, "parent": parent_group, "depth": depth,
                           "step_prefixed": prefixed})
        elif prefixed:
            groups[g]["step_prefixed"] = True
        context.append((step_name, g))
        group_of.append(g)
    return group_of, groups


def _ranges(records, group_of, groups, group_lines, gpu: bool, thresholds_us) -> list[dict[str, Any]]:
    """Plain (non-step) ranges aggregated by name over steps, in order of
    first use; `parent` names the enclosing range's entry (None at the top or
    directly under a step).  GPU figures are those of the kernels launched
    inside any of the name's ranges, each counted once; gpu_span_ms sums
    each range's first-kernel-start to last-kernel-end."""
    host_ns = [0] * len(groups)
    count = [0] * len(groups)
    for (_name, _parent, _step, start, end), g in zip(records, group_of):
        if g >= 0:
            count[g] += 1
            host_ns[g] += end - start
    out = []
    for g, group in enumerate(groups):
        line = group_lines[g] if gpu else None
        out.append({
            "name": group["name"],
            "count": count[g],
            "host_ms": _ms(host_ns[g]),
            "gpu_ms": _ms(line["busy_ns"]) if gpu else None,
            "kernels": line["kernels"] if gpu else None,
            "sm_active_pct": None,
            "dram_pct": None,
            "gpu_span_ms": _ms(line["span_ns"]) if gpu else None,
            "memcpys": line["memcpys"] if gpu else None,
            "memsets": line["memsets"] if gpu else None,
            "gaps": shape_gaps(line["gaps"], thresholds_us, line["busy_ns"]) if gpu else None,
            "parent": groups[group["parent"]]["name"] if group["parent"] >= 0 else None,
            "depth": group["depth"],
            "step_prefixed": group["step_prefixed"],
        })
    return out


def build_summary(capture, state, thresholds_us, host_ns: int, stop_error: str | None) -> dict[str, Any]:
    t0 = time.perf_counter_ns()
    if capture is None:
        info: dict[str, Any] = {"traced": False, "injected": False, "ops": 0}
        analysis = None
        records, group_of, groups = [], [], []
        reason = stop_error or "the profile did not stop cleanly"
    else:
        info = capture.info()
        records = capture.range_records()
        group_of, groups = group_ranges(records)
        # per-range dicts for the steps only: the other ranges come by group
        analysis = capture.analyze(*thresholds_us, groups=group_of, plain_ranges=False)
        reason = state.get("reason") or info["reason"]
    gpu = bool(info["traced"] or info["injected"])
    summary: dict[str, Any] = {"schema": SCHEMA_VERSION}
    summary["source"] = "cupti" if info["traced"] else ("injected" if info["injected"] else None)
    summary["gpu_error"] = None if gpu else reason
    summary["cupti_note"] = info.get("note")
    summary["host_ms"] = _ms(host_ns)
    ranges = analysis["ranges"] if analysis else []
    step_names = {r["step"]: r["name"] for r in ranges if r is not None and r["step"] is not None}
    if gpu and analysis is not None:
        total = analysis["total"]
        summary["gaps"] = shape_gaps(total["gaps"], thresholds_us, total["busy_ns"])
        summary["gaps"]["histogram"] = _histogram(total["gaps"], analysis["histogram_edges_ns"])
        summary["gaps"]["worst"] = _worst_gaps(analysis, step_names)
        summary["gaps"]["per_stream"] = _stream_section(analysis, thresholds_us)
        summary["gpu"] = _gpu_section(analysis)
    else:
        summary["gaps"] = None
        summary["gpu"] = None
    watched = bool(info.get("watched_syncs") or info["injected"])
    syncs_per_step = None
    if watched and analysis is not None:
        summary["syncs"], syncs_per_step = build_syncs(
            capture.calls(), analysis["waits"], analysis["unknown_copies"])
        summary["syncs_error"] = None
    else:
        summary["syncs"] = None
        summary["syncs_error"] = (state or {}).get("syncs_reason") or info.get("syncs_reason") or reason
    summary["sm"] = None
    summary["dram"] = None
    summary["metrics_error"] = METRICS_NOT_COLLECTED
    summary["steps"] = _steps(ranges, gpu, thresholds_us, syncs_per_step)
    summary["ranges"] = _ranges(records, group_of, groups,
                                analysis["groups"] if analysis else [], gpu, thresholds_us)
    summary["diagnosis"] = diagnose(summary)
    summary["dropped_records"] = info.get("dropped_records", 0) if capture else None
    summary["overhead"] = {
        "records": info.get("ops", 0) + info.get("apis", 0) + info.get("syncs", 0)
        + info.get("calls", 0),
        "ranges": info.get("ranges", 0),
        "buffer_mb": round(info.get("buffer_bytes", 0) / (1 << 20), 2),
        "buffers_refused": info.get("buffers_refused", 0),
        "drains": info.get("drains", 0),
        "drain_ms": _ms(info.get("drain_ns", 0)),
        "stop_ms": _ms(info.get("stop_ns_cost", 0)),
        "invalid_records": info.get("invalid_records", 0),
        "range_mismatches": info.get("range_mismatches", 0),
        "ranges_left_open": info.get("ranges_left_open", 0),
        "instrument_mismatches": state.get("instrument_mismatches", 0),
    }
    summary["overhead"]["summary_ms"] = _ms(time.perf_counter_ns() - t0)
    return summary
