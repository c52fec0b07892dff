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
A projection never exceeds the loop's time (projected <= current), and
never crosses a physical floor (PRODUCT.md), both stated in its basis and in
its "floors":

- the GPU's busy time in the loop's window, on its busiest device
  (loop["gpu_floor_ms"]): nothing that keeps the kernels makes the loop
  shorter.  Only memory_bound changes the kernels; it says so and may go
  below it.
- the host's own work: removing syncs leaves the loop no shorter than its
  time less the time the host was blocked in those syncs (data loading,
  Python and launches stay) and less what loopscope's own capture added to
  the host's time (_profiler_ms), so a sync site wins at most, per sync, the
  idle it caused up to the host's next launch capped by its blocked time
  (the site's cost_in_steps_ms, _syncs.build_syncs).  The idle beyond that
  was the host's own work: the basis says so, and names the launch-free
  host range it lay in (loop["host_ranges"]).  A CUDA graph removes the
  launches and the Python between them, but not the host's time in ranges
  that launch nothing (loop["host_ranges_ms"]: data loading and the like),
  nor pageable host-to-device copies (a capture refuses them; the host
  stays blocked in their calls, loop["pageable_call_ms"], until the memory
  is pinned: the basis names them as what must change first).  Its host
  floor is the larger of the two (they may overlap).  It is not the host
  time less the launch calls' own time: a replay skips the Python and the
  dispatcher that drove the captured launches too (the public eager BERT
  trace: 4.43 ms of host time, 0.20 ms of it in launch calls, for 0.53 ms of
  GPU work), so that figure would hold back wins a graph does make.
  A profile that records a CUDA-graph capture (capturing(): most of its
  launch calls ran nothing on the GPU, as launches into a capturing stream
  do) projects no graph win at all: its time is the capture's, no replay
  was timed, and the host floor is its whole host time; the text says
  what the trace is and asks for a profile of the replays.
  memory_bound keeps the host's own work too: the loop less all its
  blocked time and the capture's cost.
  The blocked time of a sync is the union of its calls, enter to exit (the
  copy and the wait of an `.item()`, the stack capture at the enter
  included): the host time of the calls a sync site issues is subtracted
  with it, their time beyond the wait included (a call outlasts the wait
  CUPTI's sync record shows).  What feeds the sync stays in the floor, and
  a sync site's floor says so (FEEDS_STAY): its Python and the launches
  before its calls (the `y.sum()` of `y.sum().item()`).  A launch record
  carries no stack (nothing ties it to the site) and, live, no duration;
  and removing a sync often keeps what fed it (a `loss` the backward needs,
  a sum accumulated on the GPU instead of read): taking that work out would
  state less host work than stays.  Deleting the feeding code as well can
  therefore take the loop below this floor: H200, 80 `y.sum().item()`
  deleted whole, 16.1 -> 11.9 ms, ~50 us of host work a site of which the
  profile saw ~9 us blocked (benchmarks/tour/projection_check.py).  The capture's
  cost is an estimate (summary["overhead"]["in_loop_estimate_ms"], counts
  of the whole profile times the costs measured in a C loop), taken out
  only where loopscope's capture ran in the loop (overhead's
  in_loop_captured: live, injected, a loopscope export read back); another
  profiler cost its loop what this code cannot know, and the floor says so."""
from __future__ import annotations

from itertools import compress, count
from typing import Any

from ._names import clip, display_path

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
RANGE_NAME_CHARS = 60  # a host range's name in a basis
# A profile more than this share of whose launch calls ran no GPU op
# recorded a CUDA-graph capture (capturing()): launches into a capturing
# stream build the graph and run nothing.  SGLang's capture on an MI300X:
# 544 of 546; eager traces of the corpus: 0 to 4% (a launch whose op the
# trace lost, ops outside the trace's window).
CAPTURE_SHARE = 0.5
# What a sync site's host floor leaves in, said in its floor (see the doc).
FEEDS_STAY = ("; what feeds the syncs stays in: the Python and launches before their calls "
              "(the y.sum() of y.sum().item()), which no record ties to them")


def ms_text(ms: float) -> str:
    """A duration in ms with 3-4 significant digits."""
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    if ms >= 1:
        return f"{ms:.2f}"
    return f"{ms:.3f}"


def _floors(host_ms: float, host_text: str, gpu_ms: float, kernels_change: bool = False
            ) -> dict[str, Any]:
    """A projection's two floors (see the module's doc): host_ms, the
    host's own work that stays (host_text: what it is), and gpu_ms, the
    GPU's busy time, which binds unless the change is to the kernels."""
    return {"host_ms": round(max(host_ms, 0.0), 6), "host": host_text,
            "gpu_busy_ms": round(gpu_ms, 6), "kernels_change": kernels_change}


def _floor_text(f: dict[str, Any]) -> str:
    gpu = (f"the GPU busy {ms_text(f['gpu_busy_ms'])} ms binds only kernels left as they are: "
           "this changes the kernels" if f["kernels_change"]
           else f"the GPU busy {ms_text(f['gpu_busy_ms'])} ms")
    return f"; floors: the host's own work {ms_text(f['host_ms'])} ms ({f['host']}), {gpu}"


def _entry(kind: str, what: str, current: float, saved: float, basis: str,
           scope: str = "this loop", caveat: str = "", floors: dict[str, Any] | None = None,
           **more: Any) -> dict[str, Any]:
    saved = min(max(saved, 0.0), current)
    if floors is not None:
        floor = max(floors["host_ms"], 0.0 if floors["kernels_change"] else floors["gpu_busy_ms"])
        saved = max(min(saved, current - floor), 0.0)
        basis += _floor_text(floors)
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
        # worth listing under "What it would win" (the views leave the rest out)
        "notable": speedup is None or speedup >= NOTABLE_SPEEDUP,
        "text": f"{what} {gain}: {ms_text(current)} -> {ms_text(projected)} ms" + caveat,
        "basis": basis,
        "floors": floors,
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
        share = (f"{100 * sum(kept) / saved:.0f}% of this saving" if sum(kept) <= saved
                 else "more than this whole saving")  # a share over 100% reads as a slip
        caveat += f", the longest ({named} ms) too, {share}, which may lie outside any loop"
    return "the profiled time line", caveat + "; mark steps to project the loop alone)"


def _gpu_floor(loop: dict[str, Any]) -> float:
    """The GPU busy time of the loop's window (a summary saved before the
    floors had only the busy time of the loop's own ops)."""
    return max(loop.get("gpu_floor_ms") or 0.0, 0.0) or loop["busy_ms"]


def _profiler_ms(summary: dict[str, Any]) -> float | None:
    """What loopscope's capture added to the host's time in the loop, as
    summary["overhead"] estimates it (its in_loop_estimate_ms: counts of
    the whole profile, so no less than the loop's share); None where
    another profiler recorded the loop (its cost is unknown here)."""
    overhead = summary.get("overhead") or {}
    if not overhead.get("in_loop_captured"):
        return None
    return max(overhead.get("in_loop_estimate_ms") or 0.0, 0.0)


def _host_floor(loop: dict[str, Any], blocked: float, profiler: float | None, syncs: str,
                gpu_ms: float, kernels_change: bool = False, removes_syncs: bool = False
                ) -> dict[str, Any]:
    """The floors of a change that keeps the host's own work: the host's
    time in the loop less `blocked` (the time blocked in `syncs`, the
    calls' whole time) and less `profiler` (_profiler_ms), each stated;
    removes_syncs: the change removes those syncs, and the floor says what
    feeds them stays in (FEEDS_STAY)."""
    text = (f"{_span_name(loop)} less the {ms_text(blocked)} ms the host was blocked in "
            f"{syncs} (their calls' whole time)")
    if profiler is None:
        text += "; the cost of the profiler that recorded it is unknown, left in"
    else:
        text += f" and the {ms_text(profiler)} ms loopscope's capture added (estimated)"
    if removes_syncs:
        text += FEEDS_STAY
    floors = _floors(_host_span(loop) - blocked - (profiler or 0.0), text, gpu_ms,
                     kernels_change)
    floors.update(blocked_ms=round(blocked, 6),
                  profiler_ms=None if profiler is None else round(profiler, 6))
    return floors


def _host_span(loop: dict[str, Any]) -> float:
    """The time the host worked through the loop: the steps' own span (the
    loop may run on after the last step while the GPU drains), or without
    steps the whole time line."""
    host = loop.get("host_ms")
    return loop["ms"] if host is None else min(host, loop["ms"])


def _span_name(loop: dict[str, Any]) -> str:
    return "the steps' host time" if loop.get("host_ms") is not None else "the time line"


def _host_ranges_text(loop: dict[str, Any]) -> str:
    """The launch-free host ranges of the loop, for a graph's host floor."""
    named = loop.get("host_ranges") or []
    if not named:
        return "no range that launches nothing was marked in the loop"
    return "its time in ranges that launch nothing: " + ", ".join(
        f"{clip(r['name'], RANGE_NAME_CHARS)} {ms_text(r['host_ms'])} ms" for r in named)


def capturing(loop: dict[str, Any]) -> tuple[int, int] | None:
    """(launch calls that ran nothing on the GPU, launch calls) when the
    profile recorded a CUDA-graph capture: more than CAPTURE_SHARE of its
    launch calls ran no GPU op (launches into a capturing stream only
    record the graph); None otherwise, or where no launch call was timed."""
    calls = loop.get("launch_calls") or 0
    idle = calls - min(loop.get("ran_ops") or 0, calls)
    if calls and idle > CAPTURE_SHARE * calls:
        return idle, calls
    return None


def _graph_host_floor(loop: dict[str, Any]) -> tuple[float, str]:
    """The host work a CUDA graph leaves in place (see the module's doc):
    the launch-free host ranges and the calls of pageable host-to-device
    copies, the larger of the two (they may overlap); for a capture, the
    whole host time."""
    text = _host_ranges_text(loop)
    ranges = loop.get("host_ranges_ms") or 0.0
    pageable = loop.get("pageable_call_ms") or 0.0
    copies = loop.get("pageable_copies") or 0
    if copies:
        text += (f"; {copies} pageable host-to-device {'copy' if copies == 1 else 'copies'} "
                 f"held the host {ms_text(pageable)} ms in {'its call' if copies == 1 else 'their calls'}"
                 ", which a graph cannot take in: pin that memory first (tensor.pin_memory())")
    return max(ranges, pageable), text


def _launch_gaps(loop: dict[str, Any], graphs: dict[str, Any] | None,
                 gaps: dict[str, Any]) -> dict[str, Any]:
    floor_ms = REPLAY_GAP_FLOOR_US * loop["ops"] / 1e3
    projected = loop["busy_ms"] + floor_ms + loop["sync_idle_ms"]
    replaying = bool(graphs and graphs["steps_replaying"])
    basis = (f"GPU busy {ms_text(loop['busy_ms'])} ms + {REPLAY_GAP_FLOOR_US:g} us replay gap x "
             f"{loop['ops']} GPU ops + {ms_text(loop['sync_idle_ms'])} ms idle in syncs")
    capture = capturing(loop)
    if capture is not None:  # the trace is the capture: no replay was timed
        idle, calls = capture
        said = (f"{idle} of its {calls} launch calls ran nothing on the GPU: "
                "the profile recorded a CUDA-graph capture")
        floors = _floors(_host_span(loop), f"{_span_name(loop)}, all of it: {said}, "
                         "and no replay of the graph was timed", _gpu_floor(loop))
        return _entry("launch_gaps", "a CUDA graph", loop["ms"], 0.0, basis,
                      _scope(loop, gaps, 0.0)[0],
                      f" ({said}; its time is the capture's, not a loop's: profile the graph's "
                      "replays)", floors, capture={"idle_launches": idle, "launch_calls": calls})
    host_ms, host_text = _graph_host_floor(loop)
    floors = _floors(host_ms, host_text, _gpu_floor(loop))
    scope, caveat = _scope(loop, gaps, loop["ms"] - projected)
    if replaying:
        return _entry("replay_gaps", "cutting the host time between CUDA-graph replays",
                      loop["ms"], loop["ms"] - projected, basis, scope, caveat, floors)
    return _entry("launch_gaps", "a CUDA graph (no launch gaps)", loop["ms"],
                  loop["ms"] - projected, basis, scope, caveat, floors)


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
                gaps: dict[str, Any], profiler: float | None = None) -> list[dict[str, Any]]:
    if not syncs:
        return []
    # with steps, what the syncs made inside them caused (see the doc)
    in_steps = loop["from"] == "steps"
    key = "gap_in_steps_ms" if in_steps else "gap_ms"
    # what removing them wins: per sync, capped by its blocked time (a
    # summary saved before the floors: the idle alone, capped below)
    cost_key = "cost_in_steps_ms" if in_steps else "cost_ms"
    blocked_key = "blocked_in_steps_ms" if in_steps else "blocked_ms"

    def cost(s: dict[str, Any]) -> float:
        return min(s.get(cost_key, s[key]), s.get(blocked_key, s["blocked_ms"]))

    costly = sorted((s for s in syncs["sites"] if s.get(key)),
                    key=lambda s: (-cost(s), -s[key]))[:SYNC_SITES]
    out = []
    for site in costly:
        code = site.get("call") or site.get("code")
        outside = round(site.get("gap_ms", 0.0) - site[key], 6)
        its = "its sync" if site["count"] == 1 else f"its {site['count']} syncs"
        blocked = site.get(blocked_key, site["blocked_ms"])
        basis = (f"the GPU idled {ms_text(site[key])} ms in gaps {its} caused"
                 + (" inside steps" if in_steps else "")
                 + f"; the host was blocked {ms_text(blocked)} ms in them")
        if outside > 0:
            basis += f" ({ms_text(outside)} ms of gaps outside steps left out)"
        won = cost(site)
        if site[key] - won > 1e-6:
            basis += _own_work_text(loop, site[key] - won)
        scope, caveat = _scope(loop, {}, site[key])
        if caveat:  # a site's own syncs, wherever they were
            caveat = " (no steps marked: its syncs anywhere on the time line count)"
        floors = _host_floor(loop, blocked, profiler, "these syncs", _gpu_floor(loop),
                             removes_syncs=True)
        out.append(_entry(
            "sync_site", _site_what(site, code), loop["ms"], won, basis, scope, caveat, floors,
            site={"file": site.get("file"), "line": site.get("line"), "code": code,
                  "kind": site["kind"], "count": site["count"],
                  "blocked_ms": blocked, "gap_ms": site[key], "cost_ms": round(won, 6)}))
    return out


def _own_work_text(loop: dict[str, Any], beyond_ms: float) -> str:
    """Why a sync site wins less than the idle its syncs were charged
    with: the host went on with its own work after each wait, and where
    the loop's idle lies inside a launch-free host range, which one."""
    text = (f"; removing them wins at most the time the host waited in each: the other "
            f"{ms_text(beyond_ms)} ms of that idle the host spent on its own work before its "
            "next launch")
    named = [r for r in loop.get("host_ranges") or [] if r["idle_ms"] > 0]
    if named and loop.get("idle_ms"):
        top = named[0]
        text += (f" ({100 * top['idle_ms'] / loop['idle_ms']:.0f}% of the loop's idle time lies "
                 f"inside {clip(top['name'], RANGE_NAME_CHARS)}, {ms_text(top['host_ms'])} ms "
                 "of host time: make that faster or overlap it)")
    else:
        text += " (Python and launches between the wait and the next GPU op)"
    return text


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
    syncs = summary.get("syncs") or {}
    blocked = (syncs.get("blocked_in_steps_ms", syncs.get("blocked_ms", 0.0))
               if loop["from"] == "steps" else syncs.get("blocked_ms", 0.0)) or 0.0
    floors = _host_floor(loop, blocked, _profiler_ms(summary), "syncs", _gpu_floor(loop),
                         kernels_change=True)
    return [_entry("memory_bound", what, loop["ms"], saved,
                   f"{ms_text(busy)} ms of GPU busy time at {DRAM_ACHIEVABLE_PCT:g}% of peak DRAM "
                   "throughput (what a streaming copy reaches) instead of its measured share",
                   floors=floors)]


def project(summary: dict[str, Any], verdict: str, step_verdicts: list[str] | None = None
            ) -> list[dict[str, Any]]:
    """The projections of a summary whose loop reads `verdict` (see the
    module's doc), longest saving first; [] without a GPU time line.
    step_verdicts: see diagnose()."""
    loop = summary.get("loop")
    if not loop or not loop["ms"] or summary.get("gaps") is None:
        return []
    out = [_launch_gaps(loop, summary.get("graphs"), summary["gaps"])]
    out += _sync_sites(loop, summary.get("syncs"), summary["gaps"], _profiler_ms(summary))
    out += _memory_bound(summary, loop, verdict, step_verdicts)
    out.sort(key=lambda p: -p["saved_ms"])
    return out
