"""Shapes the C core's raw figures (integers, ns) into the summary dict of
PRODUCT.md: plain, JSON-serialisable, units in the key names."""
from __future__ import annotations

import bisect
import time
from typing import Any

from ._diagnosis import diagnose, diagnose_step
from ._syncs import build_syncs

SCHEMA_VERSION = 1
NO_SAMPLES = (
    "PM sampling ran but no sample was decoded (the loop may have been shorter than one "
    "sampling interval)"
)


def no_counters_reason(pm: dict[str, Any]) -> str:
    """Why sampling ran but the loop has no counter figures."""
    if pm.get("error"):
        return pm["error"]
    if pm.get("overflows"):
        return (f"the PM sampling buffer overflowed {pm['overflows']} time(s) and no sample of "
                "the loop survived; raise metrics_buffer_mb or metrics_interval_us")
    return NO_SAMPLES


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


def _r(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _figures(metrics: dict[str, Any] | None) -> dict[str, Any] | None:
    """Span and busy-time figures of one window (the loop, a step, a range).

    Without busy intervals (counters-only mode: no traced ops) the busy-time
    figures are estimated from the span ones and GR active (the share of
    time the GPU was doing any work): value_busy = value_span * 100 / gr."""
    if metrics is None:
        return None
    span, busy = metrics["span"], metrics["busy"]
    if not span["samples"]:
        return None
    busy_from = "ops"
    if not busy["samples"]:
        gr = span["gr_active_pct"]
        busy_from = "gr_active" if gr else None
        estimated = {}
        for key, value in span.items():
            if not isinstance(value, float) or key in ("samples", "covered_ns", "window_ns"):
                estimated[key] = value
            elif not gr:
                estimated[key] = None
            else:
                scaled = value * 100.0 / gr
                estimated[key] = min(scaled, 100.0) if key.endswith("_pct") else scaled
        busy = estimated
    return {"span": span, "busy": busy, "busy_from": busy_from,
            "window_ns": span["window_ns"], "covered_ns": span["covered_ns"]}


def _bytes(gbps: float | None, covered_ns: int) -> int | None:
    """GB/s (bytes per ns) over the covered time -> bytes."""
    return None if gbps is None else int(round(gbps * covered_ns))


def _sm_dram(fig: dict[str, Any] | None, info: dict[str, Any]) -> tuple[Any, Any, Any]:
    """summary["sm"], ["dram"], ["pcie"] of the whole loop."""
    if fig is None:
        return None, None, None
    span, busy = fig["span"], fig["busy"]
    pm = info.get("pm") or {}
    interval = pm.get("interval")
    sm = {
        "active_pct": _r(span["sm_active_pct"]),
        "active_busy_pct": _r(busy["sm_active_pct"]),
        "issue_ipc": _r(span["sm_issue"], 3),
        "issue_busy_ipc": _r(busy["sm_issue"], 3),
        "warp_occupancy_pct": _r(span["warp_occupancy_pct"]),
        "gr_active_pct": _r(span["gr_active_pct"]),
        "tensor_active_pct": _r(span["tensor_active_pct"]),
        "tensor_active_busy_pct": _r(busy["tensor_active_pct"]),
        "samples": span["samples"],
        # How much of the loop the samples cover: short of 100 when samples were
        # lost to an overflow or the loop was shorter than one interval.
        "coverage_pct": (_r(min(100.0, 100.0 * fig["covered_ns"] / fig["window_ns"]))
                         if fig["window_ns"] else None),
        "busy_from": fig["busy_from"],
        "interval_us": (round(interval / 1e3, 3) if interval and pm.get("trigger") == "gpu_time"
                        else None),
    }
    dram = {
        "throughput_pct": _r(span["dram_throughput_pct"]),
        "throughput_busy_pct": _r(busy["dram_throughput_pct"]),
        "read_gbps": _r(span["dram_read_gbps"], 3),
        "write_gbps": _r(span["dram_write_gbps"], 3),
        "read_busy_gbps": _r(busy["dram_read_gbps"], 3),
        "write_busy_gbps": _r(busy["dram_write_gbps"], 3),
    }
    pcie = {
        "read_bytes": _bytes(span["pcie_read_gbps"], fig["covered_ns"]),
        "write_bytes": _bytes(span["pcie_write_gbps"], fig["covered_ns"]),
    }
    return sm, dram, pcie


def _metrics_section(info: dict[str, Any]) -> dict[str, Any] | None:
    """How the counters were sampled (None when they were not)."""
    pm = info.get("pm")
    if not pm:
        return {"source": "injected", "samples": info.get("samples", 0)} if info.get(
            "samples_injected") else None
    return {
        "source": "pm_sampling",
        "device": pm["device"],
        "chip": pm["chip"],
        "trigger": pm["trigger"],
        "interval": pm["interval"],
        "figures": pm["figures"],
        "cupti_metrics": pm["cupti_metrics"],
        "dropped_metrics": pm["dropped_metrics"],
        "samples": pm["samples"],
        "overflows": pm["overflows"],
        "counter_data_full": pm["counter_data_full"],
        "incomplete_samples": pm["incomplete"],
        "eval_errors": pm["eval_errors"],
        "restarts": pm["restarts"],
        "reconfigures": pm["reconfigures"],
        "decodes": pm["decodes"],
        "decode_ms": _ms(pm["decode_ns"]),
        "decode_cupti_ms": _ms(pm["decode_data_ns"]),
        "evaluate_ms": _ms(pm["evaluate_ns"]),
        "decoder_error": pm["decoder_error"],
        "setup_ms": {name: _ms(ns) for name, ns in pm["phases_ns"].items()},
        "config_reused": pm["config_reused"],
        "config_source": pm.get("config_source"),  # built, cache (disk), reused (this process)
        "cache_note": pm.get("cache_note"),  # why the disk cache was not used, None if it was
        "sampler_reused": pm["sampler_reused"],
        "counter_data_samples": pm["max_samples"],
        "hw_buffer_mb": round(pm["hw_buffer_bytes"] / (1 << 20), 1),
        "counter_data_mb": round(pm["counter_data_bytes"] / (1 << 20), 2),
        "clock_delta_us": round(pm["clock_delta_ns"] / 1e3, 3),
        "clock_shift_ns": pm["clock_shift_ns"],
        "error": pm["error"],
    }


def _window_figures(r: dict[str, Any]) -> dict[str, Any]:
    fig = _figures(r.get("metrics"))
    if fig is None:
        return {"sm_active_pct": None, "sm_active_busy_pct": None, "dram_pct": None,
                "dram_busy_pct": None, "gr_active_pct": None, "samples": 0}
    span, busy = fig["span"], fig["busy"]
    return {
        "sm_active_pct": _r(span["sm_active_pct"]),
        "sm_active_busy_pct": _r(busy["sm_active_pct"]),
        "dram_pct": _r(span["dram_throughput_pct"]),
        "dram_busy_pct": _r(busy["dram_throughput_pct"]),
        "gr_active_pct": _r(span["gr_active_pct"]),
        "samples": span["samples"],
    }


def _steps(ranges, gpu: bool, thresholds_us, syncs_per_step: dict[int, int] | None = None
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
        }
        step.update(_window_figures(r))
        step["verdict"] = diagnose_step(step) if gpu or step["samples"] else None
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


def _ranges(records, group_of, groups, group_lines, gpu: bool, thresholds_us,
            range_dicts) -> list[dict[str, Any]]:
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
            "sm_active_busy_pct": None,
            "dram_busy_pct": None,
            "gr_active_pct": None,
            "samples": 0,
            "_weights": {},
            "gpu_span_ms": _ms(line["span_ns"]) if gpu else None,
            "memcpys": line["memcpys"] if gpu else None,
            "memsets": line["memsets"] if gpu else None,
            "gaps": shape_gaps(line["gaps"], thresholds_us, line["busy_ns"]) if gpu else None,
            "parent": groups[group["parent"]]["name"] if group["parent"] >= 0 else None,
            "depth": group["depth"],
            "step_prefixed": group["step_prefixed"],
        })
    # Counter averages per name, each instance weighted by the sample time it
    # covered (range dicts are complete only when counters were sampled).
    for r, g in zip(range_dicts, group_of):
        if r is not None and g >= 0 and r.get("metrics"):
            _add_weighted(out[g], r)
    for entry in out:
        entry.pop("_weights")
    return out


_RANGE_FIGURES = {
    "sm_active_pct": ("span", "sm_active_pct"),
    "sm_active_busy_pct": ("busy", "sm_active_pct"),
    "dram_pct": ("span", "dram_throughput_pct"),
    "dram_busy_pct": ("busy", "dram_throughput_pct"),
    "gr_active_pct": ("span", "gr_active_pct"),
}


def _add_weighted(entry: dict[str, Any], r: dict[str, Any]) -> None:
    """Folds one instance of a range into its name's averages, each instance
    weighted by the sample time it covered (span or busy)."""
    fig = _figures(r.get("metrics"))
    if fig is None:
        return
    entry["samples"] += fig["span"]["samples"]
    weights = entry["_weights"]
    for key, (window, name) in _RANGE_FIGURES.items():
        value = fig[window][name]
        if value is None:
            continue
        covered = r["metrics"][window]["covered_ns"] or fig["covered_ns"]
        total, weight = weights.get(key, (0.0, 0))
        weights[key] = (total + value * covered, weight + covered)
        entry[key] = round(weights[key][0] / weights[key][1], 2) if weights[key][1] else None


# Host cost of each thing the profile does inside the user's loop, in us, as
# measured on an H200 host (GPU_FACTS.md: a C loop of 200,000 launches with
# and without CUPTI; ranges from benchmarks/ranges.py): one traced GPU op
# (kernel, copy or memset activity record), one launch call seen by a
# callback, one blocking call (callback pair + Python stack), one range
# (enter + exit).  PM sampling and the parsing of records run on
# loopscope's worker thread and cost the loop nothing.
IN_LOOP_COST_US = {"op": 0.65, "launch_callback": 0.11, "blocking_call": 2.0, "range": 0.25}


def overhead_section(info: dict[str, Any], state: dict[str, Any] | None) -> dict[str, Any]:
    """summary["overhead"]: what the profile itself cost, where, and an
    estimate of what it added inside the loop (counts x IN_LOOP_COST_US)."""
    pm = info.get("pm") or {}
    start = info.get("start_phases_ns") or {}
    stop = info.get("stop_phases_ns") or {}
    finish = info.get("finish_phases_ns") or {}
    ops = info.get("ops", 0)
    launches = info.get("launch_records", 0)
    calls = info.get("calls", 0)
    ranges = info.get("ranges", 0)
    cost = IN_LOOP_COST_US
    estimate_us = (ops * cost["op"] + launches * cost["launch_callback"]
                   + calls * cost["blocking_call"] + ranges * cost["range"])
    return {
        "start_ms": _ms(sum(start.values())),
        "stop_ms": _ms(info.get("stop_ns_cost", 0)),
        "finish_ms": _ms(info.get("finish_ns", 0)),
        "finish_wait_ms": _ms(info.get("finish_wait_ns", 0)),
        "finished_on_worker": bool(info.get("finished_on_worker")),
        "decode_ms": _ms(pm.get("decode_ns", 0)),
        "metrics_setup_ms": _ms(pm.get("setup_ns", 0)),
        "metrics_start_delay_ms": _ms(pm.get("start_delay_ns", 0)),
        "start_phases_ms": {k: _ms(v) for k, v in start.items()},
        "stop_phases_ms": {k: _ms(v) for k, v in stop.items()},
        "finish_phases_ms": {k: _ms(v) for k, v in finish.items()},
        "warm_up": info.get("warm_up"),
        "callbacks": launches + calls,
        "records": ops + info.get("apis", 0) + info.get("syncs", 0) + calls,
        "ranges": ranges,
        "in_loop_estimate_ms": round(estimate_us / 1e3, 3),
        "in_loop_estimate": (
            f"{ops} GPU ops x {cost['op']} us + {launches} launch callbacks x "
            f"{cost['launch_callback']} us + {calls} blocking calls x {cost['blocking_call']} us"
            f" + {ranges} ranges x {cost['range']} us (host costs measured on an H200)"),
        "ops_after_stop": info.get("ops_after_stop", 0),
        "records_after_stop": info.get("records_after_stop", 0),
        "buffer_mb": round(info.get("buffer_bytes", 0) / (1 << 20), 2),
        "buffers_refused": info.get("buffers_refused", 0),
        "drains": info.get("drains", 0),
        "drain_ms": _ms(info.get("drain_ns", 0)),
        "invalid_records": info.get("invalid_records", 0),
        "range_mismatches": info.get("range_mismatches", 0),
        "ranges_left_open": info.get("ranges_left_open", 0),
        "instrument_mismatches": (state or {}).get("instrument_mismatches", 0),
    }


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
        # per-range dicts for the steps only (the other ranges come by group),
        # unless counters were sampled: their averages are folded per name
        analysis = capture.analyze(*thresholds_us, groups=group_of,
                                   plain_ranges=bool(info.get("sampled") or info.get("samples_injected")))
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
    # Syncs are measured when the callbacks watched them, or in tests when
    # fake API calls went through the switchboard (not merely fake kernels).
    watched = bool(info.get("watched_syncs") or info.get("calls_injected"))
    syncs_per_step = None
    if watched and analysis is not None:
        summary["syncs"], syncs_per_step = build_syncs(
            capture.calls(), analysis["waits"], analysis["unknown_copies"])
        summary["syncs_error"] = None
    else:
        summary["syncs"] = None
        summary["syncs_error"] = (state or {}).get("syncs_reason") or info.get("syncs_reason") or reason
    whole = _figures(analysis.get("metrics")) if analysis else None
    summary["sm"], summary["dram"], summary["pcie"] = _sm_dram(whole, info)
    summary["metrics"] = _metrics_section(info) if capture is not None else None
    if summary["sm"] is not None:
        summary["metrics_error"] = None
    elif info.get("sampled"):
        summary["metrics_error"] = no_counters_reason(info.get("pm") or {})
    else:
        summary["metrics_error"] = ((state or {}).get("metrics_reason") or info.get("metrics_reason")
                                    or reason)
    summary["steps"] = _steps(ranges, gpu, thresholds_us, syncs_per_step)
    summary["ranges"] = _ranges(records, group_of, groups,
                                analysis["groups"] if analysis else [], gpu, thresholds_us,
                                ranges)
    summary["diagnosis"] = diagnose(summary)
    summary["dropped_records"] = info.get("dropped_records", 0) if capture else None
    summary["overhead"] = overhead_section(info, state)
    summary["overhead"]["summary_ms"] = _ms(time.perf_counter_ns() - t0)
    return summary
