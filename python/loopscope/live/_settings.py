"""Process-wide settings, read from the environment once.

LOOPSCOPE_CACHE_DIR
    Where the PM sampling config image is cached between processes (it takes
    ~150 ms to build on an H200).  Default: $XDG_CACHE_HOME/loopscope, else
    ~/.cache/loopscope.  "off" (or empty) turns the cache off.

LOOPSCOPE_INTERNAL
    Two switches for diagnosis, not a public interface (comma-separated
    key=value pairs):
      callbacks=0|1                0: no CUPTI callbacks (no launch records, no syncs):
                                   what activity tracing alone costs the loop
                                   (benchmarks/cost/overhead_options.py)
      own_timestamps=0|1           1 (default): loopscope's CUPTI timestamp source
                                   (CLOCK_REALTIME ns) is registered when another tool
                                   changed it; 0: whatever another tool left
                                   (benchmarks/cost/beside_torch_profiler.py's control)
    The alternatives that lost were deleted (issue 43): the overlap of a start
    with the last finish and a PM sampler that runs across profiles are how
    loopscope works, not switches.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

_WARM_UP_ONCE = 2  # the C core's warm_up: 0 none, 1 every start, 2 once per process
_FLAGS = ("callbacks", "own_timestamps")

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
        if key not in _FLAGS:
            raise _bad(item, f"names no switch; known: {', '.join(sorted(_FLAGS))}")
        if value not in ("0", "1"):
            raise _bad(item, "must be 0 or 1")
        out[key] = value == "1"
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
    # _options.CORE_START for the measurements).
    options["warm_up"] = _WARM_UP_ONCE if warm_up else 0
    options["metrics_cache_dir"] = cache_dir()
    return options
