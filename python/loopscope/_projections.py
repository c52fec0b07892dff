"""Projections: what removing each cause would win, in ms and as a speedup
("a CUDA graph would make this loop ~2.3x faster: 9.56 -> 4.06 ms").
summary["diagnosis"]["projections"], longest saving first; the report
shows them right after the verdict.

The loop's time (summary["loop"]): from the first step's start to the end
of the last step or of its last GPU op, whichever is later (with no steps:
the GPU's time line, first op to last).  Each projection is arithmetic on
figures the model measured for that window:

- launch_gaps: the loop with every launch gap gone, as a CUDA graph replays
  it: its GPU busy time, plus REPLAY_GAP_FLOOR_US for each GPU op (a
  replay still leaves that gap between kernels), plus the idle time that
  syncs caused (a graph does not remove a sync).  When the steps already
  replay graphs the same figure reads as cutting the host time between
  replays ("replay_gaps").
- sync_site: one per sync site (the SYNC_SITES most costly): the loop
  without the GPU idle time the site's syncs caused (the sync-caused gaps
  each of its syncs overlapped longest); its host blocked time is given
  beside.
- memory_bound: the memory-bound steps (MEMORY_BOUND) at DRAM_ACHIEVABLE_PCT
  of peak DRAM throughput: each one's busy time scaled by its DRAM
  throughput over that figure.
A projection never exceeds the loop's time (projected <= current)."""
from __future__ import annotations

from itertools import compress, count
from typing import Any

from ._names import display_path

# The gap a CUDA-graph replay still leaves between consecutive kernels:
# GPU_FACTS.md measured a mean of 0.55 us (the demo loop replayed from a
# graph on an H200), benchmarks/RESULTS.md 0.76 us on the same loop; this is
# their middle.  benchmarks/verdicts_gpu.py checks it on the GPU machine.
REPLAY_GAP_FLOOR_US = 0.65
# The most DRAM throughput a memory-bound loop reaches: GPU_FACTS.md, a
# streaming copy on an H200 read 84% of peak (4 TB/s of the 4.8 TB/s spec).
DRAM_ACHIEVABLE_PCT = 84.0
SYNC_SITES = 3
NOTABLE_SPEEDUP = 1.05  # below this a projection says there is little to win


def ms_text(ms: float) -> str:
    """A duration in ms with 3-4 significant digits."""
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    if ms >= 1:
        return f"{ms:.2f}"
    return f"{ms:.3f}"


def _entry(kind: str, what: str, current: float, saved: float, basis: str,
           **more: Any) -> dict[str, Any]:
    saved = min(max(saved, 0.0), current)
    projected = current - saved
    speedup = current / projected if projected > 0 else None
    if speedup is None:
        gain = "would leave nothing of this loop"
    elif speedup >= NOTABLE_SPEEDUP:
        gain = f"would make this loop ~{speedup:.1f}x faster"
    else:
        gain = f"would win little ({speedup:.2f}x)"
    return {
        "kind": kind,
        "what": what,
        "current_ms": round(current, 6),
        "projected_ms": round(projected, 6),
        "saved_ms": round(saved, 6),
        "speedup": None if speedup is None else round(speedup, 3),
        "text": f"{what} {gain}: {ms_text(current)} -> {ms_text(projected)} ms",
        "basis": basis,
        **more,
    }


def _launch_gaps(loop: dict[str, Any], graphs: dict[str, Any] | None) -> dict[str, Any]:
    floor_ms = REPLAY_GAP_FLOOR_US * loop["ops"] / 1e3
    projected = loop["busy_ms"] + floor_ms + loop["sync_idle_ms"]
    replaying = bool(graphs and graphs["steps_replaying"])
    basis = (f"GPU busy {ms_text(loop['busy_ms'])} ms + {REPLAY_GAP_FLOOR_US:g} us replay gap x "
             f"{loop['ops']} GPU ops + {ms_text(loop['sync_idle_ms'])} ms idle in syncs")
    if replaying:
        return _entry("replay_gaps", "cutting the host time between CUDA-graph replays",
                      loop["ms"], loop["ms"] - projected, basis)
    return _entry("launch_gaps", "a CUDA graph (no launch gaps)", loop["ms"],
                  loop["ms"] - projected, basis)


def _sync_sites(loop: dict[str, Any], syncs: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not syncs:
        return []
    costly = sorted((s for s in syncs["sites"] if s.get("gap_ms")),
                    key=lambda s: -s["gap_ms"])[:SYNC_SITES]
    out = []
    for site in costly:
        where = (f"{display_path(site['file'])}:{site['line']}" if site.get("file")
                 else "a sync with no Python frame")
        code = site.get("call") or site.get("code")
        what = f"removing the sync at {where}" + (f" ({code})" if code else "")
        out.append(_entry(
            "sync_site", what, loop["ms"], site["gap_ms"],
            f"the GPU idled {ms_text(site['gap_ms'])} ms in gaps its {site['count']} syncs "
            f"caused; the host was blocked {ms_text(site['blocked_ms'])} ms in them",
            site={"file": site.get("file"), "line": site.get("line"), "code": code,
                  "kind": site["kind"], "count": site["count"],
                  "blocked_ms": site["blocked_ms"], "gap_ms": site["gap_ms"]}))
    return out


def _memory_bound(summary: dict[str, Any], loop: dict[str, Any], verdict: str,
                  step_verdicts: list[str] | None = None) -> list[dict[str, Any]]:
    if step_verdicts is not None:  # every step's, in order: no dict read per step
        steps = [summary["steps"][k] for k in compress(count(), map(
            "MEMORY_BOUND".__eq__, step_verdicts))]
    else:
        steps = [s for s in summary["steps"] if s.get("verdict") == "MEMORY_BOUND"]
    parts = [(s["gpu_ms"], s.get("dram_busy_pct")) for s in steps]
    if not steps and verdict == "MEMORY_BOUND" and summary.get("dram"):
        parts = [(loop["busy_ms"], summary["dram"].get("throughput_busy_pct"))]
    parts = [(ms, pct) for ms, pct in parts if ms and pct]
    if not parts:
        return []
    saved = sum(ms * (1 - pct / DRAM_ACHIEVABLE_PCT) for ms, pct in parts
                if pct < DRAM_ACHIEVABLE_PCT)
    what = (f"the {len(steps)} memory-bound steps at the measured peak DRAM throughput"
            if steps else "the loop at the measured peak DRAM throughput")
    busy = sum(ms for ms, _ in parts)
    return [_entry("memory_bound", what, loop["ms"], saved,
                   f"{ms_text(busy)} ms of GPU busy time at {DRAM_ACHIEVABLE_PCT:g}% of peak DRAM "
                   "throughput (what a streaming copy reaches) instead of its measured share")]


def project(summary: dict[str, Any], verdict: str, step_verdicts: list[str] | None = None
            ) -> list[dict[str, Any]]:
    """The projections of a summary whose loop reads `verdict` (see the
    module's doc), longest saving first; [] without a GPU time line.
    step_verdicts: see diagnose()."""
    loop = summary.get("loop")
    if not loop or not loop["ms"] or summary.get("gaps") is None:
        return []
    out = [_launch_gaps(loop, summary.get("graphs"))]
    out += _sync_sites(loop, summary.get("syncs"))
    out += _memory_bound(summary, loop, verdict, step_verdicts)
    out.sort(key=lambda p: -p["saved_ms"])
    return out
