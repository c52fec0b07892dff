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


_MIB = 1 << 20

# The C core's start options, each with its default and range: _core.start
# takes every one of them, resolved, in one dict (core_start_values) and has
# no default or range of its own.  name -> (default, lowest, highest); None
# bounds: not a number.  The numbers' ranges are RANGES' in the core's units;
# 0 (automatic) is also allowed for metrics_interval_ns; metrics_device -1:
# the current context's device (else 0).
# - warm_up: 0 none, 1 every start, 2 once per process.  Once by default
#   (issue 11, H200): with CUPTI's buffers handed over zeroed, step 0's
#   largest gap after the first profile was the same without a warm-up
#   (none 96.9 us, once 95.9 us, at every start 84.9 us: noise), while the
#   one at every start cost 0.36-0.42 ms of each enter; the first profile of
#   a process still showed a bubble without one (eager step 0: 206 us none,
#   114 us once).
# - metrics_decode_ns: decode every 10 ms while a profile runs (ls_sampler:
#   20 ms between profiles).  H200, 2026-11-29: a DecodeData call costs
#   ~0.5-0.8 ms a ms of busy SMs since the last one plus ~1-3 ms
#   (ls_sampler.h), so the sampler's thread takes 0.72-0.85 core at 10 ms and
#   is behind at 2 ms, and the tail summary() waits for is one call of 5-8 ms.
# - metrics_wait_for_start: 0 never, 1 every start, 2 when the sampler must
#   be set up: the first profile of a process waits for it (issue 30: without
#   it a script's one profile read no SM or DRAM at all), at most
#   LS_PM_WAIT_BOUND_NS.
# - callbacks and own_timestamps: for diagnosis only (_settings.py's
#   LOOPSCOPE_INTERNAL).
CORE_START: dict[str, tuple[Any, float | None, float | None]] = {
    "trace": (True, None, None),
    "syncs": (True, None, None),
    "driver_api": (False, None, None),
    "warm_up": (2, 0, 2),
    "callbacks": (True, None, None),
    "own_timestamps": (True, None, None),
    "graph_kernels": (False, None, None),
    "buffer_bytes": (4 * _MIB, RANGES["buffer_mb"][0] * _MIB, RANGES["buffer_mb"][1] * _MIB),
    "max_buffers": (64, 1, RANGES["max_buffer_mb"][1] / RANGES["buffer_mb"][0]),
    "cupti_paths": ((), None, None),
    "metrics": (False, None, None),
    "metrics_device": (-1, -1, 2**31 - 1),
    "metrics_interval_ns": (0, RANGES["metrics_interval_us"][0] * 1e3,
                            RANGES["metrics_interval_us"][1] * 1e3),
    "metrics_buffer_bytes": (64 * _MIB, RANGES["metrics_buffer_mb"][0] * _MIB,
                             RANGES["metrics_buffer_mb"][1] * _MIB),
    "metrics_decode_ns": (10_000_000, RANGES["metrics_decode_ms"][0] * 1e6,
                          RANGES["metrics_decode_ms"][1] * 1e6),
    "metrics_cache_dir": (None, None, None),
    "metrics_wait_for_start": (2, 0, 2),
}


def core_start_values(**given: Any) -> dict[str, Any]:
    """Every _core.start option: `given`, the others at CORE_START's
    defaults.  A name CORE_START does not know is a TypeError; a number out
    of its range (or not an int) a ValueError (TypeError) naming it."""
    for name in given:
        if name not in CORE_START:
            raise unknown_option("_core.start", name, list(CORE_START))
    values = {name: given.get(name, default) for name, (default, _, _) in CORE_START.items()}
    for name, (_, low, high) in CORE_START.items():
        value = values[name]
        if low is None or high is None or (name == "metrics_interval_ns" and value == 0):
            continue
        if not isinstance(value, int):  # a bool is an int: warm_up=False is 0
            raise TypeError(f"_core.start's {name} must be an int, got {shown(value)}")
        if not low <= value <= high:
            raise ValueError(f"_core.start's {name} must be between {low:g} and {high:g}, "
                             f"got {value}")
    return values


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
