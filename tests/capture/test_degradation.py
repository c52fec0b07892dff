"""Without a GPU (or with trace=False) a profile still runs: host ranges and
steps are recorded, GPU sections are None with the reason, one warning.
Also: option validation and the extension module's multi-phase init.

Warnings are "once per process", so the warning tests run in fresh
interpreters."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import loopscope
from loopscope import _testhooks
from machine import NO_DRIVER_REASON, driver_present

# These tests are about the machine without a GPU: real start-up, no stand-ins.
pytestmark = pytest.mark.real_tracing

PYTHON_DIR = str(Path(loopscope.__file__).resolve().parent.parent)


def run_python(code: str, *args: str) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter that imports this loopscope."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run([sys.executable, *args, "-c", textwrap.dedent(code)],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def no_gpu():
    """Skips the test where GPU tracing actually works (these tests are
    about the machine without one)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", loopscope.LoopscopeWarning)
        with loopscope.profile() as prof:
            pass
    if prof.summary()["source"] == "cupti":
        pytest.skip("GPU tracing works here; these tests need a machine without it")
    reason = prof.summary()["gpu_error"]
    if not driver_present():  # the one reason whose words are known here
        assert reason == NO_DRIVER_REASON
    return reason


@pytest.fixture
def host_only_summary(test_clock, no_gpu):
    """A profile of two steps and a range, with no GPU."""
    with loopscope.profile() as prof:
        for _ in range(2):
            with prof.step():
                with loopscope.range("work"):
                    pass
    return prof


WARNING_PROBE = """
    import json, warnings
    import loopscope
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for trace in {traces}:
            with loopscope.profile(trace=trace) as prof:
                with prof.step():
                    pass
            prof.summary()
    print(json.dumps([[w.category.__name__, str(w.message), w.filename] for w in caught]))
"""


def test_no_gpu_warns_once_for_two_profiles(no_gpu):
    """Two profiles in one process: exactly one LoopscopeWarning, naming the
    reason, pointing at the user's line."""
    out = run_python(WARNING_PROBE.format(traces="(True, True)"))
    caught = json.loads(out.stdout)
    assert len(caught) == 1, caught
    category, message, filename = caught[0]
    assert category == "LoopscopeWarning"
    assert "GPU tracing is off" in message
    assert no_gpu in message
    assert filename == "<string>"  # the with-statement in the user's code


def test_trace_false_does_not_warn():
    """trace=False is a choice, not a failure: no warning."""
    out = run_python(WARNING_PROBE.format(traces="(False, False)"))
    assert json.loads(out.stdout) == []


def test_warning_can_be_made_an_error(no_gpu):
    """The warning is a real category: -W error::loopscope.LoopscopeWarning
    (or pytest's filterwarnings=error) turns it into an exception at the
    with-statement; that must not leave the profile running, so the next
    profile still works."""
    code = """
        import loopscope
        try:
            with loopscope.profile():
                pass
        except loopscope.LoopscopeWarning as error:
            print("raised:", error)
        print("active after:", loopscope._core.active())
        try:
            with loopscope.profile(trace=False) as prof:
                pass
            print("next profile: ok")
        except RuntimeError as error:
            print("next profile:", error)
    """
    out = run_python(code, "-W", "error::loopscope.LoopscopeWarning").stdout
    assert "raised: loopscope: GPU tracing is off" in out
    assert "active after: False" in out, out
    assert "next profile: ok" in out, out


def test_loopscope_warning_is_a_runtime_warning():
    assert issubclass(loopscope.LoopscopeWarning, RuntimeWarning)


def test_gpu_sections_are_none_with_a_reason(host_only_summary, no_gpu):
    """No GPU: gaps/gpu None, gpu_error the reason, verdict UNKNOWN; steps
    and ranges still timed exactly."""
    s = host_only_summary.summary()
    assert s["source"] is None
    assert s["gaps"] is None and s["gpu"] is None
    assert s["gpu_error"] == no_gpu
    if not driver_present():  # every section says the same known sentence
        assert (s["gpu_error"], s["syncs_error"], s["metrics_error"]) == (NO_DRIVER_REASON,) * 3
    assert s["diagnosis"]["verdict"] == "UNKNOWN"
    assert no_gpu in s["diagnosis"]["reasons"][0]
    assert [(st["index"], st["name"], st["host_ms"], st["gpu_ms"], st["kernels"], st["gaps"])
            for st in s["steps"]] == [(0, "Step_0", 0.003, None, None, None),
                                      (1, "Step_1", 0.003, None, None, None)]
    assert [(r["name"], r["count"], r["host_ms"], r["gpu_ms"]) for r in s["ranges"]] == [
        ("work", 2, 0.002, None)]
    assert s["dropped_records"] == 0
    o = s["overhead"]
    assert (o["records"], o["ranges"], o["ranges_left_open"], o["range_mismatches"]) == (0, 4, 0, 0)
    # Host costs are CLOCK_MONOTONIC time (the test clock only drives ranges).
    for key in ("drain_ms", "summary_ms", "stop_ms", "start_ms", "finish_ms", "finish_wait_ms"):
        assert isinstance(o[key], float) and o[key] >= 0


def test_report_mentions_the_reason(host_only_summary, no_gpu):
    """The text report says why GPU sections are missing, and shows the steps."""
    report = host_only_summary.report()
    assert report.startswith("loopscope report")
    assert "UNKNOWN" in report.splitlines()[1]
    # the reason in the verdict line; the missing sections' line refers to it (issue 41)
    assert report.count(no_gpu) == 1
    assert "GPU sections missing (GPU time line" in report
    assert "): see the verdict line above" in report
    assert "Step_1" in report
    assert "2 steps" in report.splitlines()[0]


def test_summary_is_json_serialisable(host_only_summary):
    """The summary is plain data: json round-trips it unchanged (no NaN)."""
    s = host_only_summary.summary()
    assert json.loads(json.dumps(s, allow_nan=False)) == s


def test_injected_summary_is_json_serialisable(test_clock):
    """The same holds for a summary with every GPU section filled in
    (synthetic records only, so trace=False also on a GPU machine)."""
    with loopscope.profile(trace=False) as prof:
        with prof.step():
            pass
        _testhooks._inject("kernel", [(1_000, 2_000, 0, 1, 1, "a"), (60_000, 61_000, 1, 2, 2, None)])
        _testhooks._inject("memcpy", [(3_000, 4_000, 0, 1, 3, "copy", 1 << 20)])
        _testhooks._inject("api", [(test_clock.at(1) + 1, test_clock.at(1) + 2, 2)])
        _testhooks._inject("sync_record", [(2_500, 2_600)])
    s = prof.summary()
    assert s["source"] == "injected"
    assert json.loads(json.dumps(s, allow_nan=False)) == s
    assert repr(prof).startswith("<loopscope.Profile steps=1 verdict=")


def test_trace_false_reason(test_clock):
    """trace=False: host-only, with a reason that says so."""
    with loopscope.profile(trace=False) as prof:
        with prof.step():
            pass
    s = prof.summary()
    assert s["gaps"] is None and s["gpu"] is None
    assert "trace=False" in s["gpu_error"]
    assert "trace=False" in prof.report()
    assert s["steps"][0]["host_ms"] == 0.001


def test_injection_without_gpu_fills_the_gpu_sections(no_gpu):
    """Injected records make the GPU sections appear even without a GPU."""
    with loopscope.profile() as prof:
        _testhooks._inject("kernel", [(1_000, 2_000, 0, 1, 1)])
    s = prof.summary()
    assert s["source"] == "injected"
    assert s["gpu_error"] is None
    assert s["gpu"]["kernels"] == 1


@pytest.mark.parametrize("thresholds, error", [
    ((50, 20), ValueError),         # normal above severe
    ((-1, 20), ValueError),
    ((20, 2e9), ValueError),        # beyond 1e9 us
    ((20, 50, 80), TypeError),
    ((20,), TypeError),
    (20, TypeError),
    (("a", "b"), TypeError),
    (None, TypeError),
])
def test_bad_gap_thresholds(thresholds, error):
    """gap_thresholds_us must be two numbers with 0 <= normal <= severe."""
    with pytest.raises(error, match="gap_thresholds_us"):
        loopscope.profile(gap_thresholds_us=thresholds)


@pytest.mark.parametrize("options", [
    {"buffer_mb": 0},
    {"buffer_mb": -4},
    {"buffer_mb": float("nan")},
    {"buffer_mb": 8, "max_buffer_mb": 4},
])
def test_bad_buffer_sizes(options):
    """buffer_mb must be > 0 and at most max_buffer_mb."""
    with pytest.raises(ValueError, match="buffer_mb"):
        loopscope.profile(**options)


def test_unknown_option_is_a_type_error():
    with pytest.raises(TypeError):
        loopscope.profile(gap_threshold_us=(1, 2))


def test_good_options_are_accepted(test_clock):
    """Edge values that are valid: equal thresholds, buffer == max."""
    with loopscope.profile(gap_thresholds_us=(10, 10), buffer_mb=1, max_buffer_mb=1,
                           driver_api=True) as prof:
        pass
    assert prof.summary()["steps"] == []


def test_summary_before_running_raises():
    prof = loopscope.profile()
    with pytest.raises(RuntimeError, match="not run yet"):
        prof.summary()
    with pytest.raises(RuntimeError, match="not run yet"):
        prof.report()
    assert repr(prof) == "<loopscope.Profile (not started)>"


def test_extension_imports_twice_in_one_process():
    """Multi-phase init: after dropping it from sys.modules, a second import
    makes a new, working module with its own types and range cache."""
    code = """
        import importlib, sys
        import loopscope._core as first
        del sys.modules["loopscope._core"]
        second = importlib.import_module("loopscope._core")
        assert second is not first
        assert second.Range is not first.Range
        assert second.range("x") is second.range("x")
        assert second.range("x") is not first.range("x")
        from loopscope.live import _options
        state = second.start(_options.core_start_values(trace=False))
        with second.range("x"):
            pass
        capture = second.stop()
        info = capture.info()
        assert (info["ranges"], info["traced"]) == (1, False), info
        assert not first.active()
        print("ok", type(capture).__name__, state["tracing"])
    """
    assert run_python(code).stdout.split() == ["ok", "Capture", "False"]


def test_import_needs_no_gpu():
    """Importing loopscope never needs CUDA: a fresh interpreter imports it
    and runs a host-only profile."""
    code = """
        import loopscope
        with loopscope.profile(trace=False) as prof:
            with prof.step():
                pass
        print(prof.summary()["steps"][0]["name"])
    """
    assert run_python(code).stdout.strip() == "Step_0"
