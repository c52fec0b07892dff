"""Strict mode, `loopscope.no_sync()`, without a GPU: fake CUPTI callbacks
go through the real switchboard from real Python frames, and SyncError must
come out at the line that synced, before the next statement runs.

The fakes are C-level callables (functools.partial, map, next), so the
innermost Python frame during a fake sync is the test's own line, as for
torch's C methods.  On a machine without a GPU, no_sync() alone warns once
and starts a host-only session; the injected calls still reach the
switchboard, so it still raises.
"""
from __future__ import annotations

import ctypes
import functools
import itertools
import sys
import threading
import warnings

import pytest

import loopscope
from machine import driver_present
from loopscope import _core, _profile, _testhooks
from loopscope.figures._syncs import display_path

THIS_FILE = __file__
COPY_CORR = 7
ITEM_CALLS = [("cudaMemcpyAsync", 2_000, COPY_CORR), ("cudaStreamSynchronize", 1_000)]


def here() -> int:
    """The caller's current line number."""
    return sys._getframe(1).f_lineno


def c_callable(calls, release_gil=True):
    """A callable made of C functions only (no Python frame of its own) that
    injects `calls` through the switchboard; one positional argument is
    accepted and ignored (x.to("cpu"))."""
    inject = functools.partial(_testhooks._inject_calls, release_gil=release_gil)
    return functools.partial(next, map(inject, itertools.repeat(calls)))


def make_fake_tensor(release_gil=True):
    sync = c_callable(ITEM_CALLS, release_gil)

    class FakeTensor:
        item = cpu = to = sync
        upload = c_callable([("cudaMemcpyAsync", 2_000, COPY_CORR)], release_gil)  # non_blocking

    return FakeTensor()


X = make_fake_tensor()


def source_line(line):
    return open(THIS_FILE, encoding="utf-8").read().splitlines()[line - 1].strip()


def traceback_line(error, function_name):
    """Line of `function_name`'s frame in the error's traceback."""
    tb, lines = error.__traceback__, []
    while tb is not None:
        if tb.tb_frame.f_code.co_name == function_name:
            lines.append(tb.tb_lineno)
        tb = tb.tb_next
    assert len(lines) == 1, lines
    return lines[0]




def needs_no_driver(test):
    """For tests about the machine without a GPU: skipped where there is a
    driver, and run with the real start-up (conftest otherwise starts every
    session with syncs=False)."""
    skip = pytest.mark.skipif(
        driver_present(), reason="an NVIDIA driver is present: no_sync() can watch syncs here")
    return pytest.mark.real_tracing(skip(test))


# ---------------------------------------------------------------------------
# The error, where it is raised, and what it says.

@pytest.mark.parametrize("release_gil", [True, False])
def test_sync_raises_at_its_line_before_the_next_statement(release_gil):
    """SyncError names this file, the line, function, code and kind of the
    sync, and the statement after the sync never runs."""
    x = make_fake_tensor(release_gil)
    ran = []
    with pytest.raises(loopscope.SyncError) as info:
        with loopscope.no_sync():
            line = here() + 1
            v = x.item()
            ran.append("next statement")
    error = info.value
    function = "test_sync_raises_at_its_line_before_the_next_statement"
    assert ran == []
    assert (error.file, error.line, error.function) == (THIS_FILE, line, function)
    assert (error.code, error.kind, error.api) == ("v = x.item()", "item", "cudaStreamSynchronize")
    assert str(error) == (f"host-device sync inside loopscope.no_sync() at "
                          f"{display_path(THIS_FILE)}:{line} in {function}(): x.item()  [item] "
                          f"via cudaStreamSynchronize")
    assert traceback_line(error, function) == line


def test_sync_error_is_a_public_runtime_error():
    assert loopscope.SyncError.__module__ == "loopscope._strict"
    assert issubclass(loopscope.SyncError, RuntimeError)


def test_inside_a_profile_the_profile_goes_on_and_records_the_sync():
    """no_sync() inside profile(): raises at the line, leaves the profile
    running, and the profile's summary lists the sync."""
    with loopscope.profile() as prof:
        _testhooks._inject("memcpy", [(10, 20, 0, 7, COPY_CORR, None, 4, 2, 1)])  # pageable
        with pytest.raises(loopscope.SyncError) as info:
            with loopscope.no_sync():
                line = here() + 1
                X.cpu()
        assert _core.active()
        line_after = here() + 1
        X.cpu()  # strict mode is off again: no error
    assert info.value.line == line
    sites = prof.summary()["syncs"]["sites"]
    assert [(s["line"], s["kind"], s["count"]) for s in sites] == [(line, "cpu", 1),
                                                                  (line_after, "cpu", 1)]


def test_each_sync_is_reported_not_only_the_first():
    """A SyncError caught inside the block does not switch strict mode off."""
    lines = []
    with loopscope.no_sync():
        for _ in range(2):
            try:
                lines.append(here() + 1)
                X.item()
            except loopscope.SyncError as error:
                lines.append(error.line)
    assert len(lines) == 4 and set(lines) == {lines[0]}  # (sync line, error line) twice


def test_no_sync_alone_stops_its_own_session():
    with pytest.raises(loopscope.SyncError):
        with loopscope.no_sync():
            X.item()
    assert not _core.active()
    with pytest.raises(RuntimeError, match="no profile is running"):
        X.item()  # nothing is watching any more


def test_an_instance_can_be_used_twice():
    guard = loopscope.no_sync()
    for _ in range(2):
        with pytest.raises(loopscope.SyncError):
            with guard:
                X.item()


# ---------------------------------------------------------------------------
# allow=

@pytest.mark.parametrize("allow", [{"item"}, "item", ["item", "print"], ("item",)])
def test_allowed_kind_passes_and_the_block_completes(allow):
    ran = []
    with loopscope.no_sync(allow=allow):
        X.item()
        ran.append("after")
    assert ran == ["after"]


def test_allowed_kind_does_not_let_other_kinds_pass():
    with pytest.raises(loopscope.SyncError) as info:
        with loopscope.no_sync(allow={"item"}):
            X.item()
            line = here() + 1
            X.to("cpu")
    assert (info.value.line, info.value.kind) == (line, "cpu")


def test_unknown_kind_is_a_value_error_listing_the_kinds():
    with pytest.raises(ValueError) as info:
        loopscope.no_sync(allow="bogus")
    assert str(info.value) == (f"no_sync(allow=...): unknown sync kind(s) 'bogus'; known kinds: "
                               f"{', '.join(loopscope.SYNC_KINDS)}")
    with pytest.raises(ValueError, match=r"unknown sync kind\(s\) 'Item', 'bogus'"):
        loopscope.no_sync(allow={"item", "bogus", "Item"})


@pytest.mark.parametrize("allow", [5, 1.5, object()])
def test_allow_of_a_wrong_type_is_a_type_error(allow):
    with pytest.raises(TypeError, match=r"no_sync\(allow=...\) takes sync kinds"):
        loopscope.no_sync(allow=allow)


@pytest.mark.parametrize("allow", [[5], ["bogus", 5], b"item"], ids=["int", "str-and-int", "bytes"])
def test_allow_items_of_a_wrong_type_are_a_type_error(allow):
    with pytest.raises(TypeError, match=r"no_sync\(allow=...\)"):
        loopscope.no_sync(allow=allow)


def read_back(x):
    """One line that copies and then waits, through no call the resolver
    knows by name (as torch.equal or torch.allclose do)."""
    return x.compare()


READ_BACK_LINE = read_back.__code__.co_firstlineno + 3  # `return x.compare()`
# The runtime calls the driver: each runtime call with its driver call inside
# it (1 us clock ticks: copy [0, 4] holds [1, 2], stream sync [2, 5] holds [3, 4]).
NESTED_ITEM_CALLS = [("cudaMemcpyAsync", 4_000, COPY_CORR), ("cuMemcpyDtoHAsync_v2", 1_000, COPY_CORR),
                     ("cudaStreamSynchronize", 3_000), ("cuStreamSynchronize", 1_000)]


@pytest.mark.parametrize("calls", [ITEM_CALLS, NESTED_ITEM_CALLS], ids=["runtime", "nested"])
@pytest.mark.parametrize("judged", [True, False], ids=["copy-record-pageable", "no-copy-record"])
def test_one_sync_has_one_kind_in_the_report_and_in_strict_mode(judged, calls, test_clock):
    """x.compare() copies and then waits for the stream.  The profile knows
    from the copy's record that the copy itself waited (pageable): its sync
    begins with the copy.  Without the record it cannot judge the copy, and
    neither can strict mode here (no driver to ask): the noted wait is the
    stream sync.  Either way it is one sync of one line, and it has one kind
    -- the copy's -- in the report and in strict mode; allowing that kind lets
    the line through, allowing the stream sync's does not."""

    class CopyThenWait:
        compare = c_callable(calls)

    with loopscope.profile() as prof:
        if judged:
            _testhooks._inject("memcpy", [(10, 20, 0, 7, COPY_CORR, None, 4, 2, 1)])  # pageable
        read_back(CopyThenWait())
    syncs = prof.summary()["syncs"]
    (site,) = syncs["sites"]
    names = [api.removesuffix("_v2") for api, *_ in calls]
    copies = [api for api in names if "Memcpy" in api]
    apis = {api: 1 for api in names if judged or api not in copies}
    assert (syncs["count"], syncs["unjudged_async_copies"]) == (1, 0 if judged else len(copies))
    assert (site["line"], site["kind"], site["apis"]) == (READ_BACK_LINE, "memcpy", apis)
    with pytest.raises(loopscope.SyncError) as info:
        with loopscope.no_sync():
            read_back(CopyThenWait())
    # strict mode names the wait it noted (the fake calls exit in order)
    assert (info.value.line, info.value.kind, info.value.api) == (
        READ_BACK_LINE, site["kind"], "cudaStreamSynchronize")
    with pytest.raises(loopscope.SyncError):
        with loopscope.no_sync(allow={"stream_sync"}):
            read_back(CopyThenWait())
    with loopscope.no_sync(allow={site["kind"]}):
        read_back(CopyThenWait())


def test_a_wait_after_a_copy_of_another_line_keeps_its_own_kind():
    """The copy on one line, the stream sync on the next: the wait did not
    follow a copy of its own line, so both the report and strict mode name
    it by its own call."""
    copy, wait = c_callable(ITEM_CALLS[:1]), c_callable(ITEM_CALLS[1:])
    with loopscope.profile() as prof:
        copy()
        line = here() + 1
        wait()
    (site,) = prof.summary()["syncs"]["sites"]
    assert (site["line"], site["kind"]) == (line, "stream_sync")
    with pytest.raises(loopscope.SyncError) as info:
        with loopscope.no_sync():
            copy()
            line = here() + 1
            wait()
    assert (info.value.line, info.value.kind) == (line, "stream_sync")


@pytest.mark.parametrize("between, kind", [(3, "memcpy"), (4, "stream_sync")])
def test_a_wait_is_named_by_a_copy_up_to_four_calls_back(between, kind):
    """The copy, `between` allocations (calls that neither launch nor wait),
    then the stream sync, all on one line: the report and strict mode each
    look back four calls of the thread for the copy the wait followed, so
    with three between it is the copy's sync (memcpy), with four the wait
    keeps its own kind.  Both say the same."""
    calls = [ITEM_CALLS[0]] + [("cuMemAlloc", 1_000)] * between + [ITEM_CALLS[1]]

    class CopyThenWait:
        compare = c_callable(calls)

    with loopscope.profile() as prof:
        read_back(CopyThenWait())
    (site,) = prof.summary()["syncs"]["sites"]
    assert (site["line"], site["kind"], site["apis"]) == (
        READ_BACK_LINE, kind, {"cudaStreamSynchronize": 1})
    with pytest.raises(loopscope.SyncError) as info:
        with loopscope.no_sync():
            read_back(CopyThenWait())
    assert (info.value.line, info.value.kind, info.value.api) == (
        READ_BACK_LINE, kind, "cudaStreamSynchronize")


# ---------------------------------------------------------------------------
# Nesting, exceptions, threads.

def test_nested_no_sync_is_a_runtime_error_and_leaves_nothing_armed():
    with loopscope.profile():
        with pytest.raises(RuntimeError, match=r"no_sync\(\) blocks do not nest"):
            with loopscope.no_sync():
                with loopscope.no_sync():
                    pass
        X.item()  # strict mode is off after the outer block ended
        with pytest.raises(loopscope.SyncError):
            with loopscope.no_sync():  # and can be armed again
                X.item()


def test_exception_in_the_block_propagates_unchanged_and_disarms():
    boom = KeyError("boom")
    with loopscope.profile() as prof:
        with pytest.raises(KeyError) as info:
            with loopscope.no_sync():
                raise boom
        X.item()  # after the block: no SyncError
    assert info.value is boom
    assert prof.summary()["syncs"]["count"] == 1


def run_in_thread(target):
    thread = threading.Thread(target=target)
    thread.start()
    thread.join()


def test_sync_on_a_worker_thread_is_raised_when_its_block_ends():
    """A thread other than the main thread gets no pending call: its sync is
    raised at block exit, still naming the line that synced."""
    seen = {"ran": []}

    def worker():
        try:
            with loopscope.no_sync():
                seen["line"] = here() + 1
                X.item()
                seen["ran"].append("after the sync")
        except loopscope.SyncError as error:
            seen["error"] = error

    run_in_thread(worker)
    error = seen["error"]
    assert seen["ran"] == ["after the sync"]
    assert (error.file, error.line, error.kind) == (THIS_FILE, seen["line"], "item")
    assert error.function == "test_sync_on_a_worker_thread_is_raised_when_its_block_ends.<locals>.worker"


def test_worker_exception_wins_over_its_pending_sync_error():
    seen = {}

    def worker():
        try:
            with loopscope.no_sync():
                X.item()
                raise ValueError("user error")
        except Exception as error:  # noqa: BLE001 (which one comes out is the point)
            seen["error"] = error

    run_in_thread(worker)
    assert type(seen["error"]) is ValueError and str(seen["error"]) == "user error"
    assert not _core.active()


def test_only_the_thread_that_entered_is_guarded():
    """Per the strict-mode contract (csrc/capture/ls_strict.h: 'the first host wait
    on the armed thread'): a sync of another thread is not raised."""
    with loopscope.profile() as prof:
        with loopscope.no_sync():
            run_in_thread(X.item)
            ran = True
    assert ran
    assert prof.summary()["syncs"]["count"] == 1


def test_runtime_async_copy_alone_is_not_stopped():
    """An async copy waits only into pageable memory.  Strict mode asks the
    driver only at the driver's own copy calls (cuMemcpyDtoHAsync, which the
    runtime's cudaMemcpyAsync goes through), so the runtime call alone
    passes; the profile still reports it from the copy's activity record."""
    with loopscope.profile() as prof:
        _testhooks._inject("memcpy", [(10, 20, 0, 7, COPY_CORR, None, 4, 2, 1)])  # pageable
        with loopscope.no_sync():
            line = here() + 1
            X.upload()
    (site,) = prof.summary()["syncs"]["sites"]
    assert (site["line"], site["kind"]) == (line, "memcpy")


@needs_no_driver
def test_without_a_driver_a_driver_async_copy_passes():
    """With no driver to ask whether the host memory is pageable, strict mode
    lets a driver async copy through (never a false SyncError)."""
    host = ctypes.create_string_buffer(64)  # plain pageable memory
    copy = c_callable([("cuMemcpyDtoHAsync_v2", 2_000, 11, ctypes.addressof(host))])
    ran = []
    with loopscope.no_sync():
        copy()
        ran.append("after")
    assert ran == ["after"]


# ---------------------------------------------------------------------------
# Without a GPU.

@pytest.fixture
def fresh_warnings(monkeypatch):
    """Forget which LoopscopeWarnings were already given in this process."""
    monkeypatch.setattr(_profile, "_warned", set())


@needs_no_driver
def test_alone_without_gpu_warns_once_and_still_runs(fresh_warnings):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", loopscope.LoopscopeWarning)
        for _ in range(2):
            ran = []
            line = here() + 1
            with loopscope.no_sync():
                ran.append("body")
            assert ran == ["body"]
    loopscope_warnings = [w for w in caught if issubclass(w.category, loopscope.LoopscopeWarning)]
    assert len(loopscope_warnings) == 1
    warning = loopscope_warnings[0]
    assert str(warning.message) == (
        "loopscope.no_sync: syncs cannot be watched here: no NVIDIA GPU driver on this machine "
        "(libcuda.so.1 cannot be opened). The block runs unguarded.")
    assert (warning.filename, warning.lineno) == (THIS_FILE, line)
    assert not _core.active()


@needs_no_driver
def test_warning_made_an_error_leaves_no_session(fresh_warnings):
    with warnings.catch_warnings():
        warnings.simplefilter("error", loopscope.LoopscopeWarning)
        with pytest.raises(loopscope.LoopscopeWarning):
            with loopscope.no_sync():
                pass
    leaked = _core.active()
    if leaked:
        _core.stop()  # leave nothing for the next test
    assert not leaked


# ---------------------------------------------------------------------------
# With a GPU: strict mode asks the real driver about a fake copy's host memory.

def _cuda_torch():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


needs_cuda = pytest.mark.skipif(_cuda_torch() is None, reason="needs an NVIDIA GPU visible to PyTorch")


@pytest.fixture
def cuda_context():
    """A current CUDA context on this thread (as inside any real copy call),
    made before strict mode is armed."""
    torch = _cuda_torch()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    return torch


@needs_cuda
def test_driver_async_copy_into_pageable_memory_raises(cuda_context):
    host = ctypes.create_string_buffer(64)  # plain pageable memory
    copy = c_callable([("cuMemcpyDtoHAsync_v2", 2_000, 11, ctypes.addressof(host))])
    ran = []
    with pytest.raises(loopscope.SyncError) as info:
        with loopscope.no_sync():
            line = here() + 1
            copy()
            ran.append("after")
    assert ran == []
    assert (info.value.line, info.value.kind, info.value.api) == (line, "memcpy", "cuMemcpyDtoHAsync")


@needs_cuda
def test_driver_async_copy_into_pinned_memory_passes(cuda_context):
    pinned = cuda_context.empty(64, dtype=cuda_context.uint8, pin_memory=True)
    copy = c_callable([("cuMemcpyDtoHAsync_v2", 2_000, 11, pinned.data_ptr())])
    ran = []
    with loopscope.no_sync():
        copy()
        ran.append("after")
    assert ran == ["after"]
