"""Steps without markers: `loopscope.profile(steps=module)` makes each
top-level call of `module` a step, for loops that have no place to put
`prof.step()` (Hugging Face `generate()`: one forward call per token).

A step begins when the module is called from outside itself (a call inside
its own forward is part of the step) and lasts until its next top-level
call begins on the same thread, or until the function that made the call
returns, or the profile ends, whichever comes first: so the host work after
a forward (sampling the token, the stopping check and its `.item()`-like
syncs) belongs to the step of that forward, as one iteration of the decode
loop, and the time after the loop (`generate()` returned; a server waiting
for its next request) belongs to no step.  A caller that returns into the
function that then makes the next call (transformers 5's `_prefill`, which
makes generate()'s first forward and returns into the decode loop) leaves
the step open to that call: the step's end is marked at the return and taken
back by a call from the function returned into; that function's return, a
call from anywhere else (a server's next request handler), a step of the
user's (prof.step(), which a held step does not refuse), or the profile's
end ends the step at the mark.  The calling function is the first
frame outside torch's package and loopscope's (so a DDP or DataParallel
wrapper, or `run --watch-module`'s global pre-hook, is looked through: a
training loop that calls its model from its own loop body keeps each step
from one call to the next).  Its return is seen through sys.monitoring
(Python 3.12+: a PY_RETURN event on that one code object; a function that
exits by an exception is not seen, and its step ends at the next call).
Python 3.10 and 3.11 have no such event, and a profile function set only
between the calls would run the Python there 1.2x (3.10) to 1.7x (3.11)
slower (CPU box, 2026-11-30): there a step lasts until the next call.  The
summary's `module_steps["ends"]` says which rule held.  Steps are named as
`prof.step()` names them (step_name, "Step_{i}").

How: a forward pre-hook (prepend=True, so it runs before the module's own
hooks) and a forward hook (always_call=True, so a forward that raises still
counts down) on that one module, with a per-thread call depth; both are
removed when the profile ends, leaving the module's hooks exactly as they
were.  A hook never lets an error of its own reach the user's forward: a
step that cannot open (the user's own prof.step() is open on the thread)
is skipped and counted, and the summary says so."""
from __future__ import annotations

import os
import sys
import threading
from typing import Any

_getframe = sys._getframe

# loopscope's own folder: its frames (the hooks, the watch) are never the caller
# (as its frames name their files: a code object's co_filename, not __file__,
# which can differ in form)
_PACKAGE = os.path.dirname(os.path.dirname((lambda: None).__code__.co_filename)) + os.sep
# 2 is sys.monitoring.PROFILER_ID, which cProfile takes on 3.12+: left to it
_TOOL_IDS = (4, 3)
_TOOL_NAME = "loopscope steps=module"


class CallerReturns:
    """One sys.monitoring tool for the process: a PY_RETURN event on the
    code objects of the functions that call a stepped module, dispatched to
    the ModuleSteps alive.  Claimed when the first ModuleSteps attaches and
    given back (events off on every code, callback and id freed) when the
    last detaches.  `monitoring` is sys.monitoring, or a stand-in in tests."""

    def __init__(self, monitoring: Any = getattr(sys, "monitoring", None)) -> None:
        self.monitoring = monitoring
        self.lock = threading.Lock()
        self.tool: int | None = None
        self.listeners: tuple[ModuleSteps, ...] = ()
        # id -> code: a code object's own hash hashes its constants each
        # time, an id does not; the code is held, so its id stays its own
        self.codes: dict[int, Any] = {}

    def attach(self, steps: ModuleSteps) -> str:
        """"caller_return" when returns are seen, else why not."""
        m = self.monitoring
        if m is None:
            return "next_call: Python < 3.12 has no sys.monitoring"
        with self.lock:
            if self.tool is None:
                for tool in _TOOL_IDS:
                    if m.get_tool(tool) is None:
                        try:
                            m.use_tool_id(tool, _TOOL_NAME)
                        except ValueError:
                            continue
                        m.register_callback(tool, m.events.PY_RETURN, self._on_return)
                        self.tool = tool
                        break
                else:
                    return (f"next_call: sys.monitoring tool ids {', '.join(map(str, _TOOL_IDS))} "
                            f"are taken ({', '.join(str(m.get_tool(t)) for t in _TOOL_IDS)})")
            self.listeners += (steps,)
        return "caller_return"

    def watch(self, code: Any) -> None:
        """PY_RETURN on this code object from now on (once per code)."""
        if id(code) in self.codes:
            return
        with self.lock:
            if self.tool is None or id(code) in self.codes:
                return
            m = self.monitoring
            m.set_local_events(self.tool, code, m.events.PY_RETURN)
            self.codes[id(code)] = code

    def detach(self, steps: ModuleSteps) -> None:
        with self.lock:
            if steps not in self.listeners:
                return
            self.listeners = tuple(x for x in self.listeners if x is not steps)
            if self.listeners or self.tool is None:
                return
            m, tool = self.monitoring, self.tool
            self.tool = None
            for code in self.codes.values():
                m.set_local_events(tool, code, 0)
            self.codes.clear()
            m.register_callback(tool, m.events.PY_RETURN, None)
            m.free_tool_id(tool)

    def _on_return(self, code: Any, offset: int, value: Any) -> None:
        # the frame returning is the callback's caller
        self.returned(sys._getframe(1))

    def returned(self, frame: Any) -> None:
        """`frame` is returning: each ModuleSteps whose open step it made
        ends that step.  Nothing raises from here into the user's function."""
        for steps in self.listeners:
            try:
                steps.caller_returned(frame)
            except Exception:  # noqa: BLE001 - caller_returned counts its own
                pass


RETURNS = CallerReturns()


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
    """The hooks on one module, for one running profile.

    The pre-hook runs once per call of the module, so a token's step pays
    for every line of it (cold: its code is out of the caches after each
    forward); the common case (one thread, the caller where it was last
    time, the last step open and not held) runs in _before alone, with the
    thread's state in one list: [call depth, open step, the id of the frame
    whose return ends it, held]."""

    def __init__(self, prof: Any, module: Any) -> None:
        # Only the profile's (or watch's) step method is kept, not the profile:
        # a Profile's is its Stepper's C method, which holds no reference back,
        # so a finished Profile and its ModuleSteps make no reference cycle.
        # A watch gives its step opener instead (_open_step: a step made and
        # entered in one call); a profile's step is made and entered here.
        self._step = prof.step
        self._open = getattr(prof, "_open_step", None)
        self._local = threading.local()
        self.calls = 0           # top-level calls seen
        self.skipped = 0         # top-level calls that could not open a step
        self.ended_by_return = 0  # steps ended by their caller's return
        self.errors: list[str] = []
        self._handles = []
        # loopscope's folder and torch's package folder (their frames are not
        # the caller), for str.startswith
        self._inside_roots: tuple[str, ...] = ()
        self._caller_depth = 0   # the caller's depth below _before, last time
        self._returns = RETURNS  # read here, so a test may stand another in
        self._codes = self._returns.codes
        self.ends = self._returns.attach(self)
        self._by_return = self.ends == "caller_return"
        try:
            self._handles.append(module.register_forward_pre_hook(
                self._before, with_kwargs=True, prepend=True))
            self._handles.append(module.register_forward_hook(self._after, always_call=True))
        except TypeError as error:  # a torch older than 2.1: no always_call / prepend
            self.remove()
            raise TypeError(f"steps=module needs torch >= 2.1 (forward hooks with "
                            f"always_call and prepend): {error}") from None

    def _state(self) -> list[Any]:
        """This thread's [depth, step, caller id, held]."""
        try:
            return self._local.st
        except AttributeError:
            st = self._local.st = [0, None, None, False]
            return st

    def _error(self, error: BaseException) -> None:
        if len(self.errors) < 3:
            self.errors.append(f"{type(error).__name__}: {error}")

    def _before(self, module: Any, args: Any, kwargs: Any) -> None:
        try:
            st = self._local.st
        except AttributeError:
            st = self._state()
        if st[0]:
            st[0] += 1
            return None
        st[0] = 1
        self.calls += 1
        caller: Any = None
        if self._by_return:
            try:
                # the caller where it was last time, when that frame is
                # outside and the one below it inside (sys._getframe(k) makes
                # no frame object for the frames it passes: ~0.3 us, the
                # walk ~1.5 us)
                depth, roots = self._caller_depth, self._inside_roots
                if depth:
                    try:
                        caller = _getframe(depth)
                        if caller.f_code.co_filename.startswith(roots) or \
                                not _getframe(depth - 1).f_code.co_filename.startswith(roots):
                            caller = None
                    except ValueError:  # the stack is shallower now
                        caller = None
                if caller is None:
                    caller = self._find_caller()
            except Exception as error:  # the step then ends at the next call
                caller = None
                self._error(error)
        try:
            step = st[1]
            if step is not None:
                if st[3]:
                    self._close_open(st, caller)
                else:  # the common case: the last step ends at this call
                    st[1] = st[2] = None
                    step.__exit__(None, None, None)
            opener = self._open
            if opener is None:  # a profile's C step: made and entered, no Python frame
                step = self._step()
                step.__enter__()
                st[1] = step
            else:
                st[1] = opener()
        except Exception as error:  # never the user's forward's problem
            self.skipped += 1
            self._error(error)
            return None
        if caller is not None:
            try:
                code = caller.f_code
                if id(code) not in self._codes:
                    self._returns.watch(code)
                # the frame lives (and keeps its id) until it returns; no
                # reference is held, so its locals are never kept past it
                st[2] = id(caller)
            except Exception as error:  # the step then ends at the next call
                self._error(error)
        return None

    def _find_caller(self) -> Any:
        """The function whose return ends the step about to open: the first
        frame outside torch's package and loopscope's (the hook runs under
        torch's Module.__call__); None where there is none.  Its depth below
        _before is kept for the next call."""
        roots = self._inside_roots
        if not roots:
            torch_module = sys.modules.get("torch.nn.modules.module")
            tail = os.path.join("nn", "modules", "module.py")
            name = getattr(torch_module, "__file__", None) or ""
            if not name.endswith(tail):
                return None
            roots = self._inside_roots = (_PACKAGE, name[:-len(tail)])
        # from _before's caller: frame 0 here is this function, 1 _before
        frame: Any = sys._getframe(2)
        depth = 1
        while frame is not None and frame.f_code.co_filename.startswith(roots):
            frame, depth = frame.f_back, depth + 1
        if frame is None:
            return None
        self._caller_depth = depth
        return frame

    def _inside(self, filename: str) -> bool:
        """A frame of loopscope's package (the hooks; `run --watch-module`'s
        first call comes through its global pre-hook) or of torch's."""
        return filename.startswith(self._inside_roots or _PACKAGE)

    def caller_returned(self, frame: Any) -> None:
        """From the PY_RETURN callback, on the returning thread: the open
        step's caller returned, so the step ends here, unless the function
        it returns into makes the next call: generate()'s first forward is
        made by a helper (transformers 5's `_prefill`) that returns into the
        decode loop, whose work on that token belongs to the step.  So the
        end is marked here and the step held open; the next call from that
        function takes the mark back, and its return, a call from anywhere
        else, or the profile's end ends the step at the mark.  A caller is
        noted only beside an open step, and _close_open clears both."""
        st = self._state()
        if st[2] != id(frame) or st[0]:
            return
        try:
            step = st[1]
            parent = None if st[3] else frame.f_back
            if parent is not None and not self._inside(parent.f_code.co_filename) \
                    and step._mark_end():
                # held before the watch: should it fail, the next call or the
                # profile's end still ends the step at its mark
                st[2], st[3] = id(parent), True
                self._returns.watch(parent.f_code)
            else:
                self._close_open(st, returned=True)
        except Exception as error:  # never the user's function's problem
            self._error(error)

    def enter_call(self, module: Any, args: Any) -> None:
        """The call under way when the hooks were added (`loopscope run
        --watch-module` adds them from a global pre-hook, which runs before
        the module's own): its step opens here, as the pre-hook would have
        opened it; the forward hook, added before the forward ends, closes
        its depth."""
        self._before(module, args, {})

    def _after(self, module: Any, args: Any, output: Any) -> None:
        try:
            st = self._local.st
        except AttributeError:  # hooks added under a call _before never saw
            return None
        if st[0] > 0:
            st[0] -= 1
        return None

    def _close_open(self, st: list[Any], caller: Any = None, returned: bool = False) -> None:
        """Ends the open step: at its mark when its end was marked (held),
        unless `caller`, the next call's, is the function its caller
        returned into.  `returned`: its caller's return ends it."""
        step, returned_into, held = st[1], st[2], st[3]
        st[1] = st[2] = None
        st[3] = False
        if step is None:
            return
        if held and caller is not None and id(caller) == returned_into:
            # that function's own next call: the step lasts to here, unless
            # a step of the user's ended it at its mark meanwhile
            if not step._unmark_end():
                self.ended_by_return += 1
        elif held or returned:
            self.ended_by_return += 1
        step.__exit__(None, None, None)

    def close(self) -> None:
        """At the profile's end (on its thread): closes this thread's open
        step and removes the hooks.  Steps left open on other threads end
        with the profile."""
        try:
            self._close_open(self._state())
        finally:
            self.remove()

    def remove(self) -> None:
        while self._handles:
            self._handles.pop().remove()
        self._returns.detach(self)

    def note(self) -> dict[str, Any]:
        """summary["module_steps"]: what the hooks saw, and which rule ended
        the steps ("caller_return", or "next_call: why not")."""
        return {"calls": self.calls, "skipped": self.skipped, "errors": list(self.errors),
                "ends": self.ends, "ended_by_return": self.ended_by_return}
