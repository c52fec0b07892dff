"""ls_ids (csrc/common/ls_ids.c): sorted sets of ids, as the finish's window filter
and thread widening use them -- ids in order already, shuffled, repeated,
all one value, bytes that all ids share and bytes that differ -- against
Python's own sorted(set(...)) and list.index."""
from __future__ import annotations

import random

import pytest

from loopscope import _testhooks


def cases(bits):
    rng = random.Random(bits)
    top = (1 << bits) - 1
    yield []
    yield [7]
    yield list(range(100))                                   # in order: no sort
    yield [5] * 1000                                         # one thread's launches
    yield list(range(1000, 0, -1))                           # reversed
    pairs = [i + (1 if i % 2 == 0 else -1) for i in range(2, 2002)]
    yield pairs                                              # runtime/driver pairs swapped
    yield [rng.randrange(0, 300) for _ in range(5000)]       # many repeats
    yield [rng.randrange(0, top + 1) for _ in range(5000)]   # every byte differs
    yield [top - rng.randrange(0, 256) for _ in range(3000)]  # only the low byte differs
    yield [0, top, 0, top, 1]
    if bits == 64:
        tid = 140_670_369_606_528
        yield [tid, tid + (1 << 40), tid] * 50 + [3]        # thread ids wider than 32 bits


@pytest.mark.parametrize("bits", [32, 64])
def test_sort_unique_and_find_are_pythons(bits):
    for ids in cases(bits):
        want = sorted(set(ids))
        probes = [p for p in want[::7] + [v + 1 for v in want[:20]] + [0, (1 << bits) - 1]
                  if p < 1 << bits]
        got, found = _testhooks._ids_sort_unique(ids, bits, probes)
        assert got == want, ids[:10]
        assert found == [want.index(p) if p in want else -1 for p in probes]


def test_bad_width_is_refused():
    with pytest.raises(ValueError, match="bits must be 32 or 64"):
        _testhooks._ids_sort_unique([1], 16)
    with pytest.raises(ValueError, match=r"ids\[1\] does not fit 32 bits"):
        _testhooks._ids_sort_unique([1, 1 << 32], 32)
