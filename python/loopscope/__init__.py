"""loopscope: why is this PyTorch GPU loop slower than the GPU allows?

    with loopscope.profile() as prof:
        for i in range(10):
            with prof.step():
                y = model(x)
    print(prof.report())
    summary = prof.summary()      # plain dicts: gaps, gpu, steps, ranges, diagnosis, ...

`loopscope.instrument(model)` adds a range per submodule call (per layer).
"""
from ._core import range  # noqa: A004  (the public name is part of the contract)
from ._instrument import InstrumentHandle, instrument
from ._profile import LoopscopeWarning, Profile, profile

__version__ = "0.1.0"
__all__ = ["InstrumentHandle", "LoopscopeWarning", "Profile", "instrument", "profile", "range",
           "__version__"]
