"""Capture.calls(): the blocking calls as dicts, their frames made once per
distinct frame within one list (a loop's calls share a few stacks) and
shared by the calls that have them -- with each call's own values, and
nothing carried from one list or one profile to the next."""
from __future__ import annotations

import gc
import sys

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
