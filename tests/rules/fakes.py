"""Fakes shared by the rule tests: API calls that go through the real
switchboard from a real Python line (see tests/capture/test_syncs.py for the idea),
and synthetic GPU timelines whose figures the tests work out themselves."""
from __future__ import annotations

import functools
import itertools

from loopscope import _testhooks


def c_callable(calls, *then):
    """A callable made of C functions only, so the innermost Python frame of
    its API calls is the caller's line.  Each call injects `calls` through
    the switchboard (each call reads the profile clock once, at enter; its
    exit is enter + its duration); one positional argument is ignored."""
    results = map(functools.partial(_testhooks._inject_calls), itertools.repeat(calls))
    for f in then:
        results = map(f, results)
    return functools.partial(next, results)


def kernel(start, end, corr, name="k", device=0, stream=7):
    return (start, end, device, stream, corr, name)


def sample(start, end, **figures):
    return (start, end, {k: float(v) for k, v in figures.items()})
