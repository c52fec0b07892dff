"""Implicit syncs: from the blocking calls the C core recorded (with the raw
Python stack of each) to sites a user can act on: file, line, function, the
source line, the exact call, and the kind (`item`, `print`, `cpu`, ...).

Resolution happens here, when the summary is built, never in the CUPTI
callback: the C core copies out code-object names and source positions only.
The reported site is the innermost frame outside torch, loopscope and the
standard library; frames inside torch decide the kind where they can, then
the call at the site (`x.item()`, `if t:`), then the CUDA API that waited.
"""
from __future__ import annotations

import ast
import linecache
import os
import sys
import sysconfig
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterable

from ._names import display_path

KINDS = (
    "item", "print", "cpu", "tolist", "numpy", "bool", "nonzero",
    "synchronize", "stream_sync", "event_sync", "memcpy", "other",
)

# Tensor methods and functions whose result depends on GPU data: the host
# must wait for it.
_METHOD_KINDS = {
    "item": "item", "cpu": "cpu", "tolist": "tolist", "numpy": "numpy",
    "nonzero": "nonzero", "argwhere": "nonzero", "unique": "nonzero",
    "unique_consecutive": "nonzero", "masked_select": "nonzero", "bincount": "nonzero",
    "repeat_interleave": "nonzero", "where": "nonzero",
    "synchronize": None,  # decided by the API: stream, event or device
}
_NAME_KINDS = {"print": "print", "str": "print", "repr": "print", "format": "print",
               "float": "item", "int": "item", "complex": "item", "bool": "bool",
               "list": "tolist"}
_CLASS_KINDS = {"stream": "stream_sync", "event": "event_sync", "device": "synchronize",
                "copy": "memcpy", "copy_async": "memcpy", "free": "other"}


def _folder(module_name: str) -> str | None:
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    return os.path.dirname(os.path.abspath(path)) + os.sep if path else None


_prefix_cache: dict[bool, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {}


def _internal_prefixes() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(torch and loopscope folders, installed-package folders, standard
    library folders), computed once (again if torch is imported later).
    Installed packages often live inside the standard library's folder
    (lib/python3.X/site-packages), so they are told apart first."""
    key = "torch" in sys.modules
    if key not in _prefix_cache:
        paths = sysconfig.get_paths()
        ours = tuple(p for p in (_folder("torch"), _folder("loopscope")) if p)
        packages = {os.path.abspath(paths[k]) + os.sep for k in ("purelib", "platlib") if paths.get(k)}
        packages.update(os.path.abspath(p) + os.sep for p in sys.path
                        if os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages"))
        stdlib = tuple(os.path.abspath(paths[k]) + os.sep for k in ("stdlib", "platstdlib")
                       if paths.get(k))
        _prefix_cache[key] = (ours, tuple(packages), stdlib)
    return _prefix_cache[key]


# Parsed sources by file: (the linecache lines they were parsed from, the
# hash of their text, the parsed file or None): a summary, or no_sync's
# handler, parses each file once per version of its text.
_tree_cache: dict[str, tuple[list[str], int, "_Parsed | None"]] = {}
_TREE_CACHE_SIZE = 64


@dataclass(frozen=True)
class Frame:
    file: str | None
    function: str | None
    first_line: int
    line: int
    end_line: int
    col: int
    end_col: int
    # the frame's instruction tests an object's truth (read from its
    # bytecode when captured; False where unknown: trace files)
    truth_test: bool = False

    @classmethod
    def of(cls, raw: Iterable[Any]) -> "Frame":
        return cls(*raw)


@dataclass
class Site:
    file: str | None
    line: int | None
    function: str | None
    code: str | None
    call: str | None
    kind: str


_Position = tuple[Any, Any, Any, Any]


def _first_line(node: ast.AST) -> int:
    """The first line a node's code covers: a decorated def or class
    begins at its first decorator (its own lineno is the `def` line)."""
    line: int = getattr(node, "lineno")
    decorators = getattr(node, "decorator_list", None)
    return min([line] + [d.lineno for d in decorators]) if decorators else line


def _node_at(tree: ast.AST, position: _Position) -> tuple[ast.AST | None, ast.AST | None]:
    """(the node of `tree` at position (line, col, end line, end col), its
    parent): where nodes share a position, the innermost one (the last in
    ast.walk's order).  Walks in ast.walk's order but only into the nodes
    whose lines hold the position's line (a node's children lie within its
    lines; below an f-string, whose parts Python 3.11 may place oddly,
    everything is walked), so a file of 20,000 nodes costs a few hundred
    visits instead of a walk of all of them (~60 ms on a 230 kB file)."""
    line = position[0]
    found: tuple[ast.AST | None, ast.AST | None] = (None, None)
    todo = deque([(tree, False)])
    while todo:
        parent, whole = todo.popleft()
        for child in ast.iter_child_nodes(parent):
            lineno = getattr(child, "lineno", None)
            if lineno is not None:
                end = getattr(child, "end_lineno", None)
                if (lineno, getattr(child, "col_offset", None), end,
                        getattr(child, "end_col_offset", None)) == position:
                    found = (child, parent)
                if not whole and end is not None and not _first_line(child) <= line <= end:
                    continue
            todo.append((child, whole or isinstance(child, ast.JoinedStr)))
    return found


class _Parsed:
    """A parsed source file and the nodes found in it so far, by position."""

    def __init__(self, tree: ast.AST) -> None:
        self.tree = tree
        self.found: dict[_Position, tuple[ast.AST | None, ast.AST | None]] = {}

    def node_at(self, position: _Position) -> tuple[ast.AST | None, ast.AST | None]:
        if position not in self.found:
            self.found[position] = _node_at(self.tree, position)
        return self.found[position]


class _Sources:
    """Source text of files and their syntax trees: each file parsed once
    per process and version of its text (summary() of every profile would
    otherwise parse it again: ~2 ms on the demo on the H200, ~40 ms for a
    library module of 5,000 lines)."""

    def lines(self, file: str) -> list[str]:
        return linecache.getlines(file)

    def parsed(self, file: str) -> _Parsed | None:
        """The file's parsed text (None: it does not parse).  linecache hands
        back the same list while the text it holds is unchanged, so only a
        new list costs a join and a hash of the whole text (~0.3 ms for a
        large module)."""
        lines = self.lines(file)
        cached = _tree_cache.get(file)
        if cached is not None and cached[0] is lines:
            return cached[2]
        text = "".join(lines)
        digest = hash(text)
        if cached is None or cached[1] != digest:
            if cached is None and len(_tree_cache) >= _TREE_CACHE_SIZE:
                _tree_cache.pop(next(iter(_tree_cache)))
            try:
                cached = (lines, digest, _Parsed(ast.parse(text or "\n")))
            except (SyntaxError, ValueError):
                cached = (lines, digest, None)
        _tree_cache[file] = (lines, digest, cached[2])
        return cached[2]

    def segment(self, frame: Frame) -> str | None:
        """The exact source text of the frame's instruction (3.11+ positions)."""
        lines = self.lines(frame.file) if frame.file else []
        if frame.col < 0 or not (0 < frame.line <= frame.end_line <= len(lines)):
            return None
        chunk = [lines[i].encode() for i in range(frame.line - 1, frame.end_line)]
        if len(chunk) == 1:
            text = chunk[0][frame.col:frame.end_col]
        else:
            text = chunk[0][frame.col:] + b"".join(chunk[1:-1]) + chunk[-1][:frame.end_col]
        return " ".join(text.decode(errors="replace").split()) or None

    def node_at(self, frame: Frame) -> tuple[ast.AST | None, ast.AST | None]:
        """(node whose positions are the frame's, its parent), or Nones."""
        parsed = self.parsed(frame.file) if frame.file else None
        if parsed is None or frame.col < 0:
            return None, None
        return parsed.node_at((frame.line, frame.col, frame.end_line, frame.end_col))


def _call_kind(node: ast.AST | None, parent: ast.AST | None) -> str | None:
    """Kind from the syntax at the site: x.item(), print(t), if t:, x[mask]."""
    if node is None:
        return None
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute):
            name = func.attr
            if name == "to":
                texts = [ast.unparse(a) for a in list(node.args) + [k.value for k in node.keywords]]
                return "cpu" if any("cpu" in t for t in texts) else "memcpy"
            if name in ("cuda", "copy_", "pin_memory"):
                return "memcpy"
            return _METHOD_KINDS.get(name)
        if isinstance(func, ast.Name):
            if func.id in _METHOD_KINDS:
                return _METHOD_KINDS[func.id]
            return _NAME_KINDS.get(func.id)
        return None
    if isinstance(node, ast.JoinedStr | ast.FormattedValue):
        return "print"
    if isinstance(parent, ast.If | ast.While | ast.IfExp | ast.Assert) and getattr(parent, "test", None) is node:
        return "bool"
    if isinstance(parent, ast.BoolOp) or (isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not)):
        return "bool"
    if _truth_test(node) is not None:
        return "bool"
    if isinstance(node, ast.Subscript):
        return "nonzero"  # boolean-mask indexing: the result's size depends on GPU data
    return None


def _truth_test(node: ast.AST | None) -> ast.expr | None:
    """The tested expression when the instruction's position is the whole
    truth test (3.11 gives `if x:` the position of the statement, 3.12 gives
    `x and y` and `not x` that of the expression): `x`."""
    if isinstance(node, ast.If | ast.While | ast.IfExp | ast.Assert):
        return node.test
    if isinstance(node, ast.BoolOp):
        return node.values[0]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return node.operand
    return None


def _comprehension_test(node: ast.AST | None) -> ast.expr | None:
    """The `if` of a comprehension or generator expression whose position
    is the whole comprehension (3.11 gives its tests that position), when it
    has one `if`; with more, which one tested cannot be told: None."""
    if not isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
        return None
    tests = [test for generator in node.generators for test in generator.ifs]
    return tests[0] if len(tests) == 1 else None


def _torch_kind(frames: list[Frame]) -> str | None:
    """Kind from torch's own Python frames, innermost first."""
    for f in frames:
        file = (f.file or "").replace("\\", "/")
        func = f.function or ""
        if "/torch/" not in file:
            continue
        if file.endswith("/torch/_tensor_str.py") or func in (
                "Tensor.__repr__", "Tensor.__str__", "Tensor.__format__"):
            return "print"
        if file.endswith("/torch/cuda/streams.py"):
            return "event_sync" if func.startswith("Event.") else "stream_sync"
        if file.endswith("/torch/cuda/__init__.py") and func == "synchronize":
            return "synchronize"
        if func in ("Tensor.__array__", "Tensor.numpy"):
            return "numpy"
    return None


_COPY_CLASSES = ("copy", "copy_async")


def copy_waited_for(call: dict[str, Any], before: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The copy `call` waited for, or None: `call` is a wait that is no copy
    and, among the calls its thread made just before it (latest first), a
    copy from the same Python stack was the thread's last launch (torch's
    `.item()`: a copy, then a stream sync).  Whether that copy itself made
    the host wait (pageable memory) is not asked: the profile learns it from
    the copy's record, strict mode from the driver, and either may not know;
    the sync is the same one and keeps one kind."""
    if call["wait_class"] in _COPY_CLASSES:
        return None
    for earlier in before:
        if earlier["launches_before"] + 1 < call["launches_before"]:
            return None  # older than the thread's last launch
        if (earlier["wait_class"] in _COPY_CLASSES
                and earlier["launches_before"] + 1 == call["launches_before"]
                and earlier["frames"] == call["frames"]):
            return earlier
    return None


class Resolver:
    """Turns raw calls (dicts from the C core) into sites."""

    def __init__(self) -> None:
        self._internal = _internal_prefixes()
        self._sources = _Sources()
        self._memo: dict[tuple[Any, ...], Site] = {}
        # A trace's threads named by a string ("tid": "25738") are carried as
        # that string's hash: the name, where the reader gave one, is what
        # every view shows (the summary's sites and the reasons quoting them)
        self.thread_names: dict[Any, Any] = {}

    def _is_internal(self, file: str | None) -> bool:
        """torch, loopscope and the standard library; an installed library
        (diffusers, transformers, the user's own package) is a user site."""
        if not file or file.startswith("<frozen"):
            return True
        ours, packages, stdlib = self._internal
        path = os.path.abspath(file)
        if path.startswith(ours):
            return True
        return path.startswith(stdlib) and not path.startswith(packages)

    def site(self, call: dict[str, Any]) -> Site:
        """The site of one call; calls with the same stack share it."""
        key = (tuple(map(tuple, call["frames"])), call["wait_class"])
        site = self._memo.get(key)  # one lookup: hashing a stack is most of a call's cost
        if site is None:
            site = self._memo[key] = self._resolve(call)
        return site

    def sync_site(self, call: dict[str, Any], before: Iterable[dict[str, Any]] = ()) -> Site:
        """The site of a sync, named by `call` -- in a profile the first call
        of the sync, in strict mode the wait it noted -- and `before`, the
        calls its thread made just before it, latest first.  One rule
        wherever a sync is shown (the report, strict mode, budgets): a wait
        that follows a copy of its own line is named by that copy."""
        copy = copy_waited_for(call, before)
        return self.site(copy if copy is not None else call)

    def _resolve(self, call: dict[str, Any]) -> Site:
        frames = [Frame.of(f) for f in call["frames"]]
        user = next((f for f in frames if not self._is_internal(f.file)), None)
        if user is None and frames:
            user = frames[0]  # only library frames: report the innermost
        class_kind = _CLASS_KINDS.get(call["wait_class"], "other")
        if user is None:
            return Site(None, None, None, None, None, class_kind)
        node, parent = self._sources.node_at(user)
        kind = (_torch_kind(frames) or ("bool" if user is frames[0] and user.truth_test else None)
                or _call_kind(node, parent))
        if kind is None:
            kind = class_kind
        lines = self._sources.lines(user.file) if user.file else []
        code = lines[user.line - 1].strip() if 0 < user.line <= len(lines) else None
        call_frame = user
        tested = (_truth_test(node) or _comprehension_test(node)) if kind == "bool" else None
        if tested is not None:  # show the tested expression, not the whole statement
            call_frame = Frame(user.file, user.function, user.first_line, tested.lineno,
                               tested.end_lineno or tested.lineno, tested.col_offset,
                               tested.end_col_offset or tested.col_offset)
        return Site(user.file, user.line if user.line > 0 else None, user.function, code or None,
                    self._sources.segment(call_frame), kind)


def _step_span(steps: list[int]) -> str:
    """[0,1,2,5,7,8] -> '0-2, 5, 7-8'."""
    parts, i = [], 0
    while i < len(steps):
        j = i
        while j + 1 < len(steps) and steps[j + 1] == steps[j] + 1:
            j += 1
        parts.append(str(steps[i]) if i == j else f"{steps[i]}-{steps[j]}")
        i = j + 1
    return ", ".join(parts)


def format_site(site: dict[str, Any]) -> str:
    """`denoise.py:42 in step(): x.item()  [item] x10, blocked 1.3 ms, steps 0-9`."""
    if site.get("file") is None:
        thread = site.get("thread_id")
        where = f"thread {thread} (no Python frame)" if thread is not None else "<no Python frame>"
    else:
        where = f"{display_path(site['file'])}:{site['line']} in {site['function']}()"
    code = site.get("call") or site.get("code")
    text = f"{where}: {code}" if code else where
    steps = f", steps {_step_span(sorted(set(site['steps'])))}" if site.get("steps") else ""
    return f"{text}  [{site['kind']}] x{site['count']}, blocked {site['blocked_ms']:.3f} ms{steps}"


_BEFORE_CALLS = 4  # as strict mode's look back (ls_strict_py.c)


def _calls_before(calls: list[dict[str, Any]], wanted: set[int]) -> dict[int, list[dict[str, Any]]]:
    """{index: the calls its thread recorded just before it, latest first}
    for each wanted index of `calls` (record order)."""
    recent: dict[int, list[dict[str, Any]]] = {}
    out = {}
    for i, call in enumerate(calls):
        mine = recent.setdefault(call["thread_id"], [])
        if i in wanted:
            out[i] = mine[::-1]
        mine.append(call)
        if len(mine) > _BEFORE_CALLS:
            del mine[0]
    return out


class SyncSection(dict[str, Any]):
    """summary["syncs"]: a plain dict that also knows, outside the dict, the
    site of each of the model's syncs (`site_of[i]`: the index in
    ["sites"] of Model.syncs()[i]), for the views that show single syncs
    (the trace export), and the resolver that named the summary's sites
    (the export names the other recorded calls with it)."""

    site_of: list[int]
    resolver: "Resolver"


def build_syncs(calls: list[dict[str, Any]], syncs: list[tuple[Any, ...]], unknown_copies: int,
                sync_gaps: list[int] | None = None,
                resolver: Resolver | None = None) -> SyncSection:
    """summary["syncs"] from the model's syncs (Model.syncs()): their sites,
    named by the one rule strict mode uses (Resolver.sync_site). sync_gaps
    (Model.sync_gaps(), parallel to syncs): the GPU idle time each sync
    caused, summed per site as gap_ms (gap_in_steps_ms: of the syncs made
    inside steps); cost_ms (cost_in_steps_ms): what removing them could
    win, per sync the idle it caused up to the host's next launch but no
    more than the host was blocked in it (the rest of that idle the host
    spent on its own work, which stays: _projections); resolver: how
    stacks become sites (a trace file's need their own, see _analyze)."""
    resolver = resolver or Resolver()
    sites: dict[tuple[Any, ...], dict[str, Any]] = {}
    entry_of: list[dict[str, Any]] = [{}] * len(syncs)  # per model sync: its site's entry
    by_kind: dict[str, int] = {}
    blocked_ns = 0
    blocked_in_steps_ns = 0
    in_steps = 0
    gaps = sync_gaps if sync_gaps is not None else [0] * len(syncs)
    before = _calls_before(calls, {ids[0] for *_, ids in syncs})
    for index, sync in sorted(enumerate(syncs), key=lambda item: item[1]):
        start_ns, end_ns, blocked, thread_id, step, wait_class, call_ids = sync
        gap_ns = gaps[index]
        site = resolver.sync_site(calls[call_ids[0]], before.get(call_ids[0], ()))
        key = (site.file, site.line, site.function, site.kind, site.call,
               thread_id if site.file is None else None)
        entry = sites.get(key)
        if entry is None:
            entry = sites[key] = {
                "file": site.file, "line": site.line, "function": site.function,
                "code": site.code, "call": site.call, "kind": site.kind, "count": 0,
                "blocked_ms": 0.0, "steps": set(),
                "thread_id": resolver.thread_names.get(thread_id, thread_id), "apis": {},
                "first_ns": start_ns, "gap_ms": 0.0, "gap_in_steps_ms": 0.0,
                "blocked_in_steps_ms": 0.0, "cost_ms": 0.0, "cost_in_steps_ms": 0.0,
            }
        entry_of[index] = entry
        entry["count"] += 1
        entry["blocked_ms"] += blocked / 1e6
        entry["gap_ms"] += gap_ns / 1e6
        # what a step loop would win (see _projections)
        entry["gap_in_steps_ms"] += (0 if step is None else gap_ns) / 1e6
        cost_ns = min(gap_ns, blocked)
        entry["cost_ms"] += cost_ns / 1e6
        entry["cost_in_steps_ms"] += (0 if step is None else cost_ns) / 1e6
        entry["blocked_in_steps_ms"] += (0 if step is None else blocked) / 1e6
        blocked_in_steps_ns += 0 if step is None else blocked
        for i in call_ids:
            api = calls[i]["api"] or "?"
            entry["apis"][api] = entry["apis"].get(api, 0) + 1
        by_kind[site.kind] = by_kind.get(site.kind, 0) + 1
        blocked_ns += blocked
        if step is not None:
            in_steps += 1
            # a set while building: a long block's site has thousands of
            # steps (a list's `in` made summary() quadratic in them)
            entry["steps"].add(step)
    ordered = sorted(sites.values(), key=lambda s: (-s["blocked_ms"], -s["count"], s["first_ns"]))
    for s in ordered:
        s["blocked_ms"] = round(s["blocked_ms"], 6)
        s["gap_ms"] = round(s["gap_ms"], 6)
        s["gap_in_steps_ms"] = round(s["gap_in_steps_ms"], 6)
        for figure in ("blocked_in_steps_ms", "cost_ms", "cost_in_steps_ms"):
            s[figure] = round(s[figure], 6)
        s["steps"] = sorted(s["steps"])
    position = {id(s): k for k, s in enumerate(ordered)}
    section = SyncSection({
        "count": len(syncs),
        "blocked_ms": round(blocked_ns / 1e6, 6),
        "blocked_in_steps_ms": round(blocked_in_steps_ns / 1e6, 6),
        "by_kind": dict(sorted(by_kind.items(), key=lambda kv: -kv[1])),
        "sites": ordered,
        "in_steps": in_steps,
        "outside_steps": len(syncs) - in_steps,
        "unjudged_async_copies": unknown_copies,
    })
    section.site_of = [position[id(entry)] for entry in entry_of]
    return section
