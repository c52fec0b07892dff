"""The fill rule of csrc/analysis/ls_kernels.h written again in plain Python, so the
tests' expected fill figures come from an independent computation: the
share of the device's block slots a kernel's grid can occupy at once."""
from __future__ import annotations

WARP = 32


def fill_of(grid, block, registers=0, shared=0, *, sms, threads_per_sm, blocks_per_sm=0,
            regs_per_sm=0, shared_per_sm=0):
    """grid, block: (x, y, z).  A device figure of 0 (or None) is unknown
    and its limit is left out, as is a kernel's 0 registers or shared."""
    blocks = grid[0] * grid[1] * grid[2]
    threads = block[0] * block[1] * block[2]
    warp_threads = -(-threads // WARP) * WARP
    per_sm = [threads_per_sm // warp_threads]
    if blocks_per_sm:
        per_sm.append(blocks_per_sm)
    if registers and regs_per_sm:
        per_sm.append(regs_per_sm // (registers * warp_threads))
    if shared and shared_per_sm:
        per_sm.append(shared_per_sm // shared)
    slots = max(1, min(per_sm)) * sms
    return min(blocks, slots) / slots


def weighted_fill_pct(kernels):
    """(fill_pct, fill_known_pct) of kernels given as (duration, fill or
    None), as summary["gpu"] reports them: the time-weighted fill of the
    kernels whose fill is known, and the share of kernel time it is known
    for."""
    total = sum(d for d, _ in kernels)
    known = [(d, f) for d, f in kernels if f is not None]
    shaped = sum(d for d, _ in known)
    fill = round(100 * sum(d * f for d, f in known) / shaped, 2) if shaped else None
    return fill, (round(100 * shaped / total, 2) if total else None)
