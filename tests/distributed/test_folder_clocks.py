"""Issue 26: the clocks of per-rank traces read offline as one job.  Each
trace's times are its profiler's own conversion to its host's clock; a
collective ends at practically one instant on every rank, so the ends of
the steps' first collective kernels say how far the files' clocks disagree
(skew["clock"]["collective_ends"]), and beyond 10 us the ranks are moved by
it before arrivals are compared.  Synthetic 4-rank Kineto folders
(tests/rank_traces.py) with a planted per-rank clock offset; the expected
figures are worked out here from the times written."""
from __future__ import annotations

import statistics

import pytest

import loopscope
from loopscope.figures import _ranks

from rank_traces import GEMM_NS, write_job

STEPS = 4
WORLD = 4
PLANTED_NS = 2_500_000          # the straggler's host delay per step
# rank -> how far its trace's clock is off (ns): rank 1's as far as the delay, both ways
CLOCKS = {1: 2_500_000, 2: -700_000, 3: 1_200_000}


def test_clock_offsets_without_a_straggler_name_nobody(tmp_path, monkeypatch):
    """Every rank arrives together; rank 1's file reads 2.5 ms late, rank 3's
    1.2 ms: moved by the collective ends, nobody arrives late."""
    write_job(tmp_path, WORLD, STEPS, {}, clock=CLOCKS)
    job = loopscope.analyze(tmp_path, workers=1, progress=False)
    ends = job["skew"]["clock"]["collective_ends"]
    assert ends["aligned"] is True and ends["reference_rank"] == 0
    assert [(e["rank"], e["offset_us"], e["steps"]) for e in ends["per_rank"]] == [
        (r, CLOCKS.get(r, 0) / 1e3, STEPS) for r in range(WORLD)]
    # each file's own launch -> start of its all-reduce: the gemm's 5 ms after the call
    # (rank_traces: the call 20 us after the gemm's launch, which starts 10 us after it)
    lag_us = (10_000 + GEMM_NS - 20_000) / 1e3
    assert [e["min_launch_lag_us"] for e in ends["per_rank"]] == [lag_us] * WORLD
    assert ends["residual_us"] == {"median": 0.0, "max": 0.0, "steps": STEPS}
    assert "rank 1 +2500.000 us" in job["skew"]["clock"]["method"]
    assert job["skew"]["straggler"] is None
    assert all(row["late_ms"] == 0.0 for row in job["skew"]["steps"])
    assert all(row["start_skew_us"] == 0.0 for row in job["skew"]["steps"])  # hosts aligned too
    assert "STRAGGLER" not in loopscope.views._report.format_report(job)
    # the files' own clock, as read before: rank 1 named, 2.5 ms - rank 0's 0 late
    monkeypatch.setattr(_ranks, "END_ALIGN_MIN_NS", 10**12)
    unaligned = loopscope.analyze(tmp_path, workers=1, progress=False)["skew"]
    assert unaligned["straggler"]["rank"] == 1
    assert unaligned["straggler"]["late_ms"] == pytest.approx(
        (CLOCKS[1] - min(0, *CLOCKS.values())) / 1e6)


def test_a_straggler_hidden_by_its_clock_is_named_as_planted(tmp_path):
    """Rank 2's host 2.5 ms late every step, its file's clock 2.5 ms early
    (its arrival reads on time): named, lateness within 10% of the delay."""
    clocks = {1: 1_000_000, 2: -PLANTED_NS, 3: -400_000}
    p = write_job(tmp_path, WORLD, STEPS, {2: PLANTED_NS}, clock=clocks)
    job = loopscope.analyze(tmp_path, workers=1, progress=False)
    assert job["skew"]["clock"]["collective_ends"]["aligned"] is True
    st = job["skew"]["straggler"]
    assert (st["rank"], st["cause"], st["last_in_steps"]) == (2, "host late", STEPS)
    want = statistics.mean(max(p["arrive"][r, k] for r in range(WORLD))
                           - min(p["arrive"][r, k] for r in range(WORLD))
                           for k in range(STEPS)) / 1e6
    assert st["late_ms"] == pytest.approx(want)
    assert abs(st["late_ms"] - PLANTED_NS / 1e6) <= 0.10 * PLANTED_NS / 1e6
    # host lateness is each rank's own clock: the offsets change nothing in it
    assert st["host_late_ms"] == pytest.approx(PLANTED_NS / 1e6)


@pytest.mark.parametrize("offset_ns, aligned", [(9_000, False), (11_000, True)])
def test_offsets_up_to_10_us_are_the_collectives_own_spread(tmp_path, offset_ns, aligned):
    """A collective's ends spread a few us (0.0-0.7 us on 2 x H100): an
    offset up to 10 us keeps the files' clock, beyond it the rank moves."""
    write_job(tmp_path, 2, STEPS, {}, clock={1: offset_ns})
    job = loopscope.analyze(tmp_path, workers=1, progress=False)
    ends = job["skew"]["clock"]["collective_ends"]
    assert ends["aligned"] is aligned
    assert ends["per_rank"][1]["offset_us"] == offset_ns / 1e3
    # the ends' spread as the ranks are compared: moved, none; kept, the offset
    assert ends["residual_us"]["median"] == (0.0 if aligned else offset_ns / 1e3)
    starts = [row["start_skew_us"] for row in job["skew"]["steps"]]
    assert starts == [0.0 if aligned else offset_ns / 1e3] * STEPS
    assert ("checked against the collectives' ends" in job["skew"]["clock"]["method"]) \
        is not aligned


@pytest.mark.parametrize("jitter_us, meet", [(18, True), (22, False)])
def test_ends_that_do_not_meet_are_no_clock(tmp_path, jitter_us, meet):
    """Rank 1's clock 100 us off, its all-reduce a further jitter_us later in
    every other step: moved by the median offset its ends are jitter_us / 2
    from rank 0's in every step.  Up to 10 us they meet as one collective's
    do and the rank is moved; beyond it they are not one collective: the
    files' clock is kept, and said why."""
    jitter = {k: jitter_us * 1000 * (k % 2) for k in range(STEPS)}
    write_job(tmp_path, 2, STEPS, {}, clock={1: 100_000}, comm_jitter={1: jitter})
    job = loopscope.analyze(tmp_path, workers=1, progress=False)
    ends = job["skew"]["clock"]["collective_ends"]
    offsets = [100_000 + jitter[k] for k in range(STEPS)]
    median = statistics.median(offsets)
    assert ends["per_rank"][1]["offset_us"] == median / 1e3
    assert ends["aligned"] is meet
    spread = statistics.median(abs(o - median) for o in offsets) / 1e3
    if meet:
        assert ends["residual_us"]["median"] == pytest.approx(spread)
        starts = [row["start_skew_us"] for row in job["skew"]["steps"]]
        assert starts == [median / 1e3 - 100] * STEPS
    else:
        assert ends["residual_us"] is None
        assert "do not meet step by step" in ends["why"]
        assert [row["start_skew_us"] for row in job["skew"]["steps"]] == [100.0] * STEPS


def test_a_rank_without_collective_ends_is_not_checked(tmp_path):
    """Compacts without done_ns (a ranks file written before it): the
    files' clock, said not checked."""
    write_job(tmp_path, 2, STEPS, {}, clock={1: 2_000_000})
    job = loopscope.analyze(tmp_path, workers=1, progress=False)
    compacts = [dict(c, steps=[dict(s, done_ns=None) for s in c["steps"]]) if c["rank"] == 1
                else c for c in job["ranks"]]
    skew = _ranks.merge(compacts, {}, {}, "nccl", shared_clock=True)
    ends = skew["clock"]["collective_ends"]
    assert (ends["aligned"], ends["per_rank"]) == (False, None)
    assert ends["why"] == "rank 1: no collective kernel end in a step shared with rank 0"
    assert "not checked against the collectives' ends" in skew["clock"]["method"]
    assert [row["start_skew_us"] for row in skew["steps"]] == [2000.0] * STEPS
