"""Per-layer ranges for PyTorch modules: `loopscope.instrument(model)`.

Each instrumented submodule call becomes a range (NVTX + loopscope's own
host timestamps, through the same C range as `loopscope.range`), named by
the module's path and prefixed by the step open on the calling thread:
`Step_3/layers.0/mlp`.  The analysis then projects GPU work onto the ranges
by correlation id, as Nsight Systems projects NVTX ranges: an op belongs to
every range that was open when its launch call began.

Names.  A module's default name is its path below the instrumented root,
with "/" between levels except before a numeric index, which stays on its
container: `layers.0.mlp` -> `layers.0/mlp`.  The root itself is named by its
class (`Transformer`).  `names={"layers.0.mlp": "Layer_0/MLP"}` renames
modules by their dotted path ("" is the root); a value of None leaves that
module out (its children stay in).  Backward ranges (backward=True) are the
forward name plus ".backward".

Step prefix.  Profile.step() returns a `StepScope`, which records the open
step's label on a thread-local; a hook reads it, and keeps the last Range it
built per module, so after the first call in a step a hook builds no string.
Every (step, module) pair is one name interned for the life of the process
(about 300 bytes); for very long loops use step_prefix=False (one name per
module: the step still encloses it in Nsight and in the summary).

Costs.  Hooks only push/pop a C range (no CUDA call, no allocation on the
device, no sync), so they are safe inside CUDA graph capture: ranges during
capture are host-only, and a replay runs no hooks at all, so its kernels go
to the range around the replay (the step).  torch's own hook dispatch is
most of the cost per call; benchmarks/bench_instrument.py measures it.

torch.compile.  Instrument the module torch.compile returned (an
OptimizedModule): its call gets a range at the compiled boundary and the
hooks inside it are not registered.  Hooks on modules that run inside a
compiled region skip themselves while Dynamo traces (no graph break), so the
compiled code carries no per-layer ranges: inside compiled regions the
per-layer split is lost (Inductor fuses across layers anyway), and the
kernels count for the enclosing range.  An eager fallback (graph break,
recompile limit) runs the hooks as usual.  Module.compile() (in place)
compiles the module's own hooks too: it gets no range at all.  TorchScript
modules take no Python hooks: a scripted root is refused, scripted
submodules are left out (their work counts for the enclosing range).

Exceptions.  The post hook is registered with always_call=True, so a forward
that raises an Exception still closes its range.  A BaseException
(KeyboardInterrupt) skips torch's post hooks; the ranges it left open on the
thread are closed when the enclosing step ends (or by the next post hook of
an enclosing module), and counted as nesting mismatches
(handle.mismatches, summary["overhead"]["instrument_mismatches"]).  A post
hook whose pre hook never ran (hooks added in the middle of a forward) is
counted the same way and closes nothing.  Nothing here raises for a
mismatch.
"""
from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from typing import Any

from . import _core

__all__ = ["InstrumentHandle", "StepScope", "instrument"]


class _ThreadState(threading.local):
    """Per thread: the open step's label and the sites of the hook ranges
    open on this thread (innermost last)."""

    def __init__(self) -> None:
        self.step: str | None = None
        self.stack: list[_Site] = []
        self.mark = 0  # len(stack) when the open step began


_local = _ThreadState()
# The label of the step most recently entered on any thread and still open:
# backward hooks run on autograd's device threads, where no step is open.
_open_step: list[str | None] = [None]
# Nesting mismatches seen by every hook since the process started.
_mismatches = [0]
_NOT_YET = object()


def mismatch_count() -> int:
    """Nesting mismatches counted so far (process wide)."""
    return _mismatches[0]


class StepScope:
    """A step's range (what `Profile.step()` returns), which also tells the
    hooks of `instrument()` which step is open on this thread."""

    __slots__ = ("_range", "_label")

    def __init__(self, step_range: Any) -> None:
        self._range = step_range
        self._label = step_range.name

    def __enter__(self) -> Any:
        entered = self._range.__enter__()  # raises if a step is open here: nothing changes then
        local = _local
        local.step = self._label
        local.mark = len(local.stack)
        _open_step[0] = self._label
        return entered

    def __exit__(self, exc_type, exc, tb) -> bool:
        local = _local
        if len(local.stack) > local.mark:  # hook ranges a BaseException left open
            _close_from(local.stack, local.mark, counted=True)
        local.step = None
        if _open_step[0] is self._label:
            _open_step[0] = None
        return self._range.__exit__(exc_type, exc, tb)

    @property
    def name(self) -> str:
        return self._label

    @property
    def step(self) -> int:
        return self._range.step

    def __repr__(self) -> str:
        return repr(self._range)


class _Site:
    """One hooked call site (a module's forward, or its backward): its name,
    the Range built for the last step seen, and its handle's counters."""

    __slots__ = ("name", "prefix", "cached", "counts")

    def __init__(self, name: str, prefix: bool, counts: list[int]) -> None:
        self.name = name
        self.prefix = prefix
        self.cached: tuple[Any, Any] = (_NOT_YET, None)  # (step label, Range), replaced whole
        self.counts = counts

    def range_for(self, step: str | None) -> Any:
        """The Range for this site in `step` (the slow path: once per step)."""
        full = f"{step}/{self.name}" if (self.prefix and step is not None) else self.name
        rng = _core.range(full)
        self.cached = (step, rng)
        return rng


def _count(site: _Site, n: int = 1) -> None:
    site.counts[0] += n
    _mismatches[0] += n


def _close_from(stack: list[_Site], index: int, counted: bool) -> None:
    """Closes the ranges of stack[index:], innermost first.  Ranges close in
    the C core by position (the innermost open range of the thread), which
    the stack mirrors."""
    while len(stack) > index:
        site = stack.pop()
        if counted:
            _count(site)
        site.cached[1].__exit__(None, None, None)


def _unbalanced(stack: list[_Site], site: _Site) -> None:
    """A post hook whose range is not the innermost hook range of the thread."""
    for i in range(len(stack) - 1, -1, -1):
        if stack[i] is site:
            _close_from(stack, i + 1, counted=True)  # ranges whose post hooks never ran
            _close_from(stack, i, counted=False)     # and this site's own
            return
    _count(site)  # its pre hook never ran (or its range was closed already): nothing to close


def _post_hook(site: _Site, is_compiling: Any) -> Any:
    """The post hook closing `site`'s range: one body for the forward hook
    (module, args, output) and the full backward hook (module, grad_input,
    grad_output), which take the same number of arguments."""
    local = _local

    def post(module, _inputs, _outputs):
        if is_compiling():
            return None
        stack = local.stack
        if stack and stack[-1] is site:
            stack.pop()
            site.cached[1].__exit__(None, None, None)
        else:
            _unbalanced(stack, site)
        return None

    return post


def _forward_hooks(site: _Site, is_compiling: Any) -> tuple[Any, Any]:
    local = _local

    def pre(module, args):
        if is_compiling():
            return None
        step = local.step
        cached = site.cached
        rng = cached[1] if cached[0] is step else site.range_for(step)
        rng.__enter__()
        local.stack.append(site)
        return None

    pre.__loopscope_site__ = site  # type: ignore[attr-defined]
    return pre, _post_hook(site, is_compiling)


def _backward_hooks(site: _Site, is_compiling: Any) -> tuple[Any, Any]:
    local = _local

    def pre(module, grad_output):
        if is_compiling():
            return None
        step = local.step or _open_step[0]
        cached = site.cached
        rng = cached[1] if cached[0] is step else site.range_for(step)
        rng.__enter__()
        local.stack.append(site)
        return None

    return pre, _post_hook(site, is_compiling)


class InstrumentHandle:
    """What `instrument()` returns: the hooks it registered.

    remove() takes every hook off (a second remove() does nothing); used as a
    context manager, the hooks go at the end of the with-block.
    names:      {dotted module path: range name (without the step prefix)}.
    mismatches: nesting mismatches this handle's hooks saw (see the module doc).
    """

    def __init__(self, names: dict[str, str], hooks: list[Any], counts: list[int],
                 root_type: str) -> None:
        self._names = names
        self._hooks = hooks
        self._counts = counts
        self._root_type = root_type

    @property
    def names(self) -> dict[str, str]:
        return dict(self._names)

    @property
    def mismatches(self) -> int:
        return self._counts[0]

    @property
    def active(self) -> bool:
        return bool(self._hooks)

    def remove(self) -> None:
        hooks, self._hooks = self._hooks, []
        for hook in hooks:
            hook.remove()

    def __enter__(self) -> "InstrumentHandle":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.remove()
        return False

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        state = "active" if self._hooks else "removed"
        return (f"<loopscope.InstrumentHandle {self._root_type}: {len(self._names)} modules, "
                f"{state}, mismatches={self.mismatches}>")


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
        for hook in sub._forward_pre_hooks.values():
            if getattr(hook, "__loopscope_site__", None) is not None:
                where = f"its submodule {path!r}" if path else "it"
                raise RuntimeError(
                    f"{type(module).__name__} is already instrumented ({where} has loopscope "
                    "hooks): call remove() on the first handle before instrumenting again")

    unimplemented = torch.nn.Module.forward
    # An older torch without torch.compiler.is_compiling: the hooks always run
    # (Dynamo may then break a compiled graph at them).
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or _never
    counts = [0]
    chosen: dict[str, str] = {}
    hooks: list[Any] = []
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
            site = _Site(name, bool(step_prefix), counts)
            pre, post = _forward_hooks(site, is_compiling)
            hooks.append(sub.register_forward_pre_hook(pre, prepend=True))
            hooks.append(sub.register_forward_hook(post, always_call=True))
            if backward:
                bsite = _Site(f"{name}.backward", bool(step_prefix), counts)
                bpre, bpost = _backward_hooks(bsite, is_compiling)
                hooks.append(sub.register_full_backward_pre_hook(bpre, prepend=True))
                hooks.append(sub.register_full_backward_hook(bpost))
            chosen[path] = name
    except Exception as error:
        for hook in hooks:
            hook.remove()
        where = f"module {path!r}" if path else "the root module"
        raise TypeError(f"loopscope.instrument(): cannot hook {where} "
                        f"({type(sub).__name__}): {error}") from error
    return InstrumentHandle(chosen, hooks, counts, type(module).__name__)
