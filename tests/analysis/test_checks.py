"""summary["checks"] (issue 24): each self-check failed on purpose, on the
side of its threshold where it must fail and on the side where it must
pass; a failed one is a WARNING at the top of the report and the HTML, and
the budgets and regression gates that read its figures refuse to pass.

Expected numbers are written here from the records the tests make, never
from loopscope's constants."""
from __future__ import annotations

import json
import os

import pytest

import loopscope
from loopscope import _core, _testhooks
from loopscope.figures import _checks
from loopscope.figures._budgets import check_budgets, evaluate
from loopscope.__main__ import main
from loopscope.surfaces._compare import compare, regressions
from loopscope.views._html import render
from loopscope.views._report import format_report, short_text
from loopscope._summary import build_summary
from trace_fixtures import trace_doc, write

# CI runs the suite again with ASan preloaded, where matplotlib cannot load.
UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")

US, MS = 1_000, 1_000_000


def checks_by_name(summary):
    return {c["name"]: c for c in summary["checks"]}


def kernel(start, end, corr, name="k"):
    return (start, end, 0, 7, corr, name)


@pytest.fixture
def live_injected(monkeypatch):
    """Injected records treated as a live CUPTI profile's: the live checks
    (timeline, clock_rate) then judge them against the scripted clock."""
    monkeypatch.setattr(_checks, "LIVE_SOURCES", frozenset({"cupti", "injected"}))


def windowed(inject, kernels, ratio=None, start=1 * MS):
    """A profile on the test clock, set again to 1 ms and 1 us a read, whose
    kernels are `kernels`; `ratio` the CUPTI/host clock ratio the session
    measured.  The profile reads the clock at its start (1 ms) and its stop
    (1 ms + 1 us)."""
    _testhooks._set_test_clock(start, 1 * US)
    with loopscope.profile() as prof:
        inject("kernel", kernels)
    if ratio is not None:
        prof.finished.state["cupti_clock_ratio"] = ratio  # before its summary is made
    return prof


def assert_refused(summary, check, budgets=("max_severe_gaps",)):
    """The WARNING at the top of the report and the HTML, and the budgets refused."""
    lines = format_report(summary).splitlines()
    assert lines[1].startswith(f"WARNING ({check}): ")
    assert f"WARNING: check {check} failed" in short_text(summary)
    if not UNDER_ASAN:  # the HTML draws with matplotlib, which dies under CI's ASan preload
        assert f"WARNING ({check}): " in render(summary)
    verdict = evaluate(summary, check_budgets({b: 1000 for b in budgets}))
    assert [o.name for o in verdict.failed] == list(budgets)
    assert all(f"check {check} failed" in o.line() for o in verdict.failed)
    assert verdict.met == []


def assert_passes(summary, check):
    assert checks_by_name(summary)[check]["ok"] is True
    assert "WARNING (" not in format_report(summary)
    assert "WARNING" not in short_text(summary)
    verdict = evaluate(summary, check_budgets({"max_severe_gaps": 1000}))
    assert verdict.failed == [] and [o.name for o in verdict.met] == ["max_severe_gaps"]


# -- timeline -----------------------------------------------------------------

def test_timeline_inside_the_window_passes_and_outside_fails(test_clock, inject, live_injected):
    # The profile reads the clock at its start (1 ms) and stop: the window is
    # a few us.  Tolerance (module doc): 1 ms + 2% of the window each side.
    start = test_clock.start
    inside = windowed(inject, [kernel(start + 1 * US, start + 2 * US, 1)]).summary()
    assert_passes(inside, "timeline")
    # A time base stretched 3x: the same kernel lands 2 ms past the stop,
    # more than the 1 ms (+ 2% of the 1 us window) allowed.
    stretched = windowed(inject, [kernel(3 * start, 3 * start + 3 * US, 1)]).summary()
    check = checks_by_name(stretched)["timeline"]
    assert check["ok"] is False and "after the profile stopped" in check["detail"]
    assert_refused(stretched, "timeline")


def test_timeline_tolerance_both_sides(test_clock, inject, live_injected):
    # The stop reads the clock once after the start: window = 1 tick (1 us).
    start = 10 * MS
    window = 1 * US
    slack = 1 * MS + 0.02 * window
    stop = start + window
    ok = windowed(inject, [kernel(stop, stop + int(slack), 1)], start=start).summary()
    assert checks_by_name(ok)["timeline"]["ok"] is True
    late = windowed(inject, [kernel(stop, stop + int(slack) + 1, 1)], start=start).summary()
    assert checks_by_name(late)["timeline"]["ok"] is False
    ok = windowed(inject, [kernel(start - int(slack), start + 10, 1)], start=start).summary()
    assert checks_by_name(ok)["timeline"]["ok"] is True
    early = windowed(inject, [kernel(start - int(slack) - 1, start + 10, 1)],
                     start=start).summary()
    assert checks_by_name(early)["timeline"]["ok"] is False
    assert "before the profile started" in checks_by_name(early)["timeline"]["detail"]


def test_timeline_and_clock_rate_do_not_apply_to_injected_or_offline_records(test_clock, inject):
    prof = windowed(inject, [kernel(5 * MS, 6 * MS, 1)], ratio=3.0)
    names = [c["name"] for c in prof.summary()["checks"]]
    assert "timeline" not in names and "clock_rate" not in names
    assert "durations" in names and "drops" in names


# -- clock_rate -----------------------------------------------------------------

@pytest.mark.parametrize("ratio, ok", [(1.0, True), (1.0099, True), (0.9901, True),
                                       (1.0101, False), (0.9899, False), (2.05, False),
                                       (float("nan"), False), (float("inf"), False)])
def test_clock_rate_threshold(test_clock, inject, live_injected, ratio, ok):
    start = test_clock.start
    summary = windowed(inject, [kernel(start, start + 1 * US, 1)], ratio=ratio).summary()
    check = checks_by_name(summary)["clock_rate"]
    assert check["ok"] is ok
    if ok:
        assert_passes(summary, "clock_rate")
    else:
        assert_refused(summary, "clock_rate", ("max_gap_us", "min_busy_pct"))


def test_clock_rate_not_measured_is_left_out(test_clock, inject, live_injected):
    start = test_clock.start
    summary = windowed(inject, [kernel(start, start + 1 * US, 1)]).summary()
    assert "clock_rate" not in checks_by_name(summary)


def test_clock_rate_is_the_sessions_measure_over_a_long_enough_span():
    assert _checks.clock_rate_check(None) is None
    assert _checks.clock_rate_check(True)["ok"] is False  # a bool is not a ratio
    span = 1 * MS  # the minimum host reference span judged
    info = {"clock_rate": 2.1, "reference_span_ns": span}
    assert _checks.measured_clock_rate(info, "cupti", None) == 2.1
    assert _checks.measured_clock_rate(dict(info, reference_span_ns=span - 1), "cupti",
                                       None) is None
    assert _checks.measured_clock_rate(info, "injected", None) is None  # the test clock
    assert _checks.measured_clock_rate({}, "cupti", None) is None
    assert _checks.measured_clock_rate(info, "cupti", {"cupti_clock_ratio": 1.0}) == 1.0


# -- durations and drops: a capture whose counts say records were lost ----------

class Doctored:
    """A finished capture whose info() reports extra counts (drops, records
    refused for their times): what a real buffer overflow would say."""

    def __init__(self, capture, **info):
        self._capture, self._info = capture, info

    def info(self):
        return dict(self._capture.info(), **self._info)

    def __getattr__(self, name):
        return getattr(self._capture, name)


def doctored_summary(prof, **info):
    done = prof.finished
    return build_summary(Doctored(done.capture, **info), done.state, done.thresholds,
                         done.host_ns, None)


def test_drops_fail_on_one_dropped_record(test_clock, inject):
    from synthetic_loop import run_loop

    with loopscope.profile() as prof:
        run_loop(prof)
    assert_passes(doctored_summary(prof, dropped_records=0), "drops")
    dropped = doctored_summary(prof, dropped_records=1)
    assert "1 activity record(s) dropped" in checks_by_name(dropped)["drops"]["detail"]
    assert_refused(dropped, "drops", ("max_severe_gaps", "max_syncs", "min_busy_pct"))
    refused = doctored_summary(prof, buffers_refused=2)
    assert checks_by_name(refused)["drops"]["ok"] is False
    assert _checks.sample_drops_check(0)["ok"] is True
    assert _checks.sample_drops_check(1)["ok"] is False  # a PM overflow
    lost = dict(dropped, checks=[{"name": "sample_drops", "ok": False, "detail": "1 lost"}])
    # a lost sample refuses the counter budget only
    assert _checks.refusal(lost, "min_sm_active_pct") == "check sample_drops failed: 1 lost"
    assert _checks.refusal(lost, "max_severe_gaps") is None


def test_durations_fail_on_records_refused_for_their_times(test_clock, inject):
    from synthetic_loop import run_loop

    with loopscope.profile() as prof:
        run_loop(prof)
    assert_passes(doctored_summary(prof, invalid_records=0), "durations")
    bad = doctored_summary(prof, invalid_records=3)
    assert "3 GPU op record(s) were left out" in checks_by_name(bad)["durations"]["detail"]
    assert_refused(bad, "durations")


def test_a_kernel_longer_than_the_window_fails_durations():
    # window 10 ms: allowed 10 + 1 + 0.2 ms (+ drain 0)
    allowed = 10 * MS + 1 * MS + 0.02 * 10 * MS
    assert _checks.durations_check(0, None, int(allowed), allowed)["ok"] is True
    assert _checks.durations_check(0, None, int(allowed) + 1, allowed)["ok"] is False


# -- coverage ---------------------------------------------------------------------

def busy_kernels_and_samples(covered):
    """Ten 100 us kernels 1 us apart; samples over the first `covered` kernels."""
    kernels, samples, t = [], [], 1_000
    for i in range(10):
        kernels.append(kernel(t, t + 100 * US, i + 1, f"k{i}"))
        if i < covered:
            samples.append((t, t + 100 * US, {"sm_active_pct": 90.0,
                                              "dram_throughput_pct": 10.0}))
        t += 100 * US + 1 * US
    return kernels, samples


@pytest.mark.parametrize("covered, short_ns, ok", [(10, 0, True), (9, 0, True), (9, 1_000, False),
                                                    (8, 0, False), (5, 0, False)])
def test_coverage_threshold(run_trace, covered, short_ns, ok):
    # 10 kernels of 100 us, 9 gaps of 1 us: 1009 us, of which the GPU had work 1000 us;
    # samples cover covered x 100 us (less short_ns): judged over the busy time (issue
    # 41): 9 kernels are 90.0%, on the cut-off (>= 90%), 1 us less (89.9%) is under it
    kernels, samples = busy_kernels_and_samples(covered)
    if short_ns:
        start, end, values = samples[-1]
        samples[-1] = (start, end - short_ns, values)
    summary = run_trace(kernels=kernels, samples=samples)
    check = checks_by_name(summary)["coverage"]
    assert check["ok"] is ok
    busy_pct = round(100 * (covered * 100_000 - short_ns) / 1_000_000, 2)
    span_pct = round(100 * (covered * 100_000 - short_ns) / 1_009_000, 2)
    assert check["detail"].startswith(f"PM samples cover {busy_pct:g}% of the GPU's busy time "
                                      f"({span_pct:g}% of the whole profile: the time not "
                                      "covered had no GPU work")
    if ok:
        verdict = evaluate(summary, check_budgets({"min_sm_active_pct": 1}))
        assert [o.name for o in verdict.met] == ["min_sm_active_pct"]
    else:
        assert_refused(summary, "coverage", ("min_sm_active_pct",))
        # a budget that does not read the counters is not refused
        verdict = evaluate(summary, check_budgets({"max_severe_gaps": 0}))
        assert [o.name for o in verdict.met] == ["max_severe_gaps"]


def test_set_up_before_any_gpu_work_is_not_counted_against_coverage(run_trace):
    """Issue 41, item 7: `loopscope run` of a script that builds its model
    inside the profile read 45-63% coverage.  A first kernel (a weight copy's
    worth), 50 ms with no GPU work and no sample (sampling not yet started),
    then the loop sampled whole: the check passes over the GPU's busy time
    and says what the rest of the window was."""
    setup = kernel(1_000, 1_000 + 10 * US, 100, "copy_weights")
    t0 = 1_000 + 50 * MS
    loop, samples = busy_kernels_and_samples(10)
    loop = [(a + t0, b + t0, *rest) for a, b, *rest in loop]
    samples = [(a + t0, b + t0, v) for a, b, v in samples]
    summary = run_trace(kernels=[setup] + loop, samples=samples)
    busy_ns = 10 * US + 10 * 100 * US
    covered_ns = 10 * 100 * US
    window_ns = (loop[-1][1]) - setup[0]
    check = checks_by_name(summary)["coverage"]
    assert check["ok"] is True
    assert check["detail"] == (
        f"PM samples cover {round(100 * covered_ns / busy_ns, 2):g}% of the GPU's busy time "
        f"({round(100 * covered_ns / window_ns, 2):g}% of the whole profile: the time not "
        "covered had no GPU work, e.g. set-up before the first kernel)")
    assert "WARNING" not in format_report(summary)


@pytest.mark.parametrize("past_ns, named", [(0, False), (1, True)])
def test_low_coverage_names_the_gpu_work_after_the_exit(test_clock, inject, live_injected,
                                                        past_ns, named):
    """A profile whose kernel runs on after its exit (nothing inside waited
    for the GPU) has samples only up to the exit (an H200 probe read 3-7%
    so).  One kernel from 9 D before the stop to D (+ past_ns) after it: the
    part after the exit is exactly the 10% coverage may miss (general
    advice), or a nanosecond more (the advice names it).  The one sample
    covers the kernel's first D: short of the cut-off either way."""
    start, d = 10 * MS, 100 * US
    stop = start + 1 * US  # the profile reads the clock at its start and its stop
    first, last = stop - 9 * d, stop + d + past_ns
    _testhooks._set_test_clock(start, 1 * US)
    with loopscope.profile() as prof:
        inject("kernel", [kernel(first, last, 1)])
        inject("sample", [(first, first + d, {"sm_active_pct": 90.0})])
    assert (prof.capture.info()["start_ns"], prof.capture.info()["stop_ns"]) == (start, stop)
    check = checks_by_name(prof.summary())["coverage"]
    assert check["ok"] is False
    after_exit, span = last - stop, last - first
    assert (after_exit * 100 > 10 * span) is named  # the share coverage may miss: 100 - 90
    if named:
        assert check["detail"].endswith(
            f"part of the loop only; the GPU ran {after_exit / 1e6:.3f} ms of the profile's work "
            "after its exit, where samples are no longer the profile's: wait for the GPU inside "
            "the with block (torch.cuda.synchronize() at its end)")
    else:
        assert check["detail"].endswith(
            "part of the loop only; profile more steps or lower metrics_interval_us")


@pytest.mark.parametrize("decode_us, interval_us, behind", [
    (20.0, 20.0, False),   # as fast as the samples come: it keeps pace
    (20.1, 20.0, True),    # a tenth of a us a sample slower: it falls behind
    (54.0, 20.0, True),    # an H200 at 20 us
    (None, 20.0, False),   # no decode measured (a trace, the test source's injections)
    (54.0, None, False)])  # no interval known
def test_a_decoder_is_behind_when_a_sample_takes_longer_than_the_interval(decode_us, interval_us,
                                                                         behind):
    assert _checks.decoder_behind(decode_us, interval_us) is behind


def test_no_coverage_check_without_counters(run_trace):
    summary = run_trace(kernels=[kernel(1_000, 2_000, 1)])
    assert "coverage" not in checks_by_name(summary)


# -- steps ------------------------------------------------------------------------

def test_steps_declared_but_none_found_fails():
    assert _checks.steps_check(True, 0, "the trace has 6 ProfilerStep#N range(s)")["ok"] is False
    assert _checks.steps_check(True, 1, "the trace has 6 ProfilerStep#N range(s)")["ok"] is True
    assert _checks.steps_check(False, 0, "the trace has 0 ProfilerStep#N range(s)")["ok"] is True


def test_steps_module_that_never_ran_fails_the_step_budgets(test_clock):
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(2, 2)
    with loopscope.profile(steps=model) as prof:
        pass  # the model is never called: no step
    summary = prof.summary()
    check = checks_by_name(summary)["steps"]
    assert check["ok"] is False and "steps=Linear was given" in check["detail"]
    assert format_report(summary).splitlines()[1].startswith("WARNING (steps): ")
    # whole-profile budgets do not read steps; a step selection does
    verdict = evaluate(summary, check_budgets({"max_syncs": 0}), steps="Step_*")
    assert verdict.met == [] and len(verdict.failed) == 1


def test_trace_steps_check_counts_profiler_steps():
    ranges = [("ProfilerStep#1", -1, 0, 10, 1, -1), ("ProfilerStep#2", -1, 10, 20, 1, -1),
              ("aten::mm", 0, 1, 2, 1, -1)]
    got = _checks.trace_checks({"steps": [], "dropped_records": 0}, {}, ranges, None)
    steps = {c["name"]: c for c in got}["steps"]
    assert steps["ok"] is False and "2 ProfilerStep#N range(s)" in steps["detail"]
    got = _checks.trace_checks({"steps": [{}, {}], "dropped_records": 0}, {}, ranges, None)
    assert {c["name"]: c for c in got}["steps"]["ok"] is True


def _kineto_with(tmp_path, bad: dict) -> dict:
    """A Kineto trace of two good kernels and a third whose fields are
    `bad` (merged over a good kernel's), read by loopscope.analyze."""
    def kernel(at, corr, over=None):
        k = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": at, "dur": 5.0,
             "args": {"device": 0, "stream": 7, "correlation": corr}}
        k.update(over or {})
        return {key: v for key, v in k.items() if v is not None}
    events = [kernel(10.0, 1), kernel(30.0, 2), kernel(50.0, 3, bad)]
    path = write(tmp_path / "t.json", trace_doc(events))
    return loopscope.analyze(path)


@pytest.mark.parametrize("bad, reason", [
    ({"dur": -3.0}, "a negative dur"),
    ({"dur": None}, "no usable dur"),
    ({"dur": "soon"}, "no usable dur"),
    ({"ts": None}, "no usable ts")])
def test_every_kineto_op_dropped_for_its_times_fails_durations(tmp_path, bad, reason):
    """Issue 39: the Kineto reader's reasons ("a negative dur", "no usable
    dur/ts") once passed the check, which knew only older wording.  The
    reader now counts such records under the one shared list of reasons
    (_core.TIME_SKIP_REASONS); the check reads the count, not the text."""
    assert reason in _core.TIME_SKIP_REASONS
    summary = _kineto_with(tmp_path, bad)
    assert summary["gpu"]["kernels"] == 2
    assert summary["trace"]["skip_reasons"] == {"kernel": reason}
    got = checks_by_name(summary)["durations"]
    assert got["ok"] is False
    assert got["detail"].startswith(f"1 GPU op record(s) were left out as invalid (kernel: "
                                    f"{reason})")


def test_an_op_dropped_for_another_reason_passes_durations(tmp_path):
    """A kernel with no device is skipped too, but not for its times: the
    durations check is about times only."""
    summary = _kineto_with(tmp_path, {"pid": "gpu", "args": {"stream": 7, "correlation": 3}})
    assert summary["trace"]["skipped"] == {"kernel": 1}
    assert checks_by_name(summary)["durations"]["ok"] is True


@pytest.mark.parametrize("start, end, reason", [
    (None, 60_000, "no start or end time"), (50_000, None, "no start or end time"),
    (50_000, 40_000, "ends before it starts")])
def test_every_nsys_row_dropped_for_its_times_fails_durations(tmp_path, start, end, reason):
    """The same for Nsight Systems rows (a kernel row with no start or no
    end, or an end before its start)."""
    import sqlite3
    path = tmp_path / "k.sqlite"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT NOT NULL,"
        " contextId INT NOT NULL, streamId INT NOT NULL, correlationId INT, globalPid INT,"
        " demangledName INT NOT NULL, shortName INT NOT NULL);"
        "INSERT INTO StringIds VALUES (1, 'k');"
        "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.11.1');")
    for row in [(10_000, 15_000, 1), (30_000, 35_000, 2), (start, end, 3)]:
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,0,1,7,?,1,1,1)", row)
    db.commit()
    db.close()
    assert reason in _core.TIME_SKIP_REASONS
    summary = loopscope.analyze(path)
    assert summary["gpu"]["kernels"] == 2
    got = checks_by_name(summary)["durations"]
    assert got["ok"] is False and f"(kernel: {reason})" in got["detail"]


def test_the_time_reasons_are_one_list():
    """Every reader skips for its times by one list; a reason is named
    once in it."""
    reasons = _core.TIME_SKIP_REASONS
    assert len(set(reasons)) == len(reasons) and all(reasons)


# -- the regression gates ------------------------------------------------------------

def saved(tmp_path, name, summary):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(summary))
    return str(path)


def test_diff_gate_refuses_a_side_whose_check_failed(test_clock, inject, tmp_path, capsys):
    from synthetic_loop import run_loop

    with loopscope.profile() as prof:
        run_loop(prof)
    good = doctored_summary(prof)
    bad = doctored_summary(prof, dropped_records=5)
    a, b = saved(tmp_path, "good", good), saved(tmp_path, "bad", bad)
    assert main(["diff", "--max-regression-pct", "10", a, a]) == 0
    capsys.readouterr()
    assert main(["diff", "--max-regression-pct", "10", a, b]) == 1
    err = capsys.readouterr().err
    assert "refused, after: check drops failed" in err
    check = regressions(compare(bad, good), 10)
    assert check.checked == [] and all("before: check drops failed" in f for f in check.failed)


def test_a_nan_or_infinite_baseline_never_passes(test_clock, tmp_path, capsys):
    from synthetic_loop import run_loop

    with loopscope.profile() as prof:
        run_loop(prof)
    after = dict(prof.summary())
    after["loop"] = dict(after["loop"], ms=after["loop"]["ms"] * 3)
    for bad in (float("nan"), float("inf")):
        base = dict(prof.summary())
        base["loop"] = dict(base["loop"], ms=bad)
        a, b = saved(tmp_path, "base", base), saved(tmp_path, "after", after)
        assert "NaN" in open(a).read() or "Infinity" in open(a).read()
        assert main(["diff", "--max-regression-pct", "10", a, b]) == 1
        err = capsys.readouterr().err
        assert "loop_ms: loop time is not a finite number in before" in err


# -- a time line with no gap (issue 24 item 6) ---------------------------------------

def test_no_gap_means_no_gap_statistics_everywhere(run_trace):
    """Two touching kernels: no gap.  mean/p50/p99/max are None in the whole
    run, its step-less streams and the report, HTML, budgets and compare
    cope (a budget on the longest gap is met: there is none)."""
    s = run_trace(kernels=[kernel(1_000, 2_000, 1), kernel(2_000, 3_000, 2)])
    g = s["gaps"]
    assert g["count"] == 0
    assert (g["mean_us"], g["p50_us"], g["p99_us"], g["max_us"]) == (None, None, None, None)
    stream, = g["per_stream"]
    assert stream["gaps"]["max_us"] is None and stream["gaps"]["mean_us"] is None
    assert "no gap statistics" in format_report(s)
    if not UNDER_ASAN:  # matplotlib dies under CI's ASan preload
        assert "no gap statistics" in render(s)
    verdict = evaluate(s, check_budgets({"max_gap_us": 0}))
    assert [(o.name, o.measured) for o in verdict.met] == [("max_gap_us", 0.0)]
    r = compare(s, s)
    assert r["figures"]["mean_gap_us"]["before"] is None


def test_a_step_without_gaps_has_none_and_its_neighbours_keep_theirs(test_clock, inject):
    with loopscope.profile() as prof:
        with prof.step():  # one kernel: the profile's first op, no gap before it
            inject("api", [(_core.now_ns(), _core.now_ns() + 1, 1)])
        with prof.step():  # one kernel 5 us after the first: a 5 us gap
            inject("api", [(_core.now_ns(), _core.now_ns() + 1, 2)])
        inject("kernel", [kernel(1_000, 2_000, 1), kernel(7_000, 8_000, 2)])
    first, second = prof.summary()["steps"]
    assert first["gaps"]["count"] == 0 and first["gaps"]["max_us"] is None
    assert first["gaps"]["p50_us"] is None and first["gaps"]["mean_us"] is None
    assert second["gaps"]["count"] == 1 and second["gaps"]["max_us"] == 5.0
    assert "no gap statistics" not in format_report(prof.summary())


# -- a rank without a world size (issue 24 item 6) -------------------------------------

@pytest.mark.parametrize("info, size", [({"rank": 0}, None), ({"rank": 1, "world_size": None}, None),
                                        ({"rank": 1, "world_size": "8"}, None),
                                        ({"rank": 1, "world_size": 1}, None),
                                        ({"rank": 1, "world_size": 2}, 2)])
def test_a_rank_without_a_usable_world_size_never_reads_of_none(tmp_path, info, size):
    from trace_fixtures import make_events, trace_doc, write as write_trace

    doc = trace_doc(make_events(seed=2))
    doc["distributedInfo"] = info
    summary = loopscope.analyze(write_trace(tmp_path / "rank.json", doc))
    assert (summary["rank"], summary["world_size"]) == (info["rank"], size)
    text = format_report(summary)
    assert "of None" not in text and "gathering: None" not in text
    expected = (f"Rank {info['rank']} of {size}" if size is not None
                else f"Rank {info['rank']} (the trace does not say of how many)")
    assert expected in text


# -- the CLI gate (loopscope run --max-*) ---------------------------------------------

def test_run_gate_fails_with_the_reason_when_a_check_failed(tmp_path):
    from test_cli import cli, script

    body = """
        import loopscope
        from loopscope import _core, _testhooks
        from loopscope.figures import _checks
        _checks.LIVE_SOURCES = frozenset(("cupti", "injected"))  # judged as a live profile
        with loopscope.profile(trace=False) as prof:
            t = _core.now_ns() + OFFSET
            _testhooks._inject("kernel", [(t, t + 1_000, 0, 7, 1, "k"), (t + 2_000, t + 3_000, 0, 7, 2, "k")])
    """
    near = cli("run", "--max-severe-gaps", "0", script(tmp_path, body.replace("OFFSET", "0"), "near.py"))
    assert near.returncode == 0, near.stderr
    assert "budgets met: max_severe_gaps" in near.stderr
    far = cli("run", "--max-severe-gaps", "0",
              script(tmp_path, body.replace("OFFSET", "10_000_000_000"), "far.py"))
    assert far.returncode == 1
    assert "FAILED max_severe_gaps: refused, check timeline failed" in far.stderr
    assert "WARNING (timeline): the GPU time line" in far.stdout


# -- recordings keep the checks made when they were recorded ---------------------------

def _write_recording(path, data):
    """A recording edited here, written with a fresh checksum (a plain file
    without one is refused as possibly damaged)."""
    from loopscope.files import _recording

    data = dict(data)
    data.pop("checksum", None)
    path.write_bytes(_recording.with_checksum(json.dumps(data).encode()))


def test_a_replayed_recording_keeps_its_recorded_checks(test_clock, inject, tmp_path):
    from loopscope.files import _recording
    from loopscope.readers import _replay
    from synthetic_loop import run_loop

    with loopscope.profile() as prof:
        run_loop(prof)
    path = prof.save_recording(tmp_path / "rec.json")
    data = json.loads(open(path).read())
    assert [c["name"] for c in data["profile"]["checks"]] == ["durations", "drops"]
    clean = _replay.replay(_recording.load(path)).summary()
    assert all(c["ok"] for c in clean["checks"]) and "WARNING" not in format_report(clean)
    # recorded on a live GPU: a failed timeline (the replay cannot check it)
    # and dropped records (the replay kept all it was given)
    data["profile"]["checks"] = [
        {"name": "timeline", "ok": False, "detail": "the GPU time line ends 12 ms late"},
        {"name": "drops", "ok": False, "detail": "3 activity record(s) dropped"},
        {"name": "durations", "ok": True, "detail": "fine"}]
    _write_recording(tmp_path / "bad.json", data)
    bad = _replay.replay(_recording.load(tmp_path / "bad.json")).summary()
    got = {c["name"]: c for c in bad["checks"]}
    assert got["timeline"] == {"name": "timeline", "ok": False,
                               "detail": "as recorded: the GPU time line ends 12 ms late"}
    assert got["drops"]["ok"] is False and got["durations"]["detail"] != "as recorded: fine"
    lines = format_report(bad).splitlines()
    assert sorted(lines[1:3]) == [
        "WARNING (drops): as recorded: 3 activity record(s) dropped",
        "WARNING (timeline): as recorded: the GPU time line ends 12 ms late"]
    verdict = evaluate(bad, check_budgets({"max_severe_gaps": 1000}))
    assert verdict.met == [] and "check drops failed" in verdict.failed[0].line()
    # an older recording without checks still loads
    del data["profile"]["checks"]
    _write_recording(tmp_path / "old.json", data)
    old = _replay.replay(_recording.load(tmp_path / "old.json")).summary()
    assert [c["name"] for c in old["checks"]] == ["durations", "drops"]
    data["profile"]["checks"] = [{"name": "timeline", "ok": "no", "detail": "x"}]
    _write_recording(tmp_path / "odd.json", data)
    with pytest.raises(_recording.RecordingError,
                       match=r"profile\.checks\[0\]\.ok is 'no': a bool expected"):
        _replay.replay(_recording.load(tmp_path / "odd.json"))


def test_work_the_gpu_drained_after_the_stop_is_inside_the_timeline(test_clock, inject,
                                                                     live_injected):
    """A kernel queued before the stop runs 5 ms past it: outside the 1 ms
    slack, inside once the session says the GPU drained 5 ms after the stop
    (info["drained_ns"]) or the finish waited that long (phase "sync")."""
    start = 10 * MS
    stop = start + 1 * US
    prof = windowed(inject, [kernel(stop - 500, stop + 5 * MS, 1)], start=start)
    assert checks_by_name(doctored_summary(prof))["timeline"]["ok"] is False
    drained = doctored_summary(prof, drained_ns=stop + 5 * MS)
    assert checks_by_name(drained)["timeline"]["ok"] is True
    waited = doctored_summary(prof, finish_phases_ns={"sync": 5 * MS, "activity": 0,
                                                      "metrics": 0, "records": 0})
    assert checks_by_name(waited)["timeline"]["ok"] is True
    short = doctored_summary(prof, drained_ns=stop + 3 * MS)  # 5 ms > 3 ms + 1 ms slack
    assert checks_by_name(short)["timeline"]["ok"] is False


# -- torch.distributed: rank 0's cross-rank budget reads every rank's figures ----------

def test_rank_skew_budget_refuses_when_another_rank_failed_a_check():
    from loopscope.figures import _ranks

    def rank(r, failed=()):
        summary = {"checks": [{"name": n, "ok": False, "detail": f"{n} broke"} for n in failed],
                   "steps": [], "diagnosis": {"verdict": "GPU_BOUND"}}
        return _ranks.compact(summary, rank=r, world_size=2, host="h", step_times={}, clock=None)

    assert rank(1, ["timeline"])["failed_checks"] == [{"name": "timeline",
                                                        "detail": "timeline broke"}]
    assert rank(1)["failed_checks"] == []
    me = {"rank": 0, "checks": [], "ranks": [rank(0), rank(1, ["clock_rate"])]}
    assert _checks.refusal(me, "max_rank_skew_us") == (
        "rank 1: check clock_rate failed: clock_rate broke")
    # a rank's own figures do not read the other ranks' checks
    assert _checks.refusal(me, "max_severe_gaps") is None
    fine = dict(me, ranks=[rank(0), rank(1)])
    assert _checks.refusal(fine, "max_rank_skew_us") is None


def test_run_steps_pattern_matching_nothing_is_a_failed_steps_check(tmp_path):
    from test_cli import RANGES_ONLY, cli, script

    path = script(tmp_path, RANGES_ONLY)
    out = tmp_path / "s.json"
    result = cli("run", "--steps", "nope", "--json", str(out), path)
    assert result.returncode == 0  # no budget given: nothing to gate
    assert "WARNING (steps): --steps 'nope' was given, but no step was found" in result.stdout
    steps = [c for c in json.loads(out.read_text())["checks"] if c["name"] == "steps"]
    assert [c["ok"] for c in steps] == [False]
    matched = cli("run", "--steps", r"^denoise_step_\d+$", path)
    assert "WARNING" not in matched.stdout


def test_a_profile_that_did_not_stop_cleanly_verified_nothing():
    summary = build_summary(None, {}, (20.0, 50.0), 0, "stopping failed")
    assert summary["checks"] == [] and "WARNING" not in format_report(summary)


@pytest.mark.parametrize("pm, ok", [
    ({"overflows": 0, "counter_data_full": 3}, True),   # decoded in more rounds: no loss
    ({"overflows": 1, "counter_data_full": 0}, False),  # the hardware buffer overflowed
])
def test_only_an_overflow_is_a_lost_pm_sample(pm, ok):
    """A full counter data image is reset and decoded on in the same call
    (ls_pmsampling), so it loses nothing; on an H100 (12:15Z) the plugin's
    first test was refused for one, with every sample there."""
    info = {"sampled": True, "pm": pm}
    summary = {"source": "injected", "sm": {"coverage_pct": 100.0}, "metrics_error": None}
    got = {c["name"]: c for c in _checks.live_checks(summary, info, None, None)}
    assert got["sample_drops"]["ok"] is ok
