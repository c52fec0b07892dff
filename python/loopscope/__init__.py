"""loopscope: why is this PyTorch GPU loop slower than the GPU allows?

    with loopscope.profile() as prof:
        for i in range(10):
            with prof.step():
                y = model(x)
    print(prof.report())
    summary = prof.summary()      # plain dicts: gaps, syncs, gpu, steps, ranges, diagnosis, ...

    with loopscope.no_sync():     # strict mode: SyncError at the line that syncs
        ...

`loopscope.instrument(model)` adds a range per submodule call (per layer);
`loopscope.profile(steps=model)` makes each top-level call of model a step;
`loopscope.analyze("trace.json.gz")` gives the same summary from a torch.profiler
trace, an Nsight Systems SQLite export or a saved loopscope profile;
`loopscope.prepare()`, before the first CUDA call, traces each CUDA-graph replay
as one span in every later profile (graph-level mode, for loops of graph replays);
`loopscope.compare(before, after)` compares two summaries, profiles or files
(`loopscope.format_compare(result)`: the same as `loopscope diff` prints);
`loopscope.watch(step_budget_ms=...)` watches every step of a long job cheaply and
writes a full profile when a step breaks its budget (`loopscope.step()` marks a step
of the running watch or profile);
`loopscope.doctor()` says what this machine's stack (driver, CUDA runtime, CUPTI, PM
sampling per GPU) gives loopscope, and what will not work and why.
"""
from .readers._analyze import load
from .surfaces._compare import CompareError, compare, format_compare
from .surfaces._doctor import doctor
from .readers._job import analyze
from ._core import range  # noqa: A004  (the public name is part of the contract)
from .live._instrument import InstrumentHandle, instrument
from .live._prepare import prepare
from ._profile import LoopscopeWarning, Profile, profile
from .readers._sniff import TraceError
from ._strict import SyncError, no_sync
from .watching._watch import Watch, step, watch
from .figures._syncs import KINDS as SYNC_KINDS
from ._version import __version__
__all__ = [
    "CompareError", "InstrumentHandle", "LoopscopeWarning", "Profile", "SYNC_KINDS", "SyncError",
    "TraceError", "analyze", "compare", "doctor", "format_compare", "instrument", "load", "no_sync", "prepare", "profile", "range", "step", "Watch", "watch", "__version__",
]
