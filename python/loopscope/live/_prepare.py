"""`loopscope.prepare()`: graph-level mode for the whole process (issue 27).

A loop that replays CUDA graphs pays 11-14% for CUPTI's per-kernel records
(one per node per replay).  CUPTI's graph-level trace records each replay
once, for ~2%, but it must be on before a graph is instantiated: CUPTI
crashes the process when it replays a graph made while the trace was off.
So it is turned on once, before the process's first CUDA call, and stays
on; every later profile then traces each replay as one span (steps, busy
time, gaps, readiness and SM/DRAM stay measured) and eager kernels one by
one.  What a replay's kernels did inside it (their names, count, fill) is
not recorded: for that, profile without prepare() in another process.
(csrc/capture/ls_graphs.h holds the C side.)"""
from __future__ import annotations

from typing import Any

from .. import _core
from . import _cupti_paths


def prepare() -> dict[str, Any]:
    """Turns on graph-level mode for this process: every later
    `loopscope.profile()` traces each CUDA-graph replay as one span (CUPTI's
    graph-level trace, ~2% of a graph loop against 11-14% for a record per
    kernel).  Call it at the top of the script, before the first CUDA call
    (before any tensor goes to the GPU, before torch.cuda is used or a model
    is moved); calling it again is harmless.

    The graph-level trace is the process's: torch.profiler run later in
    this process does not see the kernels inside graph replays either.

    Returns {"graphs": "replays"}.  Raises RuntimeError saying why when it
    cannot: no NVIDIA driver, CUDA already started in this process, CUPTI
    not found or refusing, or a profile running."""
    if _core.graphs_prepared():
        return {"graphs": "replays"}
    why = _core.prepare_graphs(_cupti_paths.candidates())
    if why is not None:
        raise RuntimeError(f"loopscope.prepare(): graph-level mode is off: {why}")
    return {"graphs": "replays"}


def prepared() -> bool:
    """True once prepare() turned graph-level mode on in this process."""
    return bool(_core.graphs_prepared())
