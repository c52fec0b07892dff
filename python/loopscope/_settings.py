"""Process-wide settings, read from the environment once.

LOOPSCOPE_CACHE_DIR
    Where the PM sampling config image is cached between processes (it takes
    ~150 ms to build on an H200).  Default: $XDG_CACHE_HOME/loopscope, else
    ~/.cache/loopscope.  "off" (or empty) turns the cache off.

LOOPSCOPE_INTERNAL
    Internal switches, for benchmarks/cost/overhead_options.py to compare
    alternatives in one GPU run; not a public interface, and they may go
    away.  Comma-separated key=value pairs:
      warm_up=every|once|none      when start pays CUPTI's lazy set-up (default once)
      zeroed_buffers=0|1           hand CUPTI cleared activity buffers
      defer=0|1                    finish a profile on loopscope's worker thread
      metrics_wait_for_start=0|1   start waits for the sampler's set-up and start:
                                   0 never, 1 always (default: when it must be set up)
      metrics_keep_running_ms=N    sampling keeps running N ms after a profile
      metrics_keep_ms=N            sampling stays enabled N ms after a profile
      metrics_wait_bound_ms=N      how long a start waits for the sampler's set-up (2000)
      metrics_max_samples=N        counter data image size, in samples (0: auto)
      callbacks=0|1                0: no CUPTI callbacks (no launch records, no syncs):
                                   what activity tracing alone costs the loop
      own_timestamps=0|1           1 (default): each profile registers CUPTI's timestamp
                                   source (CLOCK_REALTIME ns); 0: whatever another tool
                                   left (benchmarks/cost/beside_torch_profiler.py's control)
      metrics_stop_in_finish=0|1   1 (default): the finish stops PM sampling before
                                   its last decode; 0: the stop follows the finish
      overlap=0|1                  back to back, a start goes on beside the last profile's
                                   finish (tracing and sampling continue from it; the finish
                                   hands its sampler over to a start posted during its tail
                                   decode); 0: it waits for the worker.  Default: on
                                   (H100, 2026-11-28: back to back 1.20x eager and 1.23x
                                   on the CUDA-graph loop against 1.55x and 3.66x waiting;
                                   see RESULTS.md)
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

_WARM_UP = {"none": 0, "every": 1, "once": 2}
_FLAGS = ("zeroed_buffers", "defer", "metrics_wait_for_start", "callbacks",
          "metrics_stop_in_finish", "own_timestamps", "overlap")
_MS = {"metrics_keep_running_ms": "metrics_keep_running_ns", "metrics_keep_ms": "metrics_keep_ns",
       "metrics_wait_bound_ms": "metrics_wait_bound_ns"}

_cache: dict[str, Any] = {}


MAX_CACHE_DIR_BYTES = 1023  # the C core's folder buffer (ls_pm_options.cache_dir) less its NUL


def cache_dir() -> str | None:
    """The PM config cache folder, or None when turned off, by the user or
    because the folder cannot be used (cache_note() says why)."""
    if "cache_dir" not in _cache:
        value = os.environ.get("LOOPSCOPE_CACHE_DIR")
        if value is not None:
            folder = None if value.strip().lower() in ("", "off") else value
            source = "LOOPSCOPE_CACHE_DIR"
        else:
            base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
            folder = str(Path(base) / "loopscope")
            source = "XDG_CACHE_HOME" if os.environ.get("XDG_CACHE_HOME") else "the home folder"
        _cache["cache_note"] = None
        problem = None if folder is None else _folder_problem(folder)
        if problem is not None:  # an optimisation only: off for this process, with a note
            _cache["cache_note"] = (f"the PM config cache is off for this process: the folder "
                                    f"from {source} {problem}")
            folder = None
        _cache["cache_dir"] = folder
    return _cache["cache_dir"]


def cache_note() -> str | None:
    """Why the PM config cache is off for this process, or None."""
    cache_dir()
    return _cache["cache_note"]


def _folder_problem(folder: str) -> str | None:
    """Why `folder` cannot hold the cache, or None (a missing folder is made later)."""
    size = len(os.fsencode(folder))
    if size > MAX_CACHE_DIR_BYTES:
        return f"is {size} bytes long, longer than the {MAX_CACHE_DIR_BYTES} loopscope takes"
    try:
        mode = os.stat(folder).st_mode
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"cannot be used ({error.strerror or error})"
    return None if stat.S_ISDIR(mode) else "exists and is not a folder"


def _bad(item: str, why: str) -> ValueError:
    return ValueError(f"LOOPSCOPE_INTERNAL: {item!r} {why}")


def parse_internal(text: str) -> dict[str, Any]:
    """The _core.start keywords of a LOOPSCOPE_INTERNAL value."""
    out: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep:
            raise _bad(item, "is not key=value")
        if key == "warm_up":
            if value not in _WARM_UP:
                raise _bad(item, f"must be one of {sorted(_WARM_UP)}")
            out["warm_up"] = _WARM_UP[value]
        elif key in _FLAGS:
            if value not in ("0", "1"):
                raise _bad(item, "must be 0 or 1")
            out[key] = value == "1"
        elif key in _MS or key == "metrics_max_samples":
            try:
                number = float(value)
            except ValueError:
                raise _bad(item, "must be a number") from None
            if not 0 <= number < 1e9:
                raise _bad(item, "must be between 0 and 1e9")
            if key in _MS:
                out[_MS[key]] = int(number * 1e6)
            else:
                out[key] = int(number)
        else:
            known = sorted(("warm_up", "metrics_max_samples", *_FLAGS, *_MS))
            raise _bad(item, f"names no switch; known: {', '.join(known)}")
    return out


def internal() -> dict[str, Any]:
    """LOOPSCOPE_INTERNAL's switches, parsed once (a bad value raises
    ValueError at each profile start until it is fixed)."""
    if "internal" not in _cache:
        _cache["internal"] = parse_internal(os.environ.get("LOOPSCOPE_INTERNAL", ""))
    return _cache["internal"]


def core_options(warm_up: bool) -> dict[str, Any]:
    """The _core.start keywords that come from the environment."""
    options = dict(internal())
    # warm_up=True means once per process (the C core's default, see
    # ls_module.c for the measurements); LOOPSCOPE_INTERNAL may say otherwise.
    options["warm_up"] = options.get("warm_up", _WARM_UP["once"]) if warm_up else 0
    options["metrics_cache_dir"] = cache_dir()
    return options
