"""Shapes the C core's raw figures (integers, ns) into the summary dict of
PRODUCT.md: plain, JSON-serialisable, units in the key names."""
from __future__ import annotations

import time
from collections import OrderedDict
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
        if r["step"] is None:
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


def _ranges(ranges, gpu: bool) -> list[dict[str, Any]]:
    """Plain (non-step) ranges aggregated by name, in order of first use."""
    by_name: "OrderedDict[str, dict[str, Any]]" = OrderedDict()
    for r in ranges:
        if r["step"] is not None:
            continue
        entry = by_name.setdefault(
            r["name"],
            {"name": r["name"], "count": 0, "host_ms": 0.0, "gpu_ms": 0.0 if gpu else None,
             "kernels": 0 if gpu else None, "sm_active_pct": None, "dram_pct": None},
        )
        entry["count"] += 1
        entry["host_ms"] = round(entry["host_ms"] + _ms(r["end_ns"] - r["start_ns"]), 6)
        if gpu:
            entry["gpu_ms"] = round(entry["gpu_ms"] + _ms(r["busy_ns"]), 6)
            entry["kernels"] += r["kernels"]
    return list(by_name.values())


def build_summary(capture, state, thresholds_us, host_ns: int, stop_error: str | None) -> dict[str, Any]:
    t0 = time.perf_counter_ns()
    if capture is None:
        info: dict[str, Any] = {"traced": False, "injected": False, "ops": 0}
        analysis = None
        reason = stop_error or "the profile did not stop cleanly"
    else:
        info = capture.info()
        analysis = capture.analyze(*thresholds_us)
        reason = state.get("reason") or info["reason"]
    gpu = bool(info["traced"] or info["injected"])
    summary: dict[str, Any] = {"schema": SCHEMA_VERSION}
    summary["source"] = "cupti" if info["traced"] else ("injected" if info["injected"] else None)
    summary["gpu_error"] = None if gpu else reason
    summary["cupti_note"] = info.get("note")
    summary["host_ms"] = _ms(host_ns)
    ranges = analysis["ranges"] if analysis else []
    step_names = {r["step"]: r["name"] for r in ranges if r["step"] is not None}
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
    summary["ranges"] = _ranges(ranges, gpu)
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
    }
    summary["overhead"]["summary_ms"] = _ms(time.perf_counter_ns() - t0)
    return summary
