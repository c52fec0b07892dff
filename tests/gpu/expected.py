"""Expected verdicts for the GPU tests, worked out in plain Python from a
summary's own measured figures with PRODUCT's rules (the cut-offs are
_diagnosis's constants; the rule is written here, not called).  Imports
without a GPU."""
from __future__ import annotations

from typing import Any

from loopscope._diagnosis import (BUSY_BELOW_PCT, COMPUTE_DRAM_BELOW_PCT, COMPUTE_SM_ABOVE_PCT,
                                  MEMORY_DRAM_FROM_PCT)


def busy_gpu_verdict(summary: dict[str, Any]) -> str:
    """The verdict of a loop whose GPU was busy at least BUSY_BELOW_PCT of
    its time line (rule 1, launch or sync bound, does not apply): rule 2 on
    the counters while busy, GPU_BOUND without counters.  Asserts the busy
    share, so a loop that is not busy fails here instead of passing on a
    verdict such as UNKNOWN."""
    busy = summary["gaps"]["busy_pct"]
    assert busy >= BUSY_BELOW_PCT, f"GPU busy {busy}% < {BUSY_BELOW_PCT}%"
    sm, dram = summary["sm"], summary["dram"]
    sm_busy = sm["active_busy_pct"] if sm else None
    dram_busy = dram["throughput_busy_pct"] if dram else None
    if sm_busy is None or dram_busy is None:
        return "GPU_BOUND"
    if dram_busy >= MEMORY_DRAM_FROM_PCT:
        return "MEMORY_BOUND"
    if sm_busy > COMPUTE_SM_ABOVE_PCT and dram_busy < COMPUTE_DRAM_BELOW_PCT:
        return "COMPUTE_BOUND"
    return "BALANCED"
