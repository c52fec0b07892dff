"""Shapes the analysed model (the C core's Model: integers, ns) into the
summary dict of PRODUCT.md: plain, JSON-serialisable, units in the key
names.  It only reads the model: gaps, steps, ranges, groups and counter
averages are all computed there, once."""
from __future__ import annotations

import gc
import os
import time
from bisect import bisect_left
from array import array
from itertools import repeat
from typing import Any, Callable, NamedTuple, Sequence

from . import _core
from .live import _settings
from .figures import _rows
from .figures._checks import live_checks
from .figures._diagnosis import capture_verdicts, diagnose, diagnose_step, traced_verdicts
from .figures._finite import finite, note, start_count
from .views._html import render
from .views._html_file import title, write_page
from .views._pictures import timeline_of
from .figures._readiness import Readiness, add_sync_blockers, overview, step_readiness
from .views._report import short_text
from .figures._syncs import Resolver, build_syncs

TOP_KERNELS = 15  # kernels named in summary["top_kernels"]

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


# A whole number of ns over 1e6 (or 1e3) is already the float nearest its
# 6- (3-) decimal value (IEEE division rounds correctly), so round() gives it
# back unchanged (tests/hostile/test_hostile_scale.py checks it): skipped for
# ints, it costs ~0.5 us a call and a million steps make millions of calls.
def _ms(ns: float) -> float:
    return ns / 1e6 if type(ns) is int else round(ns / 1e6, 6)


def _us(ns: float) -> float:
    return ns / 1e3 if type(ns) is int else round(ns / 1e3, 3)


def _pct(part: float, whole: float) -> float | None:
    return round(100.0 * part / whole, 2) if whole > 0 else None


def shape_gaps(raw: dict[str, Any], thresholds_us: tuple[float, float], busy_ns: int) -> dict[str, Any]:
    """Gap figures of one time line (the whole run, a step, a stream)."""
    return shape_gaps_many([raw], thresholds_us, [busy_ns])[0]


# The model's gap figures (a gaps dict's keys) in the order of GAP_STEP_COLUMNS.
_RAW_GAP_KEYS = ("count", "normal", "warning", "severe", "total_ns", "p50_ns", "p99_ns",
                 "max_ns", "host", "sync", "other", "host_ns", "sync_ns", "other_ns",
                 "sync_overlap_ns")


def shape_gaps_many(raws: Sequence[dict[str, Any]], thresholds_us,
                    busy_ns: Sequence[int]) -> list[dict[str, Any]]:
    """shape_gaps of several time lines (streams, range groups) in one build:
    the steps' gap fields over columns made of the model's figures."""
    cols = {column: memoryview(array("Q", [raw[key] for raw in raws]))
            for column, key in zip(GAP_STEP_COLUMNS, _RAW_GAP_KEYS)}
    cols["busy_ns"] = memoryview(array("Q", busy_ns))
    return _rows.build(len(raws), _gap_fields(cols, thresholds_us))[0]


def _gap_fields(cols: dict[str, Any], thresholds_us) -> dict[str, _rows.Field]:
    """The gap dict of a time line (the whole run, a step, a stream), per
    row of the model's gap columns (GAP_STEP_COLUMNS and busy_ns).  Exported
    for the verdict: busy_pct, idle_ms, host_ms and sync_ms."""
    count, total, busy = cols["gap_count"], cols["idle_ns"], cols["busy_ns"]
    return {
        "count": _rows.integer(count),
        "normal": _rows.integer(cols["gap_normal"]),
        "warning": _rows.integer(cols["gap_warning"]),
        "severe": _rows.integer(cols["gap_severe"]),
        "mean_us": _rows.rounded_ratio(total, count, post=1e3, digits=3, zero=None),
        # no gap, no gap statistics: None, never a 0.0 that reads as measured
        "p50_us": _rows.scaled(cols["gap_p50_ns"], 1e3, count),
        "p99_us": _rows.scaled(cols["gap_p99_ns"], 1e3, count),
        "max_us": _rows.scaled(cols["gap_max_ns"], 1e3, count),
        "idle_ms": _rows.exported("idle_ms", _rows.scaled(total, 1e6)),
        "busy_ms": _rows.scaled(busy, 1e6),
        "busy_pct": _rows.exported("busy_pct", _rows.rounded_ratio(
            busy, busy, plus=total, pre=100.0, digits=2, zero=None)),
        "thresholds_us": _rows.list_copy(list(thresholds_us)),
        "by_cause": _rows.nested({cause: _rows.integer(cols[f"gap_{cause}"])
                                  for cause in ("host", "sync", "other")}, shared=False),
        "idle_by_cause_ms": _rows.nested({
            "host": _rows.exported("host_ms", _rows.scaled(cols["gap_host_ns"], 1e6)),
            "sync": _rows.exported("sync_ms", _rows.scaled(cols["gap_sync_ns"], 1e6)),
            "other": _rows.scaled(cols["gap_other_ns"], 1e6)}, shared=False),
        # The gaps a sync overlapped, whole: idle_by_cause_ms["sync"] keeps only
        # what the host still waited in the sync, "host" the rest (its own
        # work before the next launch, which removing the sync leaves)
        "idle_sync_overlapped_ms": _rows.scaled(cols["gap_sync_overlap_ns"], 1e6),
    }


def _histogram(raw: dict[str, Any], edges_ns: list[int]) -> dict[str, Any]:
    return {"edges_us": [_us(e) for e in edges_ns], "counts": list(raw["histogram"])}


def fill_figures(line: dict[str, Any]) -> tuple[float | None, float | None]:
    """(fill_pct, fill_known_pct) of a model line: the share of its GPU the
    kernels whose fill is known could fill, weighted by their time, and the
    share of the line's kernel time whose fill is known (None: no kernel)."""
    return _fill(line["filled_ns"], line["shaped_ns"], line["kernel_ns"])


def _fill(filled_ns: int, shaped_ns: int, kernel_ns: int) -> tuple[float | None, float | None]:
    fill = _pct(filled_ns, shaped_ns) if shaped_ns else None
    return fill, _pct(shaped_ns, kernel_ns) if kernel_ns else None


def _gpu_section(total: dict[str, Any], devices: list[dict[str, Any]],
                 ops_without_launch: int) -> dict[str, Any]:
    span = sum(d["last_ns"] - d["first_ns"] for d in devices)
    names = [d.get("name") for d in devices]
    fill, known = fill_figures(total)
    return {
        # the idle between the nodes of one replay traced per kernel is neither
        # busy nor a gap (csrc/analysis/ls_model.h): out of the busy share, as
        # it is out of the gaps' busy share, so both modes read one share
        "busy_pct": _pct(total["busy_ns"], span - total["replay_idle_ns"]),
        "busy_ms": _ms(total["busy_ns"]),
        "span_ms": _ms(span),
        "replay_idle_ms": _ms(total["replay_idle_ns"]),
        "kernels": total["kernels"],
        "memcpys": total["memcpys"],
        "memsets": total["memsets"],
        # whole CUDA-graph replays (graph-level mode): not kernels, so the
        # kernel counts, kernel table and fill leave their kernels out
        "graph_replays": total["graphs"],
        "graph_replay_ms": _ms(total["graph_ns"]),
        "device": names[0] if len(set(names)) == 1 else names or None,
        "devices": [
            {
                "id": d["device"],
                "name": d.get("name"),
                "busy_pct": _pct(d["busy_ns"], d["last_ns"] - d["first_ns"] - d["replay_idle_ns"]),
                "kernels": d["kernels"],
                "memcpys": d["memcpys"],
                "memsets": d["memsets"],
                "comm_ms": _ms(d["comm_ns"]),
                "compute_ms": _ms(d["compute_ns"]),
                "sm_count": d.get("sm_count"),
                "max_threads_per_sm": d.get("max_threads_per_sm"),
            }
            for d in devices
        ],
        "ops_without_launch_record": ops_without_launch,
        # collective kernels (NCCL, ...) apart from the rest: the union of
        # each class's intervals, so overlap counts in both
        "comm_ms": _ms(total["comm_ns"]),
        "compute_ms": _ms(total["compute_ns"]),
        "comm_pct": _pct(total["comm_ns"], span),
        # how much of the GPU the kernels' grids could fill (csrc/analysis/ls_kernels.h)
        "fill_pct": fill,
        "fill_known_pct": known,
    }


def _top_kernels(kernels: list[dict[str, Any]], kernel_ns: int) -> list[dict[str, Any]]:
    """summary["top_kernels"]: the kernels by name that took the most time,
    with the launch shape that took most of it and the share of the GPU
    that shape could fill."""
    out = []
    for k in kernels:
        shape = k["shape"]
        grid, block = list(shape["grid"]), list(shape["block"])
        known = all(grid) and all(block)
        out.append({
            "name": k["name"],
            "count": k["count"],
            "total_ms": _ms(k["total_ns"]),
            "mean_us": _us(k["total_ns"] / k["count"]) if k["count"] else 0.0,
            "max_us": _us(k["max_ns"]),
            "share_pct": _pct(k["total_ns"], kernel_ns),
            "grid": grid if known else None,
            "block": block if known else None,
            "blocks": grid[0] * grid[1] * grid[2] if known else None,
            "threads_per_block": block[0] * block[1] * block[2] if known else None,
            "registers": shape["registers"] or None,
            "shared_bytes": shape["shared_bytes"] if known else None,
            "fill_pct": _pct(k["filled_ns"], k["shaped_ns"]) if k["shaped_ns"] else None,
            "shapes": k["shapes"],
            "main_shape_pct": _pct(shape["total_ns"], k["total_ns"]),
        })
    return out


def _gpu_floor_ms(model, start_ns: int, end_ns: int) -> float:
    """The GPU busy time of the loop's window [start_ns, end_ns] on its
    busiest device (the model's busy intervals, whoever launched them): no
    change that keeps the kernels makes the loop shorter (_projections)."""
    if model is None or end_ns <= start_ns:
        return 0.0
    return _ms(max((model.busy_bins(start_ns, end_ns, 1, device=d["device"])[0]
                    for d in model.devices()), default=0))


# How many gaps and range instances of the loop's window are read to place
# its idle time in the host's own ranges (_host_ranges): the longest gaps
# hold the idle that matters, and a window query costs what it returns.
HOST_RANGE_GAPS = 20000
HOST_RANGE_INSTANCES = 20000
HOST_RANGES_NAMED = 3


def _union_ns(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            if b > merged[-1][1]:
                merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return merged


def _host_ranges(model, start_ns: int, end_ns: int) -> tuple[float, list[dict[str, Any]]]:
    """The host's own work in the loop's window: named ranges that launch
    no GPU work (data loading, a checkpoint, logging), which neither a CUDA
    graph nor removing a sync takes away.  Returns the time the host spent
    in any of them (their union, clipped to the window) and, per name, its
    time and the GPU idle time that lies inside it (the longest gaps of the
    window), most idle first."""
    if model is None or end_ns <= start_ns or not model.group_count:
        return 0.0, []
    quiet = {g["name"] for g in model.groups()
             if not (g["kernels"] or g["memcpys"] or g["memsets"] or g["graphs"])}
    if not quiet:
        return 0.0, []
    w = model.window(start_ns, end_ns, limit=HOST_RANGE_INSTANCES, min_class="normal",
                     kinds=("ranges",))
    spans: dict[str, list[tuple[int, int]]] = {}
    for _, a, b, _, _, step, _, group in w["ranges"]:
        if step is None and group in quiet:
            spans.setdefault(group, []).append((max(a, start_ns), min(b, end_ns)))
    if not spans:
        return 0.0, []
    gaps = model.window(start_ns, end_ns, limit=HOST_RANGE_GAPS, min_class="warning",
                        kinds=("gaps",))["gaps"]
    idle = sorted((g["start_ns"], g["start_ns"] + g["duration_ns"]) for g in gaps)
    starts = [a for a, _ in idle]
    out: list[dict[str, Any]] = []
    for name, parts in spans.items():
        merged = _union_ns(parts)
        inside = 0
        for a, b in merged:
            for ga, gb in idle[max(bisect_left(starts, a) - 1, 0):bisect_left(starts, b)]:
                inside += max(0, min(b, gb) - max(a, ga))
        out.append({"name": name, "host_ms": _ms(sum(b - a for a, b in merged)),
                    "idle_ms": _ms(inside)})
    out.sort(key=lambda r: (-r["idle_ms"], -r["host_ms"], r["name"]))
    everything = _union_ns([p for parts in spans.values() for p in parts])
    return _ms(sum(b - a for a, b in everything)), out[:HOST_RANGES_NAMED]


def _host_work(model, start_ns: int, end_ns: int) -> dict[str, Any]:
    host_ms, ranges = _host_ranges(model, start_ns, end_ns)
    return {"host_ranges_ms": host_ms, "host_ranges": ranges}


def _launch_work(total: dict[str, Any]) -> dict[str, Any]:
    """The whole capture's launch calls (ls_readiness.h): how many, and how
    many GPU ops ran (a capture whose launches ran nothing recorded a
    CUDA-graph capture, _projections.CAPTURE_SHARE)."""
    r = total.get("readiness") or {}
    return {"launch_calls": r.get("launch_calls", 0), "ran_ops": r.get("ops", 0)}


def _pageable(cols: dict[str, Any] | None, total: dict[str, Any]) -> dict[str, Any]:
    """The loop's pageable host-to-device copies and the host time in the
    calls that launched them: a graph cannot take them in (_projections)."""
    if cols is not None and "pageable_call_ns" in cols:
        copies = _core._column_stats(cols["pageable_copies"])[1]
        ns = _core._column_stats(cols["pageable_call_ns"])[1]
    else:
        r = total.get("readiness") or {}
        copies, ns = r.get("pageable_copies", 0), r.get("pageable_call_ns", 0)
    return {"pageable_copies": copies, "pageable_call_ms": _ms(ns)}


def _loop(cols: dict[str, Any], total: dict[str, Any], model=None) -> dict[str, Any]:
    """summary["loop"]: the loop's window and what the GPU did in it (see
    _projections): the steps (their columns, see _steps), or without steps
    the GPU's time line.  start_ns/end_ns: the window; host_ms: the steps'
    own span (first start to last end; None without steps), where the host
    did its work; gpu_floor_ms: the busiest device's busy time in the
    window (_gpu_floor_ms); host_ranges(_ms): see _host_ranges;
    pageable_copies, pageable_call_ms: see _pageable; launch_calls,
    ran_ops: see _launch_work."""
    if len(cols["index"]):
        stats: dict[str, Any] = {name: _core._column_stats(cols[name]) for name in (
            "start_ns", "end_ns", "last_ns", "busy_ns", "idle_ns", "gap_sync_overlap_ns", "kernels",
            "memcpys", "memsets", "graphs")}  # (count, sum, min, max): no int per item
        start = stats["start_ns"][2]
        end = max(stats["end_ns"][3], stats["last_ns"][3])
        kernels = stats["kernels"][1]
        return {
            "from": "steps",
            "ms": _ms(max(end - start, 0)),
            "busy_ms": _ms(stats["busy_ns"][1]),
            "idle_ms": _ms(stats["idle_ns"][1]),
            "sync_idle_ms": _ms(stats["gap_sync_overlap_ns"][1]),
            "ops": kernels + stats["memcpys"][1] + stats["memsets"][1] + stats["graphs"][1],
            "kernels": kernels,
            "start_ns": start,
            "end_ns": end,
            "host_ms": _ms(max(stats["end_ns"][3] - start, 0)),  # the steps' own span
            "gpu_floor_ms": _gpu_floor_ms(model, start, end),
            **_host_work(model, start, end),
            **_pageable(cols, total),
            **_launch_work(total),
        }
    return {
        "from": "gpu",
        "ms": _ms(max(total["last_ns"] - total["first_ns"], 0)),
        "busy_ms": _ms(total["busy_ns"]),
        "idle_ms": _ms(total["gaps"]["total_ns"]),
        "sync_idle_ms": _ms(total["gaps"]["sync_overlap_ns"]),
        "ops": total["kernels"] + total["memcpys"] + total["memsets"] + total["graphs"],
        "kernels": total["kernels"],
        "start_ns": total["first_ns"],
        "end_ns": total["last_ns"],
        "host_ms": None,  # no steps: the host's part of the time line is not known
        "gpu_floor_ms": _gpu_floor_ms(model, total["first_ns"], total["last_ns"]),
        **_host_work(model, total["first_ns"], total["last_ns"]),
        **_pageable(None, total),
        **_launch_work(total),
    }


def _graphs(total: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any] | None:
    """summary["graphs"]: CUDA-graph replays and the host time between
    them, or None when nothing replayed a graph."""
    r = total["readiness"]
    if not r["graph_launches"]:
        return None
    replaying = [s for s in steps if (s.get("graph_readiness") or {}).get("graph_replays")]
    return {
        "replays": r["graph_launches"],
        "steps_replaying": len(replaying),
        "replays_per_step": (round(sum(s["graph_readiness"]["graph_replays"] for s in replaying)
                                   / len(replaying), 3) if replaying else None),
        "host_between_replays_us": (_us(r["replay_host_ns"] / r["replay_pairs"])
                                    if r["replay_pairs"] else None),
        "gpu_per_replay_us": (_us(sum(s["gpu_ms"] or 0 for s in replaying) * 1e6
                                  / sum(s["graph_readiness"]["graph_replays"]
                                        for s in replaying)) if replaying else None),
    }


def _stream_section(streams: list[dict[str, Any]], thresholds_us) -> list[dict[str, Any]]:
    gaps = shape_gaps_many([s["gaps"] for s in streams], thresholds_us,
                           [s["busy_ns"] for s in streams])
    return [
        {
            "device": s["device"],
            "stream": s["stream"],
            "kernels": s["kernels"],
            "memcpys": s["memcpys"],
            "memsets": s["memsets"],
            "gaps": gap,
        }
        for s, gap in zip(streams, gaps)
    ]


def _worst_gaps(worst: list[dict[str, Any]], step_names: Callable[[int | None], str | None]
                ) -> list[dict[str, Any]]:
    return [
        {
            "duration_us": _us(g["duration_ns"]),
            "cause": g["cause"],
            "step": g["step"],
            "step_name": step_names(g["step"]),
            "device": g["device"],
            "stream": g["stream"],
            "after": g["after"],
            "before": g["before"],
            "start_ns": g["start_ns"],
        }
        for g in worst
    ]


def _r(value: float | None, digits: int = 2) -> float | None:
    value = finite(value)
    return None if value is None else round(value, digits)


def _figures(metrics: dict[str, Any] | None) -> dict[str, Any] | None:
    """Span and busy-time figures of one window (the loop, a step), as the
    model has them (busy estimated from GR active where no op ran), or None
    when no sample covered it."""
    if metrics is None or not metrics["span"]["samples"]:
        return None
    span = metrics["span"]
    return {"span": span, "busy": metrics["busy"], "busy_from": metrics["busy_from"],
            "window_ns": span["window_ns"], "covered_ns": span["covered_ns"]}


def _bytes(gbps: float | None, covered_ns: int) -> int | None:
    """GB/s (bytes per ns) over the covered time -> bytes."""
    total = finite(None if gbps is None else gbps * covered_ns)
    return None if total is None else int(round(total))


def _sm_dram(fig: dict[str, Any] | None, info: dict[str, Any]) -> tuple[Any, Any, Any]:
    """summary["sm"], ["dram"], ["pcie"] of the whole loop."""
    if fig is None:
        return None, None, None
    span, busy = fig["span"], fig["busy"]
    pm = info.get("pm") or {}
    interval = pm.get("interval")
    # coverage is judged over the GPU's busy time where ops tell it (GR active
    # would read the samples' own coverage back)
    cover = busy if fig["busy_from"] == "ops" and busy.get("window_ns") else span
    sm = {
        "active_pct": _r(span["sm_active_pct"]),
        "active_busy_pct": _r(busy["sm_active_pct"]),
        "issue_ipc": _r(span["sm_issue"], 3),
        "issue_busy_ipc": _r(busy["sm_issue"], 3),
        "warp_occupancy_pct": _r(span["warp_occupancy_pct"]),
        "warp_occupancy_busy_pct": _r(busy["warp_occupancy_pct"]),
        "gr_active_pct": _r(span["gr_active_pct"]),
        "tensor_active_pct": _r(span["tensor_active_pct"]),
        "tensor_active_busy_pct": _r(busy["tensor_active_pct"]),
        "samples": span["samples"],
        # How much of the time the GPU had work the samples cover (of the whole
        # loop where busy time is itself read from the counters): short of 100
        # when samples were lost to an overflow or the loop was shorter than
        # one interval.  Time with no GPU work before sampling began (a model
        # built inside the profile) is in span_coverage_pct only (issue 41).
        "coverage_pct": (_r(min(100.0, 100.0 * cover["covered_ns"] / cover["window_ns"]))
                         if cover["window_ns"] else None),
        "coverage_of": "the GPU's busy time" if cover is busy else "the loop",
        "span_coverage_pct": (_r(min(100.0, 100.0 * fig["covered_ns"] / fig["window_ns"]))
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
        # decoded while this profile's window was live and let go unevaluated
        # (the sampler runs across profiles: issue 43)
        "skipped_samples": pm.get("skipped", 0),
        "decode_ms": _ms(pm["decode_ns"]),
        "decode_cupti_ms": _ms(pm["decode_data_ns"]),
        "evaluate_ms": _ms(pm["evaluate_ns"]),
        "decoder_error": pm["decoder_error"],
        # the decoder fell behind the samples: the interval the next profiles
        # use (the automatic one doubles), None when it kept pace
        "interval_note": pm.get("interval_note"),
        "setup_ms": {name: _ms(ns) for name, ns in pm["phases_ns"].items()},
        "config_reused": pm["config_reused"],
        "config_source": pm.get("config_source"),  # built, cache (disk), reused (this process)
        # why the disk cache was not used, None if it was
        "cache_note": pm.get("cache_note") or _settings.cache_note(),
        "sampler_reused": pm["sampler_reused"],
        "counter_data_samples": pm["max_samples"],
        "hw_buffer_mb": round(pm["hw_buffer_bytes"] / (1 << 20), 1),
        "counter_data_mb": round(pm["counter_data_bytes"] / (1 << 20), 2),
        "clock_delta_us": round(pm["clock_delta_ns"] / 1e3, 3),
        "clock_shift_ns": pm["clock_shift_ns"],
        "error": pm["error"],
    }


def _window_figures(metrics: dict[str, Any] | None) -> dict[str, Any]:
    fig = _figures(metrics)
    if fig is None:
        return {"sm_active_pct": None, "sm_active_busy_pct": None, "dram_pct": None,
                "dram_busy_pct": None, "gr_active_pct": None, "warp_occupancy_busy_pct": None,
                "samples": 0}
    span, busy = fig["span"], fig["busy"]
    return {
        "sm_active_pct": _r(span["sm_active_pct"]),
        "sm_active_busy_pct": _r(busy["sm_active_pct"]),
        "dram_pct": _r(span["dram_throughput_pct"]),
        "dram_busy_pct": _r(busy["dram_throughput_pct"]),
        "gr_active_pct": _r(span["gr_active_pct"]),
        "warp_occupancy_busy_pct": _r(busy["warp_occupancy_pct"]),
        "samples": span["samples"],
    }


class Summary(dict):
    """The summary: a plain dict (JSON-serialisable, compares as a dict) that
    also renders as HTML in a notebook, and whose IPython text form is one
    line (print() and repr() still show the whole dict).  `range_steps`:
    the ranges that acted as its steps, when they were not the live ones
    (see _range_steps; the trace export marks them)."""

    range_steps: "RangeSteps | None" = None
    # the FinishedProfile it is the summary of (a weak reference: a summary kept
    # alone does not keep the records alive), so its notebook view draws
    # the time line as the profile's own does
    owner: "Callable[[], Any] | None" = None

    def to_html(self) -> str:
        """The notebook view of this summary as an HTML fragment (with the
        time line while the profile it came from is alive)."""
        prof = self.owner() if self.owner is not None else None
        if prof is not None and prof.summary() is self:
            return render(self, timeline_of(prof))
        return render(self)

    def save_html(self, path: str | os.PathLike) -> str:
        """Writes to_html() as an HTML page a browser opens; returns the path."""
        return write_page(self.to_html(), path, title(self))

    def _repr_html_(self) -> str:
        return self.to_html()

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(short_text(self))


class RangeSteps(NamedTuple):
    """Ranges chosen to act as steps (see _range_steps): their indices in
    step order, and the step names to show."""

    ranges: Sequence[int]
    names: Sequence[str]


# The model's step columns (Model.step_table) a summary reads: a million
# steps cost a few columns of 8 bytes a step, not a dict per step.
HOST_STEP_COLUMNS = ("index", "name", "start_ns", "end_ns", "syncs", "sync_blocked_ns")
GAP_STEP_COLUMNS = ("gap_count", "gap_normal", "gap_warning", "gap_severe", "idle_ns",
                    "gap_p50_ns", "gap_p99_ns", "gap_max_ns", "gap_host", "gap_sync", "gap_other",
                    "gap_host_ns", "gap_sync_ns", "gap_other_ns", "gap_sync_overlap_ns")
GPU_STEP_COLUMNS = ("first_ns", "last_ns", "busy_ns", "kernels", "memcpys", "memsets", "graphs",
                    "comm_ns", "compute_ns", "kernel_ns", "shaped_ns", "filled_ns")
READINESS_STEP_COLUMNS = ("graph_launches", "replay_host_ns", "replay_pairs", "memory_calls",
                          "first_memory_call", "pageable_copies", "first_pageable_call", "ops",
                          "signature", "pageable_call_ns")


def step_columns(model, gpu: bool) -> dict[str, Any]:
    """The step columns the summary needs (host-only: the host ones)."""
    names: tuple[str, ...] = HOST_STEP_COLUMNS
    if gpu:
        names += GAP_STEP_COLUMNS + GPU_STEP_COLUMNS + READINESS_STEP_COLUMNS
    return model.step_table(names)


# A step without GPU records or counters: the keys _steps makes, in its
# order; _steps fills in index, name, host_ms, and with syncs watched syncs
# and sync_blocked_ms (the host's time blocked in the step's syncs, summed
# as the sync sites' blocked_ms is).
_HOST_STEP: dict[str, Any] = {
    "index": 0, "name": "", "host_ms": 0.0, "gpu_ms": None, "gpu_span_ms": None,
    "kernels": None, "memcpys": None, "graph_replays": None, "gaps": None, "syncs": None,
    "sync_blocked_ms": None, "sm_active_pct": None, "sm_active_busy_pct": None, "dram_pct": None,
    "dram_busy_pct": None, "gr_active_pct": None,
    "warp_occupancy_busy_pct": None, "samples": 0, "fill_pct": None, "fill_known_pct": None,
    "verdict": None, "comm_ms": None, "compute_ms": None, "graph_readiness": None,
}


def _steps(cols: dict[str, Any], gpu: bool, thresholds_us, syncs_watched: bool,
           names: Sequence[str] | None = None,
           readiness: Readiness | None = None,
           metrics: list[dict[str, Any]] | None = None
           ) -> tuple[list[dict[str, Any]], list[str] | None]:
    """(summary["steps"], their verdicts when traced) from the model's step
    columns (step_columns) and, with counters, its per-step metrics;
    `readiness`: step_readiness's of the steps.  Built row by row in C from
    the columns (_rows.build): a million steps cost the objects they hold,
    and one Python loop for their verdicts."""
    index = cols["index"]
    n = len(index)
    fields: dict[str, _rows.Field] = {key: _rows.const(value) for key, value in _HOST_STEP.items()}
    fields["index"] = _rows.integer(index)
    fields["name"] = _rows.item(cols["name"] if names is None else [names[i] for i in index])
    fields["host_ms"] = _rows.span(cols["start_ns"], cols["end_ns"], 1e6)
    if syncs_watched:
        fields["syncs"] = _rows.integer(cols["syncs"])
        fields["sync_blocked_ms"] = _rows.scaled(cols["sync_blocked_ns"], 1e6)
    counters: dict[str, Any] = {}
    if metrics is not None:
        windows = [_window_figures(m) for m in metrics]
        for key in windows[0] if windows else ():
            counters[key] = [w[key] for w in windows]
            fields[key] = _rows.item(counters[key])
    if gpu:
        fields["gpu_ms"] = _rows.scaled(cols["busy_ns"], 1e6)
        fields["gpu_span_ms"] = _rows.span(cols["first_ns"], cols["last_ns"], 1e6)
        fields["kernels"] = _rows.integer(cols["kernels"])
        fields["memcpys"] = _rows.integer(cols["memcpys"])
        fields["graph_replays"] = _rows.integer(cols["graphs"])
        fields["gaps"] = _rows.nested(_gap_fields(cols, thresholds_us))
        fields["fill_pct"] = _rows.exported("fill_pct", _rows.rounded_ratio(
            cols["filled_ns"], cols["shaped_ns"], pre=100.0, digits=2, zero=None))
        fields["fill_known_pct"] = _rows.exported("fill_known_pct", _rows.rounded_ratio(
            cols["shaped_ns"], cols["kernel_ns"], pre=100.0, digits=2, zero=None))
        fields["comm_ms"] = _rows.scaled(cols["comm_ns"], 1e6)
        fields["compute_ms"] = _rows.scaled(cols["compute_ns"], 1e6)
        if readiness is not None:
            fields["graph_readiness"] = _rows.nested(readiness.fields, shared=False)
    steps, figures = _rows.build(n, fields)
    if gpu:
        nones = repeat(None)
        graphs = cols["graphs"]
        # a step of graph replays only is GPU work too (the copies' column: not a kernel)
        other_ops = ([a + b for a, b in zip(cols["memcpys"], graphs)] if any(graphs)
                     else cols["memcpys"])
        verdicts = traced_verdicts(
            cols["kernels"], other_ops, figures["busy_pct"], figures["idle_ms"],
            figures["sync_ms"], figures["host_ms"], counters.get("sm_active_busy_pct", nones),
            counters.get("dram_busy_pct", nones), figures["fill_pct"],
            figures["fill_known_pct"], counters.get("warp_occupancy_busy_pct", nones))
        for step, verdict in zip(steps, verdicts):
            step["verdict"] = verdict
        return steps, verdicts
    if metrics is not None:  # counters only: a verdict where samples cover the step
        for step in steps:
            if step["samples"]:
                step["verdict"] = diagnose_step(step)
    return steps, None


def _capture_steps(loop: dict[str, Any], steps: list[dict[str, Any]],
                   verdicts: list[str]) -> list[str]:
    """The steps' verdicts once the loop says whether the profile recorded a
    CUDA-graph capture (_diagnosis.capture_verdicts), set in the steps too;
    the same list, untouched, when it did not."""
    judged = capture_verdicts(loop, verdicts)
    if judged is not verdicts:
        for step, verdict in zip(steps, judged):
            step["verdict"] = verdict
    return judged


def _step_name_lookup(index: Sequence[int], names: Sequence[str]
                      ) -> Callable[[int | None], str | None]:
    """step index -> its name (None: no such step), by a binary search over
    the steps' indices (increasing), so no table of a million names is made."""
    def name_of(step: int | None) -> str | None:
        if step is None:
            return None
        at = bisect_left(index, step)
        return names[at] if at < len(index) and index[at] == step else None
    return name_of


# The model's group columns (Model.group_table) the ranges section reads.
HOST_GROUP_COLUMNS = ("name", "count", "host_ns", "parent", "depth", "step_prefixed")
GPU_GROUP_COLUMNS = ("busy_ns", "span_ns", "kernels", "memcpys", "memsets", "comm_ns",
                     "compute_ns") + GAP_STEP_COLUMNS


def _uniform_or_int(column) -> _rows.Field:
    """An int column's field: one const when every row holds the same
    value (a million names of one range each at depth 0), so the column
    need not stay while the rows are made."""
    return _rows.const(column[0]) if min(column) == max(column) else _rows.integer(column)


def _ranges(model, gpu: bool, thresholds_us) -> list[dict[str, Any]]:
    """Plain (non-step) ranges aggregated by name over steps (the model's
    range groups), in order of first use; `parent` names the enclosing
    range's entry (None at the top or directly under a step).  GPU figures
    are those of the kernels launched inside any of the name's ranges, each
    counted once; gpu_span_ms sums each range's first-kernel-start to
    last-kernel-end; counter figures average the name's ranges, each
    weighted by the sample time it covered.  Built row by row in C from the
    model's group columns (_rows.build): a million names cost the objects
    their rows hold, not a dict per group in between (issue 25)."""
    if model is None or model.group_count == 0:
        return []
    cols = model.group_table(HOST_GROUP_COLUMNS + (GPU_GROUP_COLUMNS if gpu else ()))
    names = cols.pop("name")
    parent, prefixed = cols.pop("parent"), cols.pop("step_prefixed")
    fields: dict[str, _rows.Field] = {
        "name": _rows.item(names),
        "count": _uniform_or_int(cols.pop("count")),
        "host_ms": _rows.scaled(cols.pop("host_ns"), 1e6),
        "gpu_ms": _rows.scaled(cols["busy_ns"], 1e6) if gpu else _rows.const(None),
        "kernels": _rows.integer(cols["kernels"]) if gpu else _rows.const(None),
    }
    metrics = model.group_metrics()
    for key, (window, name) in _RANGE_FIGURES.items():
        fields[key] = (_rows.item([_r(m[window][name]) for m in metrics]) if metrics is not None
                       else _rows.const(None))
    fields["samples"] = (_rows.item([m["samples"] for m in metrics]) if metrics is not None
                         else _rows.const(0))
    fields.update({
        "gpu_span_ms": _rows.scaled(cols["span_ns"], 1e6) if gpu else _rows.const(None),
        "memcpys": _rows.integer(cols["memcpys"]) if gpu else _rows.const(None),
        "memsets": _rows.integer(cols["memsets"]) if gpu else _rows.const(None),
        "gaps": _rows.nested(_gap_fields(cols, thresholds_us)) if gpu else _rows.const(None),
        "parent": (_rows.item([names[p] if p >= 0 else None for p in parent]) if any(
            p >= 0 for p in parent) else _rows.const(None)),
        "depth": _uniform_or_int(cols.pop("depth")),
        "step_prefixed": (_rows.item([p != 0 for p in prefixed]) if any(prefixed)
                          else _rows.const(False)),
        "comm_ms": _rows.scaled(cols["comm_ns"], 1e6) if gpu else _rows.const(None),
        "compute_ms": _rows.scaled(cols["compute_ns"], 1e6) if gpu else _rows.const(None),
    })
    del parent, prefixed  # what the rows need is in their fields: the columns go first
    return _rows.build(len(names), fields)[0]


_RANGE_FIGURES = {
    "sm_active_pct": ("span", "sm_active_pct"),
    "dram_pct": ("span", "dram_throughput_pct"),
    "sm_active_busy_pct": ("busy", "sm_active_pct"),
    "dram_busy_pct": ("busy", "dram_throughput_pct"),
    "gr_active_pct": ("span", "gr_active_pct"),
}


# Host cost of each thing the profile does inside the user's loop, in us, as
# measured on an H200 host (GPU_FACTS.md: a C loop of 200,000 launches with
# and without CUPTI; ranges from benchmarks/host/ranges.py): one traced GPU op
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
    # a loopscope export read back: the live profile's own estimate (its
    # counts are not all in the file), so both give the same projections
    carried = (state or {}).get("in_loop_estimate_ms")
    if carried is not None:
        estimate_us = carried * 1e3
    return {
        "start_ms": _ms(sum(start.values())),
        # The whole __enter__ on the user's thread: Python before the C core's
        # start, the start (the session lock, _core.start: start_ms and its
        # call), and Python after it.
        "enter_ms": {k: _ms(v) for k, v in ((state or {}).get("enter_ns") or {}).items()},
        "stop_ms": _ms(info.get("stop_ns_cost", 0)),
        "finish_ms": _ms(info.get("finish_ns", 0)),
        "finish_wait_ms": _ms(info.get("finish_wait_ns", 0)),
        "finished_on_worker": bool(info.get("finished_on_worker")),
        "decode_ms": _ms(pm.get("decode_ns", 0)),
        # The worker's decode time for each sample it decoded while this
        # profile's window was live (evaluated, or let go unevaluated).
        "decode_us_per_sample": (round(pm["decode_ns"] / 1e3 / decoded, 1)
                                 if (decoded := pm.get("samples", 0) + pm.get("skipped", 0))
                                 else None),
        "tail_samples": pm.get("tail_samples", 0),
        "tail_decode_ms": _ms(pm.get("tail_decode_ns", 0)),
        "metrics_setup_ms": _ms(pm.get("setup_ns", 0)),
        # The enter's wait for the sampler's first set-up (metrics=True; 0
        # with "lazy" or once set up), and whether it reached its bound.
        "metrics_setup_wait_ms": _ms(info.get("pm_wait_ns", 0)),
        "metrics_setup_wait_timed_out": bool(info.get("pm_wait_timed_out")),
        "metrics_start_delay_ms": _ms(pm.get("start_delay_ns", 0)),
        "start_phases_ms": {k: _ms(v) for k, v in start.items()},
        "stop_phases_ms": {k: _ms(v) for k, v in stop.items()},
        "finish_phases_ms": {k: _ms(v) for k, v in finish.items()},
        "warm_up": info.get("warm_up"),
        "callbacks": launches + calls,
        "records": ops + info.get("apis", 0) + info.get("sync_records", 0) + calls,
        "ranges": ranges,
        "in_loop_estimate_ms": round(estimate_us / 1e3, 3),
        # whether loopscope's capture ran inside the loop, so that the estimate
        # is part of its host time (live, injected, a loopscope trace export
        # read back; state["loopscope_capture"] False: another profiler's trace)
        "in_loop_captured": bool((state or {}).get("loopscope_capture", True)),
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


# No model (the profile did not stop cleanly): empty step columns.
_NO_STEPS: dict[str, Any] = {name: memoryview(array("q")) for name in HOST_STEP_COLUMNS}
_NO_STEPS["name"] = ()


def build_summary(capture, state, thresholds_us, host_ns: int, stop_error: str | None,
                  steps: RangeSteps | None = None, source: str | None = None,
                  resolver=None) -> dict[str, Any]:
    """_build_summary with the cyclic garbage collector paused: the summary
    is a tree of new containers (a few per step) that hold no cycle, so the
    collections their allocation would trigger find nothing to free, yet
    walk them all again each time the old generation grows by a quarter
    (a quarter of the summary's time at a million steps).  The collector's
    state is given back as it was, whatever happens.

    Given back, it would start with a young collection that walks every
    object made meanwhile (~0.6 s at a million steps) only to move them to
    an older generation, where the summary's long-lived containers end up
    anyway: they are moved straight to the oldest one instead (gc.freeze
    then gc.unfreeze: two list splices, no walk).  The young objects of
    the caller move with them, so a cycle among those waits for the next
    full collection instead of the next young one.  Skipped when the
    caller froze objects of its own (unfreeze would thaw them)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _build_summary(capture, state, thresholds_us, host_ns, stop_error, steps, source,
                              resolver)
    finally:
        if collecting:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _analysed(capture, state, thresholds_us, stop_error: str | None,
              steps: RangeSteps | None) -> tuple[dict[str, Any], Any, str | None, bool, bool,
                                                  dict[str, Any]]:
    """(info, model, reason, gpu, watched, step columns) of a capture: what
    every summary starts from."""
    if capture is None:
        info: dict[str, Any] = {"traced": False, "injected": False, "ops": 0}
        model = None
        reason = stop_error or "the profile did not stop cleanly"
    else:
        info = capture.info()
        model = capture.model(*thresholds_us, steps=None if steps is None else steps.ranges)
        reason = state.get("reason") or info["reason"]
    gpu = bool(info["traced"] or info["injected"])
    # Syncs are measured when the callbacks watched them, or in tests when
    # fake API calls went through the switchboard (not merely fake kernels).
    watched = bool(info.get("watched_syncs") or info.get("calls_injected"))
    cols = step_columns(model, gpu) if model is not None else _NO_STEPS
    return info, model, reason, gpu, watched, cols


def _syncs_reason(info: dict[str, Any], state: dict[str, Any] | None, reason: str | None) -> Any:
    return (state or {}).get("syncs_reason") or info.get("syncs_reason") or reason


def _counter_figures(summary: dict[str, Any], capture, model, info: dict[str, Any],
                     state: dict[str, Any] | None, reason: str | None) -> None:
    """summary's sm, dram, pcie, metrics and metrics_error."""
    whole = _figures(model.metrics()) if model is not None else None
    summary["sm"], summary["dram"], summary["pcie"] = _sm_dram(whole, info)
    summary["metrics"] = _metrics_section(info) if capture is not None else None
    if summary["sm"] is not None:
        summary["metrics_error"] = None
    elif info.get("sampled"):
        summary["metrics_error"] = no_counters_reason(info.get("pm") or {})
    else:
        summary["metrics_error"] = ((state or {}).get("metrics_reason") or info.get("metrics_reason")
                                    or reason)


def build_step_figures(capture, state, thresholds_us, host_ns: int,
                       stop_error: str | None) -> dict[str, Any] | None:
    """What loopscope.watch() reads of each light block, built as the
    summary builds it: steps (with their syncs and counters), gpu_error,
    syncs_error, metrics_error, sm, dram, overhead and checks.  No sync
    sites: on a block of generate()'s size (768 steps x 8 syncs) these
    figures take 0.4 ms where summary() takes 26.9 ms, most of it reading
    every kept call and naming its stack's site (CPU, 2026-11-30,
    benchmarks/watch/watch_step_cost.py --block); the watch names sites
    only for a dump, from the breaching block's full summary().
    None for a traced or injected capture (its steps' GPU figures and
    checks come with the full summary only)."""
    collecting = gc.isenabled()
    gc.disable()  # as build_summary: new containers, no cycle
    try:
        info, model, reason, gpu, watched, cols = _analysed(capture, state, thresholds_us,
                                                            stop_error, None)
        if gpu:
            return None
        summary: dict[str, Any] = {"schema": SCHEMA_VERSION, "source": None,
                                   "gpu_error": reason, "host_ms": _ms(host_ns)}
        summary["steps"], _ = _steps(cols, False, thresholds_us, watched and model is not None,
                                     metrics=model.step_metrics() if model is not None else None)
        summary["syncs_error"] = None if watched and model is not None else \
            _syncs_reason(info, state, reason)
        _counter_figures(summary, capture, model, info, state, reason)
        summary["overhead"] = overhead_section(info, state)
        summary["checks"] = live_checks(summary, info, model, state) if capture else []
        return summary
    finally:
        if collecting:
            gc.enable()


def _build_summary(capture, state, thresholds_us, host_ns: int, stop_error: str | None,
                   steps: RangeSteps | None = None, source: str | None = None,
                   resolver=None) -> dict[str, Any]:
    """The summary of a finished profile's capture (None when stopping it
    failed).  `steps`: ranges that act as the steps instead of the live
    ones; every figure is then computed for them as for live steps.
    `source`: where the records came from when not a live profile (a
    trace format's kind, files/_formats); `resolver`: how call stacks
    become sync sites."""
    t0 = time.perf_counter_ns()
    non_finite = start_count()
    info, model, reason, gpu, watched, cols = _analysed(capture, state, thresholds_us,
                                                        stop_error, steps)
    calls = capture.calls() if capture is not None and watched else None
    if resolver is None and calls is not None:  # made only where calls need sites
        resolver = Resolver()
    readiness = step_readiness(cols, calls, resolver) if gpu and model is not None else None
    summary: dict[str, Any] = {"schema": SCHEMA_VERSION}
    summary["source"] = source or ("cupti" if info["traced"] else ("injected" if info["injected"] else None))
    summary["gpu_error"] = None if gpu else reason
    summary["cupti_note"] = info.get("note")
    summary["host_ms"] = _ms(host_ns)
    step_list, step_verdicts = _steps(cols, gpu, thresholds_us, watched and model is not None,
                       None if steps is None else steps.names, readiness,
                       model.step_metrics() if model is not None else None)
    step_names = _step_name_lookup(cols["index"], [s["name"] for s in step_list])
    if gpu and model is not None:
        total = model.total()
        summary["loop"] = _loop(cols, total, model)
        if step_verdicts is not None:  # rule 0: a capture's steps are the capture's
            step_verdicts = _capture_steps(summary["loop"], step_list, step_verdicts)
        summary["graphs"] = _graphs(total, step_list)
        kernels = model.kernels()
        summary["top_kernels"] = _top_kernels(kernels[:TOP_KERNELS],
                                              sum(k["total_ns"] for k in kernels))
        summary["gaps"] = shape_gaps(total["gaps"], thresholds_us, total["busy_ns"])
        summary["gaps"]["histogram"] = _histogram(total["gaps"], model.histogram_edges_ns)
        # idle intervals below a trace's time resolution, merged rather than counted
        summary["gaps"]["merged_below_resolution"] = total["gaps"]["merged"]
        summary["gaps"]["worst"] = _worst_gaps(model.worst_gaps(10), step_names)
        summary["gaps"]["per_stream"] = _stream_section(model.streams(), thresholds_us)
        summary["gpu"] = _gpu_section(total, model.devices(), model.ops_without_launch)
    else:
        summary["gaps"] = None
        summary["gpu"] = None
        summary["loop"] = summary["graphs"] = summary["top_kernels"] = None
    if watched and model is not None:
        summary["syncs"] = build_syncs(calls or [], model.syncs(), model.unknown_copies,
                                       model.sync_gaps(), resolver)
        summary["syncs"].resolver = resolver
        summary["syncs_error"] = None
    else:
        summary["syncs"] = None
        summary["syncs_error"] = _syncs_reason(info, state, reason)
    _counter_figures(summary, capture, model, info, state, reason)
    summary["steps"] = step_list
    if readiness is not None:  # without it no step has graph_readiness
        add_sync_blockers(step_list, summary["syncs"], readiness)
    summary["graph_readiness"] = overview(step_list, readiness) if readiness is not None else None
    summary["ranges"] = _ranges(model, gpu, thresholds_us)
    # before the diagnosis: the projections' host floor takes out what the
    # profile added inside the loop (its in_loop_estimate_ms, _projections)
    summary["overhead"] = overhead_section(info, state)
    summary["diagnosis"] = diagnose(summary, step_verdicts)
    summary["non_finite_note"] = note(non_finite[0])
    summary["dropped_records"] = info.get("dropped_records", 0) if capture else None
    # Launch and sync records that began after the profile stopped: the
    # worker's finish leaves out what it can place after the stop (counted in
    # info), the model ignores the rest (injected records keep their own
    # time line).  Neither is this loop's.
    summary["overhead"]["records_after_stop"] += (model.ignored_records
                                                  if model is not None else 0)
    # What the summary verified about itself (_checks); no capture: the
    # profile did not stop cleanly, nothing could be verified.
    summary["checks"] = live_checks(summary, info, model, state) if capture else []
    summary["overhead"]["summary_ms"] = _ms(time.perf_counter_ns() - t0)
    return summary
