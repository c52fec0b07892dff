"""How names are shown to a person.  The summary dicts keep the raw names
(the kernel name CUPTI gave, the absolute file path); every view (report,
HTML, trace export, budget and strict-mode messages) formats them here, at
display time, so the dicts stay exact and the views agree.

Kernel names (`kernel_name`): C++ kernels arrive mangled
(`_ZN2at6native29vectorized_elementwise_kernelILi8E...`).  They are
demangled by the C++ runtime (`abi::__cxa_demangle`, through
`_core.demangle`) and then shortened to what a report line or a time line
row can hold (Nsight Systems, too, labels kernels by a short name and keeps
the whole signature for the details):
- the return type (`void `) and the parameter list are left out;
- each template argument list becomes `<...>`;
- the file-local `(anonymous namespace)::` scope is left out (nvcc names
  it after the .cu file; it tells a user nothing);
- namespaces and enclosing classes stay, so `at::native::...` (PyTorch) and
  `cublasLt::...` (cuBLAS) tell apart.
So `void at::native::(anonymous namespace)::vectorized_layer_norm_kernel
<c10::BFloat16, float, false>(int, float, ...)` is shown as
`at::native::vectorized_layer_norm_kernel<...>`.  Names that are not
mangled C++ (`nvjet_sm90_...`, `triton_poi_...`, memcpy names) and names the
runtime cannot demangle are shown as they are.  A name that already comes
demangled (a kernel signature from another tool's trace: it starts with
`void `, or has a `::` scope and ends with a parameter list) is shortened
the same way; text whose brackets do not balance is shown whole.
`demangled_name` gives the whole demangled text, for tooltips and trace
arguments.

Source files (`display_path`): as Python tracebacks show them to users of
installed libraries: a file inside site-packages or dist-packages as the
path below that folder (`transformers/generation/utils.py`), a file below
the current directory relative to it, any other file as it is.

One-line outputs clip long texts with `clip`."""
from __future__ import annotations

import functools
import os
import re
from pathlib import PurePath

from .. import _core

_ANONYMOUS = "(anonymous namespace)::"
_QUALIFIERS = (" const", " volatile", " &&", " &", " noexcept")
_OPENERS = {"<": ">", "(": ")", "{": "}", "[": "]"}
_CLOSERS = set(_OPENERS.values())


@functools.lru_cache(maxsize=65536)
def demangled_name(raw: str | None) -> str | None:
    """The whole demangled text of a mangled C++ name; any other name (and a
    name the runtime cannot demangle) as it is; None stays None."""
    if not raw:
        return raw
    return _core.demangle(raw) or raw


@functools.lru_cache(maxsize=65536)
def kernel_name(raw: str | None) -> str | None:
    """The short form of a kernel (or any GPU op) name, see the module doc;
    None stays None."""
    if not raw:
        return raw
    text = _core.demangle(raw)
    if text is None:
        if not _looks_demangled(raw):
            return raw
        text = raw
    return _shorten(text) or text


def _looks_demangled(name: str) -> bool:
    """A C++ signature another tool demangled already.  CUDA kernels return
    void, so a demangled template kernel starts with `void `; memcpy names
    ("Memcpy HtoD (Pageable -> Device)") have no `::` scope."""
    return name.startswith("void ") or ("::" in name and name.endswith(")"))


# A demangled name cut into brackets, spaces, operator names (`operator<`,
# `operator()`: names, not brackets) and the plain text between them.
_TOKENS = re.compile(r"(\boperator(?:\(\)|\[\]|[<>=!+\-*/%^&|~,]+)|[<>(){}\[\] ])")


def _shorten(text: str) -> str | None:
    """The demangled `text` with its return type, parameter list, template
    arguments and anonymous scopes left out; None when its brackets do not
    balance (the caller then shows the whole text)."""
    while text.endswith("]") and " [clone " in text:  # g++'s "[clone .cold]" suffixes
        text = text[: text.rindex(" [clone ")]
    out: list[str] = []  # the text, each template list at depth 0 as "<...>"
    size = 0             # len("".join(out))
    spaces: list[int] = []              # where `out` has a space at depth 0
    groups: list[tuple[int, int]] = []  # (start, end) in `out` of each "(...)" at depth 0
    closers: list[str] = []             # the open brackets' closing characters
    for token in _TOKENS.split(text):
        if token in _OPENERS:
            if not closers and token == "(":
                groups.append((size, -1))
            closers.append(_OPENERS[token])
            if len(closers) == 1 and token == "<":
                token = "<...>"
        elif token in _CLOSERS:
            if not closers or closers.pop() != token:
                return None
            if not closers and token == ">":
                continue  # the end of a "<...>" already written
        elif token == " " and not closers:
            spaces.append(size)
        if closers and closers[0] == ">" and token != "<...>":
            continue  # inside a collapsed template argument list
        out.append(token)
        size += len(token)
        if not closers and token == ")":
            groups[-1] = (groups[-1][0], size)
    if closers:
        return None
    flat = "".join(out)
    stripped = True
    while stripped:
        stripped = False
        for qualifier in _QUALIFIERS:
            if flat.endswith(qualifier):
                flat, stripped = flat[: -len(qualifier)], True
    params = next((g for g in reversed(groups) if g[1] == len(flat)), None)
    if params is not None and params[0] > 0 and not flat.endswith("(anonymous namespace)"):
        flat = flat[: params[0]]
    cut = max((s for s in spaces if s < len(flat)), default=-1)
    return flat[cut + 1:].replace(_ANONYMOUS, "") or None


def clip(text: str, width: int) -> str:
    """`text` cut to `width` characters for a one-line output, "..." marking
    the cut."""
    if len(text) <= width:
        return text
    return text[: max(width - 3, 0)] + "..."


_PACKAGE_FOLDERS = ("site-packages", "dist-packages")


def display_path(file: str | None) -> str:
    """A source file as tracebacks users know show it (see the module doc)."""
    if not file:
        return "<no Python frame>"
    parts = PurePath(file).parts
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in _PACKAGE_FOLDERS:
            return os.path.join(*parts[i + 1:])
    try:
        rel = os.path.relpath(file)
    except (ValueError, OSError):  # another drive (Windows), or the current folder is gone
        return file
    return file if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel
