"""The pytest plugin's budgets against a summary that failed a self-check
(issue 24): the budget fails with the check's reason, never passes.  Inner
test files run by pytester in a fresh interpreter, as in
test_pytest_plugin.py."""
from __future__ import annotations

from test_pytest_plugin import inner, run, _this_loopscope  # noqa: F401  (its fixtures)

pytest_plugins = ["pytester"]

STRETCHED = '''
import pytest
from loopscope import _core, _testhooks
from loopscope.figures import _checks


@pytest.fixture(autouse=True)
def _live(monkeypatch):
    # injected records judged as a live profile's: the timeline check applies
    monkeypatch.setattr(_checks, "LIVE_SOURCES", frozenset({"cupti", "injected"}))


def two_kernels(second_after_ns):
    """Two 1 us kernels on the profile's own clock, the second
    `second_after_ns` after the first ends."""
    t = _core.now_ns()
    u = t + 1_000 + second_after_ns
    _testhooks._inject("kernel", [(t, t + 1_000, 0, 9, 1, "a"), (u, u + 1_000, 0, 9, 2, "b")])


@pytest.mark.loopscope(max_severe_gaps=0, max_gap_us=5)
def test_inside_the_window(loopscope_profile):
    two_kernels(1_000)


@pytest.mark.loopscope(max_severe_gaps=0, max_gap_us=1e12)
def test_a_time_base_stretched_past_the_window(loopscope_profile):
    two_kernels(10_000_000_000)  # 10 s after the profile's host window: another time base
'''


def test_a_failed_check_fails_the_budgets_with_its_reason(inner):
    inner.makepyfile(test_stretched=STRETCHED)
    result = run(inner)
    result.assert_outcomes(passed=1, failed=1)
    stretched = result.stdout.str().split("_ test_a_time_base_stretched_past_the_window _")[1]
    assert "FAILED max_severe_gaps: refused, check timeline failed" in stretched
    assert "FAILED max_gap_us: refused, check timeline failed" in stretched
    assert "met " not in stretched


BASELINE = '''
import pytest
from loopscope import _core, _testhooks
from synthetic_loop import run_loop


@pytest.fixture(autouse=True)
def _ticks():
    # host times from a ticking test clock: the loop time is the same every
    # run (on the real clock a busy CI box made it 5x once, a "regression")
    _testhooks._set_test_clock(1_000_000, 1_000)
    yield
    _testhooks._set_test_clock(0, 0)


@pytest.mark.loopscope(baseline="base.json", max_regression_pct=10)
def test_against_the_baseline(loopscope_profile):
    run_loop(loopscope_profile)
'''


def test_a_baseline_holding_nan_never_passes(inner):
    import json

    inner.makepyfile(test_base=BASELINE)
    run(inner, "--loopscope-update-baseline").assert_outcomes(passed=1)
    run(inner).assert_outcomes(passed=1)  # the same loop against its own baseline
    path = inner.path / "base.json"
    base = json.loads(path.read_text())
    base["loop"]["ms"] = float("nan")
    path.write_text(json.dumps(base))  # json writes NaN, as a broken baseline holds it
    result = run(inner)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*REGRESSED loop_ms: loop time is not a finite number in before*"])
