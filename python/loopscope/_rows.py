"""Row dicts for the summary's long lists (a dict per step, per step's gaps):
copies of a template whose key table is shared.

CPython keeps one key table for the instance dicts of a class (PEP 412's
key-sharing dicts) and `dict.copy()` of such a dict shares it too, so each
row holds only its values: 336 bytes for a step's 22 keys where a dict with
its own table takes 840 (measured with tracemalloc on CPython 3.11).  The
rows are plain `dict`s; a key added to one gives that one its own table.
Where an interpreter shares no keys the template is an ordinary dict and
the rows are ordinary copies: the same values either way."""
from __future__ import annotations

import functools
from typing import Any, Sequence

from . import _core


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


def dicts(keys: Sequence[str], columns: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """[{keys[j]: columns[j][i]} for each row i], zipped in C, the rows
    sharing one key table."""
    return _core._dicts(keys, columns, template(dict.fromkeys(keys)))
