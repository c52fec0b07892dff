"""Checks of `loopscope.profile()`'s options, at construction: a wrong one is
a TypeError (wrong kind of value) or ValueError (out of range) naming the
option, the value given and what is allowed, never an error later, deeper
down (an OverflowError at enter, a float() of a string, "no" taken as True)."""
from __future__ import annotations

import difflib
import functools
import inspect
import numbers
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

# (lowest, highest, unit) of each numeric option
RANGES: dict[str, tuple[float, float, str]] = {
    "buffer_mb": (0.0625, 1024.0, "MiB"),
    "max_buffer_mb": (0.0625, 65536.0, "MiB"),
    "metrics_interval_us": (1.0, 1e6, "us"),
    "metrics_buffer_mb": (1.0, 65536.0, "MiB"),
    "metrics_decode_ms": (1.0, 1e4, "ms"),
}


def shown(value: Any) -> str:
    """repr(value), cut to a readable length."""
    text = repr(value)
    return text if len(text) <= 60 else text[:45] + "..." + text[-10:]


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {shown(value)} "
                        f"({type(value).__name__})")
    return value


def check_number(name: str, value: Any, lowest: tuple[str, float] | None = None) -> float:
    """A finite number within RANGES[name] (and at least the option
    `lowest` = (name, value)), as a float."""
    low, high, unit = RANGES[name]
    if not _is_number(value):
        raise TypeError(f"{name} must be a number ({unit}), got {shown(value)} "
                        f"({type(value).__name__})")
    floor, floor_name = low, ""
    if lowest is not None and lowest[1] > low:
        floor, floor_name = lowest[1], f" ({lowest[0]})"
    # Comparisons, not float(): they reject NaN and infinities, and an int too
    # large for a float, without raising anything else.
    if not floor <= value <= high:
        raise ValueError(f"{name} must be between {floor:g}{floor_name} and {high:g} {unit}, "
                         f"got {shown(value)}")
    return float(value)


def check_thresholds(value: Any) -> tuple[float, float]:
    try:
        normal, severe = value
    except (TypeError, ValueError):
        normal = severe = None
    if not (_is_number(normal) and _is_number(severe)) or isinstance(value, (str, bytes)):
        raise TypeError("gap_thresholds_us must be two numbers (normal_below, severe_above), "
                        f"got {shown(value)}")
    if not 0 <= normal <= severe <= 1e9:
        raise ValueError("gap_thresholds_us must satisfy 0 <= normal <= severe <= 1e9 (us), "
                         f"got {shown(value)}")
    return float(normal), float(severe)


def unknown_option(what: str, name: str, known: list[str]) -> TypeError:
    """The TypeError for an option `what` does not take: the nearest known
    name (a typo: metrics_intervall_us), else every known one."""
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"its options: {', '.join(known)}"
    return TypeError(f"{what} got an unknown option {name!r}; {hint}")


def keywords_checked(what: str) -> Callable[[F], F]:
    """Wraps a keyword-only __init__ so that a misspelt option names the
    nearest right one; the signature (help(), an IDE's, Jupyter's Shift-Tab)
    and the type checker still see the wrapped function's own."""
    def wrap(init: F) -> F:
        known = [name for name, p in inspect.signature(init).parameters.items()
                 if p.kind is inspect.Parameter.KEYWORD_ONLY]

        @functools.wraps(init)
        def checked(self: Any, *args: Any, **options: Any) -> Any:
            for name in options:
                if name not in known:
                    raise unknown_option(what, name, known)
            return init(self, *args, **options)
        return checked  # type: ignore[return-value]
    return wrap
