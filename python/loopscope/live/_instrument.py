"""Per-layer ranges for PyTorch modules: `loopscope.instrument(model)`.

Each instrumented submodule call becomes a range (NVTX + loopscope's own
host timestamps, through the same C range stack as `loopscope.range`),
named by the module's path and prefixed by the step open on the calling
thread: `Step_3/layers.0/mlp`.  The analysis then projects GPU work onto the
ranges by correlation id, as Nsight Systems projects NVTX ranges: an op
belongs to every range that was open when its launch call began.

How.  instrument() puts a `CallRange` (a C functools.partial subclass)
in each module's __dict__ as `_call_impl`, around torch's own
Module._call_impl (which Module.__call__ looks up on the instance): its call
opens the module's range, runs the module's call and closes the range, all
in C.  The modules get no hooks, so torch keeps its no-hook fast path and a
module call costs a fraction of a microsecond more (benchmarks/host/ranges.py).
The range covers the whole module call, the user's own hooks included.
`forward` is left alone (torch.compile looks at it).  remove() gives every
module back exactly what it had: no `_call_impl` entry (or the one it had).
A copy or a pickle of an instrumented module holds torch's plain call.

Names.  A module's default name is its path below the instrumented root,
with "/" between levels except before a numeric index, which stays on its
container: `layers.0.mlp` -> `layers.0/mlp`.  The root itself is named by its
class (`Transformer`).  `names={"layers.0.mlp": "Layer_0/MLP"}` renames
modules by their dotted path ("" is the root); a value of None leaves that
module out (its children stay in).  Backward ranges (backward=True) are the
forward name plus ".backward".  Names cannot contain NUL.

Step prefix.  A step open on the calling thread (Profile.step()) prefixes
the names; each module builds its prefixed name once per step.  Those names
belong to the profile's records and are freed with its capture; for very
long loops step_prefix=False saves the one name per module and step (the
step still encloses the ranges in Nsight and in the summary).

CUDA graphs.  The wrapper makes no CUDA call (no allocation on the device,
no sync), so it is safe inside CUDA graph capture: ranges during capture are
host-only, and a replay runs no Python at all, so its kernels go to the
range around the replay (the step).

torch.compile.  Dynamo sees a functools.partial and traces the wrapped
call: no graph break, and no per-layer range inside compiled code (the
kernels count for the enclosing range; Inductor fuses across layers
anyway).  An eager fallback (graph break, recompile limit) runs the
wrappers as usual.  Instrument the module torch.compile returned (an
OptimizedModule) to get one range per call at the compiled boundary (the
modules inside it are not wrapped).  Module.compile() (in place) compiles
the module's wrapped call: it gets no range at all.  TorchScript modules take
no Python wrapper: a scripted root is refused, scripted submodules are left out
(their work counts for the enclosing range).

Exceptions.  A forward that raises closes its range where the exception
passes.  One left by a BaseException that is not an Exception
(KeyboardInterrupt, SystemExit) is closed the same way and counted as a
nesting mismatch (handle.mismatches, summary["overhead"]
["instrument_mismatches"]): its times stop where it was cut.  Backward
ranges use full backward hooks; a backward post hook that never ran leaves
its range open until the next post hook of an enclosing module on that
thread closes it (counted the same way) or the profile stops.  Nothing here
raises for a mismatch.
"""
from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Mapping
from typing import Any

from .. import _core

__all__ = ["InstrumentHandle", "instrument"]


class _ThreadState(threading.local):
    """Per thread: the backward sites whose ranges are open (innermost last)."""

    def __init__(self) -> None:
        self.stack: list[Any] = []


_local = _ThreadState()


def mismatch_count() -> int:
    """Nesting mismatches counted so far by every instrumented site (process wide)."""
    return _core._instrument_mismatches()


def _close_from(stack: list[Any], index: int, counted: bool) -> None:
    """Closes the backward ranges of stack[index:], innermost first."""
    while len(stack) > index:
        site = stack.pop()
        if counted:
            site.count_mismatch()
        site.exit()


def _backward_hooks(site: Any, is_compiling: Any) -> tuple[Any, Any]:
    """A full backward pre hook opening `site`'s range and a full backward
    hook closing it (closing, counted, the ranges opened inside it whose
    post hooks never ran)."""
    local = _local

    def pre(module: Any, grad_output: Any) -> None:
        if is_compiling():
            return None
        if site.enter():
            local.stack.append(site)
        return None

    def post(module: Any, grad_input: Any, grad_output: Any) -> None:
        if is_compiling():
            return None
        stack = local.stack
        if stack and stack[-1] is site:
            stack.pop()
            site.exit()
            return None
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is site:
                _close_from(stack, i + 1, counted=True)  # post hooks that never ran
                _close_from(stack, i, counted=False)     # and this site's own
                return None
        site.count_mismatch()  # its pre hook never ran: nothing to close
        return None

    return pre, post


_MISSING = object()


class InstrumentHandle:
    """What `instrument()` returns: the wrapped module calls and the hooks.

    remove() gives every module back what it had (a second remove() does
    nothing); used as a context manager, at the end of the with-block.
    names:      {dotted module path: range name (without the step prefix)}.
    mismatches: nesting mismatches of this handle's modules (see the module doc).
    """

    def __init__(self, names: dict[str, str], wrapped: list[tuple[Any, Any, Any]],
                 hooks: list[tuple[Any, Any, Any]], sites: list[Any], root_type: str) -> None:
        self._names = names
        # Modules are held weakly (as torch's hook handles hold their dicts): a
        # handle kept somewhere must not keep a dropped model and its memory.
        self._wrapped = wrapped  # (module ref, CallRange, its previous _call_impl or _MISSING)
        self._hooks = hooks  # (module ref, hook handle, its _is_full_backward_hook before)
        self._sites = sites
        self._root_type = root_type

    @property
    def names(self) -> dict[str, str]:
        return dict(self._names)

    @property
    def mismatches(self) -> int:
        return sum(site.mismatches for site in self._sites)

    @property
    def active(self) -> bool:
        return bool(self._wrapped or self._hooks)

    def remove(self) -> None:
        wrapped, self._wrapped = self._wrapped, []
        hooks, self._hooks = self._hooks, []
        for ref, wrapper, previous in wrapped:
            module = ref()
            if module is not None:
                _unwrap(module, wrapper, previous)
        for ref, hook, flag in hooks:
            hook.remove()
            module = ref()
            if (module is not None and not module._backward_hooks
                    and "_is_full_backward_hook" in vars(module)):
                module._is_full_backward_hook = flag  # torch set it for our hook: as it was

    def __enter__(self) -> "InstrumentHandle":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        self.remove()
        return False

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        state = "active" if self.active else "removed"
        return (f"<loopscope.InstrumentHandle {self._root_type}: {len(self._names)} modules, "
                f"{state}, mismatches={self.mismatches}>")


def _wrap(module: Any, site: Any) -> tuple[Any, Any, Any]:
    """Puts site's CallRange in module.__dict__ as `_call_impl`; returns
    (a weak reference to module, wrapper, the entry it replaced or _MISSING)."""
    own = vars(module)
    previous = own.get("_call_impl", _MISSING)
    wrapper = _core.call_range(module, site)
    own["_call_impl"] = wrapper
    return weakref.ref(module), wrapper, previous


def _unwrap(module: Any, wrapper: Any, previous: Any) -> None:
    own = vars(module)
    if own.get("_call_impl") is not wrapper:
        return  # replaced since by its owner: theirs now
    if previous is _MISSING:
        del own["_call_impl"]
    else:
        own["_call_impl"] = previous


def _never() -> bool:
    return False


def _torch() -> Any:
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch  # noqa: F811  (imported on first use: loopscope works without it)
        except ImportError:
            raise TypeError("loopscope.instrument() needs PyTorch: `import torch` failed") from None
    return torch


def _optimized_module_type() -> Any:
    """torch.compile's wrapper type, if Dynamo was ever imported (else none can exist)."""
    frames = sys.modules.get("torch._dynamo.eval_frame")
    return getattr(frames, "OptimizedModule", None) if frames else None


def default_name(path: str) -> str:
    """`layers.0.mlp` -> `layers.0/mlp`: "/" between levels, a numeric index
    stays on its container."""
    parts = path.split(".")
    name = parts[0]
    for part in parts[1:]:
        name += ("." if part.isdigit() else "/") + part
    return name


def _walk(root: Any, depth: int | None, compiled_type: Any, script_type: Any) -> list[tuple[str, Any]]:
    """(path, module) in pre-order, each module once (like named_modules),
    down to `depth`; not below a compiled module (its boundary is the
    range); TorchScript submodules left out (they take no Python hooks)."""
    out: list[tuple[str, Any]] = []
    seen: set[int] = set()
    todo: list[tuple[str, Any, int]] = [("", root, 0)]
    while todo:
        path, module, level = todo.pop()
        if id(module) in seen or isinstance(module, script_type):
            continue
        seen.add(id(module))
        out.append((path, module))
        if compiled_type is not None and isinstance(module, compiled_type):
            continue
        if depth is not None and level >= depth:
            continue
        children = [(f"{path}.{name}" if path else name, child, level + 1)
                    for name, child in module._modules.items() if child is not None]
        todo.extend(reversed(children))
    return out


def _check_names(names: Any) -> dict[str, str | None]:
    if names is None:
        return {}
    if not isinstance(names, Mapping):
        raise TypeError(f"names must be a mapping {{module path: range name}}, got "
                        f"{type(names).__name__}")
    for key, value in names.items():
        if not isinstance(key, str):
            raise TypeError(f"names: keys are dotted module paths (str), got {key!r}")
        if value is not None and (not isinstance(value, str) or not value):
            raise TypeError(f"names[{key!r}] must be a non-empty str (or None to leave the "
                            f"module out), got {value!r}")
        if value is not None and "\0" in value:
            raise ValueError(f"names[{key!r}] = {value!r} contains a NUL character (U+0000): "
                             "names are C strings for NVTX and would be cut there; remove it")
    return dict(names)


def instrument(module: Any, depth: int | None = None, names: Mapping[str, str | None] | None = None,
               *, backward: bool = False, step_prefix: bool = True) -> InstrumentHandle:
    """Puts a range around every call of `module` and its submodules.

    depth:       how many levels below `module` get ranges (0: the module
                 itself only; None: all).
    names:       {dotted path: range name}, e.g. {"layers.0.mlp": "Layer_0/MLP"};
                 "" is the root; None as a value leaves that module out.
    backward:    also range each module's backward ("<name>.backward"), through
                 full backward hooks (these wrap the module's inputs and outputs
                 for autograd; modules that modify their output in place cannot
                 have them).
    step_prefix: prefix names with the open step ("Step_3/layers.0/mlp").
    Returns an InstrumentHandle; `with loopscope.instrument(model): ...`
    removes the hooks at the end.  Needs torch >= 2.1 (always_call hooks).
    See the module doc for torch.compile, CUDA graphs and exceptions."""
    torch = _torch()
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"loopscope.instrument() takes a torch.nn.Module, not "
                        f"{type(module).__module__}.{type(module).__qualname__}")
    if isinstance(module, torch.jit.ScriptModule):
        raise TypeError("loopscope.instrument() cannot hook a TorchScript module (it takes no "
                        "Python hooks): wrap its call in loopscope.range(...) instead")
    if depth is not None and (not isinstance(depth, int) or isinstance(depth, bool)):
        raise TypeError(f"depth must be None or an int >= 0, got {depth!r}")
    if depth is not None and depth < 0:
        raise ValueError(f"depth must be None or an int >= 0, got {depth}")
    mapping = _check_names(names)
    compiled_type = _optimized_module_type()
    modules = _walk(module, depth, compiled_type, torch.jit.ScriptModule)
    paths = {path for path, _ in modules}
    unknown = sorted(set(mapping) - paths)
    if unknown:
        sample = ", ".join(repr(p) for p in sorted(paths)[:8])
        within = f" within depth {depth}" if depth is not None else ""
        raise ValueError(f"names: no module at {', '.join(map(repr, unknown))}{within}; "
                         f"paths are dotted, like named_modules(): {sample}, ...")
    for path, sub in modules:
        if isinstance(vars(sub).get("_call_impl"), _core.CallRange):
            where = f"its submodule {path!r}" if path else "it"
            raise RuntimeError(
                f"{type(module).__name__} is already instrumented ({where} has a loopscope "
                "range): call remove() on the first handle before instrumenting again")

    unimplemented = torch.nn.Module.forward
    # An older torch without torch.compiler.is_compiling: the backward hooks
    # always run (Dynamo may then break a compiled graph at them).
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or _never
    chosen: dict[str, str] = {}
    wrapped: list[tuple[Any, Any, Any]] = []
    hooks: list[tuple[Any, Any, Any]] = []
    sites: list[Any] = []
    try:
        for path, sub in modules:
            if type(sub).forward is unimplemented and "forward" not in vars(sub):
                continue  # containers (ModuleList, ...) are never called
            if path in mapping:
                name = mapping[path]
                if name is None:
                    continue
            elif path:
                name = default_name(path)
            elif compiled_type is not None and isinstance(sub, compiled_type):
                name = f"{type(sub._orig_mod).__name__}[compiled]"
            else:
                name = type(sub).__name__
            site = _core.Site(name, bool(step_prefix))
            sites.append(site)
            wrapped.append(_wrap(sub, site))
            if backward:
                bsite = _core.Site(f"{name}.backward", bool(step_prefix), any_thread=True)
                sites.append(bsite)
                bpre, bpost = _backward_hooks(bsite, is_compiling)
                flag = getattr(sub, "_is_full_backward_hook", None)
                ref = weakref.ref(sub)
                hooks.append((ref, sub.register_full_backward_pre_hook(bpre, prepend=True), flag))
                hooks.append((ref, sub.register_full_backward_hook(bpost), flag))
            chosen[path] = name
    except Exception as error:
        InstrumentHandle(chosen, wrapped, hooks, sites, "").remove()
        where = f"module {path!r}" if path else "the root module"
        raise TypeError(f"loopscope.instrument(): cannot hook {where} "
                        f"({type(sub).__name__}): {error}") from error
    return InstrumentHandle(chosen, wrapped, hooks, sites, type(module).__name__)
