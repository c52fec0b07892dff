"""Mutation run over loopscope's rules: one-line changes to the analysis
code, each applied in a scratch copy of the tree, built when it is C, and run
against the test files that cover it.  A mutant the tests do not notice is a
rule that can break with the suite green.

    python tests/mutation/run_mutants.py                  # every mutant of the lists
    python tests/mutation/run_mutants.py --smoke 10       # the fixed CI sample
    python tests/mutation/run_mutants.py --only 'waits.*' --jobs 2
    python tests/mutation/run_mutants.py --per-file 3     # hand list + 3 generated per file
    python tests/mutation/run_mutants.py --hand           # the hand-written list only
    python tests/mutation/run_mutants.py --generate       # rewrite python_mutants.toml
    python tests/mutation/run_mutants.py --update-md      # ... and its table in tests/MUTATION.md

The mutants live in two lists beside this script (TOML, one [[mutant]] each):
python_mutants.toml is generated from the Python rule modules (--generate;
it keeps the hand-written `equivalent` reasons of mutants that are still
there), hand_mutants.toml is written by hand (the C analysis, and the Python
rules issue 17 names).  A mutant is found by text, never
by line number: `find` must occur exactly once in its file (or once after
the line `after`), else the mutant is reported "stale" and the list needs
updating.  Classes: killed (a covering test failed or crashed), survived (all
passed), timeout, build-error (a C mutant that does not compile), stale,
uncovered (no test executes the line: a survivor not even tried).  A
survivor is explained by hand in the list: `equivalent` (it cannot change a
reported figure or verdict, and why) or `pending` (a real gap, waiting for
what is named).  Exit status 1 when a mutant survives unexplained, or when
one is stale, timed out or did not build (--smoke: when any is not killed).
"""
from __future__ import annotations

import argparse
import ast
import concurrent.futures
import fnmatch
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PY_LIST = HERE / "python_mutants.toml"
HAND_LIST = HERE / "hand_mutants.toml"
MARKDOWN = ROOT / "tests" / "MUTATION.md"
TABLE_START, TABLE_END = "<!-- mutation-table:start -->", "<!-- mutation-table:end -->"

PY_TARGETS = ["python/loopscope/figures/_diagnosis.py", "python/loopscope/figures/_syncs.py",
              "python/loopscope/_summary.py", "python/loopscope/figures/_budgets.py"]
# What a scratch copy needs to build and run the tests (tests read docs/ and
# benchmarks/: the docs checks, and the hostile tests' memory probe).
TREE = ["python", "tests", "csrc", "benchmarks", "docs", "setup.py", "pyproject.toml", "README.md"]

# The CI sample: fast to build and to test, one per rule family, all killed
# when the suite holds.  Ids from the two lists.
SMOKE = [
    "waits.step_at.nearest_step_ended",
    "waits.continues.thread",
    "analysis.cause.sync_before_host",
    "finish.window.ops_after_stop",
    "analysis.stats.normal_below",
    "samples.average.weight",
    "diagnosis.busy_below",
    "diagnosis.sync_share_ge",
    "diagnosis.cause_share",
    "syncs.kind.copy_memcpy",
]


@dataclass
class Mutant:
    id: str
    file: str
    find: str
    replace: str
    tests: list[str]
    after: str | None = None
    what: str = ""
    equivalent: str | None = None
    pending: str | None = None


@dataclass
class Result:
    id: str
    file: str
    status: str
    seconds: float = 0.0
    detail: str = ""
    equivalent: str | None = None
    pending: str | None = None
    what: str = ""

    @property
    def explained(self) -> str | None:
        if self.equivalent:
            return "equivalent: " + self.equivalent
        if self.pending:
            return "pending: " + self.pending
        return None


# ---------------------------------------------------------------------------
# The lists

def _toml_str(text: str) -> str:
    """A TOML basic string (json's escapes are valid TOML)."""
    return json.dumps(text, ensure_ascii=False)


def load_list(path: Path) -> list[Mutant]:
    if tomllib is None:
        sys.exit("run_mutants.py needs Python 3.11+ (tomllib) to read its lists")
    with open(path, "rb") as f:
        data = tomllib.load(f)
    groups = data.get("groups", {})
    out = []
    for i, entry in enumerate(data.get("mutant", [])):
        tests = []
        for t in entry.get("tests", []):
            if t.startswith("@") and t[1:] not in groups:
                sys.exit(f"{path.name}: mutant {entry.get('id')}: no group {t}")
            tests += groups[t[1:]] if t.startswith("@") else [t]
        entry = dict(entry, tests=list(dict.fromkeys(tests)))
        try:
            out.append(Mutant(**entry))
        except TypeError as error:
            sys.exit(f"{path.name}: mutant {i} ({entry.get('id')}): {error}")
    ids = [m.id for m in out]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        sys.exit(f"{path.name}: ids used twice: {', '.join(dup)}")
    return out


def _ids(path: Path) -> set[str]:
    return {m.id for m in load_list(path)} if path.exists() else set()


def save_list(path: Path, mutants: list[Mutant], header: str) -> None:
    lines = [header.rstrip(), ""]
    for m in mutants:
        lines.append("[[mutant]]")
        for key in ("id", "file", "what", "after", "find", "replace"):
            value = getattr(m, key)
            if value is not None and value != "":
                lines.append(f"{key} = {_toml_str(value)}")
        lines.append("tests = [" + ", ".join(_toml_str(t) for t in m.tests) + "]")
        for key in ("equivalent", "pending"):
            if getattr(m, key):
                lines.append(f"{key} = {_toml_str(getattr(m, key))}")
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")


def locate(text: str, m: Mutant) -> tuple[int, int] | str:
    """(start, end) of the mutant's `find` in text, or why it is stale."""
    base = 0
    if m.after is not None:
        if text.count(m.after) != 1:
            return f"anchor found {text.count(m.after)} times: {m.after.strip()!r}"
        base = text.index(m.after) + len(m.after)
        at = text.find(m.find, base)
        if at < 0:
            return f"not found after its anchor: {m.find.strip()!r}"
        return at, at + len(m.find)
    count = text.count(m.find)
    if count != 1:
        return f"found {count} times: {m.find.strip()!r}"
    at = text.index(m.find)
    return at, at + len(m.find)


def mutated_text(text: str, m: Mutant) -> str | None:
    where = locate(text, m)
    if isinstance(where, str):
        return None
    return text[:where[0]] + m.replace + text[where[1]:]


# ---------------------------------------------------------------------------
# Generating the Python mutants

_BOUNDARY = {ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="),
             ast.GtE: (">=", ">"), ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="),
             ast.Is: ("is", "is not"), ast.IsNot: ("is not", "is"),
             ast.In: ("in", "not in"), ast.NotIn: ("not in", "in")}


def _line_edits(tree: ast.AST, lines: list[str]):
    """(line number, start col, end col, new text, what) of every one-line
    mutation; columns are character offsets into the line."""

    def cols(node_line: int, byte_col: int) -> int:
        return len(lines[node_line - 1].encode()[:byte_col].decode(errors="replace"))

    def span(node) -> tuple[int, int, int] | None:
        if node.lineno != node.end_lineno:
            return None
        return node.lineno, cols(node.lineno, node.col_offset), cols(node.lineno, node.end_col_offset)

    def between(a, b) -> tuple[int, int, int] | None:
        sa, sb = span(a), span(b)
        if sa is None or sb is None or sa[0] != sb[0]:
            return None
        return sa[0], sa[2], sb[1]

    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            left = node.left
            for op, right in zip(node.ops, node.comparators):
                where = between(left, right)
                left = right
                if where is None or type(op) not in _BOUNDARY:
                    continue
                line, a, b = where
                old, new = _BOUNDARY[type(op)]
                gap = lines[line - 1][a:b]
                pattern = r"\bnot\s+in\b" if old == "not in" else (
                    r"\bis\s+not\b" if old == "is not" else (
                        rf"\b{old}\b" if old.isalpha() else rf"(?<![<>=!]){re.escape(old)}(?![<>=])"))
                found = list(re.finditer(pattern, gap))
                if old == "in":
                    found = [f for f in found if not gap[:f.start()].rstrip().endswith("not")]
                if old == "is":
                    found = [f for f in found if not gap[f.end():].lstrip().startswith("not")]
                if len(found) != 1:
                    continue
                yield line, a + found[0].start(), a + found[0].end(), new, f"`{old}` -> `{new}`"
        elif isinstance(node, ast.BoolOp):
            old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
            for x, y in zip(node.values, node.values[1:]):
                where = between(x, y)
                if where is None:
                    continue
                line, a, b = where
                found = list(re.finditer(rf"\b{old}\b", lines[line - 1][a:b]))
                if len(found) == 1:
                    yield (line, a + found[0].start(), a + found[0].end(), new,
                           f"`{old}` -> `{new}`")
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float) \
                and id(node) not in docstrings:
            where = span(node)
            if where is None:
                continue
            line, a, b = where
            v = node.value
            step = 1 if isinstance(v, int) or abs(v) >= 1 else 0.1
            for new_value in (v + step, v - step):
                text = repr(round(new_value, 6)) if isinstance(v, float) else repr(new_value)
                yield line, a, b, text, f"`{lines[line - 1][a:b]}` -> `{text}`"
        elif isinstance(node, ast.Return) and node.value is not None:
            if isinstance(node.value, ast.Constant) and node.value.value is None:
                continue
            where = span(node.value)
            if where is not None:
                yield *where, "None", "return None"
        elif isinstance(node, ast.If):
            where = span(node.test)
            if where is not None:
                yield *where, "False", "branch dropped (condition False)"


def generate(old: dict[str, Mutant], tests_of_line) -> list[Mutant]:
    out = []
    for rel in PY_TARGETS:
        text = (ROOT / rel).read_text(encoding="utf-8")
        lines = text.split("\n")
        stem = Path(rel).stem.lstrip("_")
        edits = sorted(set(_line_edits(ast.parse(text), lines)))
        for line, a, b, new, what in edits:
            original = lines[line - 1]
            replaced = original[:a] + new + original[b:]
            after = None
            if text.count(original) != 1:  # anchor on the nearest unique line above
                for k in range(line - 2, -1, -1):
                    if lines[k].strip() and text.count(lines[k]) == 1:
                        after = lines[k]
                        break
                else:
                    continue
            digest = hashlib.sha1(f"{rel}\0{after}\0{original}\0{replaced}".encode()).hexdigest()[:8]
            m = Mutant(id=f"{stem}.{digest}", file=rel, find=original, replace=replaced,
                       tests=tests_of_line(rel, line), after=after,
                       what=f"line {line} col {a + 1}: {what}")
            if mutated_text(text, m) is None:
                continue
            previous = old.get(m.id)
            if previous is not None:
                m.equivalent, m.pending = previous.equivalent, previous.pending
            out.append(m)
    return out


def covering_tests(python: str) -> callable:
    """Runs the suite once under coverage with one context per test and
    returns tests_of_line(file, line) -> the test files that execute it."""
    if subprocess.run([python, "-c", "import coverage"], capture_output=True).returncode != 0:
        sys.exit("--generate needs coverage.py (pip install coverage; the `test` extra has it)")
    data_file = Path(tempfile.mkdtemp(prefix="loopscope-mut-cov-")) / ".coverage"
    rc_file = data_file.parent / ".coveragerc"
    rc_file.write_text("[run]\ndynamic_context = test_function\nsource = loopscope\n")
    print("measuring which tests run which lines (the whole suite under coverage) ...", flush=True)
    env = dict(os.environ, COVERAGE_FILE=str(data_file))
    done = subprocess.run([python, "-m", "coverage", "run", f"--rcfile={rc_file}", "-m", "pytest",
                           "tests", "-q", "-p", "no:cacheprovider"], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    if done.returncode not in (0, 1) or len(failed) > 3:
        sys.exit("the suite failed under coverage, so no mutant list was written:\n"
                 + "\n".join(done.stdout.splitlines()[-15:]))
    # A test or two that fail only under coverage's slower run (the timing
    # checks of tests/hostile, on a loaded machine) still ran their lines:
    # the map stays right, and a mutation run first checks that its files
    # pass unmutated (check_baseline).
    for line in failed:
        print(f"warning: under coverage, {line}", flush=True)
    import coverage  # noqa: PLC0415  (only the generator needs it)

    data = coverage.CoverageData(basename=str(data_file))
    data.read()
    files = {Path(p).resolve(): p for p in data.measured_files()}
    test_paths = {}
    for p in (ROOT / "tests").rglob("test_*.py"):
        test_paths.setdefault(p.stem, str(p.relative_to(ROOT)))

    cache: dict[str, dict[int, set[str]]] = {}

    def files_of(contexts) -> set[str]:
        return {test_paths[c.split(".")[0]] for c in contexts if c.split(".")[0] in test_paths}

    def tests_of_line(rel: str, line: int) -> list[str]:
        if rel not in cache:
            measured = files.get((ROOT / rel).resolve())
            cache[rel] = data.contexts_by_lineno(measured) if measured else {}
        contexts = cache[rel].get(line, [])
        if contexts and not files_of(contexts):
            # run at import only (module constants, definitions): every test
            # file that runs this module depends on it
            return sorted(set().union(*(files_of(c) for c in cache[rel].values())))
        return sorted(files_of(contexts))

    return tests_of_line


# ---------------------------------------------------------------------------
# Scratch trees, builds, runs

class Workspace:
    def __init__(self, root: Path, python: str, keep: bool) -> None:
        self.root = root
        self.python = python
        self.keep = keep
        self.base = root / "base"
        self.source = root / "source"  # the tree as it was when the run began
        self.compile_cmds: dict[str, list[str]] = {}
        self.link_cmd: list[str] = []
        self.so_name = ""

    def snapshot(self) -> None:
        """Copies the working tree once: edits made while the run goes on
        do not leak into it."""
        self.copy_tree(self.source, ROOT)

    def copy_tree(self, dest: Path, origin: Path | None = None) -> None:
        ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info", ".pytest_cache",
                                        "mutation", "build")
        dest.mkdir(parents=True)
        for name in TREE:
            src = (origin or self.source) / name
            if src.is_dir():
                shutil.copytree(src, dest / name, ignore=ignore)
            elif src.exists():
                shutil.copy2(src, dest / name)

    def build_base(self) -> None:
        """Builds the unmutated C core once, reading the compiler commands
        so a C mutant recompiles only its own file and relinks."""
        self.copy_tree(self.base)
        env = _clean_env()
        env["LOOPSCOPE_TEST_HOOKS"] = "1"  # a test build: the tests call the C test hooks
        log = subprocess.run(
            [self.python, "setup.py", "-v", "build_ext", "--build-temp", str(self.base / "obj"),
             "--build-lib", str(self.base / "lib")],
            cwd=self.base, env=env, capture_output=True, text=True)
        if log.returncode != 0:
            sys.exit("the unmutated C core does not build:\n" + log.stdout[-3000:] + log.stderr[-3000:])
        for line in (log.stdout + "\n" + log.stderr).splitlines():
            try:
                argv = shlex.split(line)
            except ValueError:
                continue
            if "-c" in argv and "-o" in argv:
                source = argv[argv.index("-c") + 1]
                if source.startswith("csrc/"):
                    self.compile_cmds[source] = argv
            elif "-shared" in argv and "-o" in argv:
                self.link_cmd = argv
        sos = list((self.base / "lib" / "loopscope").glob("_core*.so"))
        if not self.compile_cmds or not self.link_cmd or len(sos) != 1:
            sys.exit("could not read the compiler commands from `setup.py -v build_ext`")
        self.so_name = sos[0].name

    def tree_for(self, name: str) -> Path:
        dest = self.root / name
        self.copy_tree(dest)
        shutil.copy2(self.base / "lib" / "loopscope" / self.so_name,
                     dest / "python" / "loopscope" / self.so_name)
        return dest

    def rebuild(self, dest: Path, source: str) -> str | None:
        """Recompiles `source` in tree `dest` and relinks its _core; None,
        or the compiler's complaint."""
        obj = dest / "obj"
        shutil.copytree(self.base / "obj", obj)
        base_obj, base_so = str(self.base / "obj"), str(self.base / "lib" / "loopscope" / self.so_name)
        so = str(dest / "python" / "loopscope" / self.so_name)

        def moved(argv):
            return [so if a == base_so else a.replace(base_obj, str(obj)) for a in argv]

        for argv in (moved(self.compile_cmds[source]), moved(self.link_cmd)):
            done = subprocess.run(argv, cwd=dest, capture_output=True, text=True)
            if done.returncode != 0:
                return (done.stderr or done.stdout).strip()[-800:]
        return None


def _clean_env() -> dict[str, str]:
    env = dict(os.environ)
    for key in ("LOOPSCOPE_WERROR", "LOOPSCOPE_SANITIZE", "LOOPSCOPE_COVERAGE",
                "COVERAGE_PROCESS_START", "LD_PRELOAD", "PYTHONPATH"):
        env.pop(key, None)
    return env


def run_tests(ws: Workspace, tree: Path, tests: list[str], timeout: float) -> tuple[str, float, str]:
    """(status, seconds, last lines) of the tests in `tree`."""
    env = _clean_env()
    env["PYTHONPATH"] = str(tree / "python")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    argv = [ws.python, "-m", "pytest", *tests, "-x", "-q", "-p", "no:cacheprovider",
            "-p", "no:randomly", "--no-header", "--hypothesis-seed=0"]
    # (a fixed seed: the property tests draw the same examples for the
    # baseline and every mutant, so a kill never depends on luck)
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=tree, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return "timeout", time.monotonic() - t0, _tail(out)
    seconds = time.monotonic() - t0
    if proc.returncode == 0:
        return "survived", seconds, ""
    if proc.returncode == 5 and " skipped" in out:
        # every test skipped itself: a GPU file on a machine without one
        return "skipped", seconds, _tail(out, 1)
    if proc.returncode in (4, 5):  # usage error or no test: the list is wrong
        return "error", seconds, _tail(out)
    return "killed", seconds, _failed_test(out)


def _tail(out: str, n: int = 3) -> str:
    return " | ".join(out.strip().splitlines()[-n:])


def _failed_test(out: str) -> str:
    for line in out.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line[:200]
    return _tail(out, 1)[:200] or "crashed"


# Covering files the baseline found skipping every test on this machine (a
# GPU file on a CPU box): left out of every mutant's run (try_mutant).
SKIPPED_HERE: set[str] = set()


def check_baseline(ws: Workspace, tests: list[str]) -> dict[str, float]:
    """Runs the covering test files on the unmutated tree: they must pass,
    and the loopscope they import must be the scratch copy.  Returns each
    file's time (for the timeouts)."""
    tree = ws.tree_for("baseline")
    env = _clean_env()
    env["PYTHONPATH"] = str(tree / "python")
    where = subprocess.run([ws.python, "-c", "import loopscope; print(loopscope.__file__)"],
                           cwd=tree, env=env, capture_output=True, text=True).stdout.strip()
    if not where.startswith(str(tree)):
        sys.exit(f"the scratch tree does not shadow the installed loopscope ({where})")
    times = {}
    for test in tests:
        status, seconds, detail = run_tests(ws, tree, [test], timeout=1800)
        if status == "skipped":  # left out of every mutant's run here (try_mutant)
            print(f"baseline: {test} skips every test here ({detail}): not run", flush=True)
            SKIPPED_HERE.add(test)
            continue
        if status != "survived":
            sys.exit(f"baseline: {test} does not pass on the unmutated tree ({status}): {detail}")
        times[test] = seconds
    return times


def try_mutant(ws: Workspace, m: Mutant, times: dict[str, float], factor: float) -> Result:
    r = Result(m.id, m.file, "stale", equivalent=m.equivalent, pending=m.pending, what=m.what)
    source = (ws.source / m.file).read_text(encoding="utf-8")
    where = locate(source, m)
    if isinstance(where, str):
        r.detail = where
        return r
    if not m.tests:
        r.status, r.detail = "uncovered", "no test executes this line"
        return r
    t0 = time.monotonic()
    tree = ws.tree_for(m.id)
    try:
        (tree / m.file).write_text(mutated_text(source, m), encoding="utf-8")
        if m.file.endswith(".c"):
            complaint = ws.rebuild(tree, m.file)
            if complaint is not None:
                r.status, r.detail = "build-error", complaint.splitlines()[-1]
                r.seconds = time.monotonic() - t0
                return r
        else:
            compiled = subprocess.run([ws.python, "-m", "py_compile", str(tree / m.file)],
                                      capture_output=True, text=True)
            if compiled.returncode != 0:
                r.status, r.detail = "build-error", compiled.stderr.strip().splitlines()[-1]
                return r
        # the rule tests first (they are written to kill), then the fastest files
        # (a file the baseline found skipping every test here is left out)
        ordered = sorted((t for t in m.tests if t not in SKIPPED_HERE),
                         key=lambda t: (not t.startswith("tests/rules/"), times.get(t, 60)))
        if not ordered:  # not killed here: its `pending` must say where it is
            r.status, r.detail = "survived", "every covering test skips itself here"
            r.seconds = time.monotonic() - t0
            return r
        timeout = 30 + factor * sum(times.get(t, 60) for t in ordered)
        r.status, _, r.detail = run_tests(ws, tree, ordered, timeout)
        r.seconds = time.monotonic() - t0
        return r
    finally:
        if not ws.keep:
            shutil.rmtree(tree, ignore_errors=True)


# ---------------------------------------------------------------------------
# Report

def markdown_table(results: list[Result], wall: float, jobs: int) -> str:
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    tried = [r for r in results if r.status not in ("stale",)]
    timed = [r.seconds for r in results if r.seconds]
    lines = [
        f"Mutants: {len(results)}; " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
        f"Wall time {wall:.0f} s with {jobs} job(s); per tried mutant "
        f"{(sum(timed) / len(timed)) if timed else 0:.1f} s on average (build + tests).",
        "",
        "| file | tried | killed | survived (explained) | other |",
        "|---|---|---|---|---|",
    ]
    for file in sorted({r.file for r in results}):
        rs = [r for r in results if r.file == file]
        kept = [r for r in tried if r.file == file]
        killed = sum(r.status == "killed" for r in rs)
        surv = [r for r in rs if r.status in ("survived", "uncovered")]
        eq = sum(1 for r in surv if r.explained)
        other = len(rs) - killed - len(surv)
        lines.append(f"| {file} | {len(kept)} | {killed} | {len(surv)} ({eq}) | {other} |")
    lines += ["", "| mutant | what | status | why it survives / detail |", "|---|---|---|---|"]
    for r in results:
        if r.status == "killed":
            continue
        surviving = r.status in ("survived", "uncovered")
        why = (r.explained or "NOT EXPLAINED") if surviving else r.detail
        lines.append(f"| {r.id} | {r.what.replace('|', '/')} | {r.status} | {why.replace('|', '/')} |")
    return "\n".join(lines)


def update_markdown(table: str) -> None:
    text = MARKDOWN.read_text(encoding="utf-8")
    if TABLE_START not in text or TABLE_END not in text:
        sys.exit(f"{MARKDOWN} has no {TABLE_START} ... {TABLE_END} section")
    head, rest = text.split(TABLE_START, 1)
    _, tail = rest.split(TABLE_END, 1)
    MARKDOWN.write_text(f"{head}{TABLE_START}\n{table}\n{TABLE_END}{tail}", encoding="utf-8")


def table_from(paths: list[str], update_md: bool) -> int:
    """The table of earlier runs, merged in order; a mutant's explanation
    and description are read from the lists as they are now."""
    lists = {m.id: m for m in load_list(HAND_LIST) + load_list(PY_LIST)}
    merged: dict[str, Result] = {}
    for path in paths:
        for row in json.loads(Path(path).read_text(encoding="utf-8")):
            r = Result(**row)
            m = lists.get(r.id)
            if m is not None:
                r.equivalent, r.pending, r.what = m.equivalent, m.pending, m.what
            merged.pop(r.id, None)
            merged[r.id] = r
    results = list(merged.values())
    table = markdown_table(results, 0.0, 0).split("\n")
    table[1] = (f"Merged from {len(paths)} run(s) ({', '.join(Path(p).name for p in paths)}); "
                f"per tried mutant {sum(r.seconds for r in results) / max(1, len(results)):.1f} s "
                "on average (build + tests).")
    text = "\n".join(table)
    print(text)
    if update_md:
        update_markdown(text)
    unexplained = [r.id for r in results if r.status in ("survived", "uncovered")
                   and not r.explained]
    if unexplained:
        print(f"\nunexplained survivors: {', '.join(unexplained)}", file=sys.stderr)
    return 1 if unexplained else 0


# ---------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", type=int, metavar="N", help="run the first N of the fixed CI sample")
    p.add_argument("--only", action="append", metavar="GLOB", help="mutant ids matching GLOB")
    p.add_argument("--hand", action="store_true", help="the hand-written list only")
    p.add_argument("--per-file", type=int, metavar="N", help="N generated mutants of each file "
                   "(spread over the file), with every hand-written one")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--timeout-factor", type=float, default=4.0,
                   help="a mutant's time limit: 30 s + this times its tests' unmutated time")
    p.add_argument("--generate", action="store_true", help="rewrite python_mutants.toml")
    p.add_argument("--update-md", action="store_true", help="write the table into tests/MUTATION.md")
    p.add_argument("--json", metavar="PATH", help="write every result as JSON")
    p.add_argument("--keep", action="store_true", help="keep the scratch trees")
    p.add_argument("--list", action="store_true", help="list the chosen mutants and stop")
    p.add_argument("--table-from", nargs="+", metavar="JSON", help="no run: the table of "
                   "earlier runs' --json files (a later file's result of a mutant replaces an "
                   "earlier one: a re-run after a test was added), explanations from the lists")
    args = p.parse_args(argv)
    python = sys.executable

    if args.table_from:
        return table_from(args.table_from, args.update_md)

    if args.generate:
        old = {m.id: m for m in load_list(PY_LIST)} if PY_LIST.exists() else {}
        mutants = generate(old, covering_tests(python))
        header = ("# Generated by `python tests/mutation/run_mutants.py --generate`: one-line\n"
                  "# mutations of the Python rule modules, found by text (`find`, after the\n"
                  "# unique line `after` when given).  `tests`: the test files that execute\n"
                  "# the line.  `equivalent` is written by hand and kept on regeneration.")
        save_list(PY_LIST, mutants, header)
        print(f"{len(mutants)} mutants written to {PY_LIST.relative_to(ROOT)}")
        return 0

    every = load_list(HAND_LIST) + (load_list(PY_LIST) if PY_LIST.exists() else [])
    missing_files = [m for m in every if not (ROOT / m.file).is_file()]
    if missing_files:  # the code moved: the list must follow it (one line each, no traceback)
        for m in missing_files:
            print(f"mutant {m.id}: its file {m.file} does not exist (the code moved?): "
                  f"retarget it in {HAND_LIST.name if m.id in _ids(HAND_LIST) else PY_LIST.name}",
                  file=sys.stderr)
        return 1
    by_id = {m.id: m for m in every}
    if args.smoke is not None:
        missing = [i for i in SMOKE if i not in by_id]
        if missing:
            print(f"smoke sample names mutants no list has: {', '.join(missing)}", file=sys.stderr)
            return 1
        chosen = [by_id[i] for i in SMOKE[:args.smoke]]
    else:
        chosen = load_list(HAND_LIST) if args.hand else every
        if args.only:
            chosen = [m for m in chosen if any(fnmatch.fnmatchcase(m.id, g) for g in args.only)]
        if args.per_file:  # a spread sample of the generated list; the hand list whole
            hand = {m.id for m in load_list(HAND_LIST)}
            spread = [m for m in chosen if m.id in hand]
            generated = [m for m in chosen if m.id not in hand]
            for file in dict.fromkeys(m.file for m in generated):
                of_file = [m for m in generated if m.file == file]
                stride = max(1, len(of_file) // args.per_file)
                spread += of_file[::stride][:args.per_file]
            chosen = spread
    if args.list:
        for m in chosen:
            print(f"{m.id:40} {m.file:34} {m.what}")
        return 0
    if not chosen:
        print("no mutant chosen", file=sys.stderr)
        return 1

    t0 = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="loopscope-mutants-"))
    try:
        ws = Workspace(scratch, python, args.keep)
        ws.snapshot()
        print(f"building the unmutated core in {scratch} ...", flush=True)
        ws.build_base()
        tests = sorted({t for m in chosen for t in m.tests})
        if args.smoke is not None:  # CI ran the whole suite just before: prove the scratch
            tests = [t for t in tests if t.startswith("tests/rules/")]  # tree works, quickly
        times = check_baseline(ws, tests)
        print(f"baseline passes: {len(tests)} test files, {sum(times.values()):.0f} s", flush=True)
        results = []
        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
            futures = {pool.submit(try_mutant, ws, m, times, args.timeout_factor): m for m in chosen}
            for future in concurrent.futures.as_completed(futures):
                r = future.result()
                results.append(r)
                print(f"{r.status:12} {r.seconds:6.1f} s  {r.id:40} {r.detail[:100]}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    order = {m.id: i for i, m in enumerate(chosen)}
    results.sort(key=lambda r: order[r.id])
    wall = time.monotonic() - t0
    table = markdown_table(results, wall, args.jobs)
    print()
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=1))
    if args.update_md:
        update_markdown(table)
    if args.smoke is not None:
        bad = [r for r in results if r.status != "killed"]
    else:
        bad = [r for r in results if r.status in ("stale", "timeout", "build-error", "error")
               or (r.status in ("survived", "uncovered") and not r.explained)]
    if bad:
        print(f"\n{len(bad)} mutant(s) need attention: " + ", ".join(r.id for r in bad),
              file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
