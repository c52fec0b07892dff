"""Shapes of outside data (a recording's parts that go into a summary as they
are), checked before use: `check(value, shape, where)` raises
SchemaError naming the first place that does not fit, its value and what
was expected.

A shape is: a Python type (str), NUM (a finite number), COUNT (an int from
0 up to 2**63), Optional(shape), OneOf(shape, ...), a dict {key: shape}
(those keys must be there; others may), [shape] (a list of such items) or
MapOf(shape) (a dict of str keys to such values).  In a dict shape, a key
whose shape is Optional may also be absent."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

NUM = "a finite number"
COUNT = "a whole number >= 0"


class SchemaError(ValueError):
    """Outside data of the wrong shape; the message says where and what."""


@dataclass(frozen=True)
class Optional:
    shape: Any


@dataclass(frozen=True)
class OneOf:
    shapes: tuple


@dataclass(frozen=True)
class MapOf:
    shape: Any


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:45] + "..." + text[-10:]


def _name(shape: Any) -> str:
    if isinstance(shape, str):
        return shape
    if isinstance(shape, type):
        return f"a {shape.__name__}"
    if isinstance(shape, Optional):
        return f"{_name(shape.shape)} or null"
    if isinstance(shape, OneOf):
        return " or ".join(_name(s) for s in shape.shapes)
    if isinstance(shape, MapOf):
        return f"an object of {_name(shape.shape)}"
    if isinstance(shape, dict):
        return "an object with " + ", ".join(shape)
    return f"a list of {_name(shape[0])}"


def _fits(value: Any, shape: Any) -> bool:
    """Whether value fits the outer level of shape (items are checked apart)."""
    if isinstance(shape, Optional):
        return value is None or _fits(value, shape.shape)
    if isinstance(shape, OneOf):
        return any(_fits(value, s) for s in shape.shapes)
    if shape is NUM:
        return (isinstance(value, (int, float)) and not isinstance(value, bool)
                and abs(value) < 2**63 and math.isfinite(value))
    if shape is COUNT:
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63
    if isinstance(shape, type):
        return isinstance(value, shape)
    if isinstance(shape, (dict, MapOf)):
        return isinstance(value, dict)
    return isinstance(value, list)


def check(value: Any, shape: Any, where: str) -> None:
    if not _fits(value, shape):
        raise SchemaError(f"{where} is {_shown(value)}: {_name(shape)} expected")
    if isinstance(shape, Optional):
        if value is not None:
            check(value, shape.shape, where)
    elif isinstance(shape, OneOf):
        check(value, next(s for s in shape.shapes if _fits(value, s)), where)
    elif isinstance(shape, dict):
        for key, item in shape.items():
            if key in value:
                check(value[key], item, f"{where}.{key}")
            elif not isinstance(item, Optional):
                raise SchemaError(f"{where} has no {key!r}")
    elif isinstance(shape, MapOf):
        for key, item in value.items():
            if not isinstance(key, str):
                raise SchemaError(f"{where} has a key {_shown(key)}: keys are strings")
            check(item, shape.shape, f"{where}.{key}")
    elif isinstance(shape, list):
        for i, item in enumerate(value):
            check(item, shape[0], f"{where}[{i}]")
