"""SM/DRAM counters on synthetic PM samples: the mapping of samples onto the
loop, steps and ranges (over their span and over GPU-busy time), the verdict
rules, counters-only mode and the unavailable path.  Exact answers; all
times in ns (1 us = 1_000 ns)."""
from __future__ import annotations

import math
import time

import pytest

import loopscope
from loopscope import _core, _testhooks
from loopscope.live import _options
from loopscope.views._report import format_report
from machine import NO_DRIVER_REASON, driver_present

US = 1_000


def sample(start, end, sm=None, dram=None, **more):
    values = dict(more)
    if sm is not None:
        values["sm_active_pct"] = float(sm)
    if dram is not None:
        values["dram_throughput_pct"] = float(dram)
    return (start, end, values)


def kernel(start, end, corr, name="k", device=0, stream=7):
    return (start, end, device, stream, corr, name)


# -- the C averaging, through the capture ---------------------------------

def _analysis(kernels=(), samples=(), apis=()):
    _core.start(_options.core_start_values(trace=False, syncs=False))
    try:
        if kernels:
            _testhooks._inject("kernel", list(kernels))
        if apis:
            _testhooks._inject("api", list(apis))
        if samples:
            _testhooks._inject("sample", list(samples))
    finally:
        capture = _core.stop()
    model = capture.model()
    return capture, {"metrics": model.metrics(), "ranges": model.ranges()}


def test_span_and_busy_averages_are_overlap_weighted():
    """Kernel busy [1000, 5000]; samples [1, 3001] SM 50 and [3001, 6001]
    SM 100: the window [1000, 5000] overlaps them 2001 and 1999 ns."""
    _, a = _analysis(kernels=[kernel(1_000, 5_000, 1)],
                     samples=[sample(1, 3_001, sm=50), sample(3_001, 6_001, sm=100)])
    span = a["metrics"]["span"]
    assert span["sm_active_pct"] == pytest.approx((50 * 2001 + 100 * 1999) / 4000, abs=1e-12)
    assert (span["samples"], span["covered_ns"], span["window_ns"]) == (2, 4_000, 4_000)
    assert span["dram_throughput_pct"] is None  # not collected


def test_busy_window_leaves_idle_gaps_out():
    """Two kernels [0.1, 0.2] ms and [0.4, 0.5] ms; the GPU idles between.
    Samples of 100 us: SM 80 while busy, 0 while idle.  Over the span
    [0.1, 0.5] ms: 2 busy of 4 samples -> 40%; over busy time: 80%."""
    samples = [sample(100 * US + i * 100 * US, 200 * US + i * 100 * US,
                      sm=80 if i in (0, 3) else 0, dram=5) for i in range(4)]
    _, a = _analysis(kernels=[kernel(100 * US, 200 * US, 1), kernel(400 * US, 500 * US, 2)],
                     samples=samples)
    m = a["metrics"]
    assert m["span"]["sm_active_pct"] == 40.0
    assert m["span"]["samples"] == 4
    assert m["busy"]["sm_active_pct"] == 80.0
    assert (m["busy"]["samples"], m["busy"]["covered_ns"], m["busy"]["window_ns"]) == (
        2, 200 * US, 200 * US)
    assert m["busy"]["dram_throughput_pct"] == 5.0


def test_samples_outside_the_window_do_not_count_and_unsorted_input_is_sorted():
    _, a = _analysis(kernels=[kernel(10_000, 20_000, 1)],
                     samples=[sample(30_000, 40_000, sm=99), sample(10_000, 20_000, sm=10),
                              sample(1_000, 10_000, sm=77)])
    assert a["metrics"]["span"]["sm_active_pct"] == 10.0
    assert a["metrics"]["span"]["samples"] == 1


def test_samples_come_back_in_time_order():
    capture, _ = _analysis(samples=[sample(5_000, 6_000, sm=2), sample(1_000, 2_000, sm=1)])
    assert capture.samples() == [(1_000, 2_000, {"sm_active_pct": 1.0}),
                                 (5_000, 6_000, {"sm_active_pct": 2.0})]
    info = capture.info()
    assert (info["samples"], info["samples_injected"], info["sampled"]) == (2, True, False)


def test_window_without_samples_reads_none():
    _, a = _analysis(kernels=[kernel(1_000, 2_000, 1)], samples=[sample(50_000, 60_000, sm=5)])
    assert a["metrics"]["span"]["sm_active_pct"] is None
    assert a["metrics"]["span"]["samples"] == 0


def test_no_samples_no_metrics():
    _, a = _analysis(kernels=[kernel(1_000, 2_000, 1)])
    assert a["metrics"] is None
    assert all(r["metrics"] is None for r in a["ranges"])


def test_ops_of_other_devices_are_not_the_sampled_device_busy_time():
    """Samples from device 0; a kernel on device 1 does not make device 0 busy."""
    _, a = _analysis(kernels=[kernel(1_000, 2_000, 1, device=0), kernel(5_000, 9_000, 2, device=1)],
                     samples=[sample(1_000, 2_000, sm=60), sample(5_000, 9_000, sm=0)])
    assert a["metrics"]["busy"]["sm_active_pct"] == 60.0
    assert a["metrics"]["busy"]["window_ns"] == 1_000


@pytest.mark.parametrize("bad, error", [
    ((1, 1, {"sm_active_pct": 1.0}), ValueError),          # zero length
    ((1, 2, {"sm_busy": 1.0}), ValueError),                # unknown figure
    ((1, 2, {"sm_active_pct": -1.0}), ValueError),         # negative
    ((1, 2, {"sm_active_pct": math.inf}), ValueError),
    ((1, 2, [1.0]), TypeError),                            # not a dict
    ((2, 1, {}), ValueError),                              # ends before it starts
])
def test_bad_samples_are_refused_and_nothing_is_appended(bad, error):
    _core.start(_options.core_start_values(trace=False, syncs=False))
    try:
        with pytest.raises(error):
            _testhooks._inject("sample", [sample(1, 2, sm=1), bad])
    finally:
        capture = _core.stop()
    assert capture.info()["samples"] == 0


# -- steps and ranges ------------------------------------------------------

def _loop_with_steps(inject, test_clock, step_samples, kernels_per_step=True, **options):
    """Two steps on the scripted clock (step i spans reads 1+2i .. 2+2i:
    [1_001_000 + 2000 i, 1_002_000 + 2000 i]), each with one kernel launched
    inside it that runs [host start + 100 us, + 300 us] on the GPU."""
    with loopscope.profile(**options) as prof:
        for _ in range(2):
            with prof.step():
                pass
        records, apis = [], []
        for i in range(2):
            host = test_clock.at(1 + 2 * i)
            if kernels_per_step:
                records.append(kernel(host + 100 * US, host + 300 * US, 10 + i, f"k{i}"))
                apis.append((host + 10, host + 20, 10 + i))
        if records:
            inject("kernel", records)
            inject("api", apis)
        inject("sample", step_samples)
    return prof.summary()


def test_step_figures_over_span_and_busy(inject, test_clock):
    """Step 0's kernel runs [1_101_000, 1_301_000]; step 1's [1_103_000, 1_303_000].
    Samples: [1_101_000, 1_201_000] SM 90 DRAM 10, [1_201_000, 1_301_000] SM 70
    DRAM 30, [1_301_000, 1_303_000] SM 0 DRAM 0.  Step 0's span = its kernel
    (2 samples): SM 80, DRAM 20.  Step 1's span [1_103_000, 1_303_000]:
    98 us at 90, 100 us at 70, 2 us at 0 -> (8820 + 7000) / 200 = 79.1."""
    s = _loop_with_steps(inject, test_clock, [
        sample(1_101_000, 1_201_000, sm=90, dram=10, gr_active_pct=100.0),
        sample(1_201_000, 1_301_000, sm=70, dram=30, gr_active_pct=100.0),
        sample(1_301_000, 1_303_000, sm=0, dram=0, gr_active_pct=0.0),
    ])
    step0, step1 = s["steps"]
    assert (step0["sm_active_pct"], step0["dram_pct"], step0["samples"]) == (80.0, 20.0, 2)
    assert (step0["sm_active_busy_pct"], step0["dram_busy_pct"]) == (80.0, 20.0)
    assert step1["sm_active_pct"] == 79.1
    assert step1["dram_pct"] == round((98 * 10 + 100 * 30) / 200, 2)  # 19.9
    assert step1["samples"] == 3
    # the whole loop: ops span [1_101_000, 1_303_000] = busy (the kernels overlap)
    assert s["sm"]["active_pct"] == round((100 * 90 + 100 * 70 + 2 * 0) / 202, 2)
    assert s["sm"]["active_busy_pct"] == s["sm"]["active_pct"]
    assert s["sm"]["samples"] == 3
    assert s["sm"]["busy_from"] == "ops"
    assert s["metrics_error"] is None
    assert s["metrics"] == {"source": "injected", "samples": 3}


def test_named_ranges_average_their_instances_weighted_by_time(inject, test_clock):
    """Range "A" twice: host spans read 1..2 and 3..4 with no ops (so the
    host spans are their windows, 1 us each).  Samples: SM 10 over the first,
    SM 40 over the second -> 25."""
    with loopscope.profile() as prof:
        for _ in range(2):
            with loopscope.range("A"):
                pass
        inject("sample", [sample(test_clock.at(1), test_clock.at(2), sm=10),
                          sample(test_clock.at(3), test_clock.at(4), sm=40)])
    r = prof.summary()["ranges"][0]
    assert (r["name"], r["count"], r["sm_active_pct"], r["samples"]) == ("A", 2, 25.0, 2)


def test_dram_rates_and_pcie_bytes(run_trace):
    """DRAM read 2000 GB/s and write 1000 GB/s for 100 us; PCIe read
    1 GB/s -> 100 us * 1 B/ns = 100_000 B."""
    s = run_trace(kernels=[kernel(100 * US, 200 * US, 1)], samples=[
        sample(100 * US, 200 * US, sm=100, dram=84, dram_read_gbps=2000.0,
               dram_write_gbps=1000.0, pcie_read_gbps=1.0, pcie_write_gbps=0.0)])
    assert (s["dram"]["read_gbps"], s["dram"]["write_gbps"]) == (2000.0, 1000.0)
    assert s["dram"]["throughput_pct"] == 84.0
    assert s["pcie"] == {"read_bytes": 100_000, "write_bytes": 0}


# -- verdict rules ---------------------------------------------------------

def busy_loop(sm, dram, gap_ns=1_000):
    """Ten 100 us kernels separated by 1 us gaps (busy 99%), one sample each."""
    kernels, samples, t = [], [], 1_000
    for i in range(10):
        kernels.append(kernel(t, t + 100 * US, i + 1, f"k{i}"))
        samples.append(sample(t, t + 100 * US, sm=sm, dram=dram, gr_active_pct=100.0))
        t += 100 * US + gap_ns
    return kernels, samples


@pytest.mark.parametrize("sm, dram, verdict", [
    (100.0, 84.0, "MEMORY_BOUND"),    # a streaming copy on an H200 (GPU_FACTS)
    (100.0, 70.0, "MEMORY_BOUND"),    # the threshold itself
    (100.0, 69.99, "BALANCED"),       # just below: SM high but DRAM too high for compute
    (95.0, 2.0, "COMPUTE_BOUND"),     # an FMA loop
    (60.01, 49.99, "COMPUTE_BOUND"),
    (60.0, 10.0, "BALANCED"),         # SM must be above 60
    (90.0, 50.0, "BALANCED"),         # DRAM must be below 50
    (20.0, 10.0, "BALANCED"),         # busy but neither: latency bound kernels
])
def test_counter_rules_when_the_gpu_is_busy(run_trace, sm, dram, verdict):
    kernels, samples = busy_loop(sm, dram)
    s = run_trace(kernels=kernels, samples=samples)
    d = s["diagnosis"]
    assert d["verdict"] == verdict
    assert d["evidence"]["sm_active_busy_pct"] == round(sm, 2)
    assert d["evidence"]["dram_busy_pct"] == round(dram, 2)
    assert d["evidence"]["busy_pct"] > 99
    assert any("SM active" in r for r in d["reasons"])


def test_memory_bound_action_names_compression_and_l2(run_trace):
    kernels, samples = busy_loop(100.0, 84.0)
    d = run_trace(kernels=kernels, samples=samples)["diagnosis"]
    assert d["actions"][0].startswith("DRAM runs at 84.0% of peak")
    assert "compress the weights" in d["actions"][0] and "L2" in d["actions"][0]


def test_without_counters_a_busy_gpu_stays_gpu_bound(run_trace):
    kernels, _ = busy_loop(0, 0)
    d = run_trace(kernels=kernels)["diagnosis"]
    assert d["verdict"] == "GPU_BOUND"
    assert d["evidence"]["sm_active_pct"] is None


def test_launch_bound_wins_over_counters_when_the_gpu_idles(run_trace):
    """1 us kernels launched after 80 us gaps (host late): busy ~1.2%.
    Even with samples saying SM 95% while busy, the loop is launch bound."""
    kernels, apis, samples, t = [], [], [], 1_000
    for i in range(10):
        kernels.append(kernel(t, t + 1_000, i + 1))
        apis.append((t - 500, t - 400, i + 1))  # launched after the previous one ended
        samples.append(sample(t, t + 1_000, sm=95, dram=1))
        samples.append(sample(t + 1_000, t + 81_000, sm=0, dram=0))
        t += 81_000
    s = run_trace(kernels=kernels, apis=apis, samples=samples)
    d = s["diagnosis"]
    assert d["verdict"] == "CPU_LAUNCH_BOUND"
    assert d["evidence"]["sm_active_busy_pct"] == 95.0
    assert d["evidence"]["sm_active_pct"] < 2
    assert all(step["verdict"] is None for step in s["steps"])  # no steps here


def test_step_verdicts_use_counters(inject, test_clock):
    """Both steps' kernels busy their whole span; step 0 memory bound, step 1 compute bound."""
    s = _loop_with_steps(inject, test_clock, [
        sample(1_101_000, 1_103_000, sm=100, dram=90),  # only step 0's kernel runs
        sample(1_103_000, 1_301_000, sm=100, dram=80),  # both
        sample(1_301_000, 1_303_000, sm=100, dram=0),   # only step 1's
    ])
    # step 0 [1_101_000, 1_301_000]: DRAM (2*90 + 198*80)/200 = 80.1; step 1: (198*80 + 0)/200 = 79.2
    assert [st["dram_busy_pct"] for st in s["steps"]] == [80.1, 79.2]
    assert [st["verdict"] for st in s["steps"]] == ["MEMORY_BOUND", "MEMORY_BOUND"]


# -- counters-only mode ----------------------------------------------------

def test_counters_only_busy_from_gr_active_and_launch_bound(inject, test_clock):
    """trace=False and no ops: the windows are host spans; GR active 20% ->
    the GPU idles 80% of the loop and nobody waited on it: CPU_LAUNCH_BOUND.
    Busy-time figures are estimated as span / GR: SM 10 / 0.2 = 50."""
    s = _loop_with_steps(inject, test_clock, [
        sample(test_clock.at(0), test_clock.at(6), sm=10, dram=4, gr_active_pct=20.0)],
        kernels_per_step=False, trace=False)
    assert s["gpu"] is None and s["gaps"] is None
    assert s["sm"]["gr_active_pct"] == 20.0
    assert s["sm"]["active_pct"] == 10.0
    assert s["sm"]["active_busy_pct"] == 50.0
    assert s["sm"]["busy_from"] == "gr_active"
    assert s["dram"]["throughput_busy_pct"] == 20.0
    d = s["diagnosis"]
    assert d["verdict"] == "CPU_LAUNCH_BOUND"
    assert d["evidence"]["busy_from"] == "gr_active"
    assert d["evidence"]["busy_pct"] == 20.0
    assert any("SM active < 30% and DRAM < 50%" in r for r in d["reasons"])
    assert [st["verdict"] for st in s["steps"]] == ["CPU_LAUNCH_BOUND", "CPU_LAUNCH_BOUND"]
    assert [st["gr_active_pct"] for st in s["steps"]] == [20.0, 20.0]


def test_counters_only_compute_bound(inject, test_clock):
    s = _loop_with_steps(inject, test_clock, [
        sample(test_clock.at(0), test_clock.at(6), sm=95, dram=3, gr_active_pct=100.0)],
        kernels_per_step=False, trace=False)
    assert s["diagnosis"]["verdict"] == "COMPUTE_BOUND"
    assert [st["verdict"] for st in s["steps"]] == ["COMPUTE_BOUND", "COMPUTE_BOUND"]


# -- unavailable -----------------------------------------------------------

@pytest.mark.real_tracing
def test_unavailable_counters_leave_sm_and_dram_none_with_a_reason(run_trace):
    """Counters asked for (the default, not turned off as in the rest of
    this file) on a machine without the driver: the exact reason, in the
    summary and in the report; tracing of the injected records still works."""
    if driver_present():
        pytest.skip("a driver is here: counters may be available (tests/gpu/test_gpu_metrics.py)")
    s = run_trace(kernels=[kernel(1_000, 2_000, 1)])
    assert s["sm"] is None and s["dram"] is None and s["pcie"] is None
    assert s["metrics_error"] == NO_DRIVER_REASON
    # said once: by the GPU_BOUND reason, the SM/DRAM line refers to it (issue 41, item 6)
    lines = format_report(s).splitlines()
    assert [line for line in lines if NO_DRIVER_REASON in line] == [
        f"  - no SM/DRAM counters to split GPU_BOUND: {NO_DRIVER_REASON}"]
    assert "SM/DRAM: see the verdict's reasons above" in lines
    assert s["steps"] == [] and s["gpu"]["kernels"] == 1  # tracing still works


def test_metrics_false_says_so():
    with loopscope.profile(metrics=False) as prof:
        pass
    s = prof.summary()
    assert s["sm"] is None
    assert s["metrics_error"] == "SM and DRAM sampling was turned off (metrics=False)"
    assert "SM/DRAM: SM and DRAM sampling was turned off" in prof.report()


@pytest.mark.real_tracing
def test_without_a_driver_the_reason_is_the_driver():
    if _core.start(_options.core_start_values(trace=False, syncs=False, metrics=True))["sampling"]:
        _core.stop()
        pytest.skip("PM sampling works here")
    state = _core.stop().info()
    with loopscope.profile(metrics=True) as prof:
        pass
    reason = prof.summary()["metrics_error"]
    assert reason == state["metrics_reason"]
    if not driver_present():  # the sentence is known: the driver check comes first
        assert reason == NO_DRIVER_REASON
    else:  # a driver but no sampling: CUPTI's own words, never an empty reason
        assert reason and reason != NO_DRIVER_REASON


@pytest.mark.parametrize("option, value", [("metrics_interval_us", 0), ("metrics_buffer_mb", 0.5),
                                           ("metrics_decode_ms", -1), ("metrics_decode_ms", 0)])
def test_bad_metrics_options(option, value):
    with pytest.raises(ValueError):
        loopscope.profile(**{option: value})


def test_report_shows_counters(run_trace):
    kernels, samples = busy_loop(95.0, 2.0)
    s = run_trace(kernels=kernels, samples=samples)
    from loopscope.views._report import format_report

    text = format_report(s)
    assert "COMPUTE BOUND" in text
    assert "SM: active 95.0% (while busy 95.0%)" in text
    assert "DRAM: 2.0% of peak" in text


def test_decoder_thread_wakes_once_a_period():
    # 1 ms period for 60 ms: about 60 rounds; a loaded 2-core CI machine may
    # oversleep, so only "many, and not more than the period allows".
    rounds, _, state = _testhooks._decoder_probe(1_000_000, 60_000_000)
    assert 10 <= rounds <= 61
    assert state == "none"  # ended and joined


def test_stopping_the_decoder_does_not_wait_out_its_period():
    rounds, stop_ns, _ = _testhooks._decoder_probe(10_000_000_000, 2_000_000)
    assert rounds == 0
    assert stop_ns < 1_000_000_000  # woken at once, not after the 10 s period


def test_idle_decoder_releases_the_counters_after_the_keep_time_and_ends():
    _, _, state = _testhooks._decoder_probe(1_000_000, 3_000_000, 100_000_000)
    assert state == "idle"
    deadline = time.monotonic() + 5
    while _testhooks._decoder_state() != "ended" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _testhooks._decoder_state() == "ended"
    _core._release_counters()
    assert _testhooks._decoder_state() == "none"


def test_a_new_start_keeps_an_idle_decoder_from_releasing():
    _testhooks._decoder_probe(1_000_000, 1_000_000, 100_000_000)
    assert _testhooks._decoder_state() == "idle"
    # The next run takes the same thread over before its keep time is up,
    # and parks it for good this time (keep: 1 hour).
    _, _, state = _testhooks._decoder_probe(1_000_000, 300_000_000, 3_600_000_000_000)
    assert state == "idle"
    time.sleep(0.05)
    assert _testhooks._decoder_state() == "idle"
    _core._release_counters()
    assert _testhooks._decoder_state() == "none"


def test_release_counters_refuses_while_a_profile_runs():
    with loopscope.profile():
        with pytest.raises(RuntimeError, match="profile is running"):
            _core._release_counters()


def test_decoder_probe_refuses_while_a_profile_runs():
    with loopscope.profile():
        with pytest.raises(RuntimeError, match="no profile running"):
            _testhooks._decoder_probe(1_000_000, 1_000_000)


# Checking decoded samples against a profile's span (ls_samples_settle): 100 us
# samples, partial above 1 ms, profile from 1_000_000 to 2_000_000 ns, 100 ms
# tolerance for "another clock".
def settle(spans, started=1_000_000, stopped=2_000_000):
    """(kept, partial, delta, outside): no whole sample here ends by the start
    (those are the wait's: tests/rules/test_rule_samples.py)."""
    kept, partial, ended_before, delta, outside = _testhooks._settle_samples(
        spans, 1_000_000, started, stopped, 100_000_000)
    assert ended_before == 0
    return kept, partial, delta, outside


def test_samples_on_the_activity_clock_stay_where_they_are():
    spans = [(1_050_000, 1_150_000), (1_150_000, 1_250_000)]
    assert settle(spans) == (spans, 0, 50_000, False)


def test_partial_samples_are_dropped_wherever_they_are():
    # The first after a start and one after an overflow restart span much
    # more than an interval.
    spans = [(0, 1_100_000), (1_100_000, 1_200_000), (1_200_000, 1_700_000 + 900_000),
             (1_300_000, 1_400_000)]
    kept, partial, delta, shift = settle(spans)
    assert kept == [(1_100_000, 1_200_000), (1_300_000, 1_400_000)]
    assert (partial, delta, shift) == (2, 100_000, False)


def test_a_sample_starting_at_zero_is_dropped_not_taken_for_another_clock():
    # Seen on an H100 (a window continuing a running sampler): a sample
    # (0, 0) among real ones.  Kept, it would start 1 ms before the profile
    # on these test clocks; on real ones 1.8e18 ns before, which the clock
    # check took for another clock, shifting every sample out of the window.
    real = [(1_050_000, 1_150_000), (1_150_000, 1_250_000)]
    kept, partial, delta, shift = settle([(0, 0)] + real, started=1_000_000)
    assert kept == real and partial == 1 and shift is False and delta == 50_000
    # The control: the same real samples alone, and a zero-start sample is
    # the only thing that differs.
    assert settle(real, started=1_000_000) == (real, 0, 50_000, False)
    # On a real clock (started 1.8e18 ns): without the rule the zero sample
    # would be 1.8e18 ns before the start, far past the 100 ms tolerance.
    t = 1_795_803_510_393_982_168
    real_clock = [(t + 50_000, t + 150_000)]
    kept, partial, _, shift = settle([(0, 0)] + real_clock, started=t, stopped=t + 1_000_000)
    assert kept == real_clock and partial == 1 and shift is False


def test_a_late_first_sample_after_lost_samples_is_not_another_clock():
    # An overflow lost the first 0.5 s: the first kept sample starts late,
    # but inside the profile; shifting it would misplace every sample.
    spans = [(501_000_000, 501_100_000)]
    kept, _, delta, shift = settle(spans, started=1_000_000, stopped=600_000_000)
    assert kept == spans and delta == 500_000_000 and shift is False


def test_samples_outside_the_profile_are_reported_and_never_moved_onto_it():
    # 5 s ahead of the profile: outside, and left where they are.  Moving
    # them "onto the profile" pasted other times' samples over it (an H200,
    # 2026-11-29: SM and DRAM 0 on a busy loop, moved by 181 ms); a run on
    # another clock is put right by its own offset, at decode.
    spans = [(5_001_050_000, 5_001_150_000), (5_001_150_000, 5_001_250_000)]
    kept, _, delta, outside = settle(spans)
    assert outside is True and delta == 5_001_050_000 - 1_000_000
    assert kept == spans
    # The control: the same two samples inside the profile are not outside.
    inside = [(s - 5_000_000_000, e - 5_000_000_000) for s, e in spans]
    assert settle(inside) == (inside, 0, 50_000, False)


def test_settle_refuses_a_span_that_ends_before_it_starts():
    with pytest.raises(ValueError, match=r"spans\[0\]: end before start"):
        settle([(2, 1)])


def test_coverage_says_how_much_of_the_loop_the_samples_cover(run_trace):
    kernels, samples = busy_loop(95.0, 2.0)
    # The loop spans 10 kernels of 100 us and 9 gaps of 1 us: 1009 us, of
    # which the samples cover the kernels' 1000 us.
    # Coverage is judged over the time the GPU had work (the kernels' 1000 us, issue
    # 41); the whole window's share is span_coverage_pct.
    full = run_trace(kernels=kernels, samples=samples)
    assert full["sm"]["coverage_pct"] == 100.0
    assert full["sm"]["coverage_of"] == "the GPU's busy time"
    assert full["sm"]["span_coverage_pct"] == round(100 * 1000 / 1009, 2)
    # Samples lost to an overflow: only the first five kernels are covered.
    half = run_trace(kernels=kernels, samples=samples[:5])
    assert half["sm"]["coverage_pct"] == round(100 * 500 / 1000, 2)
    assert half["sm"]["span_coverage_pct"] == round(100 * 500 / 1009, 2)
    from loopscope.views._report import format_report

    # said once, by the failed coverage check on top (issue 41: it was said twice)
    text = format_report(half)
    assert text.count("WARNING") == 1
    assert f"WARNING (coverage): PM samples cover {round(100 * 500 / 1000, 2):g}% of the " \
           "GPU's busy time" in text
    assert "cover only" not in text and "WARNING" not in format_report(full)
    checks = [c for c in half["checks"] if c["name"] != "coverage"]  # a summary made without
    assert "cover only 50% of the loop" in format_report(dict(half, checks=checks))  # checks


def test_no_counters_reason_names_overflows_before_a_short_loop():
    from loopscope._summary import NO_SAMPLES, no_counters_reason

    # Seen on an H200 with a 4 MiB buffer decoded every 50 ms: every sample
    # lost to overflows, which the short-loop sentence would have hidden.
    assert "overflowed 3 time(s)" in no_counters_reason({"overflows": 3, "error": None})
    assert no_counters_reason({"overflows": 0, "error": None}) == NO_SAMPLES
    assert no_counters_reason({"overflows": 3, "error": "decode failed"}) == "decode failed"
