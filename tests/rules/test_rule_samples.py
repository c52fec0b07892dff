"""Rules of the PM sample handling at their edges: a figure some samples lack
is averaged over the samples that have it; a sample exactly as long as the
longest allowed span is kept; samples exactly at the clock tolerance are
inside it, a nanosecond further outside; none is ever moved.  Expected values from plain Python over the same input."""
from __future__ import annotations

import pytest

from loopscope import _testhooks

from fakes import kernel, sample


def test_a_figure_missing_from_some_samples_averages_the_others(run_trace):
    """A kernel busy [1000, 5000]; sample A [1000, 3000] has SM 40 and DRAM
    30, sample B [3000, 5000] SM 80 and no DRAM figure.  SM averages both,
    DRAM only A's (it is not 0 where B did not measure it)."""
    a, b = sample(1_000, 3_000, sm_active_pct=40, dram_throughput_pct=30), \
        sample(3_000, 5_000, sm_active_pct=80)
    s = run_trace(kernels=[kernel(1_000, 5_000, 1)], samples=[a, b])

    def average(name):
        have = [(x[2][name], x[1] - x[0]) for x in (a, b) if name in x[2]]
        return round(sum(v * w for v, w in have) / sum(w for _, w in have), 2)

    assert (s["sm"]["active_pct"], s["dram"]["throughput_pct"]) == (
        average("sm_active_pct"), average("dram_throughput_pct")) == (60.0, 30.0)


MAX_SPAN, STARTED, STOPPED, TOLERANCE = 1_000_000, 10_000_000, 20_000_000, 100_000


def settle_rule(spans, window_start=STARTED):
    """The documented settling, in plain Python: samples longer than the
    longest span are partial and dropped; so are those over by the start
    (the wait before a start that waited for sampling's set-up: the
    profile's start, which is where its sampling began unless that came
    later); the rest
    stay where they are, and are reported outside when they lie beyond the
    tolerance before the start or after the stop."""
    whole = sorted(s for s in spans if s[1] - s[0] <= MAX_SPAN)
    partial = len(spans) - len(whole)
    kept = [s for s in whole if s[1] > window_start]
    ended_before = len(whole) - len(kept)
    if not kept:
        return [], partial, ended_before, 0, False
    delta = kept[0][0] - STARTED
    outside = (kept[0][0] + TOLERANCE < STARTED
               or max(e for _, e in kept) > STOPPED + TOLERANCE)
    return kept, partial, ended_before, delta, outside


CASES = {
    "exactly-the-longest-span": [(STARTED, STARTED + MAX_SPAN)],
    "a-nanosecond-longer": [(STARTED, STARTED + MAX_SPAN + 1), (STARTED + 2, STARTED + 3)],
    "exactly-the-tolerance-before": [(STARTED - TOLERANCE, STARTED + 500)],
    "a-nanosecond-further-before": [(STARTED - TOLERANCE - 1, STARTED + 500)],
    "exactly-the-tolerance-after": [(STOPPED, STOPPED + TOLERANCE)],
    "a-nanosecond-further-after": [(STOPPED, STOPPED + TOLERANCE + 1)],
    # the wait before a moved start (H200: 41 samples 160 ms before it), then the profile's
    "over-at-the-start": [(STARTED - 160_500, STARTED - 160_000), (STARTED - 500, STARTED),
                          (STARTED, STARTED + 500)],
    "over-a-nanosecond-after-the-start": [(STARTED - 500, STARTED + 1)],
}


@pytest.mark.parametrize("name", CASES)
def test_settling_at_its_edges(name):
    spans = CASES[name]
    got = _testhooks._settle_samples(spans, MAX_SPAN, STARTED, STOPPED, TOLERANCE)
    expected = settle_rule(spans)
    assert got == expected
    assert expected[4] == name.startswith("a-nanosecond-further")
    whole = sorted(s for s in spans if s[1] - s[0] <= MAX_SPAN)
    assert got[0] == [s for s in whole if s[1] > STARTED]  # never moved
    assert expected[1] == (1 if name == "a-nanosecond-longer" else 0)
    assert expected[2] == (2 if name == "over-at-the-start" else 0)


@pytest.mark.parametrize("window_start, kept", [(STARTED, 1), (STARTED - 501, 2)])
def test_samples_of_the_profile_before_its_sampling_began_are_kept(window_start, kept):
    """A profile that did not wait for the sampler's restart (metrics="lazy")
    began before its sampling did: the last run's sample that ends between
    the two is the profile's own and is kept, judged from where sampling
    began; one over by the profile's start is not."""
    spans = [(STARTED - 500, STARTED - 1), (STARTED, STARTED + 500)]
    got = _testhooks._settle_samples(spans, MAX_SPAN, STARTED, STOPPED, TOLERANCE, window_start)
    assert got == settle_rule(spans, window_start)
    assert len(got[0]) == kept and got[2] == 2 - kept and got[4] is False


def test_sample_coverage_never_reads_above_100_percent(run_trace):
    """Samples that overlap one another (a decoder that repeats a span; the
    hook takes them as given) cover the loop twice over by their summed
    overlaps: the share of the loop the samples cover is capped at 100, and
    one sample over half the loop reads 50."""
    loop = (1_000, 5_000)
    whole = sample(*loop, sm_active_pct=50)
    s = run_trace(kernels=[kernel(*loop, 1)], samples=[whole, whole])
    covered = sum(min(loop[1], x[1]) - max(loop[0], x[0]) for x in (whole, whole))
    assert covered / (loop[1] - loop[0]) == 2
    assert s["sm"]["coverage_pct"] == 100.0
    half = sample(loop[0], (loop[0] + loop[1]) // 2, sm_active_pct=50)
    s = run_trace(kernels=[kernel(*loop, 1)], samples=[half])
    assert s["sm"]["coverage_pct"] == 100.0 * (half[1] - half[0]) / (loop[1] - loop[0]) == 50.0


def test_figures_are_rounded_as_documented(run_trace):
    """Percentages to 2 decimals, GB/s to 3 (as the summary gives them): one
    sample over the whole loop, its figures with more digits than shown."""
    loop = (1_000, 5_000)
    figures = {"sm_active_pct": 41.23456, "dram_throughput_pct": 12.34567,
               "dram_read_gbps": 123.456789, "dram_write_gbps": 98.7654321}
    s = run_trace(kernels=[kernel(*loop, 1)], samples=[sample(*loop, **figures)])
    assert (s["sm"]["active_pct"], s["dram"]["throughput_pct"]) == (
        round(figures["sm_active_pct"], 2), round(figures["dram_throughput_pct"], 2))
    assert (s["dram"]["read_gbps"], s["dram"]["write_gbps"], s["dram"]["read_busy_gbps"],
            s["dram"]["write_busy_gbps"]) == (
        round(figures["dram_read_gbps"], 3), round(figures["dram_write_gbps"], 3),
        round(figures["dram_read_gbps"], 3), round(figures["dram_write_gbps"], 3))


WINDOW_START, WINDOW_STOP = 15_000_000, 16_000_000


def overlap_rule(start, end, window_start, window_stop):
    """The documented rule, in plain Python: a sample belongs to a window
    when it ends after the window's start and starts before its stop; an
    open window (stop 0) has no stop yet."""
    return end > window_start and (window_stop == 0 or start < window_stop)


WANTED_CASES = {
    "ends-exactly-at-the-window-start": (WINDOW_START - 100, WINDOW_START),
    "ends-a-nanosecond-into-the-window": (WINDOW_START - 100, WINDOW_START + 1),
    "starts-exactly-at-the-stop": (WINDOW_STOP, WINDOW_STOP + 100),
    "starts-a-nanosecond-before-the-stop": (WINDOW_STOP - 1, WINDOW_STOP + 100),
}


@pytest.mark.parametrize("name", WANTED_CASES)
@pytest.mark.parametrize("stop", [WINDOW_STOP, 0], ids=["closed", "open"])
def test_samples_at_the_edges_of_a_window(name, stop):
    start, end = WANTED_CASES[name]
    got = _testhooks._sample_wanted(start, end, WINDOW_START, stop)
    assert got == overlap_rule(start, end, WINDOW_START, stop)
    inside = name in ("ends-a-nanosecond-into-the-window", "starts-a-nanosecond-before-the-stop")
    assert got == (inside or (stop == 0 and name == "starts-exactly-at-the-stop"))


def clock_offset_rule(first_start, started, tolerance):
    """One clock when the run's first complete sample starts within the
    tolerance of sampling's start; else the difference moves every sample."""
    return 0 if abs(first_start - started) <= tolerance else first_start - started


@pytest.mark.parametrize("first_start", [
    STARTED + TOLERANCE, STARTED + TOLERANCE + 1, STARTED - TOLERANCE, STARTED - TOLERANCE - 1,
    STARTED - 1_500_000_000 + 20_000_000_000, STARTED + 80_000])
def test_the_clock_offset_of_a_run_at_the_tolerance(first_start):
    got = _testhooks._sample_clock_offset(first_start, STARTED, TOLERANCE)
    assert got == clock_offset_rule(first_start, STARTED, TOLERANCE)
    assert (got == 0) == (abs(first_start - STARTED) <= TOLERANCE)


# Back to back (issue 27): a start less than 3 ms after the last stop began
# makes its own stop wait a grace for the next start; the rule in plain Python,
# checked on each side of the edge and for a process's first start.
BACK_TO_BACK_NS, STOP_BEGAN = 3_000_000, 7_000_000_000


@pytest.mark.parametrize("stop_began, now", [
    (STOP_BEGAN, STOP_BEGAN + 300_000),              # 0.3 ms: the next enter, back to back
    (STOP_BEGAN, STOP_BEGAN + BACK_TO_BACK_NS - 1),  # just inside
    (STOP_BEGAN, STOP_BEGAN + BACK_TO_BACK_NS),      # exactly 3 ms: a summary() came between
    (0, 1_000_000),                                  # no stop yet: the first start
])
def test_a_start_counts_as_back_to_back_only_within_3_ms_of_the_last_stop(stop_began, now):
    expected = stop_began != 0 and now - stop_began < BACK_TO_BACK_NS
    assert _testhooks._activity_back_to_back(stop_began, now) is expected
