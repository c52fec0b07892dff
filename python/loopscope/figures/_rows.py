"""Row dicts for the summary's long lists (a dict per step, per step's gaps),
built in C (csrc/python_api/ls_rows.c) from fields declared here: build().

Large rows are copies of a template whose key table is shared.  CPython keeps one key table for the instance dicts of a class (PEP 412's
key-sharing dicts) and `dict.copy()` of such a dict shares it too, so each
row holds only its values: 336 bytes for a step's 22 keys where a dict with
its own table takes 840 (measured with tracemalloc on CPython 3.11).  The
rows are plain `dict`s; a key added to one gives that one its own table.
Where an interpreter shares no keys the template is an ordinary dict and
the rows are ordinary copies: the same values either way."""
from __future__ import annotations

import functools
from typing import Any, Sequence

from .. import _core


@functools.lru_cache(maxsize=None)
def _holder_class(keys: tuple[str, ...]) -> type:
    """A class of its own per key set: its instances' dicts share one key
    table, built by the first instance in this order."""
    del keys  # the cache key: one class per key set
    return type("_Row", (), {})


def template(values: dict[str, Any]) -> dict[str, Any]:
    """A dict equal to `values` (same keys, same order) whose copies share
    its key table."""
    keys = tuple(values)
    holder = _holder_class(keys)()
    for key in keys:
        setattr(holder, key, values[key])
    row = holder.__dict__
    if list(row) != list(keys):  # not the order asked for: a plain dict then
        return dict(values)
    return row


Field = tuple  # (op, *args): how a row's value for one key is made (csrc/python_api/ls_rows.h)


def item(column: Sequence[Any]) -> Field:
    """column[i], as is."""
    return ("item", column)


def const(value: Any) -> Field:
    """The same object in every row (None, an int, a str: never a mutable one)."""
    return ("const", value)


def list_copy(values: list[Any]) -> Field:
    """A new list with these items in every row."""
    return ("list_copy", list(values))


def integer(column: Any) -> Field:
    """int(column[i]) of a column of int64 or uint64 (Model.step_table's)."""
    return ("int", column)


def scaled(column: Any, divisor: float, unless_zero: Any = None) -> Field:
    """column[i] / divisor (ns to ms: 1e6), a float; None where the column
    `unless_zero` (when given) is 0."""
    if unless_zero is None:
        return ("scale", column, float(divisor))
    return ("scale", column, float(divisor), unless_zero)


def span(first: Any, last: Any, divisor: float) -> Field:
    """(last[i] - first[i]) / divisor."""
    return ("span", first, last, float(divisor))


def rounded_ratio(num: Any, den: Any, *, digits: int, zero: Any, plus: Any = None,
                  pre: float = 1.0, post: float = 1.0) -> Field:
    """round(pre * num[i] / (den[i] + plus[i]) / post, digits), Python's
    arithmetic exactly; `zero` where the denominator is 0."""
    return ("ratio", num, den, plus, float(pre), float(post), digits, zero)


def nested(fields: dict[str, Any], shared: bool = True) -> Field:
    """A dict of these fields.  shared: copies of a template whose key table
    they share (less memory from about ten keys); else a new small dict."""
    return ("dict", fields, shared)


def exported(name: str, field: Field) -> Field:
    """The field, its values also handed back in build()'s second result
    under `name` (the same objects)."""
    return ("export", name, field)


def _program(fields: dict[str, Field], shared: bool, slots: dict[str, int]) -> tuple:
    entries = []
    for key, field in fields.items():
        if not isinstance(key, str):
            raise TypeError(f"_rows: key {key!r} is not a str")
        slot = -1
        if field[0] == "export":
            _, name, field = field
            slot = slots.setdefault(name, len(slots))
        if field[0] == "dict":
            field = ("dict", _program(field[1], field[2], slots))
        entries.append((key, slot) + tuple(field))
    # A shared template holds the consts already: its copies need no setting of them.
    values = {key: field[1] if field[0] == "const" else None for key, field in fields.items()}
    return (template(values) if shared else None, tuple(entries))


def build(count: int, fields: dict[str, Field], shared: bool = True
          ) -> tuple[list[dict[str, Any]], dict[str, list[Any]]]:
    """(rows, exported): `count` dicts of these fields, made row by row in C
    with no list per figure in between (a million steps); exported: each
    exported() field's values by name."""
    slots: dict[str, int] = {}
    program = _program(fields, shared, slots)
    rows, columns = _core._rows(count, program, len(slots))
    return rows, dict(zip(slots, columns))
