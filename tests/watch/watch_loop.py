"""A watched loop with exact figures, for tests/watch: step host times from a
scripted watch clock (loopscope._watch._clock), syncs as fake API calls
through the real switchboard, PM samples injected over each step.

`run(w, host_ms, syncs=..., sm=..., gr=...)` runs one step per entry of
host_ms inside the watch `w`; syncs[i] fake stream syncs of 2 us each in
step i (of sync_ns[i] ns each when given, then a fake launch, so no sync
of one step runs inside the next one's); every PM sample reads sm / gr for the whole run (one value, so every
step's average is that value whatever the samples' overlap)."""
from __future__ import annotations

from loopscope import _core, _testhooks
from loopscope.watching import _watch

SYNC_NS = 2_000  # one fake stream sync blocks the host this long


class StepClock:
    """_watch._clock: a step entered at t lasts the next scripted duration."""

    def __init__(self) -> None:
        self.t = 10**9
        self.durations: list[float] = []
        self.entered = False

    def __call__(self) -> int:
        if not self.entered:
            self.entered = True
            return self.t
        self.entered = False
        start = self.t
        self.t += int(self.durations.pop(0) * 1e6) + 1_000
        return start + (self.t - start - 1_000)


def install(monkeypatch) -> StepClock:
    clock = StepClock()
    monkeypatch.setattr(_watch, "_clock", clock)
    return clock


def one_sync(ns: int = SYNC_NS) -> None:
    _testhooks._inject_calls([("cudaStreamSynchronize", ns)])


def run(w, clock: StepClock, host_ms: list[float], syncs: list[int] | None = None,
        sm: float | None = None, gr: float | None = None,
        sync_ns: list[int] | None = None) -> None:
    for i, ms in enumerate(host_ms):
        clock.durations.append(ms)
        with w.step():
            for _ in range((syncs or [0] * len(host_ms))[i]):
                one_sync(SYNC_NS if sync_ns is None else sync_ns[i])
            if sync_ns is not None:
                _testhooks._inject_calls([("cudaLaunchKernel", 0)])
            if sm is not None or gr is not None:
                t = _core.now_ns()
                figures = {"dram_throughput_pct": 10.0}
                if sm is not None:
                    figures["sm_active_pct"] = sm
                if gr is not None:
                    figures["gr_active_pct"] = gr
                _testhooks._inject("sample", [(max(1, t - 10**9), t + 10**9, figures, 0)])
