"""Issue 30: the first profile of a process reads SM and DRAM.  A profile
whose sampler must be set up (the first of a process) waits for the set-up
at its enter, bounded, and its window begins after the wait, so the samples
cover the loop; metrics="lazy" keeps the old way (no wait); a sampler set up
by an earlier profile is not waited for.  Synthetic samples
(_testhooks._fake_samples) stand in for CUPTI: `setup_ns` is when sampling begins
on the scripted clock, `setup_sleep_ns` real host time the set-up takes."""
from __future__ import annotations

import pytest

import loopscope
from loopscope import _core, _testhooks

US = 1_000
START = 1_000_000
TICK = 20 * US
SETUP = 300 * US  # lazy: sampling begins this long after the enter's first clock read


@pytest.fixture(autouse=True)
def _no_fakes_left():
    yield
    _testhooks._fake_samples([])


@pytest.fixture
def wait_bound():
    """wait_bound(ns): how long the first profile's enter waits for the set-up."""
    yield lambda ns: _testhooks._sampler_keep(0, 0, ns)
    _testhooks._sampler_keep(0, 0, 0)


def samples_from(t0, t1, every=50 * US):
    return [(t, t + every, {"sm_active_pct": 50.0}) for t in range(t0, t1, every)]


def run(metrics, reused=False, sleep_ns=0):
    # Waited for, the set-up is over before the window starts: sampling
    # began at the window's first read (setup 0); lazily, SETUP after it.
    setup = SETUP if metrics == "lazy" else 0
    _testhooks._fake_samples(samples_from(0, 3_000_000), 1, 50 * US, setup, reused, sleep_ns)
    with loopscope.profile(trace=False, syncs=False, metrics=metrics) as prof:
        for _ in range(3):
            with prof.step():
                pass
    return prof


@pytest.mark.fake_sampler
def test_the_first_profile_waits_for_the_set_up_and_begins_when_sampling_does(test_clock):
    test_clock.set(START, TICK)
    prof = run(True)
    info = prof.capture.info()
    # The enter's first clock read is START; the window starts at a read
    # after the wait (the wait is outside it).
    assert info["start_ns"] > START
    assert info["pm_wait_ns"] > 0 and info["pm_wait_timed_out"] is False
    s = prof.summary()
    assert s["overhead"]["metrics_setup_wait_ms"] == pytest.approx(info["pm_wait_ns"] / 1e6, abs=1e-3)
    assert s["overhead"]["metrics_setup_wait_timed_out"] is False
    # Every sample inside the window is kept: samples from 0 every 50 us.
    start, stop = info["start_ns"], info["stop_ns"]
    want = [t for t in range(0, 3_000_000, 50 * US) if t + 50 * US > start and t < stop]
    assert s["sm"]["samples"] == len(want) > 0


@pytest.mark.fake_sampler
def test_lazy_metrics_never_wait(test_clock):
    test_clock.set(START, TICK)
    prof = run("lazy")
    info = prof.capture.info()
    assert info["start_ns"] == START
    assert info["pm_wait_ns"] == 0
    assert prof.summary()["overhead"]["metrics_setup_wait_ms"] == 0


@pytest.mark.fake_sampler
def test_a_sampler_set_up_earlier_is_not_waited_for(test_clock):
    test_clock.set(START, TICK)
    prof = run(True, reused=True)
    info = prof.capture.info()
    assert info["start_ns"] == START
    assert info["pm_wait_ns"] == 0


@pytest.mark.fake_sampler
def test_the_wait_is_bounded_and_says_it_timed_out(test_clock, wait_bound):
    # A set-up of 0.6 s against a bound of 0.1 s: the enter goes on after the
    # bound, and the set-up finishes on the worker.
    wait_bound(100_000_000)
    test_clock.set(START, TICK)
    prof = run(True, sleep_ns=600_000_000)
    info = prof.capture.info()
    assert info["pm_wait_timed_out"] is True
    assert 90e6 <= info["pm_wait_ns"] < 550e6
    assert prof.summary()["overhead"]["metrics_setup_wait_timed_out"] is True


@pytest.mark.fake_sampler
def test_a_wait_within_its_bound_does_not_time_out(test_clock, wait_bound):
    wait_bound(2_000_000_000)
    test_clock.set(START, TICK)
    prof = run(True, sleep_ns=100_000_000)
    info = prof.capture.info()
    assert info["pm_wait_timed_out"] is False
    assert 90e6 <= info["pm_wait_ns"] < 2000e6
    assert info["start_ns"] > START


def test_metrics_takes_true_false_or_lazy_only():
    loopscope.profile(metrics="lazy")
    with pytest.raises(TypeError, match="metrics"):
        loopscope.profile(metrics="eager")


@pytest.mark.fake_sampler
def test_a_profile_begun_before_any_cuda_context_samples_from_the_first_one(test_clock):
    """`loopscope run` starts its profile before the script has a CUDA
    context: the sampler is set up when the script makes one (CUPTI's
    resource callback), never before, and the enter does not wait."""
    test_clock.set(START, TICK)
    _testhooks._fake_samples(samples_from(0, 3_000_000), 1, 50 * US, 0, False, 0, True)
    with loopscope.profile(trace=False, syncs=False) as prof:
        with prof.step():
            pass
        opened_at = _core.now_ns()
        _testhooks._fake_context_created()  # the profiled code makes its context here
        for _ in range(3):
            with prof.step():
                pass
    info = prof.capture.info()
    assert info["pm_wait_ns"] == 0
    assert info["pm"] is not None and info["pm"]["started_ns"] > opened_at
    s = prof.summary()
    assert s["metrics_error"] is None
    # Sampling begins with the context: nothing before it is the profile's.
    want = [t for t in range(0, 3_000_000, 50 * US)
            if t + 50 * US > info["pm"]["started_ns"] and t < info["stop_ns"]]
    assert s["sm"]["samples"] == len(want) > 0


@pytest.mark.fake_sampler
def test_a_profile_that_never_sees_a_cuda_context_says_so(test_clock):
    test_clock.set(START, TICK)
    _testhooks._fake_samples(samples_from(0, 3_000_000), 1, 50 * US, 0, False, 0, True)
    with loopscope.profile(trace=False, syncs=False) as prof:
        with prof.step():
            pass
    s = prof.summary()
    assert s["sm"] is None
    assert "no CUDA context was made" in s["metrics_error"]
    _testhooks._fake_context_created()  # after the stop: nobody listens any more
    assert not _core.active()


@pytest.mark.parametrize("rate", [1.0, 2.05, 0.5])
def test_the_profile_clock_rate_against_the_host_is_measured(rate):
    """Issue 24: a foreign CUPTI timestamp source (Kineto's TSC ticks) makes
    the profile clock run ~2x the host's; capture.info()["clock_rate"] is the
    ratio over the profile's window.  The scripted clock runs `rate` times its
    reference: the ratio read back is that rate."""
    _testhooks._set_test_clock(START, TICK, rate)
    try:
        with loopscope.profile(trace=False, syncs=False, metrics=False) as prof:
            for _ in range(5):
                with prof.step():
                    pass
    finally:
        _testhooks._set_test_clock(0, 0)
    info = prof.capture.info()
    assert info["clock_rate"] == pytest.approx(rate, rel=1e-4)  # whole-ns reference reads
    assert info["stop_ns"] - info["start_ns"] == pytest.approx(
        rate * info["reference_span_ns"], rel=1e-4)


@pytest.mark.fake_sampler
def test_a_lazy_profile_keeps_the_last_runs_samples_before_its_restart(test_clock):
    """metrics="lazy" at another interval than the running sampler's: the
    profile does not wait for the restart, so it begins before its sampling
    does, and the last run's samples of its first moments are its own: kept.
    (Only those over by the profile's start are left out: a start that
    waited moves past them.)"""
    _testhooks._fake_samples(samples_from(0, 30_000_000), 1, 50 * US, SETUP, True)
    test_clock.set(START, TICK)
    with loopscope.profile(trace=False, syncs=False) as warm:  # the running sampler's interval
        pass
    warm.summary()
    with loopscope.profile(trace=False, syncs=False, metrics="lazy",
                           metrics_interval_us=200) as prof:
        for _ in range(40):
            with prof.step():
                pass
    info = prof.capture.info()
    start, stop, began = info["start_ns"], info["stop_ns"], info["pm"]["began_ns"]
    assert prof.summary()["metrics"]["sampler_reused"] is False  # started anew, not waited for
    assert start < began < stop
    want = [t for t in range(0, 30_000_000, 50 * US) if t + 50 * US > start and t < stop]
    assert sum(1 for t in want if t + 50 * US <= began) >= 2  # the last run's, before the restart
    assert [a for a, _, _ in prof.capture.samples()] == want


@pytest.mark.fake_sampler
@pytest.mark.parametrize("block", ["watch", "profile"])
def test_a_watch_does_not_wait_for_the_set_up_where_a_profile_does(
        test_clock, wait_bound, tmp_path, monkeypatch, block):
    """Issue 40: a watch is always on for long jobs; its first light block
    reads the counters from when sampling begins instead of holding the
    job's start up for the set-up (0.1 s of host time here), which a plain
    profile in the same state waits for."""
    from loopscope.watching import _watch

    blocks = []

    class Kept(_watch.Profile):
        def __init__(self, **options):
            super().__init__(**options)
            blocks.append(self)

    monkeypatch.setattr(_watch, "Profile", Kept)
    wait_bound(2_000_000_000)
    test_clock.set(START, TICK)
    _testhooks._fake_samples(samples_from(0, 30_000_000), 1, 50 * US, 0, False, 100_000_000)
    if block == "watch":
        with loopscope.watch(dump_dir=tmp_path, block_steps=3, warmup_steps=0,
                             p99_factor=None) as w:
            for _ in range(5):
                with w.step():
                    pass
        first = blocks[0]
        assert w.breach_count == 0 and len(w.steps()) == 5
    else:
        first = run(True, sleep_ns=100_000_000)
    info = first.capture.info()
    if block == "watch":
        assert info["pm_wait_ns"] == 0
        assert first.summary()["overhead"]["metrics_setup_wait_ms"] == 0
    else:
        assert 90e6 <= info["pm_wait_ns"] < 2000e6
