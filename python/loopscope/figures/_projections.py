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
  beside.  With steps only the syncs made inside steps count: a sync
  before or after the loop (set-up, a final copy) wins the loop nothing.

Without steps the "loop" is the GPU's whole time line, set-up and
tear-down included: the projections then say so ("the profiled time
line", not "this loop") and name the longest gaps they rest on when those
hold most of the saving (LONG_GAP_SHARE), for they may lie outside any loop.
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
# their middle.  benchmarks/tour/verdicts_gpu.py checks it on the GPU machine.
REPLAY_GAP_FLOOR_US = 0.65
# The most DRAM throughput a memory-bound loop reaches: GPU_FACTS.md, a
# streaming copy on an H200 read 84% of peak (4 TB/s of the 4.8 TB/s spec).
DRAM_ACHIEVABLE_PCT = 84.0
SYNC_SITES = 3
NOTABLE_SPEEDUP = 1.05  # below this a projection says there is little to win
# Without steps: the longest gaps are named when together they hold at
# least this share of a projection's saving (2 set-up gaps of 13.2 and
# 11.6 ms were 87% of a "50x faster" claimed for a 29 ms time line).
LONG_GAP_SHARE = 0.5
LONG_GAPS_NAMED = 3


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
           scope: str = "this loop", caveat: str = "", **more: Any) -> dict[str, Any]:
    saved = min(max(saved, 0.0), current)
    projected = current - saved
    speedup = current / projected if projected > 0 else None
    if speedup is None:
        gain = f"would leave nothing of {scope}"
    elif speedup >= NOTABLE_SPEEDUP:
        gain = f"would make {scope} ~{speedup:.1f}x faster"
    else:
        gain = f"would win little ({speedup:.2f}x)"
    return {
        "kind": kind,
        "what": what,
        "current_ms": round(current, 6),
        "projected_ms": round(projected, 6),
        "saved_ms": round(saved, 6),
        "speedup": None if speedup is None else round(speedup, 3),
        "text": f"{what} {gain}: {ms_text(current)} -> {ms_text(projected)} ms" + caveat,
        "basis": basis,
        **more,
    }


def _scope(loop: dict[str, Any], gaps: dict[str, Any], saved: float) -> tuple[str, str]:
    """What a projection speaks of, and the caveat after its figures: with
    steps "this loop"; without, "the profiled time line", naming the
    longest gaps when they hold LONG_GAP_SHARE of the saving."""
    if loop["from"] == "steps":
        return "this loop", ""
    caveat = " (no steps marked: every gap of the GPU time line counts"
    longest = [g["duration_us"] / 1e3 for g in (gaps.get("worst") or [])[:LONG_GAPS_NAMED]]
    kept: list[float] = []
    for ms in longest:
        if sum(kept) >= LONG_GAP_SHARE * saved:
            break
        kept.append(ms)
    if kept and saved > 0 and sum(kept) >= LONG_GAP_SHARE * saved:
        named = ", ".join(ms_text(ms) for ms in kept)
        caveat += (f", the longest ({named} ms) too, {100 * sum(kept) / saved:.0f}% of this "
                   "saving, which may lie outside any loop")
    return "the profiled time line", caveat + "; mark steps to project the loop alone)"


def _launch_gaps(loop: dict[str, Any], graphs: dict[str, Any] | None,
                 gaps: dict[str, Any]) -> dict[str, Any]:
    floor_ms = REPLAY_GAP_FLOOR_US * loop["ops"] / 1e3
    projected = loop["busy_ms"] + floor_ms + loop["sync_idle_ms"]
    replaying = bool(graphs and graphs["steps_replaying"])
    basis = (f"GPU busy {ms_text(loop['busy_ms'])} ms + {REPLAY_GAP_FLOOR_US:g} us replay gap x "
             f"{loop['ops']} GPU ops + {ms_text(loop['sync_idle_ms'])} ms idle in syncs")
    scope, caveat = _scope(loop, gaps, loop["ms"] - projected)
    if replaying:
        return _entry("replay_gaps", "cutting the host time between CUDA-graph replays",
                      loop["ms"], loop["ms"] - projected, basis, scope, caveat)
    return _entry("launch_gaps", "a CUDA graph (no launch gaps)", loop["ms"],
                  loop["ms"] - projected, basis, scope, caveat)


def _site_what(site: dict[str, Any], code: str | None) -> str:
    """"removing the sync at loop.py:12 (x.item())", or for a site with no
    Python frame "removing the Tensor.item() sync with no Python frame"."""
    if site.get("file"):
        return (f"removing the sync at {display_path(site['file'])}:{site['line']}"
                + (f" ({code})" if code else ""))
    count = site["count"]
    syncs = "sync" if count == 1 else f"{count} syncs"
    if code:
        return f"removing the {code} {syncs} with no Python frame"
    return f"removing the {syncs} with no Python frame ({site['kind']})"


def _sync_sites(loop: dict[str, Any], syncs: dict[str, Any] | None,
                gaps: dict[str, Any]) -> list[dict[str, Any]]:
    if not syncs:
        return []
    # with steps, what the syncs made inside them caused (see the doc)
    key = "gap_in_steps_ms" if loop["from"] == "steps" else "gap_ms"
    costly = sorted((s for s in syncs["sites"] if s.get(key)),
                    key=lambda s: -s[key])[:SYNC_SITES]
    out = []
    for site in costly:
        code = site.get("call") or site.get("code")
        outside = round(site.get("gap_ms", 0.0) - site[key], 6)
        its = "its sync" if site["count"] == 1 else f"its {site['count']} syncs"
        basis = (f"the GPU idled {ms_text(site[key])} ms in gaps {its} caused" + (" inside steps" if key == "gap_in_steps_ms" else "")
                 + f"; the host was blocked {ms_text(site['blocked_ms'])} ms in them")
        if outside > 0:
            basis += f" ({ms_text(outside)} ms of gaps outside steps left out)"
        scope, caveat = _scope(loop, {}, site[key])
        if caveat:  # a site's own syncs, wherever they were
            caveat = " (no steps marked: its syncs anywhere on the time line count)"
        out.append(_entry(
            "sync_site", _site_what(site, code), loop["ms"], site[key], basis, scope, caveat,
            site={"file": site.get("file"), "line": site.get("line"), "code": code,
                  "kind": site["kind"], "count": site["count"],
                  "blocked_ms": site["blocked_ms"], "gap_ms": site[key]}))
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
    out = [_launch_gaps(loop, summary.get("graphs"), summary["gaps"])]
    out += _sync_sites(loop, summary.get("syncs"), summary["gaps"])
    out += _memory_bound(summary, loop, verdict, step_verdicts)
    out.sort(key=lambda p: -p["saved_ms"])
    return out
