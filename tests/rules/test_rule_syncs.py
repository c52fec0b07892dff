"""Rules of sync attribution that the rest of the suite left open: which step
a sync belongs to at the edges of steps, syncs of two threads at once, and
the kind of the copy methods.  Each test fails when its rule is changed
(tests/mutation/hand_mutants.toml names the mutants).  Expected figures
come from the scripted clock and a few lines of plain Python, never from
loopscope's own code."""
from __future__ import annotations

import collections
import copy
import functools
import importlib.util
import linecache
import sys
import threading

import loopscope
from loopscope import _testhooks

from fakes import c_callable

MS = 1_000_000
WAIT_NS = 1_000
device_sync = c_callable([("cudaDeviceSynchronize", WAIT_NS)])


def step_holding(t, steps):
    """The rule, in plain words: a sync belongs to the step whose host range
    [start, end] holds its start, both ends included; else to no step."""
    held = [i for i, (a, b) in enumerate(steps) if a <= t <= b]
    return held[-1] if held else None


def sync_steps(summary):
    """{site line: steps} and the per-step sync counts of a summary."""
    return ({site["line"]: site["steps"] for site in summary["syncs"]["sites"]},
            [step["syncs"] for step in summary["steps"]])


def test_a_sync_after_a_step_ended_belongs_to_no_step(test_clock):
    """Clock reads 1 ms apart: start (read 0), step 0 (reads 1-2), the sync
    (read 3), step 1 (reads 4-5).  The nearest step that began before the
    sync had already ended: the sync is outside every step."""
    test_clock.set(MS, MS)
    with loopscope.profile() as prof:
        with prof.step():
            pass
        line = sys._getframe().f_lineno + 1
        device_sync()
        with prof.step():
            pass
    s = prof.summary()
    steps = [(test_clock.at(1), test_clock.at(2)), (test_clock.at(4), test_clock.at(5))]
    assert [st["host_ms"] for st in s["steps"]] == [(b - a) / MS for a, b in steps]
    expected = step_holding(test_clock.at(3), steps)
    assert expected is None
    assert (s["syncs"]["in_steps"], s["syncs"]["outside_steps"]) == (0, 1)
    assert sync_steps(s) == ({line: []}, [0, 0])


def test_a_sync_at_the_exact_end_of_a_step_belongs_to_it(test_clock):
    """The clock is set back so the sync starts at the very nanosecond the
    step ended: both ends of a step are inside it."""
    test_clock.set(MS, MS)
    with loopscope.profile() as prof:
        with prof.step():
            pass
        _testhooks._set_test_clock(test_clock.at(2), MS)  # next read: step 0's end
        line = sys._getframe().f_lineno + 1
        device_sync()
        with prof.step():  # reads at(3), at(4)
            pass
    s = prof.summary()
    steps = [(test_clock.at(1), test_clock.at(2)), (test_clock.at(3), test_clock.at(4))]
    assert step_holding(test_clock.at(2), steps) == 0
    assert sync_steps(s) == ({line: [0]}, [1, 0])


def test_a_sync_at_the_exact_start_of_a_step_belongs_to_it(test_clock):
    """A step, then a second step in which the clock is set back so the sync
    starts at the nanosecond the step began."""
    test_clock.set(MS, MS)
    with loopscope.profile() as prof:
        with prof.step():  # reads at(1), at(2)
            pass
        with prof.step():  # enters at(3)
            _testhooks._set_test_clock(test_clock.at(3), MS)
            line = sys._getframe().f_lineno + 1
            device_sync()  # at(3) again; the step exits at(4)
    s = prof.summary()
    steps = [(test_clock.at(1), test_clock.at(2)), (test_clock.at(3), test_clock.at(4))]
    assert step_holding(test_clock.at(3), steps) == 1
    assert sync_steps(s) == ({line: [1]}, [0, 1])


def test_syncs_of_two_threads_at_once_are_two_syncs(test_clock):
    """Two threads wait on the device from the same line with the same stack
    and no launch: thread A (the one sorted first, the lower thread id) for
    1 ms, thread B for 1 us while A still waits.  Each thread waited: two
    syncs, the host blocked 1 ms + 1 us, not one sync of 1 ms."""
    test_clock.set(MS, 1_000)  # 1 us ticks
    long_ns, short_ns = MS, 1_000
    waits = {long_ns: c_callable([("cudaDeviceSynchronize", long_ns)]),
             short_ns: c_callable([("cudaDeviceSynchronize", short_ns)])}
    idents, roles = {}, {}
    ready = threading.Barrier(3)
    go = {name: threading.Event() for name in "ab"}
    done = {name: threading.Event() for name in "ab"}
    lines = []

    def worker(name):
        idents[name] = threading.get_ident()
        ready.wait()
        go[name].wait()
        lines.append(sys._getframe().f_lineno + 1)
        waits[roles[name]]()
        done[name].set()

    with loopscope.profile() as prof:
        threads = [threading.Thread(target=worker, args=(name,)) for name in "ab"]
        for t in threads:
            t.start()
        ready.wait()
        first, second = sorted("ab", key=idents.get)
        roles[first], roles[second] = long_ns, short_ns
        go[first].set()
        done[first].wait()
        go[second].set()
        for t in threads:
            t.join()
    s = prof.summary()["syncs"]
    # plain model: syncs never span threads; each thread's wait counts whole
    per_thread = {idents[first]: [long_ns], idents[second]: [short_ns]}
    expected_count = sum(len(w) for w in per_thread.values())
    expected_ms = sum(sum(w) for w in per_thread.values()) / MS
    assert lines[0] == lines[1]
    assert (s["count"], s["blocked_ms"]) == (expected_count, expected_ms) == (2, 1.001)
    site, = s["sites"]
    assert (site["line"], site["kind"], site["count"]) == (lines[0], "synchronize", 2)


class FakeHostTensor:
    """A host tensor whose copy method waits for the stream, with no copy
    call of its own before the wait (a copy loopscope does not watch, as
    one device to device): only the site's syntax says what the user did,
    a copy (a wait after a copy call of its line would be named by that
    copy anyway: test_no_sync.py)."""
    cuda = copy_ = pin_memory = c_callable([("cudaStreamSynchronize", WAIT_NS)])


H = FakeHostTensor()


def test_copy_methods_are_kind_memcpy():
    """.cuda(), .copy_(src) and .pin_memory() at the site: kind memcpy, even
    though the API that waited is a stream sync."""
    with loopscope.profile() as prof:
        base = sys._getframe().f_lineno
        H.cuda()
        _testhooks._inject_calls([("cudaLaunchKernel", 0)])
        H.copy_(H)
        _testhooks._inject_calls([("cudaLaunchKernel", 0)])
        H.pin_memory()
    s = prof.summary()["syncs"]
    got = sorted((site["line"], site["call"], site["kind"]) for site in s["sites"])
    assert got == [(base + 1, "H.cuda()", "memcpy"), (base + 3, "H.copy_(H)", "memcpy"),
                   (base + 5, "H.pin_memory()", "memcpy")]
    assert s["by_kind"] == {"memcpy": 3}
    assert s["unjudged_async_copies"] == 0
    assert all(site["apis"] == {"cudaStreamSynchronize": 1} for site in s["sites"])


def test_a_sync_in_a_step_after_other_threads_steps_belongs_to_it(test_clock):
    """The main thread's step 0 is open while a worker thread runs three
    whole steps; then the main thread syncs.  Three steps began after step 0
    and ended before the sync: the sync is still step 0's."""
    test_clock.set(MS, MS)
    worker_steps = 3

    def worker(prof):
        for _ in range(worker_steps):
            with prof.step():
                pass

    with loopscope.profile() as prof:
        with prof.step():                         # read 1
            t = threading.Thread(target=worker, args=(prof,))
            t.start()                             # reads 2-7
            t.join()
            line = sys._getframe().f_lineno + 1
            device_sync()                         # read 8
        # exit: read 9
    s = prof.summary()
    steps = [(test_clock.at(1), test_clock.at(9))] + [
        (test_clock.at(2 + 2 * i), test_clock.at(3 + 2 * i)) for i in range(worker_steps)]
    assert [st["host_ms"] for st in s["steps"]] == [(b - a) / MS for a, b in steps]
    assert step_holding(test_clock.at(8), steps) == 0
    assert sync_steps(s) == ({line: [0]}, [1, 0, 0, 0])



def test_a_sync_on_a_thread_without_a_step_looks_past_ended_steps(test_clock):
    """The main thread's step 0 is open; a worker thread runs three whole
    steps and then, with no range of its own open, syncs.  Its step is the
    step open on another thread at that time, the one that began last: the
    three later steps have ended, so it is step 0, not no step."""
    test_clock.set(MS, MS)
    worker_steps = 3
    lines = []

    def worker(prof):
        for _ in range(worker_steps):
            with prof.step():                     # reads 2-7
                pass
        lines.append(sys._getframe().f_lineno + 1)
        device_sync()                             # read 8

    with loopscope.profile() as prof:
        with prof.step():                         # read 1
            t = threading.Thread(target=worker, args=(prof,))
            t.start()
            t.join()
        # exit: read 9
    s = prof.summary()
    steps = [(test_clock.at(1), test_clock.at(9))] + [
        (test_clock.at(2 + 2 * i), test_clock.at(3 + 2 * i)) for i in range(worker_steps)]
    assert [st["host_ms"] for st in s["steps"]] == [(b - a) / MS for a, b in steps]
    # the rule in plain words: of the steps open at the sync, the one that began last
    sync_at = test_clock.at(8)
    open_then = [i for i, (a, b) in enumerate(steps) if a <= sync_at <= b]
    expected = max(open_then, key=lambda i: steps[i][0])
    assert expected == 0
    assert sync_steps(s) == ({lines[0]: [expected]}, [1, 0, 0, 0])


PAGEABLE = 1


def pageable_copy_record(corr):
    """The memcpy record saying the async copy `corr` used pageable memory."""
    return (10, 20, 0, 7, corr, None, 4, 2, PAGEABLE)


def test_a_launch_between_a_copy_and_its_wait_splits_them():
    """An async copy to pageable memory (it waits), a kernel launch, then a
    stream sync, all from one line of one thread: the launch ends the first
    sync, so the host waited twice."""
    calls = c_callable([("cudaMemcpyAsync", 2_000, 31), ("cudaLaunchKernel", 0),
                        ("cudaStreamSynchronize", WAIT_NS)])
    with loopscope.profile() as prof:
        _testhooks._inject("memcpy", [pageable_copy_record(31)])
        calls()
    s = prof.summary()["syncs"]
    assert s["count"] == 2
    # each wait is named by its own call: the copy, then the stream sync
    assert sorted((x["kind"], x["count"], x["apis"]) for x in s["sites"]) == [
        ("memcpy", 1, {"cudaMemcpyAsync": 1}), ("stream_sync", 1, {"cudaStreamSynchronize": 1})]


copy_only = c_callable([("cudaMemcpyAsync", 2_000, 32)])
stream_wait = c_callable([("cudaStreamSynchronize", WAIT_NS)])


def test_a_copy_and_a_wait_on_different_lines_are_two_syncs():
    """A copy to pageable memory on one line, a stream sync on the next, no
    launch between: not one `.item()`, two syncs at two sites."""
    with loopscope.profile() as prof:
        _testhooks._inject("memcpy", [pageable_copy_record(32)])
        line = sys._getframe().f_lineno + 1
        copy_only()
        stream_wait()
    s = prof.summary()["syncs"]
    assert s["count"] == 2
    assert sorted((x["line"], x["count"]) for x in s["sites"]) == [(line, 1), (line + 1, 1)]


# -- where a site is and what it shows: the source text rules ----------------

to_float = c_callable([("cudaDeviceSynchronize", WAIT_NS)], len, float)  # float(t) -> a float


class Scalar:
    """A tensor-like object whose float() waits for the device."""
    __float__ = to_float


def load(tmp_path, name, source, **names):
    """Imports `source` as module `name` from a real file (its lines are read
    back for the report), with `names` in its namespace."""
    path = tmp_path / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update(names)
    spec.loader.exec_module(module)
    return module, path


def test_a_sync_on_the_first_line_at_column_0(tmp_path):
    """A script's top-level statement: line 1, column 0.  Its exact text and
    its syntax's kind (float() reads a value: item) are still found."""
    with loopscope.profile() as prof:
        load(tmp_path, "top_level", "float(t)\n", t=Scalar())
    site, = prof.summary()["syncs"]["sites"]
    assert (site["line"], site["code"], site["call"], site["kind"]) == (1, "float(t)", "float(t)",
                                                                        "item")


def test_a_call_over_several_lines_is_shown_whole(tmp_path):
    """An instruction spanning four lines: its text is every line of it,
    joined with single spaces."""
    source = "def read(t):\n    return float(\n        t\n        or None\n    )\n"
    with loopscope.profile() as prof:
        module, _ = load(tmp_path, "multi_line", source)
        module.read(Scalar())
    site, = prof.summary()["syncs"]["sites"]
    assert (site["line"], site["call"], site["kind"]) == (2, "float( t or None )", "item")


def test_a_file_that_no_longer_parses_keeps_its_lines_but_not_its_kind(tmp_path):
    """The source changed after the run into text that does not parse (as a
    .pyx file would not either): the site keeps its line and text; the kind
    comes from the API that waited, since the syntax cannot be read."""
    source = "def read(t):\n    return float(t)\n"
    with loopscope.profile() as prof:
        module, path = load(tmp_path, "edited", source)
        module.read(Scalar())
    path.write_text(source + ")))\n", encoding="utf-8")
    linecache.checkcache(str(path))
    site, = prof.summary()["syncs"]["sites"]
    assert (site["line"], site["code"], site["call"], site["kind"]) == (
        2, "return float(t)", "float(t)", "synchronize")


def test_a_sync_inside_the_standard_library_is_the_callers(tmp_path):
    """copy.copy (pure Python, in the standard library) calls the object's
    __copy__, which waits: the site is the user's line that called
    copy.copy, not a line of copy.py."""

    class Copied:
        __copy__ = device_sync

    with loopscope.profile() as prof:
        line = sys._getframe().f_lineno + 1
        copy.copy(Copied())
    site, = prof.summary()["syncs"]["sites"]
    assert (site["file"], site["line"], site["call"]) == (__file__, line, "copy.copy(Copied())")


class Truthy:
    """A tensor-like object whose truth value waits for the device."""
    __bool__ = c_callable([("cudaDeviceSynchronize", WAIT_NS)], len, bool)


# d[key] of a missing key calls the factory with no argument, from C: a
# subscript that waits, with no Python frame of its own
Lookup = functools.partial(collections.defaultdict, c_callable([("cudaDeviceSynchronize", WAIT_NS)]))
nonzero = unique = c_callable([("cudaDeviceSynchronize", WAIT_NS)])  # as `from torch import nonzero`


def test_the_kind_comes_from_the_syntax_around_the_wait():
    """The API that waited is a device sync every time; what the user wrote
    decides the kind: a truth test inside `and` or `not` is bool, a
    subscript in the branch (not the test) of a conditional expression is
    nonzero, and a bare call of a data-dependent function is nonzero."""
    t, d = Truthy(), Lookup()
    with loopscope.profile() as prof:
        base = sys._getframe().f_lineno
        a = t and 1
        b = not t
        c = d[0] if a else None
        nonzero(c)
        unique(b)
    got = sorted((s["line"] - base, s["call"], s["kind"]) for s in prof.summary()["syncs"]["sites"])
    assert got == [(1, "t", "bool"), (2, "t", "bool"), (3, "d[0]", "nonzero"),
                   (4, "nonzero(c)", "nonzero"), (5, "unique(b)", "nonzero")]


def test_a_truth_test_over_two_lines_shows_the_whole_tested_expression():
    """`if` and `while` whose tested expression spans two lines: the site is
    the statement's line, its text the whole tested expression."""
    with loopscope.profile() as prof:
        base = sys._getframe().f_lineno
        if Truthy(
        ):
            pass
        while Truthy(
        ):
            break
    got = sorted((s["line"] - base, s["code"], s["call"], s["kind"])
                 for s in prof.summary()["syncs"]["sites"])
    assert got == [(1, "if Truthy(", "Truthy( )", "bool"), (4, "while Truthy(", "Truthy( )", "bool")]


class DataDependent:
    """A tensor-like object whose data-dependent ops wait for the device,
    each a C-level call (no Python frame of its own), as torch's are."""
    masked_select = nonzero = argwhere = bincount = repeat_interleave = unique = \
        c_callable([("cudaDeviceSynchronize", WAIT_NS)])
    __getitem__ = c_callable([("cudaDeviceSynchronize", WAIT_NS)])


def test_data_dependent_ops_are_kind_nonzero_each():
    """Issue 39, kind by kind: an op whose output size depends on the GPU's
    data must wait for it: masked_select, nonzero, argwhere, bincount,
    repeat_interleave, and boolean-mask indexing x[mask] are each one sync
    of kind "nonzero" at its own line."""
    x, mask = DataDependent(), [True, False]
    with loopscope.profile() as prof:
        base = sys._getframe().f_lineno
        x.masked_select(mask)
        x.nonzero()
        x.argwhere()
        x.bincount()
        x.repeat_interleave(mask)
        x[mask]
    got = sorted((s["line"] - base, s["call"], s["kind"]) for s in prof.summary()["syncs"]["sites"])
    assert got == [(1, "x.masked_select(mask)", "nonzero"), (2, "x.nonzero()", "nonzero"),
                   (3, "x.argwhere()", "nonzero"), (4, "x.bincount()", "nonzero"),
                   (5, "x.repeat_interleave(mask)", "nonzero"), (6, "x[mask]", "nonzero")]
    assert prof.summary()["syncs"]["by_kind"] == {"nonzero": 6}
