"""The verdict: which resource a loop waits on, the numbers that decided it,
and the next action.

With gap figures only (no hardware counters yet) the rules are:
- GPU busy < 50% of its time line and at least half of the idle time in gaps
  caused by host syncs        -> SYNC_BOUND
- GPU busy < 50% and at least half of the idle time in gaps where the next
  launch came after the GPU had gone idle -> CPU_LAUNCH_BOUND
- GPU busy >= 50%             -> GPU_BOUND (SM/DRAM counters will split this
  into COMPUTE_BOUND / MEMORY_BOUND once they are collected)
- otherwise                   -> BALANCED
"""
from __future__ import annotations

from typing import Any

from ._syncs import format_site

BUSY_BELOW_PCT = 50.0
CAUSE_SHARE = 0.5

ACTIONS = {
    "CPU_LAUNCH_BOUND": (
        "capture the step in a CUDA graph (torch.cuda.CUDAGraph, or torch.compile("
        "mode='reduce-overhead')) or fuse small kernels, so the GPU stops waiting for Python"
    ),
    "SYNC_BOUND": "remove the host-device syncs inside the loop (.item(), print(tensor), .cpu())",
    "GPU_BOUND": (
        "the GPU is the bottleneck: profile kernels (ncu) to tell compute from memory bound"
    ),
    "BALANCED": "no single bottleneck: look at the worst gaps and the longest kernels",
    "NO_GPU_WORK": "no kernel, memcpy or memset ran inside the profile",
}


def _verdict(busy_pct: float | None, gaps: dict[str, Any] | None) -> str:
    if gaps is None or busy_pct is None:
        return "NO_GPU_WORK"
    idle = gaps["idle_ms"]
    by_cause = gaps["idle_by_cause_ms"]
    if busy_pct < BUSY_BELOW_PCT and idle > 0:
        if by_cause["sync"] >= CAUSE_SHARE * idle:
            return "SYNC_BOUND"
        if by_cause["host"] >= CAUSE_SHARE * idle:
            return "CPU_LAUNCH_BOUND"
        return "BALANCED"
    return "GPU_BOUND"


def diagnose_step(step: dict[str, Any]) -> str:
    if not step["kernels"] and not step["memcpys"]:
        return "NO_GPU_WORK"
    return _verdict(step["gaps"]["busy_pct"], step["gaps"])


def diagnose(summary: dict[str, Any]) -> dict[str, Any]:
    gaps, gpu = summary["gaps"], summary["gpu"]
    if gpu is None:
        return {
            "verdict": "UNKNOWN",
            "reasons": [f"no GPU timeline: {summary['gpu_error']}"],
            "actions": ["run on a machine with an NVIDIA GPU and CUPTI to get a verdict"],
            "evidence": {},
        }
    if gpu["kernels"] + gpu["memcpys"] + gpu["memsets"] == 0:
        return {"verdict": "NO_GPU_WORK", "reasons": ["no GPU operation was recorded"],
                "actions": [ACTIONS["NO_GPU_WORK"]], "evidence": {}}
    busy = gaps["busy_pct"]
    verdict = _verdict(busy, gaps)
    idle = gaps["idle_ms"]
    share = {k: (round(100 * v / idle, 1) if idle else 0.0) for k, v in gaps["idle_by_cause_ms"].items()}
    steps = [s for s in summary["steps"] if s["gaps"] is not None]
    reasons = [
        f"GPU busy {busy:.1f}% of its time line ({gaps['busy_ms']:.3f} ms busy, "
        f"{idle:.3f} ms idle in {gaps['count']} gaps)",
        f"idle time by cause: host launch late {share['host']}%, host sync {share['sync']}%, "
        f"other {share['other']}%",
        f"gaps: {gaps['severe']} severe (> {gaps['thresholds_us'][1]:g} us), {gaps['warning']} "
        f"warning, {gaps['normal']} normal; mean {gaps['mean_us']:.2f} us, "
        f"p99 {gaps['p99_us']:.2f} us, max {gaps['max_us']:.2f} us",
    ]
    if steps:
        flagged = sum(1 for s in steps if s["verdict"] == verdict)
        reasons.append(f"{flagged} of {len(steps)} steps read {verdict}")
    actions = [ACTIONS[verdict]]
    syncs = summary.get("syncs")
    if syncs and syncs["count"]:
        top = syncs["sites"][0]
        reasons.append(
            f"{syncs['count']} host-device syncs blocked the host for {syncs['blocked_ms']:.3f} ms "
            f"({syncs['in_steps']} inside steps); most costly: {format_site(top)}")
        removable = [s for s in syncs["sites"] if s["steps"]][:3]
        if removable:
            actions.append("remove these syncs from the loop: "
                           + "; ".join(format_site(s) for s in removable))
    return {
        "verdict": verdict,
        "reasons": reasons,
        "actions": actions,
        "evidence": {
            "busy_pct": busy,
            "idle_ms": idle,
            "idle_share_pct": share,
            "severe_gaps": gaps["severe"],
            "mean_gap_us": gaps["mean_us"],
            "kernels": gpu["kernels"],
            "syncs": syncs["count"] if syncs else None,
            "sync_blocked_ms": syncs["blocked_ms"] if syncs else None,
        },
    }
