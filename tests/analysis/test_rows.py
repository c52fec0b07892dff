"""Row dicts built in C from a declared program (loopscope.figures._rows.build,
_core._rows): each op against the same figure computed here in Python, the
rounding against round(), and rows that share one key table: the same
plain dicts, in less memory."""
from __future__ import annotations

import json
import platform
import sys

import pytest

import math
import struct
from array import array

from hypothesis import given, settings, strategies as st

from loopscope import _core
from loopscope.figures import _rows

KEYS = ("index", "name", "host_ms", "gpu_ms", "gaps", "verdict", "samples", "fill_pct",
        "comm_ms", "compute_ms", "graph_readiness", "kernels", "memcpys", "syncs",
        "sm_active_pct", "dram_pct", "gr_active_pct", "fill_known_pct", "gpu_span_ms",
        "sm_active_busy_pct", "dram_busy_pct", "warp_occupancy_busy_pct")


def test_a_template_equals_its_values_in_their_order():
    values = {key: i for i, key in enumerate(KEYS)}
    template = _rows.template(values)
    assert type(template) is dict
    assert template == values and list(template) == list(KEYS)
    assert _rows.template({"b": 1, "a": 2}) == {"b": 1, "a": 2}
    assert list(_rows.template({"b": 1, "a": 2})) == ["b", "a"]


def test_rows_are_the_zipped_columns_each_its_own_dict():
    columns = [[f"{key}{row}" if row % 3 else None for row in range(50)] for key in KEYS]
    want = [dict(zip(KEYS, values)) for values in zip(*columns)]
    shared = _rows.build(50, {key: _rows.item(c) for key, c in zip(KEYS, columns)})[0]
    assert shared == want
    assert all(type(row) is dict and list(row) == list(KEYS) for row in shared)
    assert json.dumps(shared) == json.dumps(want)
    # each row its own: a change to one (a new key too) leaves the others
    shared[4]["index"] = "changed"
    shared[5]["extra"] = 1
    assert shared[3] == want[3] and shared[6] == want[6] and "extra" not in shared[4]
    with pytest.raises(ValueError, match="key 'name': a column of 49 items for 50 rows"):
        _rows.build(50, {"index": _rows.item(columns[0]), "name": _rows.item(columns[1][1:])})


@pytest.mark.skipif(platform.python_implementation() != "CPython",
                    reason="key-sharing dicts are CPython's")
def test_rows_from_a_template_share_their_keys():
    """The point of it: a copy of the template holds only its values."""
    template = _rows.template(dict.fromkeys(KEYS))
    row = template.copy()
    row["index"], row["name"] = 7, "Step_7"
    assert sys.getsizeof(row) < sys.getsizeof(dict(row)) / 2


def column(values, code="Q"):
    return memoryview(array(code, values))


def same_float(a, b):
    """Equal as Python floats, the sign of a zero included (None == None)."""
    if a is None or b is None:
        return a is b
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


_DOUBLE = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-10**9, 10**9).map(lambda k: k / 1000 + 0.0005),  # ties in decimal
    st.integers(-10**9, 10**9).map(lambda k: (k + 0.5) / 100),
    st.integers(0, 2**64 - 1).map(lambda b: struct.unpack("d", struct.pack("Q", b))[0]),
    st.sampled_from([0.0, -0.0, 0.005, 0.015, 2.675, 1e-300, 2.0**52 + 0.5, 1e16,
                     float("inf"), float("-inf"), float("nan")]))


@settings(max_examples=2000, deadline=None)
@given(_DOUBLE, st.integers(0, 12))
def test_round_is_pythons_round(x, digits):
    """The rows' rounding (a fast path unless a decimal tie is within the
    product's rounding error) gives round()'s float, bit for bit."""
    got, want = _core._round(x, digits), round(x, digits)
    assert same_float(got, want) or (math.isnan(got) and math.isnan(want))


_NS = st.one_of(st.integers(0, 10**7), st.integers(0, 2**53 + 10),
                st.integers(2**53 - 5, 2**64 - 1))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_NS, _NS, _NS), min_size=0, max_size=30))
def test_each_op_is_its_python_expression(rows):
    """Every op against the expression the summary used to write in Python,
    over ns values small (the C arithmetic) and beyond 2**53 (Python's)."""
    a, b, c = (column([r[k] for r in rows]) for k in range(3))
    signed = column([r[0] - r[1] for r in rows if abs(r[0] - r[1]) < 2**63], "q")
    fields = {
        "int": _rows.integer(a),
        "scaled": _rows.exported("scaled", _rows.scaled(b, 1e6)),
        "span": _rows.span(a, b, 1e6),
        "mean": _rows.rounded_ratio(a, b, post=1e3, digits=3, zero=0.0),
        "pct": _rows.rounded_ratio(a, b, plus=c, pre=100.0, digits=2, zero=None),
        "const": _rows.const("x"),
        "copy": _rows.list_copy([20.0, 50.0]),
        "inner": _rows.nested({"item": _rows.item([str(r[2]) for r in rows]),
                               "c_ms": _rows.exported("c_ms", _rows.scaled(c, 1e6))},
                              shared=False),
    }
    got, exported = _rows.build(len(rows), fields)
    assert len(got) == len(rows)
    for row, (x, y, z) in zip(got, rows):
        assert list(row) == list(fields) and list(row["inner"]) == ["item", "c_ms"]
        assert row["int"] == x and type(row["int"]) is int
        assert same_float(row["scaled"], y / 1e6)
        assert same_float(row["span"], (y - x) / 1e6)
        assert same_float(row["mean"], round(x / y / 1e3, 3) if y else 0.0)
        assert same_float(row["pct"], round(100.0 * x / (y + z), 2) if y + z else None)
        assert row["const"] == "x" and row["copy"] == [20.0, 50.0]
        assert row["inner"] == {"item": str(z), "c_ms": z / 1e6}
    assert exported["scaled"] == [row["scaled"] for row in got]
    assert all(e is row["inner"]["c_ms"] for e, row in zip(exported["c_ms"], got))
    if len(got) > 1:
        assert got[0]["copy"] is not got[1]["copy"]  # a list of its own in each row
    ints = _rows.build(len(signed), {"v": _rows.integer(signed)})[0]
    assert [r["v"] for r in ints] == list(signed)


def test_a_bad_program_is_refused_naming_the_key():
    """Columns of the wrong type or length, unknown ops, a template whose
    keys differ from the fields: a clear error, never a crash."""
    two = column([1, 2])
    with pytest.raises(ValueError, match="key 'a': a column of 2 items for 3 rows"):
        _rows.build(3, {"a": _rows.integer(two)})
    with pytest.raises(TypeError, match="key 'a': a column must hold int64 or uint64"):
        _rows.build(2, {"a": _rows.integer(memoryview(array("d", [1.0, 2.0])))})
    with pytest.raises(TypeError, match="key 'a': a column must be a buffer"):
        _rows.build(2, {"a": _rows.integer([1, 2])})
    with pytest.raises(ValueError, match="key 'a': a column of 1 items for 2 rows"):
        _rows.build(2, {"a": _rows.item([1])})
    with pytest.raises(ValueError, match="no op 'nope'"):
        _core._rows(1, (None, (("a", -1, "nope", 1),)), 0)
    with pytest.raises(ValueError, match="the divisor must be finite and not 0"):
        _rows.build(2, {"a": _rows.scaled(two, 0.0)})
    with pytest.raises(ValueError, match="template's keys are not the entries' keys"):
        _core._rows(1, ({"b": None}, (("a", -1, "const", 1),)), 0)
    with pytest.raises(ValueError, match="key 'a': a const must be the template's value"):
        _core._rows(1, ({"a": None}, (("a", -1, "const", 1),)), 0)
    with pytest.raises(ValueError, match="no entry exports to slot 1"):
        _core._rows(1, (None, (("a", 0, "const", 1),)), 2)
    with pytest.raises(ValueError, match="that no other entry fills"):
        _core._rows(1, (None, (("a", 0, "const", 1), ("b", 0, "const", 2))), 1)
    with pytest.raises(TypeError, match="a program must be a tuple"):
        _core._rows(1, [None, ()], 0)
    assert _rows.build(0, {"a": _rows.integer(column([]))}) == ([], {})


def test_equal_floats_of_a_row_are_one_object():
    """Floats are immutable: a row's equal figures (a gaps dict's p50, p99
    and max of a step with one gap) share one object; other rows have their
    own, and a nested dict (made in its own pass) its own."""
    ns = column([1_500_000, 2_500_000])
    rows, _ = _rows.build(2, {"a": _rows.scaled(ns, 1e6), "b": _rows.scaled(ns, 1e6),
                              "c": _rows.nested({"d": _rows.scaled(ns, 1e6)}, shared=False)})
    assert rows[0]["a"] == rows[0]["b"] == rows[0]["c"]["d"] == 1.5
    assert rows[0]["a"] is rows[0]["b"] and rows[1]["a"] is rows[1]["b"]
    assert rows[0]["a"] is not rows[1]["a"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=40),
       st.lists(st.integers(-2**63, 2**63 - 1), max_size=40))
def test_column_stats_are_count_sum_min_max(unsigned, signed):
    """The loop's totals over step columns (_core._column_stats), against
    len/sum/min/max of the same ints, past 64 bits in the sum."""
    for values, code in ((unsigned, "Q"), (signed, "q")):
        want = (len(values), sum(values), min(values, default=None), max(values, default=None))
        assert _core._column_stats(column(values, code)) == want
    with pytest.raises(TypeError, match="a column must hold int64 or uint64"):
        _core._column_stats(memoryview(array("i", [1])))


def test_a_guarded_scale_is_none_where_its_guard_is_zero():
    """scaled(column, div, unless_zero=guard): column[i] / div, None where
    guard[i] is 0 (a time line with no gap has no gap statistics)."""
    values, guard = column([5_000, 0, 7_000, 2**62]), column([1, 0, 0, 3])
    rows, _ = _rows.build(4, {"x": _rows.scaled(values, 1e3, guard)})
    assert [r["x"] for r in rows] == [5.0, None, None, 2**62 / 1e3]
    with pytest.raises(ValueError, match="key 'x': a column of 3 items for 4 rows"):
        _rows.build(4, {"x": _rows.scaled(values, 1e3, column([1, 1, 1]))})
    with pytest.raises(ValueError, match="key 'x': op scale takes 2 arguments"):
        _core._rows(1, (None, (("x", -1, "scale", column([1]), 1.0, column([1]), 4),)), 0)
