"""A synthetic denoise-like loop for the surfaces (pytest plugin, notebook,
CLI, recordings): real steps on whatever clock runs, GPU records injected
with exact device times.  Imported by tests in this process and by the
scripts, inner test files and notebooks they run in subprocesses.

Each step launches `kernels` kernels of 10 us (one launch API record each,
taken at the current profiler clock, so inside the step).  On the device,
kernels of a step are `inner_gap_ns` apart and the first kernel of the next
step comes `step_gap_ns` after the last one.  Device times start at 1 us,
before the launch times (the profiler clock is far ahead: the real clock
always; the test fixture's clock, which starts at 1 ms, while the loop's
device time stays under 1 ms), so every gap is caused by the host ("host
launch late"): the loop reads CPU_LAUNCH_BOUND when it is mostly idle.

With the defaults (3 steps x 2 kernels, 5 us inside a step, 80 us between
steps): gaps 5, 80, 5, 80, 5 us -> 5 gaps, 3 normal, 2 severe (steps 1
and 2), busy 60 us of 235 us (25.53%), CPU_LAUNCH_BOUND."""
from __future__ import annotations

from loopscope import _core, _testhooks

KERNEL_NS = 10_000
DEVICE_T0 = 1_000


def run_loop(prof, steps: int = 3, kernels: int = 2, inner_gap_ns: int = 5_000,
             step_gap_ns: int = 80_000, stream: int = 7) -> None:
    t, corr = DEVICE_T0, 1
    apis, ops = [], []
    for _ in range(steps):
        with prof.step():
            for j in range(kernels):
                now = _core.now_ns()
                apis.append((now, now + 1, corr))
                ops.append((t, t + KERNEL_NS, 0, stream, corr, f"gemm_{j}"))
                t += KERNEL_NS + (inner_gap_ns if j < kernels - 1 else step_gap_ns)
                corr += 1
    _testhooks._inject("api", apis)
    _testhooks._inject("kernel", ops)


def run_graph_like(prof, steps: int = 3) -> None:
    """The same loop with 1 us gaps everywhere: no severe gap, GPU_BOUND."""
    run_loop(prof, steps=steps, inner_gap_ns=1_000, step_gap_ns=1_000)
