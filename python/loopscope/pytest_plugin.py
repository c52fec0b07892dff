"""pytest plugin: GPU loop budgets as test assertions.

Registered through the `pytest11` entry point, so installing loopscope is
enough.  It gives

- the fixture `loopscope_profile`: a running `loopscope.Profile` around the
  test body (the test marks steps with `loopscope_profile.step()`); asking
  it for `summary()` or `report()` inside the test ends the profile there,
  so plain assertions on the summary work too;
- the marker `@pytest.mark.loopscope(max_syncs=0, max_severe_gaps=0, ...,
  steps="Step_*", profile={...})`: after the test body passes, the budgets
  are checked on the summary.  A budget over its limit fails the test with a
  readable message (the budget, the measured value, the top sync sites, the
  worst gaps); a budget whose metric was not measured (no GPU, no counters)
  skips the test with the reason; an unknown budget name is a usage error.
  A body that stops at loopscope.demo's NoGPUError (the demo loop on a
  machine without a GPU) skips with its message too.
  A marked test that does not ask for the fixture is profiled as a whole.
  `steps` is a glob over step names; when no `prof.step()` step matches it,
  ranges (`loopscope.range`) with matching names are taken as the steps.
  `profile` holds options for `loopscope.profile()` (e.g. trace,
  gap_thresholds_us);
- baselines: `@pytest.mark.loopscope(baseline="path.json",
  max_regression_pct=10)` compares the test's summary with a saved one
  (loopscope.compare) and fails the test when the loop time, GPU idle
  time, severe gaps, syncs or their blocked time got worse by more than
  max_regression_pct percent (default 10; noise floors in _compare).  The
  path is relative to the test file's folder.  `--loopscope-update-baseline`
  writes the baselines instead of checking them; a missing baseline fails
  the test and says how to write it; a baseline whose figures this machine
  cannot measure (written on a GPU, checked on a CPU-only runner) skips the
  test with the reason, as an unmeasurable budget does;
- the option `--loopscope-graph-replays`: graph-level mode for the test
  session (`loopscope.prepare()` when pytest starts, before the tests make
  their CUDA context): every profile traces each CUDA-graph replay whole;
  where it cannot be turned on (no driver, CUDA already started by a
  conftest), a warning says why and the profiles trace per kernel;
- the option `--loopscope-watch=BUDGET_MS` (and `--loopscope-watch-dir=DIR`):
  every test not profiled otherwise runs inside `loopscope.watch()`, whose
  steps are the test's `loopscope.step()` blocks; a step over the budget
  writes a dump, listed at the end of the run (a flight recorder, not a
  gate: the test's outcome is its own);
- the option `--loopscope-report=PATH`: every profiled test's summary and
  budget results, written as one JSON file at the end of the run (not
  under pytest-xdist yet: its workers' results are not gathered).

The plugin never imports torch, and does nothing for tests without the
fixture or the marker, so projects that do not use it are not affected."""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
from typing import Any

import pytest

MARKER = "loopscope"
FIXTURE = "loopscope_profile"
OPTIONS = ("steps", "profile", "baseline", "max_regression_pct")
DEFAULT_REGRESSION_PCT = 10.0

_STATE = pytest.StashKey["_ProfiledTest"]()
_RESULTS = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("loopscope", "loopscope: GPU loop budgets")
    group.addoption(
        "--loopscope-report", metavar="PATH", default=None,
        help="write every loopscope-profiled test's summary and budget results as JSON to PATH",
    )
    group.addoption(
        "--loopscope-update-baseline", action="store_true", default=False,
        help="write the summaries of tests marked @pytest.mark.loopscope(baseline=...) to their "
             "baseline files instead of comparing with them",
    )
    group.addoption(
        "--loopscope-watch", metavar="BUDGET_MS", type=float, default=None,
        help="watch every test's steps (loopscope.step() blocks) with loopscope.watch(): a step "
             "over BUDGET_MS host time writes a dump; tests profiled by the fixture or marker "
             "are left to their profile",
    )
    group.addoption(
        "--loopscope-watch-dir", metavar="DIR", default="loopscope-dumps",
        help="with --loopscope-watch: where the dumps go (default loopscope-dumps)",
    )
    group.addoption(
        "--loopscope-graph-replays", action="store_true", default=False,
        help="graph-level mode: trace each CUDA-graph replay as one span in every profile "
             "(loopscope.prepare() at the session's start, before CUDA starts)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "loopscope(max_syncs=, max_sync_blocked_ms=, max_severe_gaps=, max_gap_us=, "
        "max_idle_pct=, min_busy_pct=, min_sm_active_pct=, max_rank_skew_us=, steps='Step_*', "
        "profile={}, baseline='path.json', max_regression_pct=10): "
        "profile the test with loopscope and fail it when a budget is exceeded",
    )
    config.stash[_RESULTS] = {}
    budget = config.getoption("--loopscope-watch", default=None)
    if budget is not None:
        from .watching._watch import watch

        try:  # the watch's own checks, before any test runs
            watch(step_budget_ms=budget, dump_dir=config.getoption("--loopscope-watch-dir"))
        except (TypeError, ValueError) as error:
            raise pytest.UsageError(f"--loopscope-watch: {error}") from None
    if config.getoption("--loopscope-graph-replays", default=False):
        from .live._prepare import prepare

        try:
            prepare()
        except RuntimeError as refused:  # the run goes on, per kernel
            config.issue_config_time_warning(
                pytest.PytestWarning(f"{refused}; profiles trace each kernel"), stacklevel=2)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Checks every marker's budgets before anything runs (a misspelt budget
    is a usage error, like a misspelt option); a marked test that does not
    ask for the fixture gets it anyway."""
    for item in items:
        marker = item.get_closest_marker(MARKER)
        if marker is not None:
            try:
                _parse_marker(marker)
            except pytest.UsageError as error:
                raise pytest.UsageError(f"{item.nodeid}: {error}") from None
            names = getattr(item, "fixturenames", None)
            if names is not None and FIXTURE not in names:
                names.append(FIXTURE)


class _Baseline:
    """A marker's baseline: the file (as written in the marker) and the
    allowed regression."""

    def __init__(self, path: str, max_pct: float) -> None:
        self.path = path
        self.max_pct = max_pct


def _parse_baseline(kwargs: dict[str, Any]) -> _Baseline | None:
    path = kwargs.pop("baseline", None)
    pct = kwargs.pop("max_regression_pct", None)
    if path is None:
        if pct is not None:
            raise pytest.UsageError("@pytest.mark.loopscope: max_regression_pct needs "
                                    "baseline='path.json' (the summary to compare with)")
        return None
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise pytest.UsageError(f"@pytest.mark.loopscope: baseline must be a file path, "
                                f"got {path!r}")
    if pct is None:
        pct = DEFAULT_REGRESSION_PCT
    if isinstance(pct, bool) or not isinstance(pct, (int, float)) or not 0 <= pct < float("inf"):
        raise pytest.UsageError(f"@pytest.mark.loopscope: max_regression_pct must be a number "
                                f">= 0, got {pct!r}")
    return _Baseline(str(path), float(pct))


def _marker_baseline(marker) -> _Baseline | None:
    """The marker's baseline (checked), or None."""
    return None if marker is None else _parse_baseline(dict(marker.kwargs))


def _parse_marker(marker) -> tuple[dict[str, float], str | None, dict[str, Any]]:
    from .figures._budgets import BUDGETS, BudgetError, check_budgets
    from ._profile import Profile

    if marker is None:
        return {}, None, {}
    if marker.args:
        raise pytest.UsageError(
            f"@pytest.mark.loopscope takes keyword arguments only, got {marker.args!r}; "
            f"valid budgets: {', '.join(BUDGETS)}; options: {', '.join(OPTIONS)}"
        )
    kwargs = dict(marker.kwargs)
    steps = kwargs.pop("steps", None)
    options = kwargs.pop("profile", None) or {}
    _parse_baseline(kwargs)  # checked here with the rest; read by _marker_baseline
    if steps is not None and not isinstance(steps, str):
        raise pytest.UsageError(f"@pytest.mark.loopscope: steps must be a glob str, got {steps!r}")
    if not isinstance(options, dict):
        raise pytest.UsageError(
            f"@pytest.mark.loopscope: profile must be a dict of loopscope.profile() options, "
            f"got {options!r}")
    try:
        budgets = check_budgets(kwargs)
    except BudgetError as error:
        raise pytest.UsageError(f"@pytest.mark.loopscope: {error}; options: "
                                f"{', '.join(OPTIONS)}") from None
    try:  # the profile's own checks, before any test runs
        Profile(**options)
    except (TypeError, ValueError) as error:
        raise pytest.UsageError(f"@pytest.mark.loopscope: profile={options!r}: {error}") from None
    return budgets, steps, options


class _ProfiledTest:
    """The profile of one test, its budgets and, once checked, the result."""

    def __init__(self, prof, budgets: dict[str, float], steps: str | None,
                 baseline: _Baseline | None = None, folder: str = ".",
                 update_baseline: bool = False) -> None:
        self.prof = prof
        self.budgets = budgets
        self.steps = steps
        self.baseline = baseline
        self.baseline_path = (os.path.join(folder, os.fspath(baseline.path))
                              if baseline is not None else None)
        self.update_baseline = update_baseline
        self.verdict: Any = None  # a _budgets.Verdict once checked
        self.regressions: Any = None  # a _compare.Regressions once checked
        self.baseline_note: str | None = None
        self.summary: dict[str, Any] | None = None

    def stop(self) -> None:
        if self.prof.is_running:
            self.prof.__exit__(None, None, None)

    def final_summary(self) -> dict[str, Any]:
        """The summary the budgets see: with `steps` matching no real step,
        ranges of that name stand in for steps."""
        if self.summary is None:
            import fnmatch

            summary = self.prof.summary()
            pattern = self.steps
            if pattern is not None and not any(
                    fnmatch.fnmatchcase(s["name"], pattern) for s in summary["steps"]):
                from ._range_steps import summary_with_range_steps

                summary = summary_with_range_steps(
                    self.prof.finished, lambda name: fnmatch.fnmatchcase(name, pattern)) or summary
            self.summary = summary
        return self.summary

    def _check_baseline(self) -> list[str]:
        """Compares with the baseline (or writes it); failure messages."""
        from .surfaces._compare import CompareError, compare, regressions
        from .files._inputs import output_problem

        assert self.baseline is not None and self.baseline_path is not None
        path = self.baseline_path
        if self.update_baseline:
            problem = output_problem(path) if os.path.lexists(path) else None
            if problem is not None:  # a folder or a FIFO where the baseline goes
                return [f"loopscope: cannot write the baseline {path}: {problem}"]
            folder = os.path.dirname(os.path.abspath(path))
            tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
            try:  # a part of the path that is a file, a folder not writable: said, no traceback
                os.makedirs(folder, exist_ok=True)
                with open(tmp, "w") as f:
                    json.dump(self.final_summary(), f, indent=1, default=str)
                os.replace(tmp, path)
            except OSError as error:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                why = error.strerror or str(error)
                if isinstance(error, (FileExistsError, NotADirectoryError)):
                    why = "a part of the path is a file, not a folder"
                return [f"loopscope: cannot write the baseline {path}: {why}"]
            self.baseline_note = f"baseline written to {path}"
            return []
        if not os.path.lexists(path):  # anything else there is refused by name below
            return [f"loopscope: the baseline {path} does not exist; run pytest with "
                    "--loopscope-update-baseline to write it from this test's profile"]
        try:
            result = compare(path, self.final_summary())
        except (CompareError, OSError, ValueError) as error:
            return [f"loopscope: cannot compare with the baseline {path}: {error}"]
        # this run's summary as `here`: a figure this machine cannot measure (a baseline
        # written on a GPU, checked on a CPU runner) skips with the reason, never fails
        self.regressions = regressions(result, self.baseline.max_pct, here=self.final_summary())
        if self.regressions.failed:
            return [self.regressions.message(f"the baseline {self.baseline.path}")]
        return []

    def check(self) -> None:
        """Raises pytest's failure or skip when a budget fails or cannot be
        measured, or a figure regressed against the baseline."""
        failures: list[str] = []
        unavailable: list[str] = []
        if self.budgets:
            from .figures._budgets import evaluate

            self.verdict = evaluate(self.final_summary(), self.budgets, self.steps)
            if self.verdict.failed:
                failures.append(self.verdict.message())
            elif self.verdict.unavailable:
                unavailable.append("loopscope budget not measured: " + self.verdict.skip_reason())
        if self.baseline is not None and not (self.update_baseline and failures):
            failures += self._check_baseline()  # a failing test writes no baseline
            if self.regressions is not None and not self.regressions.checked and \
                    self.regressions.unavailable:
                unavailable.append("loopscope baseline not checked: not measured: "
                                   + ", ".join(self.regressions.unavailable))
        if failures:
            pytest.fail("\n".join(failures), pytrace=False)
        if unavailable:
            _skip("; ".join(unavailable))


def _skip(reason: str) -> None:
    """Skips the running test, reported at the test's line as a skip mark
    would be."""
    try:
        skip = pytest.skip.Exception(reason, _use_item_location=True)
    except TypeError:  # a pytest without that (private) argument
        skip = pytest.skip.Exception(reason)
    raise skip


# Budgets read from the SM/DRAM counters.
COUNTER_BUDGETS = frozenset({"min_sm_active_pct"})


def _make_cuda_context() -> None:
    """Before a profile whose budgets read the counters: make the CUDA
    context the test body would make anyway (torch already imported, a GPU
    there, CUDA not yet used), so the profile's enter sets PM sampling up on
    it and its samples cover the whole body.  Otherwise the first test of a
    session would make the context inside the profile, sampling would start
    ~0.35 s into it, and its coverage check would refuse the budget.
    torch is imported here when installed but not yet imported (a test
    that imports it inside its body); nothing happens without it."""
    torch = sys.modules.get("torch")
    if torch is None and importlib.util.find_spec("torch") is not None:
        import torch
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is None or not cuda.is_available() or cuda.is_initialized():
            return
        cuda.init()
        cuda.synchronize()  # the primary context exists from here on
    except Exception:  # noqa: BLE001  a test that cannot use CUDA says so itself
        return


@functools.lru_cache(maxsize=None)
def _profile_class():
    from ._profile import Profile

    class TestProfile(Profile):
        """A Profile that ends itself when the test asks for its results."""

        __test__ = False

        def summary(self) -> dict[str, Any]:
            if self.is_running:
                self.__exit__(None, None, None)
            return super().summary()

    return TestProfile


@pytest.fixture
def loopscope_profile(request: pytest.FixtureRequest):
    """A running loopscope profile around the test body; mark steps with
    `loopscope_profile.step()`.  Budgets of @pytest.mark.loopscope are
    checked after the test body passes."""
    marker = request.node.get_closest_marker(MARKER)
    budgets, steps, options = _parse_marker(marker)
    baseline = _marker_baseline(marker)
    try:
        prof = _profile_class()(**options)
    except (TypeError, ValueError) as error:
        raise pytest.UsageError(f"@pytest.mark.loopscope: profile options: {error}") from None
    folder = os.path.dirname(str(getattr(request.node, "path", None) or request.node.fspath))
    state = _ProfiledTest(prof, budgets, steps, baseline, folder,
                          request.config.getoption("--loopscope-update-baseline"))
    request.node.stash[_STATE] = state
    if COUNTER_BUDGETS & set(budgets):
        _make_cuda_context()
    prof.__enter__()
    try:
        yield prof
    finally:
        state.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Ends the test's profile right after its body, then checks the budgets
    inside the call phase, so an exceeded budget is a test failure.
    With --loopscope-watch, a test without a profile runs inside a watch."""
    watching = _start_watch(item)
    try:
        result = yield
    except Exception as error:
        state = item.stash.get(_STATE, None)
        if state is not None and _needs_a_gpu(error):  # not a failure: a machine without one
            state.stop()
            _skip(f"loopscope: {error}")
        raise
    finally:
        _end_watch(item, watching)
        state = item.stash.get(_STATE, None)
        if state is not None:
            state.stop()
    if state is not None:
        state.check()
    return result


def _start_watch(item: pytest.Item):
    """A running loopscope.watch() around the test body (--loopscope-watch),
    unless the test is profiled (profiles and watches do not nest)."""
    budget = item.config.getoption("--loopscope-watch", default=None)
    if budget is None or item.stash.get(_STATE, None) is not None:
        return None
    from .watching._watch import watch

    w = watch(step_budget_ms=budget, dump_dir=item.config.getoption("--loopscope-watch-dir"))
    try:
        w.__enter__()
    except RuntimeError as busy:  # a profile the test's fixtures left running: said, not watched
        item.add_report_section("call", "loopscope watch", f"not watched: {busy}")
        return None
    return w


def _end_watch(item: pytest.Item, w) -> None:
    if w is None:
        return
    w.__exit__(None, None, None)
    summary = w.summary()
    if summary["steps_seen"] or summary["dumps"]:
        item.config.stash[_RESULTS].setdefault(item.nodeid, {})["watch"] = summary


def _needs_a_gpu(error: BaseException) -> bool:
    """The test body stopped at loopscope.demo's NoGPUError (looked up only
    when the demo module was imported: the plugin imports nothing)."""
    import sys

    demo = sys.modules.get("loopscope.demo")
    return demo is not None and isinstance(error, demo.NoGPUError)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    state = item.stash.get(_STATE, None)
    if state is not None and (call.when == "call" or report.outcome != "passed"):
        entry = item.config.stash[_RESULTS].setdefault(item.nodeid, {})
        entry.setdefault("outcome", report.outcome)
        if call.when == "call":
            entry["outcome"] = report.outcome
    return report


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    state = item.stash.get(_STATE, None)
    if state is None:
        return
    try:
        summary = state.final_summary()
    except Exception as error:  # a profile that never ran: nothing to keep
        summary = {"error": f"{type(error).__name__}: {error}"}
    entry = item.config.stash[_RESULTS].setdefault(item.nodeid, {})
    entry["summary"] = summary
    entry["budgets"] = state.verdict.as_dict() if state.verdict else None
    entry["steps"] = state.steps
    if state.baseline is not None:
        entry["baseline"] = {"path": state.baseline_path, "note": state.baseline_note,
                             "regressions": state.regressions.as_dict()
                             if state.regressions else None}
    if state.verdict is not None and (state.verdict.failed or state.verdict.unavailable):
        entry["message"] = state.verdict.message()


def pytest_sessionfinish(session: pytest.Session) -> None:
    results = session.config.stash.get(_RESULTS, {})
    path = session.config.getoption("--loopscope-report")
    if not path or hasattr(session.config, "workerinput"):
        return
    tests = {k: v for k, v in results.items() if "summary" in v}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"loopscope_report": 1, "tests": tests}, f, indent=1, default=str)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    results = config.stash.get(_RESULTS, {})
    watched = {k: v["watch"] for k, v in results.items() if "watch" in v}
    if watched:
        steps = sum(w["steps_seen"] for w in watched.values())
        dumps = [p for w in watched.values() for p in w["dumps"]]
        terminalreporter.write_line(
            f"loopscope watch: {len(watched)} test{'s' if len(watched) != 1 else ''}, {steps} "
            f"steps watched, {sum(w['breaches'] for w in watched.values())} breaches, "
            f"{len(dumps)} dump{'s' if len(dumps) != 1 else ''}")
        for node, w in watched.items():
            for path in w["dumps"]:
                terminalreporter.write_line(f"  {node}: {path}")
    profiled = [v for v in results.values() if "summary" in v]
    if not profiled:
        return
    failed = sum(1 for v in profiled if v.get("outcome") == "failed")
    skipped = sum(1 for v in profiled if v.get("outcome") == "skipped")
    line = f"loopscope: {len(profiled)} test{'s' if len(profiled) != 1 else ''} profiled"
    line += f", {failed} failed, {skipped} skipped"
    written = sum(1 for v in profiled if (v.get("baseline") or {}).get("note"))
    if written:
        line += f"; {written} baseline{'s' if written != 1 else ''} written"
    path = config.getoption("--loopscope-report")
    if path:
        line += f"; report written to {path}"
    terminalreporter.write_line(line)
