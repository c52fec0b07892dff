"""Type checks, run as tests so CI runs them: mypy over python/loopscope
(configured in pyproject.toml; the C core typed by _core.pyi), and mypy's
stubtest, which fails when _core.pyi and the built C core disagree (a
function, method or argument added, removed or renamed on one side only)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("mypy", reason="mypy is in the test extra: pip install -e '.[test]'")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_mypy_passes_over_the_package():
    result = run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


def test_the_stub_matches_the_c_core():
    result = run("mypy.stubtest", "loopscope._core")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_package_ships_its_types():
    package = ROOT / "python" / "loopscope"
    assert (package / "py.typed").is_file()
    assert (package / "_core.pyi").is_file()


# The public signatures as a user's type checker sees them (issue 28): every
# option of loopscope.profile typed (a misspelt one is an error before the run),
# the HTML and comparison text typed as str.
USER_CODE = '''
import loopscope

with loopscope.profile(metrics_interval_us=50.0, gap_thresholds_us=(10.0, 40.0)) as prof:
    with prof.step():
        pass
page: str = prof.to_html()
where: str = prof.save_html("view.html")
summary = prof.summary()
text: str = loopscope.format_compare(loopscope.compare(summary, "before.json"))
error: type[ValueError] = loopscope.CompareError
'''
MISTAKES = '''
import loopscope

loopscope.profile(metrics_intervall_us=5)
loopscope.profile(trace="yes")
count: int = loopscope.profile().to_html()
'''


def test_a_users_code_type_checks_against_the_public_signatures(tmp_path):
    (tmp_path / "good.py").write_text(USER_CODE)
    (tmp_path / "bad.py").write_text(MISTAKES)
    env_path = str(ROOT / "python")
    # The user's own code under --strict; the package's insides are not the
    # user's (test_mypy_passes_over_the_package checks them with the
    # project's settings), as mypy treats an installed typed package.
    good = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--strict",
                           "--follow-imports=silent", str(tmp_path / "good.py")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "MYPYPATH": env_path})
    assert good.returncode == 0, good.stdout + good.stderr
    bad = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental",
                          "--follow-imports=silent", str(tmp_path / "bad.py")], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600, env={**os.environ, "MYPYPATH": env_path})
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert 'bad.py:4: error: Unexpected keyword argument "metrics_intervall_us"' in bad.stdout
    assert 'bad.py:5: error: Argument "trace" to "Profile" has incompatible type "str"' \
        in bad.stdout
    assert 'bad.py:6: error: Incompatible types in assignment (expression has type "str", ' \
        'variable has type "int")' in bad.stdout


# Issue 41, item 9: the modules that define the public API (every name of
# loopscope.__all__, and the C core's stub) pass mypy --strict, as a user's
# strict checker reads them; the rest of the package keeps the project's settings.
def public_api_files() -> list[str]:
    import importlib

    import loopscope

    modules = {"loopscope"}
    for name in loopscope.__all__:
        value = getattr(loopscope, name)
        modules.add(getattr(value, "__module__", None) or "loopscope._version")
    if "loopscope.figures._syncs" not in modules:  # SYNC_KINDS: a frozenset, no __module__
        modules.add("loopscope.figures._syncs")
    files = []
    for module in sorted(modules):
        if module == "loopscope._core":
            files.append("python/loopscope/_core.pyi")
            continue
        # the source tree's file, by module name: in CI the package imported is
        # an installed copy, outside this tree
        path = Path(importlib.import_module(module).__file__ or "")
        tail = path.name if path.name != "__init__.py" else "__init__.py"
        relative = Path("python", *module.split(".")[:-1 if tail != "__init__.py" else None])
        files.append(str(relative / tail))
        assert (ROOT / files[-1]).is_file(), files[-1]
    return files


def test_the_public_api_passes_mypy_strict():
    files = public_api_files()
    assert "python/loopscope/_profile.py" in files and "python/loopscope/_core.pyi" in files
    result = run("mypy", "--strict", "--follow-imports=silent", "--no-incremental", *files)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Success: no issues found in {len(files)} source files" in result.stdout


def test_no_name_is_used_undefined_in_code_ci_never_runs():
    """pyflakes over the package, the tests and the benchmarks, for names
    used but never bound: GPU-only paths (a probe's CUDA loop, a GPU test)
    run nowhere in CI, and one such name cost a GPU run on 2026-11-30
    (light_callbacks_probe --c-dispatch).  Only undefined names fail here,
    not style."""
    api = pytest.importorskip("pyflakes.api", reason="pyflakes is in the test extra")
    from pyflakes import messages

    undefined = (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)
    found: list[str] = []

    class Collect:
        def flake(self, message: object) -> None:
            if isinstance(message, undefined):
                found.append(str(message))

        def syntaxError(self, filename: str, msg: str, lineno: int, offset: int, text: str) -> None:
            found.append(f"{filename}:{lineno}: {msg}")

        def unexpectedError(self, filename: str, msg: str) -> None:
            found.append(f"{filename}: {msg}")

    files = list(api.iterSourceCode([str(ROOT / d) for d in ("python", "tests", "benchmarks")]))
    assert len(files) > 200  # the three folders were found and read (255 on 2026-11-30)
    for path in files:
        api.checkPath(path, Collect())
    assert found == []
