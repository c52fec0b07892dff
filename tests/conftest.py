"""Shared fixtures for the CPU test suite.

- `test_clock`: a scripted profiler clock, so host times are exact.
- `inject`: appends synthetic GPU records to the running profile.
- `run_trace`: runs a whole profile around a set of synthetic records and
  returns its summary.
The LoopscopeWarning "GPU tracing is off" is expected on CPU machines; it is
ignored here and checked on its own in capture/test_degradation.py (in subprocesses).
The suite needs a test build (LOOPSCOPE_TEST_HOOKS=1, README's test command):
without one, the import of loopscope._testhooks below fails once, here,
saying how to rebuild, rather than test by test.
"""
from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

# A few test modules share helpers with a test module of another folder
# (`from test_cli import cli`): pytest puts a test's own folder on sys.path
# only when it collects a module there, so a run of one folder alone would
# not find the other.  Every folder of tests/ is put there up front.
_TESTS = Path(__file__).resolve().parent
for _folder in sorted(p for p in _TESTS.iterdir()
                      if p.is_dir() and p.name not in ("data", "mutation", "__pycache__")):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))

import loopscope
from loopscope import _core, _testhooks


@pytest.fixture(autouse=True)
def _quiet_and_clean():
    """Ignore the no-GPU warning; make sure no test leaks a running profile
    or a scripted clock into the next one."""
    if _core.active():  # a previous test died inside a profile
        _core.stop()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", loopscope.LoopscopeWarning)
        yield
    _testhooks._set_test_clock(0, 0)
    leaked = _core.active()
    if leaked:
        _core.stop()
    assert not leaked, "the test left a loopscope profile running"


@pytest.fixture(autouse=True)
def _synthetic_records_only(request, monkeypatch):
    """The CPU suite feeds synthetic records and expects exact answers, so on
    a machine with a GPU it must not mix in real CUPTI records: every
    profile runs with trace=False, metrics=False and syncs=False there
    (injected API calls still go through the switchboard; no_sync() keeps
    its sync callbacks), except in tests marked
    `real_tracing` (the degradation tests, which skip where tracing works),
    `fake_sampler` (synthetic PM samples through _testhooks._fake_samples, which
    need metrics=True and never touch the GPU) or `gpu`."""
    if any(request.node.get_closest_marker(m) for m in ("real_tracing", "gpu", "fake_sampler")):
        return
    real_start = _core.start

    def start_without_tracing(values):
        values = dict(values)
        if values["trace"]:           # a profile: no real sync callbacks either (no_sync
            values["syncs"] = False   # starts with trace=False and keeps them)
        values["trace"] = False
        values["metrics"] = False  # real PM samples would mix with the injected ones
        return real_start(values)

    monkeypatch.setattr(_core, "start", start_without_tracing)


@dataclass
class TestClock:
    """The scripted clock: read n (0-based) returns start + n * tick."""

    start: int
    tick: int

    __test__ = False  # not a test class

    def set(self, start: int, tick: int) -> None:
        self.start, self.tick = start, tick
        _testhooks._set_test_clock(start, tick)

    def at(self, n: int) -> int:
        return self.start + n * self.tick


@pytest.fixture
def test_clock():
    """Clock reads return 1_000_000, 1_001_000, ... (1 us ticks); off afterwards.

    The profile start reads it once, each range enter/exit once, stop once.
    So the first step of a profile spans reads 1..2: [1_001_000, 1_002_000]."""
    clock = TestClock(1_000_000, 1_000)
    _testhooks._set_test_clock(clock.start, clock.tick)
    try:
        yield clock
    finally:
        _testhooks._set_test_clock(0, 0)


@pytest.fixture
def internal_switches(monkeypatch):
    """internal_switches("key=value,..."): LOOPSCOPE_INTERNAL for this test.
    The switches are parsed once per process, so the parse is dropped when
    they are set and again after the test (monkeypatch puts the variable back)."""
    from loopscope.live import _settings

    def set_to(value: str) -> None:
        monkeypatch.setenv("LOOPSCOPE_INTERNAL", value)
        _settings._cache.pop("internal", None)

    yield set_to
    _settings._cache.pop("internal", None)


@pytest.fixture
def inject():
    """inject(kind, records): _testhooks._inject that also checks the returned count."""

    def _inject(kind: str, records) -> int:
        records = list(records)
        count = _testhooks._inject(kind, records)
        assert count == len(records)
        return count

    return _inject


@pytest.fixture
def run_trace(inject):
    """run_trace(kernels=..., memcpys=..., memsets=..., apis=..., syncs=..., samples=...,
    **profile_options)
    -> summary of a profile holding exactly those synthetic records."""

    def _run(*, kernels=(), memcpys=(), memsets=(), apis=(), syncs=(), samples=(), **options):
        with loopscope.profile(**options) as prof:
            for kind, records in (("kernel", kernels), ("memcpy", memcpys),
                                  ("memset", memsets), ("api", apis), ("sync_record", syncs),
                                  ("sample", samples)):
                if records:
                    inject(kind, records)
        return prof.summary()

    return _run

