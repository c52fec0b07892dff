"""Imports form a DAG, in C and in Python (STYLE rule 10); a trace format is
one registration that every floor reads (STYLE rule 15, at the end).

C: a module is a .c/.cpp/.h file stem of csrc/FLOOR/; A depends on B when a
file of A includes "B.h".  The floors (csrc/README.md) are ordered: a file
includes only headers of its own floor or a lower one.  For that graph to be the real one, a header declares
exactly what its own .c (or .cpp) defines: every ls_* function or variable
declared in X.h is defined in X.c, and every non-static ls_* one defined in
X.c is declared in X.h (a function defined in one file but declared in
another's header hides a dependency, as ls_dict_of once did).

A class's private fields are a boundary too (STYLE rule 16): no module
outside _profile.py touches those of its classes (Profile, FinishedProfile).

"""
from __future__ import annotations

import ast
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

import loopscope
from loopscope import _core
from loopscope.__main__ import main
from loopscope.files import _formats
from loopscope.files._formats import TraceFormat, TraceRead

ROOT = Path(__file__).resolve().parents[2]
CSRC = ROOT / "csrc"
PACKAGE = ROOT / "python" / "loopscope"


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_find_cycle_finds_one_and_accepts_a_dag():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"a"}}) == ["a", "a"]


# -- C ---------------------------------------------------------------------

def _strip_c(text: str) -> str:
    """Source without comments, string/char literals and preprocessor lines."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)
    text = re.sub(r"'(?:\\.|[^'\\\n])*'", "''", text)
    out = []
    continued = False
    for line in text.splitlines():
        if continued or line.lstrip().startswith("#"):
            continued = line.rstrip().endswith("\\")
            continue
        out.append(line)
    return "\n".join(out)


def _top_level_chunks(text: str) -> list[tuple[str, str]]:
    """(text, terminator) of each top-level statement: ';' for a declaration
    (a struct, enum or initialiser body stays inside it), '{' for a function
    definition (its body left out).  An extern "C" block is transparent."""
    chunks: list[tuple[str, str]] = []
    stack: list[str] = []  # "extern", "namespace", "function" or "body"
    start = 0
    for i, ch in enumerate(text):
        depth = sum(1 for kind in stack if kind != "extern")
        if ch == "{":
            head = text[start:i]
            if depth == 0 and re.search(r'extern\s*""\s*$', head):
                stack.append("extern")
                start = i + 1
            elif depth == 0 and re.search(r"\bnamespace\b[\w\s]*$", head):
                stack.append("namespace")  # C++: its end also ends a statement
            elif depth == 0 and re.search(r"\)\s*$", head) and "=" not in head:
                chunks.append((head, "{"))
                stack.append("function")
            else:
                stack.append("body")
        elif ch == "}" and stack:
            kind = stack.pop()
            if kind == "extern" or (kind in ("function", "namespace") and depth == 1):
                start = i + 1
        elif ch == ";" and depth == 0:
            chunks.append((text[start:i], ";"))
            start = i + 1
    return chunks


def _declared_in_header(text: str) -> set[str]:
    """ls_* functions and extern variables a header declares."""
    names = set()
    for chunk, end in _top_level_chunks(_strip_c(text)):
        chunk = chunk.strip()
        if end != ";" or chunk.startswith(("typedef", "static", "struct", "enum", "union")):
            continue
        m = re.search(r"\b(ls_\w+)\s*\(", chunk)
        if m and not re.search(r"\(\s*\*\s*$", chunk[: m.start()]):
            names.add(m.group(1))
        elif chunk.startswith("extern"):
            m = re.search(r"\b(ls_\w+)\s*(?:\[[^\]]*\])?\s*$", chunk)
            if m:
                names.add(m.group(1))
    return names


def _defined_in_source(text: str) -> set[str]:
    """Non-static ls_* functions and variables a source file defines,
    including those made by a top-level macro such as LS_APPEND_IMPL(ls_x, ...)."""
    stripped = _strip_c(text)
    names = set(re.findall(r"^[A-Z_][A-Z0-9_]*\(\s*(ls_\w+)\s*,", stripped, re.M))
    for chunk, end in _top_level_chunks(stripped):
        chunk = re.sub(r'^extern\s*""', "", chunk.strip()).strip()  # extern "C" int f(...)
        if not chunk or chunk.startswith(("static", "typedef", "extern", "struct", "enum",
                                          "union")):
            continue
        if end == "{":
            m = re.search(r"\b(ls_\w+)\s*\([^{}]*\)\s*$", chunk, re.S)
        else:
            before = chunk.split("=", 1)[0]
            m = None if "(" in before else re.search(
                r"\b(ls_\w+)\s*(?:\[[^\]]*\])?\s*$", before)
        if m:
            names.add(m.group(1))
    return names


def c_graph() -> tuple[dict[str, set[str]], list[str]]:
    """(graph of stems, problems with headers)."""
    graph: dict[str, set[str]] = defaultdict(set)
    declared: dict[str, set[str]] = {}
    defined: dict[str, set[str]] = defaultdict(set)
    for path in sorted(CSRC.glob("*/*")):
        if path.suffix not in (".c", ".cpp", ".h"):
            continue
        text = path.read_text()
        for included in re.findall(r'^\s*#\s*include\s+"([^"]+)\.h"', text, re.M):
            if included != path.stem:
                graph[path.stem].add(included)
        graph.setdefault(path.stem, set())
        if path.suffix == ".h":
            declared[path.stem] = _declared_in_header(text)
        else:
            defined[path.stem] |= _defined_in_source(text)
    problems = []
    owner = {name: stem for stem, names in defined.items() for name in names}
    for stem, names in sorted(declared.items()):
        for name in sorted(names):
            if owner.get(name) != stem:
                problems.append(f"{stem}.h declares {name}, defined in "
                                f"{owner[name] + '.c' if name in owner else 'no file'}")
    for stem, names in sorted(defined.items()):
        for name in sorted(names - declared.get(stem, set())):
            problems.append(f"{stem}.c defines {name}, not declared in {stem}.h")
    return graph, problems


def test_c_header_parser_on_examples():
    header = """
    /* a comment with ls_fake(x); */
    #define LS_X(a) ls_macro(a)
    typedef struct { int (*ls_pointer)(void); } ls_t;
    typedef void (*ls_callback)(int);
    extern PyType_Spec ls_thing_spec;
    extern const uint64_t ls_edges[12];
    PyObject *ls_thing_new(PyTypeObject *type,
                           int x);
    static inline int ls_inline(void) { return 1; }
    """
    assert _declared_in_header(header) == {"ls_thing_spec", "ls_edges", "ls_thing_new"}
    source = """
    static int helper(void) { return ls_other(1); }
    PyType_Spec ls_thing_spec = { .name = "x" };
    const uint64_t ls_edges[12] = {0};
    PyObject *ls_thing_new(PyTypeObject *type, int x)
    {
        if (x) { return NULL; }
        return ls_make(type);
    }
    static PyObject *ls_private(void) { return NULL; }
    """
    assert _defined_in_source(source) == {"ls_thing_spec", "ls_edges", "ls_thing_new"}


def test_each_c_header_declares_what_its_source_defines():
    _, problems = c_graph()
    assert problems == []


def test_c_includes_form_no_cycle():
    graph, _ = c_graph()
    assert len(graph) > 20  # the walk found the sources
    assert find_cycle(graph) is None


# The floors of csrc/, lowest first (csrc/README.md says what each is for).
C_FLOORS = ["common", "platform", "analysis", "traces", "capture", "session", "python_api",
            "testhooks", "module"]
MAX_SOURCES_PER_FLOOR = 15  # a .c/.cpp and its .h count as one


def c_floor_of() -> dict[str, str]:
    """Each module stem of csrc/ and the floor folder it lives in."""
    return {path.stem: path.parent.name for path in CSRC.glob("*/*")
            if path.suffix in (".c", ".cpp", ".h")}


def upward_includes(graph: dict[str, set[str]], floor_of: dict[str, str],
                    floors: list[str]) -> list[str]:
    """Each include that goes to a higher floor, as 'a (floor) -> b (floor)'."""
    rank = {floor: i for i, floor in enumerate(floors)}
    return [f"{a} ({floor_of[a]}) -> {b} ({floor_of[b]})"
            for a in sorted(graph) for b in sorted(graph[a])
            if rank[floor_of[b]] > rank[floor_of[a]]]


def test_upward_includes_finds_one_and_accepts_same_and_lower_floors():
    floors = ["low", "high"]
    floor_of = {"a": "low", "b": "high", "c": "high", "d": "low"}
    assert upward_includes({"a": {"b", "d"}, "b": {"c"}}, floor_of, floors) == [
        "a (low) -> b (high)"]
    assert upward_includes({"b": {"a", "c"}, "c": {"d"}, "a": {"d"}}, floor_of, floors) == []


def test_every_csrc_folder_is_a_known_floor():
    folders = sorted(p.name for p in CSRC.iterdir() if p.is_dir())
    assert folders == sorted(C_FLOORS)
    assert not [p.name for p in CSRC.iterdir() if p.suffix in (".c", ".cpp", ".h")]


def test_c_includes_go_only_to_the_same_or_a_lower_floor():
    graph, _ = c_graph()
    floor_of = c_floor_of()
    assert floor_of["ls_records"] == "common" and floor_of["ls_module"] == "module"
    assert upward_includes(graph, floor_of, C_FLOORS) == []


def test_no_floor_holds_more_than_15_sources():
    sizes = {floor: len({p.stem for p in (CSRC / floor).iterdir()
                         if p.suffix in (".c", ".cpp", ".h")}) for floor in C_FLOORS}
    assert all(sizes.values())
    assert max(sizes.values()) <= MAX_SOURCES_PER_FLOOR, sizes


# -- Python ----------------------------------------------------------------

# The package's floors, bottom to top (each subpackage's __init__.py says
# what it is for): a module may import modules of its own floor and of the
# floors below it, never above.  A root module is on the "top" floor (the
# model and the session) unless named in ROOT_FLOORS; a subpackage is its
# own floor.  The model and the session sit above the views because they
# offer them as methods (prof.report(), the notebook view), and below the
# readers, which turn a trace into a FinishedProfile.
FLOORS = ("core", "live", "files", "figures", "distributed", "views", "top", "watching", "readers", "surfaces",
          "doors")
ROOT_FLOORS = {"_core": "core", "_version": "core",             # import nothing of ours
               "__init__": "doors", "__main__": "doors",        # the public API, the CLI
               "pytest_plugin": "doors"}                        # pytest's entry point


def _module_name(path: Path) -> str:
    """Dotted name inside the package: "views._html", "_profile"; a
    subpackage's __init__ is the subpackage ("views"), the package's own
    is "__init__"."""
    parts = list(path.relative_to(PACKAGE).with_name(path.name.split(".")[0]).parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _package_of(module: str, is_package: bool) -> list[str]:
    """The package a module's relative imports start from, as parts."""
    if module == "__init__":
        return []
    parts = module.split(".")
    return parts if is_package else parts[:-1]


def python_graph() -> dict[str, set[str]]:
    # the C extension counts as a module (it imports nothing of ours)
    files = [p for p in PACKAGE.rglob("*") if p.suffix in (".py", ".pyi", ".so", ".pyd")]
    modules = {_module_name(p) for p in files}
    graph: dict[str, set[str]] = {m: set() for m in modules}

    def resolve(parts: list[str]) -> str | None:
        name = ".".join(parts) or "__init__"
        return name if name in modules else None

    for path in sorted(p for p in files if p.suffix == ".py"):
        me = _module_name(path)
        here = _package_of(me, path.name == "__init__.py")
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str | None] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                elif node.module == "loopscope" or (node.module or "").startswith("loopscope."):
                    base = []
                else:
                    continue
                named = (node.module or "").split(".") if node.module else []
                if not node.level:
                    named = named[1:]                                 # drop "loopscope"
                for alias in node.names:                              # a module, or a name in one
                    targets.append(resolve(base + named + [alias.name]) or resolve(base + named))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] == "loopscope":
                        targets.append(resolve(parts[1:]))
            for target in targets:
                if target is not None and target != me:
                    graph[me].add(target)
    return graph


def floor_of(module: str) -> str:
    if "." in module or (PACKAGE / module).is_dir():
        return module.split(".")[0]
    return ROOT_FLOORS.get(module, "top")


def upward_imports(graph: dict[str, set[str]], floor_of) -> list[str]:
    """'a (floor) imports b (higher floor)' for each import that goes up."""
    rank = {floor: i for i, floor in enumerate(FLOORS)}
    return [f"{a} ({floor_of(a)}) imports {b} ({floor_of(b)})"
            for a in sorted(graph) for b in sorted(graph[a])
            if rank[floor_of(b)] > rank[floor_of(a)]]


def test_upward_imports_finds_one_and_accepts_downward_and_sideways():
    floors = {"v": "views", "v2": "views", "f": "figures", "t": "top"}.__getitem__
    assert upward_imports({"v": {"f", "v2"}, "v2": set(), "f": set(), "t": {"v"}}, floors) == []
    assert upward_imports({"f": {"v"}, "v": {"t"}, "t": set()}, floors) == [
        "f (figures) imports v (views)", "v (views) imports t (top)"]


def test_python_graph_reads_subpackages():
    graph = python_graph()
    assert "views._report" in graph["_profile"]                 # from .views._report import
    assert "figures._rows" in graph["_summary"]                 # from .figures import _rows
    assert "_core" in graph["figures._names"]                   # from .. import _core
    assert "_profile" in graph["readers._analyze"]              # from .._profile import
    assert "readers._kineto" in graph["readers._builtin"]       # from . import _kineto
    assert {"views", "figures", "readers"} <= set(graph)        # the subpackages themselves


def test_python_imports_form_no_cycle():
    graph = python_graph()
    assert "_profile" in graph and "_summary" in graph["_profile"]
    assert find_cycle(graph) is None


def test_python_imports_go_only_downward():
    graph = python_graph()
    assert len(graph) > 40  # the walk found the modules
    assert sorted({floor_of(m) for m in graph}) == sorted(FLOORS)  # each floor is in use
    assert upward_imports(graph, floor_of) == []


# -- a trace format: one registration (STYLE rule 15, issue 42) -------------

def kind_comparisons(kinds: set[str]) -> list[str]:
    """'module:line' of each comparison with a format's kind string (==, in
    a tuple...) and each dict keyed by one, outside readers/_builtin.py
    (where the built-in formats are declared)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_builtin.py" and path.parent.name == "readers":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                parts = [node.left, *node.comparators]
            elif isinstance(node, ast.Dict):
                parts = [k for k in node.keys if k is not None]
            else:
                continue
            named = {c.value for part in parts for c in ast.walk(part)
                     if isinstance(c, ast.Constant) and c.value in kinds}
            if named:
                found.append(f"{_module_name(path)}:{node.lineno} {sorted(named)}")
    return found


def test_no_module_compares_a_format_kind():
    kinds = {f.kind for f in _formats.registered()}
    assert kinds == {"kineto", "nsys", "recording"}
    assert kind_comparisons(kinds) == []


def _read_toy(reader, path: Path, gz: bool, progress: bool) -> TraceRead:
    rows = json.loads(path.read_text())["toy_kernels"]
    _core._trace_add(reader, "kernel", [(start, end, 0, 7, i, name) + (None,) * 11
                                        for i, (start, end, name) in enumerate(rows)])
    return TraceRead(meta={}, names={0: "Toy GPU"})


@pytest.fixture
def toy_format():
    """A one-line JSON list of kernels, registered for the test alone (ahead
    of kineto, which takes every other JSON file)."""
    fmt = _formats.register(TraceFormat(
        kind="toy", name="toy kernel list", noun="a toy kernel list",
        help="a toy kernel list (one JSON line of [start_ns, end_ns, name])",
        sniff=lambda head: head.startswith(b'{"toy_kernels":'), read=_read_toy,
        no_gpu="the toy file lists no kernel", no_apis="a toy file records no API call",
        no_counters="a toy file records no counter", no_stacks="a toy file keeps no stack",
        device_facts="toy header", suffixes=(".toy",)), first=True)
    try:
        yield fmt
    finally:
        _formats.unregister("toy")


def test_a_new_trace_format_is_one_registration(toy_format, tmp_path, capsys):
    path = tmp_path / "run.toy"
    path.write_text(json.dumps({"toy_kernels": [[1_000, 2_000, "a"], [90_000, 91_000, "b"],
                                                [95_000, 94_000, "ends_early"]]}))
    summary = loopscope.analyze(path)
    assert summary["source"] == summary["trace"]["format"] == "toy"
    assert summary["gpu"]["kernels"] == 2 and summary["gaps"]["count"] == 1
    # what it cannot measure, in its own words
    assert summary["syncs_error"] == toy_format.no_apis
    assert summary["metrics_error"] == toy_format.no_counters
    # its checks are a trace's (no live timeline or clock rate): the
    # record its reader skipped fails the durations check
    checks = {c["name"]: c for c in summary["checks"]}
    assert sorted(checks) == ["drops", "durations", "steps"]
    assert not checks["durations"]["ok"] and "ends before it starts" in checks["durations"]["detail"]
    report = loopscope.load(path).report()
    assert f"Trace: toy kernel list {path}:" in report
    assert "Kernel fill unknown on GPU 0: the trace's toy header gives no SM count" in report
    for argv, words in ((["analyze", "--help"], "a toy kernel list (one JSON line of "
                                                "[start_ns, end_ns, name]), a torch.profiler"),
                        (["--help"], "report on a toy kernel list, a torch.profiler trace")):
        with pytest.raises(SystemExit):
            main(argv)
        assert words in " ".join(capsys.readouterr().out.split())  # as wrapped
    assert _formats.suffixes() == (".toy", ".json", ".json.gz", ".sqlite")  # a folder's traces
    with pytest.raises(ValueError, match="registered already"):
        _formats.register(toy_format)


def test_a_trace_format_has_one_reader():
    fmt = TraceFormat(kind="none", name="", noun="", help="", sniff=lambda head: False)
    with pytest.raises(ValueError, match="needs one of read= and load="):
        _formats.register(fmt)
    assert _formats.get("none") is None


# -- the profile's private fields ------------------------------------------

OWNER = PACKAGE / "_profile.py"


def private_fields(source: str) -> set[str]:
    """The private attributes a module's classes set on self."""
    return {node.attr for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name) and node.value.id == "self"
            and node.attr.startswith("_") and not node.attr.startswith("__")}


def foreign_uses(source: str, fields: set[str]) -> list[tuple[int, str, bool]]:
    """(line, field, assigned) of each use of one of `fields` on something
    other than self, cls or an imported module (`_instrument._local` is that
    module's own).  Assigned: set, deleted, or its item set (x._f[k] = v)."""
    tree = ast.parse(source)
    modules = {(alias.asname or alias.name).split(".")[0] for node in ast.walk(tree)
               if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    written = {id(node.value) for node in ast.walk(tree)
               if isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load)}
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or node.attr not in fields:
            continue
        if isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"} | modules:
            continue
        assigned = not isinstance(node.ctx, ast.Load) or id(node) in written
        out.append((node.lineno, node.attr, assigned))
    return sorted(out)


def test_foreign_uses_finds_reads_and_writes_but_not_self_or_a_module():
    code = ("from loopscope.live import _instrument\n"
            "class A:\n"
            "    def f(self, prof):\n"
            "        self._state = _instrument._local\n"
            "        prof._state = {}\n"
            "        prof._state['k'] = 1\n"
            "        return prof.finished._summary, prof.state\n")
    assert private_fields(code) == {"_state"}
    assert foreign_uses(code, {"_state", "_local", "_summary"}) == [
        (5, "_state", True), (6, "_state", True), (7, "_summary", False)]


def test_no_module_outside_profile_touches_a_profiles_private_fields():
    """The package and the benchmarks neither set nor read them (a reader
    makes a FinishedProfile through its constructor; the with-block hands
    one over); the tests may read one (white-box), never set it."""
    fields = private_fields(OWNER.read_text())
    assert {"_state", "_finished", "_thresholds", "_summary"} <= fields  # the scan found them
    found = []
    for root, reads_too in ((PACKAGE, True), (ROOT / "benchmarks", True), (ROOT / "tests", False)):
        for path in sorted(root.rglob("*.py")):
            if path == OWNER:
                continue
            for line, field, assigned in foreign_uses(path.read_text(), fields):
                if assigned or reads_too:
                    found.append(f"{path.relative_to(ROOT)}:{line}: "
                                 f"{'sets' if assigned else 'reads'} {field}")
    assert found == []
