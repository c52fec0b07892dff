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
  A marked test that does not ask for the fixture is profiled as a whole.
  `steps` is a glob over step names; when no `prof.step()` step matches it,
  ranges (`loopscope.range`) with matching names are taken as the steps.
  `profile` holds options for `loopscope.profile()` (e.g. trace,
  gap_thresholds_us);
- the option `--loopscope-report=PATH`: every profiled test's summary and
  budget results, written as one JSON file at the end of the run (not
  under pytest-xdist yet: its workers' results are not gathered).

The plugin never imports torch, and does nothing for tests without the
fixture or the marker, so projects that do not use it are not affected."""
from __future__ import annotations

import functools
import json
import os
from typing import Any

import pytest

MARKER = "loopscope"
FIXTURE = "loopscope_profile"
OPTIONS = ("steps", "profile")

_STATE = pytest.StashKey["_ProfiledTest"]()
_RESULTS = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("loopscope", "loopscope: GPU loop budgets")
    group.addoption(
        "--loopscope-report", metavar="PATH", default=None,
        help="write every loopscope-profiled test's summary and budget results as JSON to PATH",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "loopscope(max_syncs=, max_sync_blocked_ms=, max_severe_gaps=, max_gap_us=, "
        "max_idle_pct=, min_busy_pct=, min_sm_active_pct=, max_rank_skew_us=, steps='Step_*', "
        "profile={}): "
        "profile the test with loopscope and fail it when a budget is exceeded",
    )
    config.stash[_RESULTS] = {}


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


def _parse_marker(marker) -> tuple[dict[str, float], str | None, dict[str, Any]]:
    from ._budgets import BUDGETS, BudgetError, check_budgets
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

    def __init__(self, prof, budgets: dict[str, float], steps: str | None) -> None:
        self.prof = prof
        self.budgets = budgets
        self.steps = steps
        self.verdict: Any = None  # a _budgets.Verdict once checked
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
                    self.prof, lambda name: fnmatch.fnmatchcase(name, pattern)) or summary
            self.summary = summary
        return self.summary

    def check(self) -> None:
        """Raises pytest's failure or skip when a budget fails or cannot be measured."""
        if not self.budgets:
            return
        from ._budgets import evaluate

        self.verdict = evaluate(self.final_summary(), self.budgets, self.steps)
        if self.verdict.failed:
            pytest.fail(self.verdict.message(), pytrace=False)
        if self.verdict.unavailable:
            reason = "loopscope budget not measured: " + self.verdict.skip_reason()
            try:  # reported at the test's line, as a skip mark would be
                raise pytest.skip.Exception(reason, _use_item_location=True)
            except TypeError:  # a pytest without that (private) argument
                pytest.skip(reason)


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
    budgets, steps, options = _parse_marker(request.node.get_closest_marker(MARKER))
    try:
        prof = _profile_class()(**options)
    except (TypeError, ValueError) as error:
        raise pytest.UsageError(f"@pytest.mark.loopscope: profile options: {error}") from None
    state = _ProfiledTest(prof, budgets, steps)
    request.node.stash[_STATE] = state
    prof.__enter__()
    try:
        yield prof
    finally:
        state.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Ends the test's profile right after its body, then checks the budgets
    inside the call phase, so an exceeded budget is a test failure."""
    try:
        result = yield
    finally:
        state = item.stash.get(_STATE, None)
        if state is not None:
            state.stop()
    if state is not None:
        state.check()
    return result


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
    profiled = [v for v in results.values() if "summary" in v]
    if not profiled:
        return
    failed = sum(1 for v in profiled if v.get("outcome") == "failed")
    skipped = sum(1 for v in profiled if v.get("outcome") == "skipped")
    line = f"loopscope: {len(profiled)} test{'s' if len(profiled) != 1 else ''} profiled"
    line += f", {failed} failed, {skipped} skipped"
    path = config.getoption("--loopscope-report")
    if path:
        line += f"; report written to {path}"
    terminalreporter.write_line(line)
