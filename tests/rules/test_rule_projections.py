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

import pytest

from loopscope.figures import _projections

NOTABLE = 1.05
SITES = 3


def summary(loop_ms: float, site_gaps_ms: list[float]) -> dict:
    """A loop of steps, 10 GPU ops, nothing idle in syncs (so the CUDA-graph
    projection saves only launch gaps), and one sync site per gap given:
    site k at loop.py:10+k, one item() sync whose gap in steps is that figure."""
    sites = [{"file": "/work/loop.py", "line": 10 + k, "function": "train", "code": "x.item()",
              "call": "x.item()", "kind": "item", "count": 1, "blocked_ms": 0.25,
              "gap_ms": gap, "gap_in_steps_ms": gap, "apis": {}, "steps": [0]}
             for k, gap in enumerate(site_gaps_ms)]
    return {"loop": {"from": "steps", "ms": loop_ms, "busy_ms": loop_ms / 2, "idle_ms": loop_ms / 2,
                     "sync_idle_ms": 0.0, "ops": 10, "kernels": 10},
            "gaps": {"worst": []}, "syncs": {"sites": sites}, "steps": [], "graphs": None}


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
