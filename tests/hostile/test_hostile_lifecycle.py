"""Issue 14, conditions 6 and 7: a profile or a no_sync() block dropped
while open, no_sync() around a profile, no_sync() on several threads.

Nothing may stay stuck: the next profile or block must work, the user's code
runs to its end, and each drop is said once (a LoopscopeWarning).  Syncs are
faked through the real switchboard (_testhooks._inject_calls) from C-level
callables, so the innermost Python frame of a fake sync is the test's line.
"""
from __future__ import annotations

import functools
import gc
import itertools
import os
import sys
import threading
import warnings
import weakref

import pytest

import loopscope
from loopscope import _core, _testhooks
from loopscope.live import _options, _session

THIS_FILE = __file__
SYNC = [("cudaStreamSynchronize", 1_000)]


def here() -> int:
    return sys._getframe(1).f_lineno


def c_callable(calls):
    """Injects `calls` through the switchboard with no Python frame of its own."""
    inject = functools.partial(_testhooks._inject_calls, release_gil=True)
    return functools.partial(next, map(inject, itertools.repeat(calls)))


sync = c_callable(SYNC)  # a stream sync, as x.item() makes


def loopscope_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, loopscope.LoopscopeWarning)]


def one_step_profile() -> list[str]:
    """A whole profile of one step; the names of its steps."""
    with loopscope.profile() as prof:
        with prof.step():
            pass
    return [s["name"] for s in prof.summary()["steps"]]


# ---------------------------------------------------------------------------
# Condition 6: an entered Profile dropped without exit.

def test_dropped_profile_stops_itself_and_says_so_once():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = loopscope.profile()
        p.__enter__()
        ref = weakref.ref(p)
        del p
        assert ref() is None, "nothing else may keep a running profile alive"
        assert not _core.active()
        assert one_step_profile() == ["Step_0"]
        assert one_step_profile() == ["Step_0"]
    messages = loopscope_warnings(caught)
    assert [m for m in messages if "dropped while running" in m] == [
        "loopscope: a profile was dropped while running (its __enter__ ran, its __exit__ never "
        "did): it was stopped and its records discarded. Use `with loopscope.profile() as prof:`"]



def live(kind: type) -> int:
    return sum(type(o) is kind for o in gc.get_objects())


def test_a_finished_dropped_profile_and_its_capture_go_by_reference_counting(tmp_path):
    """No cycle keeps a finished profile's records: with the collector off,
    the Profile, its Capture (the C records) and its cached Models are freed
    at `del`, whatever was read from it (a Capture and its Models once made
    a cycle, and a steps=module Profile and its hooks another; a watch
    drops a profile per block)."""
    torch = pytest.importorskip("torch")
    module = torch.nn.Linear(2, 2)
    was_on = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        base = (live(_core.Capture), live(_core.Model), live(loopscope.Profile))
        for options in ({}, {"trace": False}, {"steps": module}):
            prof = loopscope.profile(**options)
            with prof:
                for _ in range(3):
                    if "steps" in options:
                        module(torch.zeros(1, 2))
                    else:
                        with prof.step():
                            sync()
            assert len(prof.summary()["steps"]) == 3
            prof.model.steps()
            prof.capture.model(1.0, 2.0, steps=[0, 1])  # a second cached model
            prof.report()
            prof.export_trace(tmp_path / "t.json")
            prof.save_recording(tmp_path / "r.loopscope.json.gz")
            assert live(_core.Capture) == base[0] + 1 and live(_core.Model) == base[1] + 2
            ref = weakref.ref(prof)
            del prof
            assert ref() is None, options
            assert (live(_core.Capture), live(_core.Model), live(loopscope.Profile)) == base
        # A Model kept past its Profile keeps the records it reads, then goes too.
        with loopscope.profile(trace=False) as prof:
            with prof.step():
                sync()
        model = prof.model
        del prof
        assert live(_core.Capture) == base[0] and len(model.steps()) == 1
        del model
        assert (live(_core.Capture), live(_core.Model)) == base[:2]
    finally:
        if was_on:
            gc.enable()

def test_the_entry_site_skips_every_file_of_the_package_subpackages_too():
    """Where a profile was entered is the first frame outside loopscope: a
    profile the CLI (surfaces/) or a reader (readers/) enters is placed at
    the user's line, not in loopscope's own file."""
    from loopscope import _profile
    from loopscope.readers import _analyze
    from loopscope.surfaces import _cli

    assert _profile._is_ours(_profile.__file__)
    assert _profile._is_ours(_cli.__file__) and _profile._is_ours(_analyze.__file__)
    assert not _profile._is_ours(__file__)
    package = os.path.dirname(_profile.__file__)
    assert not _profile._is_ours(package + "_extras" + os.sep + "x.py")  # a sibling folder


def test_profile_in_a_reference_cycle_blocks_until_collected_and_names_its_line():
    """A dropped profile kept alive by a cycle still runs: the next profile()
    says where it was entered; once collected, the next one works."""
    p = loopscope.profile()
    line = here() + 1
    p.__enter__()
    p.cycle = p
    del p
    with pytest.raises(RuntimeError) as info:
        with loopscope.profile():
            pass
    assert str(info.value) == (
        f"a loopscope profile is already running (entered at {THIS_FILE}:{line}): profiles do "
        "not nest (CUPTI has one owner per process); use loopscope.range() inside it, or exit "
        "it first")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert any("dropped while running" in m for m in loopscope_warnings(caught))
    assert one_step_profile() == ["Step_0"]


def test_profile_dropped_while_the_session_lock_is_held_is_stopped_by_the_next_start():
    """A finalizer never waits for the lock (it may run inside its holder):
    the next start closes the dropped profile instead."""
    p = loopscope.profile()
    p.__enter__()
    with _session._lock:
        del p
        assert _core.active()  # could not stop it here
    assert one_step_profile() == ["Step_0"]
    assert not _core.active()


def test_live_profile_still_refuses_a_second_one():
    """Not a drop: an open profile that is still referenced keeps running."""
    outer = loopscope.profile()
    outer.__enter__()
    try:
        with pytest.raises(RuntimeError, match="already running"):
            loopscope.profile().__enter__()
        assert _core.active()
    finally:
        outer.__exit__(None, None, None)
    assert outer.summary()["host_ms"] >= 0


def test_dropped_no_sync_block_frees_its_thread():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        guard = loopscope.no_sync()
        guard.__enter__()
        ref = weakref.ref(guard)
        del guard
        assert ref() is None, "strict mode must not keep a block alive"
        assert not _core.active()
        with pytest.raises(loopscope.SyncError) as info:
            with loopscope.no_sync():  # this thread can be guarded again
                line = here() + 1
                sync()
    assert info.value.line == line
    assert sum("dropped while open" in m for m in loopscope_warnings(caught)) == 1


def test_threads_ending_inside_no_sync_do_not_use_up_the_table():
    """A thread that ends inside its block frees its slot at the next start:
    twice as many such threads as the table holds, one after the other."""
    kept, errors = [], []

    def leave_open():
        try:
            guard = loopscope.no_sync()
            guard.__enter__()
            kept.append(guard)  # alive, but its thread ends
        except Exception as error:  # noqa: BLE001 (the assertion says which)
            errors.append(error)

    for _ in range(2 * 64 + 1):
        t = threading.Thread(target=leave_open)
        t.start()
        t.join()
    assert errors == []
    del kept[:]
    with pytest.raises(loopscope.SyncError):
        with loopscope.no_sync():
            sync()
    assert not _core.active()


# ---------------------------------------------------------------------------
# Condition 7: no_sync() is not a profile, and is per thread.

def test_profile_inside_no_sync_runs_and_strict_mode_stays_on():
    lines, ran = [], []
    with loopscope.no_sync():
        with loopscope.profile() as prof:
            with prof.step():
                with pytest.raises(loopscope.SyncError) as inside:
                    lines.append(here() + 1)
                    sync()
        with pytest.raises(loopscope.SyncError) as after:
            lines.append(here() + 1)
            sync()  # the profile has ended, the block goes on guarding
        ran.append("end of block")
    assert ran == ["end of block"]
    assert [inside.value.line, after.value.line] == lines
    summary = prof.summary()
    assert [s["name"] for s in summary["steps"]] == ["Step_0"]
    assert [(s["line"], s["count"]) for s in summary["syncs"]["sites"]] == [(lines[0], 1)]
    assert not _core.active()


def test_two_profiles_in_a_row_inside_one_no_sync_block():
    with loopscope.no_sync(allow={"stream_sync"}):
        assert one_step_profile() == ["Step_0"]
        assert one_step_profile() == ["Step_0"]
        sync()  # allowed
    assert not _core.active()


def run_threads(targets):
    threads = [threading.Thread(target=t) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "a thread hung"


def test_no_sync_on_two_threads_at_once():
    """Both blocks are open at the same time; each thread's sync is raised
    at its own block's end, with its own line."""
    both_inside = threading.Barrier(2, timeout=10)
    results: dict[str, object] = {}

    def worker(name):
        def run():
            try:
                with loopscope.no_sync():
                    both_inside.wait()
                    results[name + "_line"] = here() + 1
                    sync()
                    both_inside.wait()  # neither block ends before both synced
                    results[name + "_ran"] = True
            except BaseException as error:  # noqa: BLE001
                results[name] = error
        return run

    run_threads([worker("a"), worker("b")])
    for name in "ab":
        error = results[name]
        assert isinstance(error, loopscope.SyncError), error
        assert (error.file, error.line, error.kind) == (THIS_FILE, results[name + "_line"],
                                                          "stream_sync")
        assert results[name + "_ran"] is True
    assert not _core.active()


def test_worker_sync_before_a_profile_starts_is_raised_with_its_line():
    """A worker's sync is noted in the blocks' own session; the main thread
    then starts and ends a profile (the session changes hands twice); the
    worker's block still raises that sync, with its line."""
    synced, profiled = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def worker():
        try:
            with loopscope.no_sync():
                seen["line"] = here() + 1
                sync()
                synced.set()
                profiled.wait(10)
        except BaseException as error:  # noqa: BLE001
            seen["error"] = error

    t = threading.Thread(target=worker)
    t.start()
    assert synced.wait(10)
    assert one_step_profile() == ["Step_0"]
    profiled.set()
    t.join(30)
    error = seen["error"]
    assert isinstance(error, loopscope.SyncError)
    assert (error.file, error.line) == (THIS_FILE, seen["line"])
    assert not _core.active()


def test_a_token_that_outlived_its_session_is_reported_by_its_api_only():
    """The mechanism under the hand-over: a noted wait whose session ended
    (here stopped behind strict mode's back) never resolves to a call of the
    next session; it comes back as its API, with no frames."""
    _core.start(_options.core_start_values(trace=False, syncs=True, warm_up=0))
    _core._strict_arm(lambda call: None, False)
    try:
        stale = c_callable([("cudaDeviceSynchronize", 1_000)])
        stale()
        _core.stop()
        _core.start(_options.core_start_values(trace=False, syncs=True, warm_up=0))
        _testhooks._inject_calls([("cudaStreamSynchronize", 1_000)])  # same index, new session
    finally:
        call = _core._strict_disarm()
        _core.stop()
    assert (call["api"], call["frames"], call["stale"]) == ("cudaDeviceSynchronize", [], True)


def test_table_full_is_a_clear_error():
    """At most 64 threads inside no_sync() at once: the 65th is told so, and
    the others are unaffected."""
    count = 64 + 1
    inside = threading.Barrier(count, timeout=20)
    outcomes = []

    def worker():
        try:
            with loopscope.no_sync():
                inside.wait()
                inside.wait()
            outcomes.append("ok")
        except RuntimeError as error:
            outcomes.append(str(error))
            inside.wait()
            inside.wait()

    run_threads([worker] * count)
    assert sorted(outcomes) == ["loopscope.no_sync(): at most 64 threads can be inside "
                                "no_sync() blocks at once"] + ["ok"] * 64
    assert not _core.active()
