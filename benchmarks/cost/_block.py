"""One profiled with-block, timed the way the cost figures read it (a
sibling module of the benchmarks, imported by path like scale/_memory.py).

The block is enter + loop + exit, the loop ending when the GPU has done its
work (torch.cuda.synchronize() inside the block); summary() is timed apart,
after the exit.  overhead_options.py, session_phases.py and
cost_breakdown.py share it, so their enter/loop/exit columns mean the same."""
from __future__ import annotations

import time
from typing import Any, Callable


def timed_block(loopscope: Any, torch: Any, loop: Callable[[Any], Any],
                options: dict[str, Any] | None = None, *, sync_first: bool = True,
                summary: bool = True) -> tuple[Any, dict[str, float | None]]:
    """Runs loop(prof) in one `loopscope.profile(**options)` block; returns
    the profile and the times in ms: enter, loop, exit, block (their sum)
    and summary (None unless asked).  sync_first: wait for earlier GPU work
    before the clock starts (False in a back-to-back series, where the
    series is timed as a whole)."""
    if sync_first:
        torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    prof = loopscope.profile(**(options or {}))
    prof.__enter__()
    t1 = time.perf_counter_ns()
    loop(prof)
    torch.cuda.synchronize()
    t2 = time.perf_counter_ns()
    prof.__exit__(None, None, None)
    t3 = time.perf_counter_ns()
    t4 = t3
    if summary:
        prof.summary()
        t4 = time.perf_counter_ns()
    return prof, {"enter": (t1 - t0) / 1e6, "loop": (t2 - t1) / 1e6, "exit": (t3 - t2) / 1e6,
                  "block": (t3 - t0) / 1e6, "summary": (t4 - t3) / 1e6 if summary else None}
