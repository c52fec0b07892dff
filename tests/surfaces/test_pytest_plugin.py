"""The pytest plugin, run the way users run it: inner test files executed by
pytester in a fresh interpreter, with synthetic GPU records injected into
the profiled tests.  Checks the outcomes (pass / fail / skip / usage
error), the failure text, the JSON report, and that the plugin stays out
of the way of tests that do not use it.

Where loopscope is installed (CI) pytest finds the plugin through its
pytest11 entry point; in a source checkout it is loaded with -p."""
from __future__ import annotations

import sys
import importlib.metadata
import json
import os
from pathlib import Path

import pytest

import loopscope

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parents[1]  # tests/: the shared helpers and data

# The repo's own conftest (forces trace=False, checks nothing leaks): the
# plugin must work under it, so the inner runs use it too.
CONFTEST = (HERE / "conftest.py").read_text()


def plugin_args() -> list[str]:
    """[] where the entry point registers the plugin, else -p (loading it
    twice is an error in pytest)."""
    for ep in importlib.metadata.entry_points(group="pytest11"):
        if ep.value == "loopscope.pytest_plugin":
            return []
    return ["-p", "loopscope.pytest_plugin"]


@pytest.fixture(autouse=True)
def _this_loopscope(monkeypatch):
    """The inner interpreters import this loopscope (a checkout or the installed one)."""
    python_dir = str(Path(loopscope.__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", python_dir + os.pathsep + os.environ.get("PYTHONPATH", ""))


@pytest.fixture
def inner(pytester: pytest.Pytester):
    """A pytester folder with the synthetic loop and the repo's conftest."""
    pytester.makepyfile(synthetic_loop=(HERE / "synthetic_loop.py").read_text())
    pytester.makeconftest(CONFTEST)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", *args)


LOOP_TESTS = '''
import pytest
import loopscope
from synthetic_loop import run_loop, run_graph_like


@pytest.mark.loopscope(max_severe_gaps=0)
def test_eager(loopscope_profile):
    run_loop(loopscope_profile)


@pytest.mark.loopscope(max_severe_gaps=0, max_gap_us=5, min_busy_pct=90)
def test_graph(loopscope_profile):
    run_graph_like(loopscope_profile)


@pytest.mark.loopscope(max_severe_gaps=0, steps="Step_0")
def test_only_the_first_step(loopscope_profile):
    run_loop(loopscope_profile)


@pytest.mark.loopscope(max_severe_gaps=0, max_syncs=0)
def test_syncs_not_measured(loopscope_profile):
    run_graph_like(loopscope_profile)


@pytest.mark.loopscope(min_sm_active_pct=50)
def test_sm_not_measured(loopscope_profile):
    run_graph_like(loopscope_profile)


def test_plain_assertions(loopscope_profile):
    run_loop(loopscope_profile)
    s = loopscope_profile.summary()       # ends the profile here
    assert (s["gaps"]["count"], s["gaps"]["severe"]) == (5, 2)
    assert s["diagnosis"]["verdict"] == "CPU_LAUNCH_BOUND"


class RangeSteps:
    """Steps marked with loopscope.range, for a test without the fixture."""
    n = 0

    def step(self):
        self.n += 1
        return loopscope.range(f"Denoise_{self.n - 1}")


@pytest.mark.loopscope(max_severe_gaps=1, steps="Denoise_*")
def test_whole_body_with_range_steps():
    run_loop(RangeSteps())


def test_body_error_is_the_failure(loopscope_profile):
    run_loop(loopscope_profile)
    raise ValueError("the test's own failure")
'''


def test_pass_fail_and_skip_with_readable_messages(inner, tmp_path):
    inner.makepyfile(test_loops=LOOP_TESTS)
    report = tmp_path / "out" / "loopscope.json"
    result = run(inner, "-rs", f"--loopscope-report={report}")
    result.assert_outcomes(passed=3, failed=3, skipped=2)
    # the eager loop: a failure (not an error) whose text is the evidence, no traceback
    result.stdout.fnmatch_lines([
        "*_ test_eager _*",
        "loopscope: 1 of 1 budget failed, whole profile",
        "  FAILED max_severe_gaps: severe gaps 2 (> 50 us), budget <= 0",
        "Worst gaps:",
        "        80.0 us  [host] step Step_1, stream 7, before gemm_0",
        "        80.0 us  [host] step Step_2, stream 7, before gemm_0",
        "         5.0 us  [host] step Step_0, stream 7, before gemm_1",
        "         5.0 us  [host] step Step_1, stream 7, before gemm_1",
        "         5.0 us  [host] step Step_2, stream 7, before gemm_1",
        "Severe gaps per step: Step_1 1, Step_2 1",
        "Verdict: CPU_LAUNCH_BOUND: capture the step in a CUDA graph*",
        "*_ test_whole_body_with_range_steps _*",
    ])
    eager_section = result.stdout.str().split("_ test_eager _")[1].split("_ test_whole_body")[0]
    assert "Traceback" not in eager_section and "def test_eager" not in eager_section
    # a marked test without the fixture: ranges named like the glob are its steps
    result.stdout.fnmatch_lines([
        "*_ test_whole_body_with_range_steps _*",
        "loopscope: 1 of 1 budget failed, ranges matching 'Denoise_*' as steps (3 steps)",
        "  FAILED max_severe_gaps: severe gaps 2 (> 50 us), budget <= 1",
        "Worst gaps:",
        "        80.0 us  [host] step Denoise_1, stream 7, before gemm_0",
        "        80.0 us  [host] step Denoise_2, stream 7, before gemm_0",
        "         5.0 us  [host] step Denoise_0, stream 7, before gemm_1",
    ])
    # the test's own failure stays the failure
    result.stdout.fnmatch_lines([
        "*_ test_body_error_is_the_failure _*",
        "*ValueError: the test's own failure",
    ])
    # unavailable metrics skip with the reason, never pass
    result.stdout.fnmatch_lines([
        "SKIPPED [[]1[]] test_loops.py:*: loopscope budget not measured: max_syncs: not "
        "measured (sync detection unavailable: *",
    ])
    result.stdout.fnmatch_lines([
        "SKIPPED [[]1[]] test_loops.py:*: loopscope budget not measured: min_sm_active_pct: "
        "not measured (*",
    ])
    result.stdout.fnmatch_lines([
        "loopscope: 8 tests profiled, 3 failed, 2 skipped; report written to *loopscope.json",
    ])

    data = json.loads(report.read_text())
    tests = data["tests"]
    assert sorted(k.split("::")[1] for k in tests) == sorted([
        "test_eager", "test_graph", "test_only_the_first_step", "test_syncs_not_measured",
        "test_sm_not_measured", "test_plain_assertions", "test_whole_body_with_range_steps",
        "test_body_error_is_the_failure"])
    eager = tests["test_loops.py::test_eager"]
    assert eager["outcome"] == "failed"
    assert eager["budgets"]["budgets"] == {
        "max_severe_gaps": {"limit": 0.0, "measured": 2.0, "ok": False, "reason": None}}
    assert eager["summary"]["gaps"]["severe"] == 2
    assert eager["message"].startswith("loopscope: 1 of 1 budget failed")
    graph = tests["test_loops.py::test_graph"]
    assert graph["outcome"] == "passed"
    assert {k: v["measured"] for k, v in graph["budgets"]["budgets"].items()} == {
        "max_severe_gaps": 0.0, "max_gap_us": 1.0, "min_busy_pct": 92.31}
    first = tests["test_loops.py::test_only_the_first_step"]
    assert first["outcome"] == "passed"
    assert first["budgets"]["selection"] == "steps matching 'Step_0' (1 of 3 steps)"
    assert tests["test_loops.py::test_syncs_not_measured"]["outcome"] == "skipped"
    assert tests["test_loops.py::test_plain_assertions"]["outcome"] == "passed"
    ranged = tests["test_loops.py::test_whole_body_with_range_steps"]
    assert ranged["outcome"] == "failed"
    assert [s["name"] for s in ranged["summary"]["steps"]] == ["Denoise_0", "Denoise_1", "Denoise_2"]
    assert ranged["summary"]["steps_from"] == "ranges"
    assert ranged["budgets"]["budgets"]["max_severe_gaps"]["measured"] == 2.0
    assert tests["test_loops.py::test_body_error_is_the_failure"]["outcome"] == "failed"
    assert tests["test_loops.py::test_body_error_is_the_failure"]["budgets"] is None


def test_unknown_budget_is_a_usage_error(inner):
    inner.makepyfile(test_typo='''
        import pytest

        @pytest.mark.loopscope(max_sinks=0)
        def test_x(loopscope_profile):
            pass
    ''')
    result = run(inner)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: test_typo.py::test_x: @pytest.mark.loopscope: unknown loopscope budget "
        "'max_sinks'; valid budgets: max_syncs, max_sync_blocked_ms, max_severe_gaps, "
        "max_gap_us, max_idle_pct, min_busy_pct, min_sm_active_pct, max_rank_skew_us; "
        "options: steps, profile, baseline, max_regression_pct",
    ])


def test_bad_marker_arguments_are_usage_errors(inner):
    inner.makepyfile(test_bad='''
        import pytest

        @pytest.mark.loopscope(0)
        def test_positional():
            pass
    ''')
    result = run(inner)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: test_bad.py::test_positional: @pytest.mark.loopscope "
                                 "takes keyword arguments only, got (0,); valid budgets: *"])


def test_projects_without_loopscope_tests_are_left_alone(pytester):
    """No fixture, no marker: tests run as before, nothing is profiled,
    torch is not imported, and no loopscope line is printed."""
    pytester.makepyfile(test_plain='''
        import sys

        def test_nothing_imported():
            assert "torch" not in sys.modules

        def test_other(tmp_path):
            assert tmp_path.exists()
    ''')
    result = run(pytester, "--loopscope-report=r.json")
    result.assert_outcomes(passed=2)
    assert [line for line in result.outlines if line.startswith("loopscope")] == []
    assert json.loads((pytester.path / "r.json").read_text()) == {"loopscope_report": 1, "tests": {}}


def test_help_lists_the_option(pytester):
    result = run(pytester, "--help")
    result.stdout.fnmatch_lines(["loopscope: GPU loop budgets:", "  --loopscope-report=PATH*"])
    markers = run(pytester, "--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.loopscope(max_syncs=, *"])


def test_sync_budget_fails_with_the_sync_site(inner):
    """With sync detection: a .item()-like sync per step fails max_syncs=0
    and the message points at the line that synced."""
    inner.makepyfile(test_syncs='''
        import pytest
        from loopscope import _testhooks


        def sync_here():
            _testhooks._inject_calls([("cudaStreamSynchronize", 20_000)])


        @pytest.mark.loopscope(max_syncs=0)
        def test_syncing_loop(loopscope_profile):
            for _ in range(3):
                with loopscope_profile.step():
                    sync_here()
    ''')
    result = run(inner)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "  FAILED max_syncs: host-device syncs 3 *",
        "Top sync sites:",
        "  test_syncs.py:* in sync_here(): _testhooks._inject_calls(*  [[]stream_sync] x3, blocked 0.060 ms, "
        "steps 0-2",
    ])


NO_GPU_TESTS = '''
import pytest
from loopscope.demo import NoGPUError


@pytest.mark.loopscope(max_syncs=0)
def test_marked(loopscope_profile):
    raise NoGPUError("no GPU for the demo here")


def test_fixture_only(loopscope_profile):
    raise NoGPUError("no GPU for the demo here either")


def test_without_loopscope():
    raise NoGPUError("not profiled: an error like any other")


def test_another_error(loopscope_profile):
    raise RuntimeError("a real failure")
'''


def test_a_body_stopped_by_the_demos_no_gpu_error_skips_with_its_message(inner):
    inner.makepyfile(test_no_gpu=NO_GPU_TESTS)
    result = run(inner, "-rsf")
    result.assert_outcomes(skipped=2, failed=2)
    result.stdout.fnmatch_lines([
        "SKIPPED [[]1[]] test_no_gpu.py:*: loopscope: no GPU for the demo here",
        "SKIPPED [[]1[]] test_no_gpu.py:*: loopscope: no GPU for the demo here either"])
    out = result.stdout.str()
    assert "FAILED test_no_gpu.py::test_without_loopscope" in out
    assert "FAILED test_no_gpu.py::test_another_error" in out


class _StubCuda:
    """Stands in for torch.cuda: records what the plugin asked of it."""

    def __init__(self, available, initialized):
        self.available, self.initialized, self.calls = available, initialized, []

    def is_available(self):
        return self.available

    def is_initialized(self):
        return self.initialized

    def init(self):
        self.calls.append("init")

    def synchronize(self):
        self.calls.append("synchronize")


@pytest.mark.parametrize("available, initialized, calls", [
    (True, False, ["init", "synchronize"]),  # the first counter test: context made first
    (True, True, []),                        # CUDA in use already: nothing to do
    (False, False, []),                      # no GPU: nothing, the budget skips as before
])
def test_a_counter_budget_makes_the_cuda_context_before_its_profile(monkeypatch, available,
                                                                   initialized, calls):
    """Issue 30: the first test of a session with min_sm_active_pct: its
    profile must find a CUDA context, so sampling is set up at the enter."""
    import types

    from loopscope import pytest_plugin

    cuda = _StubCuda(available, initialized)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    pytest_plugin._make_cuda_context()
    assert cuda.calls == calls


def test_without_torch_no_cuda_context_is_made(monkeypatch):
    import importlib.util

    from loopscope import pytest_plugin

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real_find_spec(name, *a))
    pytest_plugin._make_cuda_context()  # imports nothing, raises nothing
    assert "torch" not in sys.modules
    assert pytest_plugin.COUNTER_BUDGETS == {"min_sm_active_pct"}


def test_graph_replays_option_says_why_it_is_off_and_the_tests_run(pytester):
    """--loopscope-graph-replays where graph-level mode cannot be turned on
    (no NVIDIA driver here, or CUDA started by a conftest): a warning with
    the reason, and the session goes on."""
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1")
        pytest.skip("this machine has an NVIDIA driver: the mode turns on here")
    except OSError:
        pass
    pytester.makepyfile(test_plain='''
        def test_one():
            assert 1 + 1 == 2
    ''')
    result = run(pytester, "--loopscope-graph-replays", "-W", "default")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*graph-level mode is off: no NVIDIA GPU driver*"
                                 "profiles trace each kernel*"])


def test_help_lists_the_graph_replays_option(pytester):
    run(pytester, "--help").stdout.fnmatch_lines(["  --loopscope-graph-replays*"])
