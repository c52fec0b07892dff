"""Where libcupti.so.13 may live, best candidate first.

The copy torch loads (from the nvidia-cuda-cupti wheel) comes first, so that a
process never holds two CUPTI libraries; the C core tries the copy already in
the process before any of these.
"""
from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

SONAME = "libcupti.so.13"


@functools.lru_cache(maxsize=1)
def candidates() -> tuple[str, ...]:
    """Looked up once per process: the search (find_spec of the `nvidia`
    namespace package, a stat per path) cost ~0.2 ms at every profile start."""
    found: list[str] = []
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13/lib", "cuda_cupti/lib"):
            found.append(str(Path(base) / sub / SONAME))
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            found.append(str(Path(root) / "extras" / "CUPTI" / "lib64" / SONAME))
            found.append(str(Path(root) / "lib64" / SONAME))
    return tuple(p for p in dict.fromkeys(found) if os.path.exists(p))
