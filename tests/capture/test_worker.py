"""loopscope's worker thread: the end of a profile runs there, after the
user's code went on.  Synthetic PM samples (_testhooks._fake_samples) and a
delayed finish (_testhooks._finish_delay) stand in for the GPU, so the hand-over
is tested exactly: the samples of the profile's window and nothing else,
a summary taken while the worker is busy waits and is complete, records
launched after the stop are left out, and interpreter exit or a fork with
the worker busy neither hangs nor loses the process."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import textwrap
import time

import pytest

import loopscope
from loopscope import _core, _testhooks

# The loopscope this suite imports (in CI an installed one, not the source tree).
PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(loopscope.__file__)))
US = 1_000


@pytest.fixture(autouse=True)
def _no_fakes_left():
    yield
    _testhooks._finish_delay(0)
    _testhooks._fake_samples([])


def sample(start, end, sm):
    return (start, end, {"sm_active_pct": float(sm)})


def window_of(samples, start, stop):
    """The samples that overlap [start, stop]: what a profile must keep."""
    return [s for s in samples if s[1] > start and s[0] < stop]


# Around a window of [1_000_000, ~1_010_000] (the test clock, 1 us a read):
# samples of 50 us every 50 us from 0.8 ms to 1.2 ms, numbered by their SM %.
def sample_run():
    return [sample(t, t + 50 * US, sm=t // (50 * US)) for t in range(800 * US, 1_200 * US, 50 * US)]


@pytest.mark.fake_sampler
def test_the_finish_hands_over_exactly_the_samples_of_the_window(test_clock):
    samples = sample_run()
    _testhooks._fake_samples(samples, 2)
    test_clock.set(1_000_000, 20 * US)  # each clock read: 20 us later
    # "lazy": the set-up runs on the worker while the loop does (no wait at enter).
    with loopscope.profile(trace=False, syncs=False, metrics="lazy", metrics_decode_ms=1) as prof:
        for _ in range(3):
            with prof.step():
                pass
        assert _testhooks._decoder_state() in ("busy", "ticking")  # opening, then decoding
    info = prof._capture.info()
    start, stop = info["start_ns"], info["stop_ns"]
    assert (start, stop) == (1_000_000, 1_000_000 + 7 * 20 * US)
    want = window_of(samples, start, stop)
    assert 0 < len(want) < len(samples)
    assert [(s, e, v["sm_active_pct"]) for s, e, v in prof._capture.samples()] == [
        (s, e, v["sm_active_pct"]) for s, e, v in want]
    assert info["pm"]["samples"] == len(samples)  # all decoded ...
    assert info["samples_outside"] == len(samples) - len(want)  # ... the rest left out
    assert info["finished_on_worker"] is True
    assert prof.summary()["sm"]["samples"] == len(want)


@pytest.mark.fake_sampler
def test_summary_taken_while_the_worker_is_busy_waits_and_is_complete(test_clock):
    samples = sample_run()
    _testhooks._fake_samples(samples, 1)
    _testhooks._finish_delay(400_000_000)  # the worker sleeps 0.4 s before finishing
    test_clock.set(1_000_000, 20 * US)
    with loopscope.profile(trace=False, syncs=False, metrics=True) as prof:
        with prof.step():
            pass
    capture = prof._capture
    assert _testhooks._capture_pending(capture)  # exit did not wait for the worker
    s = prof.summary()
    assert not _testhooks._capture_pending(capture)
    info = capture.info()
    want = window_of(samples, info["start_ns"], info["stop_ns"])
    assert s["sm"]["samples"] == len(want) > 0
    assert len(capture.samples()) == len(want)
    assert s["overhead"]["finished_on_worker"] is True
    assert s["overhead"]["finish_wait_ms"] > 0
    assert s["overhead"]["finish_ms"] >= s["overhead"]["finish_phases_ms"]["metrics"]


@pytest.fixture(params=["", "overlap=1"], ids=["default", "overlap=1"])
def overlap(internal_switches, request):
    """overlap on: the default, and LOOPSCOPE_INTERNAL=overlap=1."""
    internal_switches(request.param)


@pytest.fixture
def no_overlap(internal_switches):
    """A start waits for the last finish: LOOPSCOPE_INTERNAL=overlap=0."""
    internal_switches("overlap=0")


@pytest.mark.fake_sampler
def test_a_start_waits_for_the_last_finish_and_both_profiles_are_complete(test_clock,
                                                                         no_overlap):
    """With overlap off (LOOPSCOPE_INTERNAL=overlap=0): the second start waits
    for the first finish, says so, and both profiles hold their window's
    samples."""
    samples = sample_run()
    _testhooks._fake_samples(samples, 1, 100_000, 0, True)
    _testhooks._finish_delay(200_000_000)
    test_clock.set(1_000_000, 20 * US)
    with loopscope.profile(trace=False, syncs=False, metrics=True) as first:
        pass
    assert _testhooks._capture_pending(first._capture)
    _testhooks._finish_delay(0)
    with loopscope.profile(trace=False, syncs=False, metrics=True) as second:
        still_finishing = _testhooks._capture_pending(first._capture)
    assert not still_finishing
    assert not second._capture.info()["continued_tracing"]
    first_info = first._capture.info()
    assert [s[:2] for s in first._capture.samples()] == [
        s[:2] for s in window_of(samples, first_info["start_ns"], first_info["stop_ns"])]


@pytest.mark.fake_sampler
def test_a_start_goes_on_beside_the_last_finish_and_both_profiles_are_complete(test_clock,
                                                                               overlap):
    """Back to back with overlap on (issue 27): the second profile starts
    while the first still finishes on the worker (0.2 s late) and does not
    wait for it; the samples decoded by the first finish after its window
    are the second's, so each profile holds exactly the samples of its own
    window."""
    samples = sample_run()
    _testhooks._fake_samples(samples, 1, 100_000, 0, True)  # a sampler set up already
    _testhooks._finish_delay(200_000_000)
    test_clock.set(1_000_000, 20 * US)
    with loopscope.profile(trace=False, syncs=False, metrics=True) as first:
        pass
    assert _testhooks._capture_pending(first._capture)
    _testhooks._finish_delay(0)
    entered = time.perf_counter()
    with loopscope.profile(trace=False, syncs=False, metrics=True) as second:
        took = time.perf_counter() - entered
        still_finishing = _testhooks._capture_pending(first._capture)
    assert still_finishing  # the second start did not wait for the first finish ...
    assert took < 0.1       # ... (which sleeps 0.2 s)
    assert second.summary()["overhead"]["start_phases_ms"]["wait"] == 0
    assert not _testhooks._capture_pending(first._capture)
    for prof in (first, second):
        info = prof._capture.info()
        want = window_of(samples, info["start_ns"], info["stop_ns"])
        assert want, "each window must overlap some samples for this test to mean anything"
        got = [(s, e, v["sm_active_pct"]) for s, e, v in prof._capture.samples()]
        assert got == [(s, e, v["sm_active_pct"]) for s, e, v in want]
    assert first._capture.info()["stop_ns"] < second._capture.info()["start_ns"]


# Three windows back to back on the test clock (20 us a read, each profile
# ~0.14 ms): samples of 50 us from 0.8 ms to 2.5 ms, numbered by their SM %.
def long_sample_run():
    return [sample(t, t + 50 * US, sm=t // (50 * US)) for t in range(800 * US, 2_500 * US, 50 * US)]


def assert_holds_its_window(prof, samples):
    info = prof._capture.info()
    want = window_of(samples, info["start_ns"], info["stop_ns"])
    assert want, "each window must overlap some samples for this test to mean anything"
    got = [(s, e, v["sm_active_pct"]) for s, e, v in prof._capture.samples()]
    assert got == [(s, e, v["sm_active_pct"]) for s, e, v in want]


def back_to_back(n, samples):
    """n profiles in a row, each finish delayed 0.15 s but the last, so the next
    start is posted before the finish reaches its samples (as back to back on a
    GPU, where the finish waits for the GPU's clock)."""
    _testhooks._fake_samples(samples, 1, 100_000, 0, True)  # a sampler set up already
    profs = []
    for i in range(n):
        _testhooks._finish_delay(150_000_000 if i < n - 1 else 0)
        with loopscope.profile(trace=False, syncs=False, metrics=True) as prof:
            pass
        profs.append(prof)
    _testhooks._finish_delay(0)
    return profs


@pytest.mark.fake_sampler
def test_three_profiles_back_to_back_each_keep_exactly_their_window(test_clock, overlap):
    """Three in a row with overlap on, each finish delayed until the next start is
    posted: no start waits (each continues the sampler, numbered after the
    last), each finish carries its samples after the stop over to the next
    window, and each profile holds exactly its own."""
    samples = long_sample_run()
    test_clock.set(1_000_000, 20 * US)
    profs = back_to_back(3, samples)
    profs[-1].summary()
    for prof in profs:
        assert_holds_its_window(prof, samples)
    assert [p.summary()["overhead"]["start_phases_ms"]["wait"] for p in profs[1:]] == [0, 0]


@pytest.mark.fake_sampler
def test_starts_do_not_wait_for_earlier_opens_queued_behind_a_slow_finish(test_clock,
                                                                          overlap):
    """Back to back behind a slow finish (0.4 s, as a long tail decode): the
    second start's open task waits behind it on the worker, and the third start
    does not wait for that open (each start has its own slot); all three
    profiles hold exactly their own windows."""
    samples = long_sample_run()
    _testhooks._fake_samples(samples, 1, 100_000, 0, True)
    test_clock.set(1_000_000, 20 * US)
    _testhooks._finish_delay(400_000_000)
    with loopscope.profile(trace=False, syncs=False, metrics=True) as first:
        pass
    _testhooks._finish_delay(0)
    took = []
    profs = [first]
    for _ in range(2):
        entered = time.perf_counter()
        with loopscope.profile(trace=False, syncs=False, metrics=True) as prof:
            took.append(time.perf_counter() - entered)
        profs.append(prof)
    assert _testhooks._capture_pending(first._capture)  # the slow finish still runs ...
    assert max(took) < 0.2, took                         # ... and no start waited for it
    profs[-1].summary()
    for prof in profs:
        assert_holds_its_window(prof, samples)


def samples_from_now(until_ms):
    """For the real clock: 1 ms samples from 5 ms before now to until_ms after,
    numbered by their SM %."""
    now = time.monotonic_ns()
    return [sample(t, t + 1_000 * US, sm=i) for i, t in
            enumerate(range(now - 5_000 * US, now + until_ms * 1_000 * US, 1_000 * US))]


@pytest.mark.fake_sampler
def test_a_start_that_waits_for_its_slot_begins_its_window_after_the_wait(overlap):
    """On the real clock: the first finish sleeps 0.4 s, so the opens of the
    next profiles queue behind it; the sixth start finds its slot (the
    second profile's, LS_OPENINGS starts before) still queued and waits.
    That wait is the start's, not the profile's: its window holds only
    what ran inside the with-block (H100, 24 profiles in a row: counted in
    the window, it made a 14 ms loop read 28 ms)."""
    # To 0.48 s (the last window ends ~0.41 s after now: within the settle's
    # 0.1 s, so the samples are taken to be on the profile's clock).
    samples = samples_from_now(480)
    _testhooks._fake_samples(samples, 1, 1_000_000, 0, True)  # a sampler set up already
    _testhooks._finish_delay(400_000_000)
    with loopscope.profile(trace=False, syncs=False, metrics=True) as first:
        pass
    _testhooks._finish_delay(0)
    profs, entered_s, inside_s = [first], [], []
    for _ in range(5):
        t0 = time.perf_counter()
        with loopscope.profile(trace=False, syncs=False, metrics=True) as prof:
            t1 = time.perf_counter()
            time.sleep(0.005)  # the profiled loop
        inside_s.append(time.perf_counter() - t1)
        entered_s.append(t1 - t0)
        profs.append(prof)
    profs[-1].summary()
    assert max(entered_s[:3]) < 0.2, entered_s  # slots free: no wait ...
    assert entered_s[4] > 0.2, entered_s          # ... the sixth waited for its slot
    last = profs[-1]._capture.info()
    window_s = (last["stop_ns"] - last["start_ns"]) / 1e9
    assert window_s < inside_s[4] + 0.05, (window_s, inside_s[4])
    assert window_s < 0.1
    waited_ms = profs[-1].summary()["overhead"]["start_phases_ms"]["wait"]
    assert waited_ms > 150, waited_ms  # reported as the start's wait
    for prof in profs:
        assert_holds_its_window(prof, samples)


@pytest.mark.fake_sampler
def test_a_start_that_starts_sampling_anew_after_a_wait_begins_its_window_once_it_runs(overlap):
    """On the real clock: the second profile samples at another interval, so
    it cannot continue the first's sampler; it waits for the first finish
    (0.3 s) and then for its own sampler's start on the worker (0.2 s, a
    slow cuptiPmSamplingStart): its window begins after both, so no part of
    it goes unsampled (H100, 24 in a row: a 3.7 ms window that began 1.3 ms
    before its sampling kept 25 of 37 samples).  Every open sleeps 0.2 s, the
    first's too, queued before the first finish: the window begins 0.3 + 0.2
    + 0.2 s after the enter, or 0.5 s when its own open runs inside it."""
    samples = samples_from_now(1_000)
    _testhooks._fake_samples(samples, 1, 1_000_000, 0, True, 200_000_000)  # each open: 0.2 s
    with loopscope.profile(trace=False, syncs=False, metrics=True) as warm:
        pass
    warm.summary()
    _testhooks._finish_delay(300_000_000)
    with loopscope.profile(trace=False, syncs=False, metrics=True) as first:
        pass
    _testhooks._finish_delay(0)
    entered_ns = time.monotonic_ns()
    with loopscope.profile(trace=False, syncs=False, metrics=True,
                           metrics_interval_us=200) as second:
        pass
    begun_s = (second._capture.info()["start_ns"] - entered_ns) / 1e9
    assert begun_s >= 0.3 + 0.2 + 0.2 - 0.1, begun_s  # after the finish and its sampler's start
    assert begun_s < 1.5, begun_s
    second.summary()
    assert not _testhooks._capture_pending(first._capture)


@pytest.mark.fake_sampler
def test_a_start_with_no_finish_in_flight_keeps_every_sample_of_its_window(test_clock,
                                                                           overlap):
    """The control: the first finish done before the second start, so
    nothing is carried over; the second still gets its window's samples."""
    samples = sample_run()
    _testhooks._fake_samples(samples, 1, 100_000, 0, True)
    test_clock.set(1_000_000, 20 * US)
    with loopscope.profile(trace=False, syncs=False, metrics=True) as first:
        pass
    first.summary()  # waits for the first finish (which stopped the sampler)
    _testhooks._fake_samples(samples, 1, 100_000, 0, True)  # started again, as CUPTI's would be
    with loopscope.profile(trace=False, syncs=False, metrics=True) as second:
        pass
    for prof in (first, second):
        info = prof._capture.info()
        got = [(s, e) for s, e, _ in prof._capture.samples()]
        assert got == [(s, e) for s, e, _ in window_of(samples, info["start_ns"], info["stop_ns"])]


def test_ops_launched_after_the_stop_are_left_out(test_clock, inject):
    """Launch 1 inside the window, launch 2 after its stop (the user's code
    went on while the worker finished): launch 2, its kernel and nothing
    else is left out, and counted."""
    with loopscope.profile() as prof:  # start reads 1_000_000, stop 1_001_000
        inject("api", [(1_000_500, 1_000_600, 1), (1_500_000, 1_500_100, 2)])
        inject("kernel", [(1_000_700, 1_000_900, 0, 7, 1, "inside"),
                          (1_500_200, 1_500_400, 0, 7, 2, "after")])
    info = prof._capture.info()
    assert (info["start_ns"], info["stop_ns"]) == (1_000_000, 1_001_000)
    assert [op[6] for op in prof._capture.ops()] == ["inside"]
    assert [api[2] for api in prof._capture.apis()] == [1]
    s = prof.summary()
    assert s["gpu"]["kernels"] == 1
    assert (s["overhead"]["ops_after_stop"], s["overhead"]["records_after_stop"]) == (1, 1)


def run_python(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=timeout)


def test_interpreter_exit_with_the_worker_busy_and_a_profile_open_exits_cleanly():
    code = """
        import warnings
        from loopscope import _core, _testhooks
        warnings.simplefilter("ignore")
        _testhooks._fake_samples([(1, 2, {"sm_active_pct": 1.0})], 1)
        _testhooks._finish_delay(300_000_000)
        _core.start(trace=False, syncs=False, metrics=True)
        pending = _core.stop()               # the worker sleeps 0.3 s on it
        assert _testhooks._capture_pending(pending)
        _testhooks._finish_delay(0)
        _core.start(trace=False, syncs=False, metrics=True, metrics_decode_ns=1_000_000)
        print("open", _core.active(), flush=True)   # left open: the atexit path ends it
    """
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "open True"
    assert result.stderr == ""


def test_a_fork_while_the_worker_finishes_neither_hangs_nor_loses_the_parent():
    code = """
        import os, warnings
        from loopscope import _core, _testhooks
        warnings.simplefilter("ignore")
        _testhooks._fake_samples([(1, 2, {"sm_active_pct": 1.0})], 1)
        _testhooks._finish_delay(500_000_000)
        _core.start(trace=False, syncs=False, metrics=True)
        capture = _core.stop()
        pid = os.fork()
        if pid == 0:
            info = capture.info()   # the child's worker is gone: no wait, a reason
            os._exit(0 if "forked" in (info["reason"] or "") else 3)
        _, status = os.waitpid(pid, 0)
        info = capture.info()
        print("child", os.waitstatus_to_exitcode(status), "parent", info["finished_on_worker"])
    """
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "child 0 parent True"


def test_a_decoder_that_falls_behind_ticks_back_to_back():
    """Ticks keep a fixed rate: one that took longer than the period (a
    PM decode behind the GPU) is followed at once, not after another idle
    period (30 ms ticks every 20 ms: 30 ms apart, where 50 ms meant the
    backlog grew by a period each time)."""
    starts = _testhooks._tick_starts(20_000_000, 30_000_000, 6)
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert len(gaps) == 5
    assert all(gap >= 30_000_000 for gap in gaps)  # a tick never overlaps the last one
    assert statistics.median(gaps) < 40_000_000


def test_ticks_quicker_than_their_period_keep_the_period():
    starts = _testhooks._tick_starts(20_000_000, 1_000_000, 4)
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert len(gaps) == 3
    assert all(gap >= 20_000_000 for gap in gaps)


@pytest.mark.fake_sampler
@pytest.mark.parametrize("decode_ms, run_s", [(1, 0.05), (10_000, 0.0)])
def test_the_ticks_decode_while_the_profile_runs_and_the_finish_only_the_tail(
        test_clock, decode_ms, run_s):
    """Each tick hands over `per_tick` synthetic samples as a decode of a
    running sampler would; the finish decodes the rest (the tail, reported
    in summary["overhead"]["tail_samples"]).  With a 10 s period no tick
    runs inside the profile and the finish decodes everything."""
    samples = sample_run()
    per_tick = 3
    _testhooks._fake_samples(samples, per_tick)
    test_clock.set(1_000_000, 20 * US)
    with loopscope.profile(trace=False, syncs=False, metrics=True,
                           metrics_decode_ms=decode_ms) as prof:
        time.sleep(run_s)
    s = prof.summary()
    pm = prof._capture.info()["pm"]
    by_ticks = min(len(samples), (pm["decodes"] - 1) * per_tick)  # the finish decodes once
    assert pm["samples"] == len(samples)
    assert pm["tail_samples"] == len(samples) - by_ticks
    assert s["overhead"]["tail_samples"] == pm["tail_samples"]
    if decode_ms == 10_000:
        assert pm["decodes"] == 1 and pm["tail_samples"] == len(samples)
    info = prof._capture.info()
    assert [x[:2] for x in prof._capture.samples()] == [
        x[:2] for x in window_of(samples, info["start_ns"], info["stop_ns"])]


def test_decoder_probe_ticks_on_the_worker_thread():
    ticks, _, state = _testhooks._decoder_probe(1_000_000, 30_000_000)
    assert 5 <= ticks <= 31
    assert state == "none"


@pytest.mark.fake_sampler
@pytest.mark.parametrize("switches", [{"defer": False}, {"metrics_wait_for_start": True},
                                      {"metrics_stop_in_finish": True}])
def test_the_old_ways_for_comparison_hand_over_the_same_samples(test_clock, switches):
    """The internal switches benchmarks/cost/overhead_options.py compares: the
    finish inside stop, or a start that waits for the sampler."""
    samples = sample_run()
    _testhooks._fake_samples(samples, 1)
    test_clock.set(1_000_000, 20 * US)
    _core.start(trace=False, syncs=False, metrics=True, **switches)
    capture = _core.stop()
    if not switches.get("defer", True):
        assert not _testhooks._capture_pending(capture)  # finished inside stop
    info = capture.info()
    assert info["finished_on_worker"] is switches.get("defer", True)
    assert capture.samples()
    assert [s[:2] for s in capture.samples()] == [
        s[:2] for s in window_of(samples, info["start_ns"], info["stop_ns"])]


@pytest.mark.fake_sampler
def test_two_threads_waiting_for_one_capture_both_get_it_whole():
    import threading

    samples = [sample(1, 2, sm=5)]
    _testhooks._fake_samples(samples, 1)
    _testhooks._finish_delay(300_000_000)
    _core.start(trace=False, syncs=False, metrics=True)
    capture = _core.stop()
    assert _testhooks._capture_pending(capture)
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(capture.info()["pm"]["samples"]))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert seen == [1, 1, 1, 1]


@pytest.mark.fake_sampler
@pytest.mark.parametrize("reused", [False, True])
def test_a_profile_that_ends_before_sampling_begins_says_why_truly(test_clock, reused):
    """Sampling that begins after the profile's end (its set-up, 5 ms here,
    outlasts a profile of a few clock reads): the reason names the first
    set-up in the process only when the sampler was set up now; a sampler
    set up by an earlier profile that started late says when it began and
    how long the profile lasted."""
    setup_ns = 5_000_000
    # the one sample comes once sampling has begun, after the profile
    _testhooks._fake_samples([sample(6_000_000, 6_100_000, sm=40)], 1, 100_000, setup_ns, reused)
    test_clock.set(1_000_000, 20 * US)
    with loopscope.profile(trace=False, syncs=False, metrics=True) as prof:
        with prof.step():
            pass
    info = prof._capture.info()
    lasted_ms = (info["stop_ns"] - info["start_ns"]) / 1e6
    assert lasted_ms < setup_ns / 1e6
    reason = prof.summary()["metrics_error"]
    if reused:
        assert reason == (
            f"PM sampling began {setup_ns / 1e6:.3f} ms after the profile started, after its end "
            f"(it lasted {lasted_ms:.3f} ms): the sampler, set up by an earlier profile, is "
            "started on loopscope's worker thread, so no sample covers a profile this short")
    else:
        assert reason == (
            f"PM sampling was still being set up when the profile ended (the first use in a "
            f"process sets it up on loopscope's worker thread: {setup_ns / 1e6:.0f} ms here), so "
            "no sample covers this profile; the next profiles reuse the set-up")


@pytest.mark.fake_sampler
def test_a_profile_longer_than_the_set_up_has_its_samples(test_clock):
    """The same set-up inside a longer profile: sampled, no reason given."""
    _testhooks._fake_samples([sample(1_000_000, 1_050_000, sm=40)], 1, 100_000, 50_000, True)
    test_clock.set(1_000_000, 20 * US)
    with loopscope.profile(trace=False, syncs=False, metrics=True) as prof:
        with prof.step():
            pass
    summary = prof.summary()
    assert summary["metrics_error"] is None and summary["sm"]["active_pct"] == 40.0


def test_a_finish_hands_what_began_after_its_stop_to_the_next_profile():
    """Back to back (issue 27), the flush of profile 1's finish also brings
    profile 2's records (tracing continued from one to the other).  Each
    record goes to exactly one profile: by its start for API and sync
    records; an op stays with profile 1 when it began by the stop or a
    launch of profile 1 made it (a kernel still running after the exit),
    else it is profile 2's; the worker's own context sync (an own call)
    goes to neither."""
    stop = 10_000
    apis = [(1_000, 1_100, 1), (9_000, 9_100, 2), (12_000, 12_100, 3)]
    ops = [(1_200, 1_500, 1, "before-stop"),
           (10_500, 11_000, 2, "launched-in-1-ran-after"),   # launch 2 is profile 1's
           (12_200, 12_500, 3, "profile-2"),                  # launch 3 came after the stop
           (13_000, 13_100, 77, "no-launch-after-stop"),      # no launch record: by its start
           (9_990, 10_010, 88, "no-launch-across-stop")]      # began by the stop: profile 1's
    syncs = [(5_000, 5_100, 10), (11_000, 11_500, 11), (14_000, 14_500, 4_000_000_001)]
    kept, moved, floor = _testhooks._split_after_stop(stop, apis, ops, syncs, [4_000_000_001])
    # Independently: the rule above, in plain Python.
    launches_1 = {c for s, e, c in apis if s <= stop}
    want_ops_1 = [n for s, e, c, n in ops if s <= stop or c in launches_1]
    want_ops_2 = [n for s, e, c, n in ops if not (s <= stop or c in launches_1)]
    assert kept == ([1, 2], want_ops_1, [10])
    assert moved == ([3], want_ops_2, [11])
    assert want_ops_2 == ["profile-2", "no-launch-after-stop"]  # the test means something
    # Later records of this window's launches are not the next profile's:
    # its floor is the window's last launch id.
    assert floor == max(launches_1) == 2
    # Nothing lost or doubled (the worker's own sync aside).
    assert sorted(kept[1] + moved[1]) == sorted(n for *_, n in ops)


def test_a_record_that_begins_exactly_at_the_stop_stays_with_its_profile():
    """The stop is the last instant of the window: a record starting at it
    is the window's; one a nanosecond later is the next profile's."""
    stop = 5_000
    kept, moved, _ = _testhooks._split_after_stop(
        stop, [(stop, stop + 10, 1), (stop + 1, stop + 10, 2)],
        [(stop, stop + 5, 9, "at"), (stop + 1, stop + 5, 9, "after-no-launch")],
        [(stop, stop + 1, 5), (stop + 1, stop + 2, 6)], [])
    assert kept == ([1], ["at"], [5])
    assert moved == ([2], ["after-no-launch"], [6])


def test_own_ids_of_one_split_do_not_follow_into_the_next():
    """The worker's own calls noted for one finish are that finish's: a
    later split whose sync record happens to carry the same id keeps it
    (the hook forgets its synthetic ids; real ids only grow)."""
    stop = 5_000
    sync_after = [(stop + 10, stop + 20, 6)]
    _, moved, _ = _testhooks._split_after_stop(stop, [], [], sync_after, [6])
    assert moved == ([], [], [])  # the own call goes to neither profile
    _, moved, _ = _testhooks._split_after_stop(stop, [], [], sync_after, [])
    assert moved == ([], [], [6])
