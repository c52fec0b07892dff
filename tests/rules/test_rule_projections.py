"""The cut-offs of the projections (_projections.py), each on the cut-off
and beside it: a speedup of 1.05x still reads "~N x faster" (below it
"would win little"), and only the three most costly sync sites are
projected.  The projection reads the summary's loop, gaps and sync sites:
they are written here as the summary carries them, so a figure lands
exactly on a cut-off (a loop built from records puts its ms on fractions
that never do).  The documented numbers are written here, never imported:
1.05x, three sites."""
from __future__ import annotations

import pytest

from loopscope import _projections

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
