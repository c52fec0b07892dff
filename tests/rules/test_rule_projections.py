"""The cut-offs of the projections (_projections.py), each on the cut-off
and beside it: a speedup of 1.05x still reads "~N x faster" (below it
"would win little"), only the three most costly sync sites are
projected, and durations keep 3-4 significant digits across 100, 10 and
1 ms.  The projection reads the summary's loop, gaps and sync sites:
they are written here as the summary carries them, so a figure lands
exactly on a cut-off (a loop built from records puts its ms on fractions
that never do).  The documented numbers are written here, never imported:
1.05x, three sites, the shown digits."""
from __future__ import annotations

import html

import pytest

from loopscope.figures import _projections

NOTABLE = 1.05
SITES = 3


def summary(loop_ms: float, site_gaps_ms: list[float]) -> dict:
    """A loop of steps, 10 GPU ops, nothing idle in syncs (so the CUDA-graph
    projection saves only launch gaps), and one sync site per gap given:
    site k at loop.py:10+k, one item() sync whose gap in steps is that figure."""
    sites = [{"file": "/work/loop.py", "line": 10 + k, "function": "train", "code": "x.item()",
              "call": "x.item()", "kind": "item", "count": 1, "blocked_ms": 100.0,
              "gap_ms": gap, "gap_in_steps_ms": gap, "apis": {}, "steps": [0]}
             for k, gap in enumerate(site_gaps_ms)]
    return {"loop": {"from": "steps", "ms": loop_ms, "busy_ms": loop_ms / 2, "idle_ms": loop_ms / 2,
                     "sync_idle_ms": 0.0, "ops": 10, "kernels": 10},
            "gaps": {"worst": []}, "syncs": {"sites": sites}, "steps": [], "graphs": None}


def floored(loop_ms: float, gpu_ms: float, cost_ms: float, blocked_ms: float,
            drain_ms: float = 0.0) -> dict:
    """One site whose syncs caused cost_ms of idle up to the next launch
    (each capped by its own wait, _syncs.build_syncs) and blocked the host
    blocked_ms, in a loop whose steps' host time is the loop less drain_ms
    (the GPU's work after the last step) and whose GPU was busy gpu_ms in
    its window."""
    s = summary(loop_ms, [cost_ms])
    s["loop"].update(host_ms=loop_ms - drain_ms, gpu_floor_ms=gpu_ms, busy_ms=gpu_ms)
    s["syncs"]["sites"][0].update(cost_in_steps_ms=cost_ms, blocked_in_steps_ms=blocked_ms,
                                  blocked_ms=blocked_ms)
    return s


@pytest.mark.parametrize("cost_ms, blocked_ms, saved_ms", [
    (2.0, 1.0, 1.0),    # the host waited 1 ms: the other 1 ms of idle was its own work
    (2.0, 2.0, 2.0),    # on the floor
    (2.0, 3.0, 2.0)])   # the wait outlasted the idle: the idle is the win
def test_removing_syncs_never_goes_below_the_hosts_own_work(cost_ms, blocked_ms, saved_ms):
    """Issue 39: the loop (20 ms of host time) less the time blocked in the
    site's syncs is the host's own work, which stays."""
    (p,) = sync_projections(floored(20.0, 1.0, cost_ms, blocked_ms))
    assert p["saved_ms"] == saved_ms
    # the GPU drains 0.5 ms after the steps: the host floor is lower by as
    # much, but a site still wins no more than its waits
    (drained,) = sync_projections(floored(20.0, 1.0, cost_ms, blocked_ms, drain_ms=0.5))
    assert drained["saved_ms"] == saved_ms
    assert drained["floors"]["host_ms"] == 19.5 - blocked_ms
    assert p["projected_ms"] >= 20.0 - blocked_ms
    assert p["floors"]["host_ms"] == 20.0 - blocked_ms
    assert f"floors: the host's own work {20.0 - blocked_ms:.1f} ms" in p["basis"]


# Issue 39, the H200 run of benchmarks/tour/projection_check.py: the profiled
# host time holds the capture's own cost, which the loop without the profiler
# never pays.  Where loopscope's capture ran in the loop (overhead's
# in_loop_captured) its estimate (in_loop_estimate_ms) leaves the host
# floor; a trace another profiler recorded cannot, and says so.
@pytest.mark.parametrize("captured, estimate_ms, profiler_ms", [
    (True, 1.0, 1.0), (True, 0.0, 0.0), (False, 1.0, None), (None, 1.0, None)])
def test_the_host_floor_leaves_out_what_the_capture_added(captured, estimate_ms, profiler_ms):
    """A 10 ms loop whose host worked all of it and waited in no sync, one
    memory-bound step of 6 ms busy at 42% of peak DRAM throughput: half of
    84%, so 3 ms to win at the peak.  The host's own work (10 ms) holds it
    to nothing, unless the capture added estimate_ms of it: then exactly
    that much is won."""
    s = floored(10.0, 6.0, 0.0, 0.0)  # a site with no cost: no sync projection
    s["steps"] = [{"gpu_ms": 6.0, "dram_busy_pct": 42.0, "verdict": "MEMORY_BOUND"}]
    s["overhead"] = {"in_loop_estimate_ms": estimate_ms}
    if captured is not None:  # None: a summary saved before the flag
        s["overhead"]["in_loop_captured"] = captured
    (p,) = [x for x in _projections.project(s, "MEMORY_BOUND") if x["kind"] == "memory_bound"]
    taken = profiler_ms or 0.0
    assert p["floors"]["host_ms"] == 10.0 - taken
    assert p["floors"]["profiler_ms"] == profiler_ms and p["floors"]["blocked_ms"] == 0.0
    assert p["saved_ms"] == taken  # 3 ms were there to win; the floor leaves this
    if profiler_ms is None:
        assert ("the cost of the profiler that recorded it is unknown, left in"
                in p["floors"]["host"])
    else:
        shown = {1.0: "1.00", 0.0: "0.000"}[taken]  # 3-4 significant digits
        assert p["floors"]["host"].endswith(
            f"and the {shown} ms loopscope's capture added (estimated)")


@pytest.mark.parametrize("captured, floor_ms", [(True, 20.0 - 1.0 - 0.25),
                                                (False, 20.0 - 1.0)])
def test_a_sync_sites_host_floor_states_both_subtractions(captured, floor_ms):
    """A site blocking 1 ms (its calls' whole time) in a 20 ms loop, the
    capture's cost estimated at 0.25 ms: the stated floor is 18.75 ms live,
    19 ms from a trace file; what the site wins (its waits) is the same."""
    s = floored(20.0, 1.0, 2.0, 1.0)
    s["overhead"] = {"in_loop_estimate_ms": 0.25, "in_loop_captured": captured}
    (p,) = sync_projections(s)
    assert p["saved_ms"] == 1.0
    assert p["floors"]["host_ms"] == floor_ms and p["floors"]["blocked_ms"] == 1.0
    assert f"floors: the host's own work {floor_ms:.1f} ms (the steps' host time less the " \
           "1.00 ms the host was blocked in these syncs (their calls' whole time)" in p["basis"]


@pytest.mark.parametrize("gpu_ms, saved_ms", [(9.0, 1.0), (7.0, 2.0), (8.0, 2.0)])
def test_no_projection_goes_below_the_gpu_busy_time(gpu_ms, saved_ms):
    """A 10 ms loop, a site costing 2 ms with 5 ms of waits: the GPU busy
    9 ms leaves 1 ms to win; at 8 ms the win just fits; at 7 ms it is whole.
    The CUDA-graph projection is held at the GPU's busy time too."""
    s = floored(10.0, gpu_ms, 2.0, 5.0)
    (p,) = sync_projections(s)
    assert p["saved_ms"] == saved_ms
    assert p["floors"]["gpu_busy_ms"] == gpu_ms
    s["loop"]["busy_ms"] = 0.0  # a graph formula that would fall below the window's busy time
    graph = next(x for x in _projections.project(s, "CPU_LAUNCH_BOUND")
                 if x["kind"] == "launch_gaps")
    assert graph["projected_ms"] == gpu_ms


def sync_projections(s: dict) -> list[dict]:
    return [p for p in _projections.project(s, "SYNC_BOUND") if p["kind"] == "sync_site"]


@pytest.mark.parametrize("saved_ms, notable", [(0.5, True), (0.49, False)])
def test_a_projection_is_worth_naming_from_1_05x(saved_ms, notable):
    """10.5 ms loop, a site whose syncs cost 0.5 ms: 10.5 / 10.0 is exactly
    1.05x, "faster"; 0.49 ms (1.049x) "would win little"."""
    (p,) = sync_projections(summary(10.5, [saved_ms]))
    projected = 10.5 - saved_ms
    speedup = 10.5 / projected
    assert (speedup >= NOTABLE) == notable
    assert (p["current_ms"], p["projected_ms"], p["speedup"]) == (
        10.5, pytest.approx(projected), round(speedup, 3))
    gain = f"would make this loop ~{speedup:.1f}x faster" if notable else \
        f"would win little ({speedup:.2f}x)"
    assert p["text"] == (f"removing the sync at /work/loop.py:10 (x.item()) {gain}: "
                         f"10.5 -> {projected:.1f} ms")


@pytest.mark.parametrize("sites", [3, 4])
def test_the_three_most_costly_sync_sites_are_projected(sites):
    """Sites costing 1, 4, 2 (and 3) ms: the three most costly are projected,
    the longest saving first; a fourth is left out."""
    gaps = [1.0, 4.0, 2.0, 3.0][:sites]
    projections = sync_projections(summary(20.0, gaps))
    costly = sorted(gaps, reverse=True)[:SITES]
    assert [p["saved_ms"] for p in projections] == costly
    assert [p["site"]["line"] for p in projections] == [10 + gaps.index(g) for g in costly]


@pytest.mark.parametrize("loop_ms, shown", [
    (100.0, "100"), (99.9, "99.9"), (10.0, "10.0"), (9.99, "9.99"), (1.0, "1.00"),
    (0.999, "0.999")])
def test_durations_are_shown_with_3_or_4_significant_digits(loop_ms, shown):
    """A projection's figures: whole ms from 100 ms, one decimal from 10 ms,
    two from 1 ms, three below (written out here for each side of each cut)."""
    (launch,) = [p for p in _projections.project(summary(loop_ms, []), "SYNC_BOUND")
                 if p["kind"] == "launch_gaps"]
    assert launch["current_ms"] == loop_ms
    assert f": {shown} -> " in launch["text"]


@pytest.mark.parametrize("gaps_ms, named", [([4.0, 3.0, 3.0, 3.0], [4.0, 3.0, 3.0]),
                                            ([3.0, 3.0, 3.0, 3.0], [])])
def test_without_steps_at_most_three_longest_gaps_are_named(gaps_ms, named):
    """No steps: a 40 ms time line, half of it busy, 10 ops.  The CUDA-graph
    saving is 40 - (20 + 10 x 0.65 us) ms; the longest gaps are named when at
    most three of them hold half of it: 4+3+3 ms do, 3+3+3 do not (a fourth
    gap would, but three is the most named)."""
    s = summary(40.0, [])
    s["loop"]["from"] = "gpu"
    s["gaps"]["worst"] = [{"duration_us": ms * 1e3} for ms in gaps_ms]
    (launch,) = [p for p in _projections.project(s, "CPU_LAUNCH_BOUND")
                 if p["kind"] == "launch_gaps"]
    saved = 40.0 - (20.0 + 10 * 0.65 / 1e3)
    assert launch["saved_ms"] == pytest.approx(saved)
    assert (sum(gaps_ms[:3]) >= 0.5 * saved) == bool(named)
    longest = (f", the longest ({', '.join(f'{ms:.2f}' for ms in named)} ms) too, "
               f"{100 * sum(named) / saved:.0f}% of this saving, which may lie outside any loop"
               if named else "")
    assert launch["text"].endswith(
        f"(no steps marked: every gap of the GPU time line counts{longest}; mark steps to "
        "project the loop alone)")


@pytest.mark.parametrize("gap_ms, shown", [(10.0, "50% of this saving"),
                                           (20.0, "100% of this saving"),
                                           (30.0, "more than this whole saving")])
def test_a_gap_longer_than_the_saving_is_no_share_over_100(gap_ms, shown):
    """Issue 39: "1180% of this saving" read as a slip.  No steps, a 40 ms
    time line busy 20 ms: the graph saves 20 ms less the replay gaps; a
    named gap up to the saving is a share of it, a longer one is "more
    than this whole saving"."""
    s = summary(40.0, [])
    s["loop"].update({"from": "gpu", "busy_ms": 20.0, "ops": 0})
    s["gaps"]["worst"] = [{"duration_us": gap_ms * 1e3}]
    (launch,) = [p for p in _projections.project(s, "CPU_LAUNCH_BOUND")
                 if p["kind"] == "launch_gaps"]
    assert launch["saved_ms"] == 20.0
    assert f", the longest ({gap_ms:.1f} ms) too, {shown}, which may lie" in launch["text"]


@pytest.mark.parametrize("saved_ms, listed", [(0.5, True), (0.49, False)])
def test_only_notable_wins_are_listed_under_what_it_would_win(saved_ms, listed):
    """Issue 39: wins of 1.00x were listed under "What it would win".  A
    projection under 1.05x stays in the summary but the report and the HTML
    list it only as a count."""
    from loopscope.views import _html, _report
    s = summary(10.5, [saved_ms])
    s["loop"].update(busy_ms=10.0, sync_idle_ms=0.3)  # the CUDA graph wins little too
    projections = _projections.project(s, "SYNC_BOUND")
    s["diagnosis"] = {"verdict": "SYNC_BOUND", "projections": projections, "reasons": [],
                      "actions": []}
    site = next(p for p in projections if p["kind"] == "sync_site")
    assert site["notable"] is listed
    lines = _report._projection_lines(s)
    assert (f"  * {site['text']}" in lines) is listed
    little = sum(not p["notable"] for p in projections)
    assert lines[-1] == ("  " + ("" if listed else "nothing notable: ")
                         + f"{little} change{'' if little == 1 else 's'} would win little "
                         "(summary['diagnosis']['projections'])")
    assert (html.escape(site["text"]) in _html._verdict(s)) is listed
