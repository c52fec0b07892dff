"""Strict JSON: every float figure of a summary enters it through
`finite()`, which turns a value that is not a finite number (inf or NaN,
e.g. the product of counter values too large to scale) into None and counts
it, so the summary can say so (summary["non_finite_note"]).  The count is
per summary being built (a context variable: threads do not mix)."""
from __future__ import annotations

import math
from contextvars import ContextVar

_count: ContextVar[list[int] | None] = ContextVar("loopscope_non_finite", default=None)


def start_count() -> list[int]:
    """Starts counting for the summary built next in this context; the
    returned list's one item is the count."""
    counter = [0]
    _count.set(counter)
    return counter


def finite(value: float | None) -> float | None:
    if value is None or math.isfinite(value):
        return value
    counter = _count.get()
    if counter is not None:
        counter[0] += 1
    return None


def note(count: int) -> str | None:
    if not count:
        return None
    return (f"{count} figure(s) came out as a number that is not finite (inf or NaN, e.g. from "
            "counter values too large to scale) and are None")
