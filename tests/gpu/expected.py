"""Expected verdicts for the GPU tests, worked out in plain Python from a
summary's own measured figures with PRODUCT's rules (the cut-offs are
_diagnosis's constants; the rule is written here, not called).  Imports
without a GPU."""
from __future__ import annotations

from typing import Any

from loopscope.figures._diagnosis import (BUSY_BELOW_PCT, COMPUTE_DRAM_BELOW_PCT, COMPUTE_SM_ABOVE_PCT,
                                  FILL_KNOWN_MIN_PCT, MEMORY_DRAM_FROM_PCT,
                                  UNDER_FILLED_BELOW_PCT, UNDER_FILLED_SM_BELOW_PCT,
                                  UNDER_FILLED_WARPS_BELOW_PCT)


def busy_gpu_verdict(summary: dict[str, Any]) -> str:
    """The verdict of a loop whose GPU was busy at least BUSY_BELOW_PCT of
    its time line (rule 1, launch or sync bound, does not apply): rule 2 on
    the counters while busy, GPU_BOUND without counters, and rule 4 (under
    filled) where those read BALANCED or GPU_BOUND.  Asserts the busy
    share, so a loop that is not busy fails here instead of passing on a
    verdict such as UNKNOWN."""
    busy = summary["gaps"]["busy_pct"]
    assert busy >= BUSY_BELOW_PCT, f"GPU busy {busy}% < {BUSY_BELOW_PCT}%"
    sm, dram = summary["sm"], summary["dram"]
    sm_busy = sm["active_busy_pct"] if sm else None
    dram_busy = dram["throughput_busy_pct"] if dram else None
    if sm_busy is not None and dram_busy is not None:
        if dram_busy >= MEMORY_DRAM_FROM_PCT:
            return "MEMORY_BOUND"
        if sm_busy > COMPUTE_SM_ABOVE_PCT and dram_busy < COMPUTE_DRAM_BELOW_PCT:
            return "COMPUTE_BOUND"
    # rule 4: where rules 2-3 read BALANCED or GPU_BOUND, kernels too small
    # to fill the GPU (launch shapes first, else the counters)
    gpu = summary["gpu"]
    fill, known = gpu.get("fill_pct"), gpu.get("fill_known_pct")
    if fill is not None and known is not None and known >= FILL_KNOWN_MIN_PCT:
        if fill < UNDER_FILLED_BELOW_PCT:
            return "UNDER_FILLED"
    else:
        warps = sm.get("warp_occupancy_busy_pct") if sm else None
        if sm_busy is not None and warps is not None and sm_busy < UNDER_FILLED_SM_BELOW_PCT \
                and warps < UNDER_FILLED_WARPS_BELOW_PCT:
            return "UNDER_FILLED"
    return "GPU_BOUND" if sm_busy is None or dram_busy is None else "BALANCED"
