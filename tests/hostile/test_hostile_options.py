"""Issue 14, condition 8: every option of loopscope.profile() is checked at
construction.  A wrong one is a TypeError (wrong kind) or ValueError (out of
range) whose message names the option, the value given and what is allowed;
nothing surfaces later (no OverflowError at enter, no "no" taken as True)."""
from __future__ import annotations

import fractions

import pytest

import loopscope
from loopscope import _core, _testhooks
from loopscope.live import _options

BOOLS = ["trace", "syncs", "driver_api", "warm_up", "metrics"]
NUMBERS = {  # option: (lowest, highest, unit), as documented in Profile's docstring
    "buffer_mb": (0.0625, 1024, "MiB"),
    "max_buffer_mb": (4, 65536, "MiB"),  # lowest: the default buffer_mb
    "metrics_interval_us": (1, 1e6, "us"),
    "metrics_buffer_mb": (1, 65536, "MiB"),
    "metrics_decode_ms": (1, 1e4, "ms"),
}


def error_of(**options) -> BaseException:
    with pytest.raises((TypeError, ValueError)) as info:
        loopscope.profile(**options)
    return info.value


@pytest.mark.parametrize("name", BOOLS)
@pytest.mark.parametrize("value", ["no", "False", 0, 1, None, 1.0, [True]])
def test_true_false_options_take_only_bools(name, value):
    error = error_of(**{name: value})
    assert type(error) is TypeError
    assert str(error) == f"{name} must be True or False, got {value!r} ({type(value).__name__})"


@pytest.mark.parametrize("name, value", [
    (name, value) for name in NUMBERS for value in ["4", None, [1], True, b"1", 1j, object]
    # None is metrics_interval_us's default: the automatic interval (issue 43)
    if not (value is None and name == "metrics_interval_us")])
def test_numeric_options_reject_other_types(name, value):
    error = error_of(**{name: value})
    unit = NUMBERS[name][2]
    assert type(error) is TypeError
    assert str(error) == f"{name} must be a number ({unit}), got {value!r} ({type(value).__name__})"


def fmt(x) -> str:
    return f"{x:g}"


@pytest.mark.parametrize("name", NUMBERS)
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), 1e300, -1, 0,
                                   10 ** 400])
def test_numeric_options_reject_values_out_of_range(name, value):
    low, high, unit = NUMBERS[name]
    error = error_of(**{name: value})
    assert type(error) is ValueError
    message = str(error)
    floor = f"{fmt(low)} (buffer_mb)" if name == "max_buffer_mb" else fmt(low)
    assert message.startswith(f"{name} must be between {floor} and {fmt(high)} {unit}, got ")
    shown = repr(value)
    if len(shown) > 60:  # a huge int is shown cut
        assert message.endswith(f"got {shown[:45]}...{shown[-10:]}")
    else:
        assert message.endswith(f"got {shown}")


def test_max_buffer_below_buffer_names_both():
    assert str(error_of(buffer_mb=8, max_buffer_mb=4)) == (
        "max_buffer_mb must be between 8 (buffer_mb) and 65536 MiB, got 4")


@pytest.mark.parametrize("value", [("20", "50"), (True, 50), "ab", b"ab", (20, None),
                                   (20, 50, 80), 20, None])
def test_thresholds_must_be_two_numbers(value):
    error = error_of(gap_thresholds_us=value)
    assert type(error) is TypeError
    assert str(error) == ("gap_thresholds_us must be two numbers (normal_below, severe_above), "
                          f"got {value!r}")


@pytest.mark.parametrize("value", [(float("nan"), 50), (20, float("inf")), (50, 20), (-1, 5),
                                   (1, 10 ** 400)])
def test_thresholds_must_be_ordered_and_finite(value):
    error = error_of(gap_thresholds_us=value)
    assert type(error) is ValueError
    assert str(error).startswith("gap_thresholds_us must satisfy 0 <= normal <= severe <= 1e9 "
                                 "(us), got ")


def test_edge_values_are_accepted_and_the_profile_runs():
    """The extremes of every range work through enter and exit (the issue's
    max_buffer_mb=1e300 raised OverflowError at enter; 65536 MiB must not)."""
    options = dict(buffer_mb=0.0625, max_buffer_mb=65536, metrics_interval_us=1e6,
                   metrics_buffer_mb=65536, metrics_decode_ms=fractions.Fraction(1),
                   gap_thresholds_us=(0, 1e9), trace=False, syncs=False, driver_api=False,
                   warm_up=False, metrics=False)
    ran = []
    with loopscope.profile(**options) as prof:
        with prof.step():
            ran.append("step")
    assert ran == ["step"]
    assert [s["name"] for s in prof.summary()["steps"]] == ["Step_0"]
    assert not _core.active()


def test_numpy_scalars_are_numbers():
    np = pytest.importorskip("numpy")
    with loopscope.profile(buffer_mb=np.float64(2), max_buffer_mb=np.int64(8),
                           gap_thresholds_us=np.array([10.0, 30.0])) as prof:
        _testhooks._inject("kernel", [(1_000, 2_000, 0, 7, 1)])
    assert prof.summary()["gaps"]["thresholds_us"] == [10.0, 30.0]


# -- the C core's start: every option comes from _options.CORE_START (issue 42)
_c_start = _core.start  # the C function itself, taken before conftest wraps it per test


def test_the_core_has_no_defaults_a_missing_option_is_named():
    for name in _options.CORE_START:
        values = _options.core_start_values()
        del values[name]
        with pytest.raises(TypeError, match=f"start: no value for {name} "):
            _c_start(values)
    assert not _core.active()


def test_the_core_refuses_an_unknown_option_and_a_wrong_type():
    with pytest.raises(TypeError, match="start: unknown option 'tracing'"):
        _c_start(dict(_options.core_start_values(), tracing=True))
    with pytest.raises(TypeError, match="start: trace must be a bool, got 1"):
        _c_start(dict(_options.core_start_values(), trace=1))
    with pytest.raises(TypeError, match="start: buffer_bytes must be an int"):
        _c_start(dict(_options.core_start_values(), buffer_bytes=4.0))
    with pytest.raises(TypeError, match="takes a dict"):
        _c_start([("trace", False)])
    with pytest.raises(TypeError, match="did you mean 'metrics_decode_ns'"):
        _options.core_start_values(metrics_decode_ms=10)
    with pytest.raises(ValueError, match="metrics_decode_ns must be between 1e\\+06 and 1e\\+10"):
        _options.core_start_values(metrics_decode_ns=10)
    assert not _core.active()


def test_a_profile_with_its_defaults_starts_the_core_at_the_core_defaults(monkeypatch):
    """profile()'s defaults (its signature, in MiB, us, ms) and CORE_START's
    (the core's units) are the same settings."""
    seen = []
    start = _core.start
    monkeypatch.setattr(_core, "start", lambda values: seen.append(values) or start(values))
    with loopscope.profile():
        pass
    for name in ("buffer_bytes", "max_buffers", "metrics_interval_ns", "metrics_buffer_bytes",
                 "metrics_decode_ns", "metrics_wait_for_start", "warm_up", "graph_kernels",
                 "callbacks", "own_timestamps"):
        assert seen[0][name] == _options.CORE_START[name][0], name
