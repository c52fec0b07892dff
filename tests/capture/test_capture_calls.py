"""Capture.calls(): the blocking calls as dicts, their frames made once per
distinct frame within one list (a loop's calls share a few stacks) and
shared by the calls that have them -- with each call's own values, and
nothing carried from one list or one profile to the next.

The source positions of frames seen before: ls_pystack keeps the positions
it found (a big function's took ~3 us a frame to find), so each must still
be the frame's own: the same site across profiles, functions made again
under one file and name with another layout, and (through the `_locate_as`
hook) a code object made at the address of a dropped one, as torch.compile
remakes code.  Expected positions come from the source text written here
and from CPython's co_positions(), never from loopscope."""
from __future__ import annotations

import functools
import gc
import sys

import pytest

import loopscope
from loopscope import _testhooks

SYNC = [("cudaStreamSynchronize", 1_000)]


def here() -> int:
    return sys._getframe(1).f_lineno


def sync_from_a():
    _testhooks._inject_calls(SYNC)
    return here() - 1


def sync_from_b():
    _testhooks._inject_calls(SYNC)
    return here() - 1


def innermost(call):
    file, function, _first, line, *_ = call["frames"][0]
    return file, function, line


def test_calls_of_one_stack_share_their_frames():
    with loopscope.profile() as prof:
        lines = []
        for _ in range(3):
            lines.append(sync_from_a())  # one line: one stack, three times
        lines.append(sync_from_b())
    calls = prof.capture.calls()
    assert [innermost(c) for c in calls] == (
        [(__file__, "sync_from_a", lines[0])] * 3 + [(__file__, "sync_from_b", lines[3])])
    first, second, third, other = (c["frames"] for c in calls)
    assert first == second == third and first != other
    assert all(a is b for a, b in zip(first, second))  # the same tuples, made once
    assert first[0] is not other[0]
    # each call its own list
    assert first is not second


def test_each_list_and_each_profile_makes_its_own():
    with loopscope.profile() as one:
        line_a = sync_from_a()
    with loopscope.profile() as two:
        line_b = sync_from_b()
    first = one.capture.calls()
    assert [innermost(c) for c in first] == [(__file__, "sync_from_a", line_a)]
    assert [innermost(c) for c in two.capture.calls()] == [(__file__, "sync_from_b", line_b)]
    again = one.capture.calls()
    assert again == first and again[0]["frames"][0] is not first[0]["frames"][0]


def test_the_shared_frames_are_released_with_the_lists():
    with loopscope.profile() as prof:
        for _ in range(50):
            sync_from_a()
    prof.capture.calls()  # warm: what the first call allocates once
    gc.collect()
    before = len(gc.get_objects())
    for _ in range(20):
        calls = prof.capture.calls()
        assert len(calls) == 50
        del calls
    gc.collect()
    assert len(gc.get_objects()) - before < 10


# -- source positions kept per (code, offset) ----------------------------------
FILE = "<remade>"


def source(sync_line: int, lines: int = 8, blank_lines_before: int = 0) -> str:
    """def f() over `lines` lines whose sync is on `sync_line` (1-based; line
    1 is the def), after `blank_lines_before` empty lines."""
    body = ["    x = 1"] * (lines - 1)
    body[sync_line - 2] = "    sync(); x = 2"
    return "\n" * blank_lines_before + "\n".join(["def f():", *body]) + "\n"


def make(sync_line: int, blank_lines_before: int = 0):
    # a C callable: f's frame is the innermost Python one, the site
    namespace = {"sync": functools.partial(_testhooks._inject_calls, SYNC)}
    exec(compile(source(sync_line, blank_lines_before=blank_lines_before), FILE, "exec"),
         namespace)
    return namespace["f"]


def sites_of(fn, times: int = 2):
    with loopscope.profile(trace=False, metrics=False) as prof:
        for _ in range(times):
            fn()
    return [(s["file"], s["line"], s["count"]) for s in prof.summary()["syncs"]["sites"]]


def test_a_site_seen_before_keeps_its_line_across_profiles():
    f = make(4)
    assert sites_of(f) == [(FILE, 4, 2)]
    assert sites_of(f) == [(FILE, 4, 2)]  # every frame now from the kept positions


def test_functions_made_again_with_another_layout_read_their_own_lines():
    for sync_line in (2, 3, 4, 5, 6, 7, 8, 2, 5):
        f = make(sync_line)
        assert sites_of(f) == [(FILE, sync_line, 2)], sync_line
        del f
        gc.collect()


def position(code, byte_offset):
    """CPython's own (line, col, end_line, end_col) of an instruction."""
    line, end_line, col, end_col = list(code.co_positions())[byte_offset // 2]
    return (line, col, end_line, end_col)


def call_offset(code, line):
    """The byte offset of an instruction on `line` (the sync's call)."""
    return next(2 * i for i, p in enumerate(code.co_positions()) if p[0] == line)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Python 3.10 keeps no positions")
def test_a_code_object_made_where_a_dropped_one_was_reads_its_own_position():
    first = make(3).__code__
    offset = call_offset(first, 3)
    assert _testhooks._locate_as(first, offset, first) == position(first, offset)  # now kept
    # Another layout (the sync five lines lower) at the same address: its own
    # position, not the kept one.
    other = make(8).__code__
    assert position(other, offset) != position(first, offset)
    assert _testhooks._locate_as(other, offset, first) == position(other, offset)
    # The same line table two lines further down the file: the same offsets,
    # a first line two greater.
    lower = make(3, blank_lines_before=2).__code__
    assert lower.co_linetable == first.co_linetable
    assert _testhooks._locate_as(first, offset, first) == position(first, offset)  # first's again
    assert _testhooks._locate_as(lower, offset, first) == position(lower, offset)
    assert position(lower, offset)[0] == position(first, offset)[0] + 2


def test_locate_as_refuses_an_offset_outside_the_code():
    code = make(3).__code__
    with pytest.raises(ValueError, match="byte_offset"):
        _testhooks._locate_as(code, len(code.co_code), code)
