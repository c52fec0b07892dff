"""Steps without markers: `loopscope.profile(steps=module)` makes each
top-level call of `module` a step, for loops that have no place to put
`prof.step()` (Hugging Face `generate()`: one forward call per token).

A step begins when the module is called from outside itself (a call inside
its own forward is part of the step) and lasts until its next top-level
call begins on the same thread, or the profile ends: so the host work after
a forward (sampling the token, the stopping check and its `.item()`-like
syncs) belongs to the step of that forward, as one iteration of the decode
loop.  Steps are named as `prof.step()` names them (step_name, "Step_{i}").

How: a forward pre-hook (prepend=True, so it runs before the module's own
hooks) and a forward hook (always_call=True, so a forward that raises still
counts down) on that one module, with a per-thread call depth; both are
removed when the profile ends, leaving the module's hooks exactly as they
were.  A hook never lets an error of its own reach the user's forward: a
step that cannot open (the user's own prof.step() is open on the thread)
is skipped and counted, and the summary says so."""
from __future__ import annotations

import threading
from typing import Any


def check_module(steps: Any) -> Any:
    """The `steps` option: None or a torch.nn.Module (duck-typed, so torch
    is never imported here).  Raises TypeError naming the option."""
    if steps is None:
        return None
    if not (callable(getattr(steps, "register_forward_pre_hook", None))
            and callable(getattr(steps, "register_forward_hook", None))):
        raise TypeError(f"steps must be a torch.nn.Module (each top-level call of it is a step), "
                        f"got {type(steps).__name__}")
    return steps


class ModuleSteps:
    """The hooks on one module, for one running profile."""

    def __init__(self, prof: Any, module: Any) -> None:
        # Only the profile's (or watch's) step method is kept, not the profile:
        # a Profile's is its Stepper's C method, which holds no reference back,
        # so a finished Profile and its ModuleSteps make no reference cycle.
        self._step = prof.step
        self._local = threading.local()
        self.calls = 0           # top-level calls seen
        self.skipped = 0         # top-level calls that could not open a step
        self.errors: list[str] = []
        self._handles = []
        try:
            self._handles.append(module.register_forward_pre_hook(
                self._before, with_kwargs=True, prepend=True))
            self._handles.append(module.register_forward_hook(self._after, always_call=True))
        except TypeError as error:  # a torch older than 2.1: no always_call / prepend
            self.remove()
            raise TypeError(f"steps=module needs torch >= 2.1 (forward hooks with "
                            f"always_call and prepend): {error}") from None

    def _before(self, module: Any, args: Any, kwargs: Any) -> None:
        local = self._local
        depth = getattr(local, "depth", 0)
        local.depth = depth + 1
        if depth:
            return None
        self.calls += 1
        try:
            self._close_open()
            step = self._step()
            step.__enter__()
            local.step = step
        except Exception as error:  # never the user's forward's problem
            self.skipped += 1
            if len(self.errors) < 3:
                self.errors.append(f"{type(error).__name__}: {error}")
        return None

    def enter_call(self, module: Any, args: Any) -> None:
        """The call under way when the hooks were added (`loopscope run
        --watch-module` adds them from a global pre-hook, which runs before
        the module's own): its step opens here, as the pre-hook would have
        opened it; the forward hook, added before the forward ends, closes
        its depth."""
        self._before(module, args, {})

    def _after(self, module: Any, args: Any, output: Any) -> None:
        local = self._local
        local.depth = max(0, getattr(local, "depth", 0) - 1)
        return None

    def _close_open(self) -> None:
        step = getattr(self._local, "step", None)
        self._local.step = None
        if step is not None:
            step.__exit__(None, None, None)

    def close(self) -> None:
        """At the profile's end (on its thread): closes this thread's open
        step and removes the hooks.  Steps left open on other threads end
        with the profile."""
        try:
            self._close_open()
        finally:
            self.remove()

    def remove(self) -> None:
        while self._handles:
            self._handles.pop().remove()

    def note(self) -> dict[str, Any]:
        """summary["steps_from_module"]: what the hooks saw."""
        return {"calls": self.calls, "skipped": self.skipped, "errors": list(self.errors)}
