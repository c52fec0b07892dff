"""The C test hooks live apart from the product (issue 29): compiled into
_core only in a test build (LOOPSCOPE_TEST_HOOKS=1), reached through
loopscope._testhooks, never by the product's own modules.  The expected
hook names are read from the C method tables here, not from loopscope."""
from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from loopscope import _core

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "loopscope"


def c_method_names(file_name: str) -> set[str]:
    """The Python names a csrc file's PyMethodDef tables give (wherever the file lives)."""
    [path] = [p for p in (ROOT / "csrc").rglob(file_name)]
    return set(re.findall(r'^\s*\{"(\w+)",', path.read_text(), re.M))


TEST_HOOKS = c_method_names("ls_test_hooks.c")
REPLAY_HOOKS = c_method_names("ls_inject.c")


def test_the_c_tables_were_read():
    assert {"_inject_calls", "_fake_samples", "_finish_delay"} <= TEST_HOOKS
    assert REPLAY_HOOKS == {"_inject", "_set_test_clock"}


def test_testhooks_gives_every_hook_of_the_core():
    from loopscope import _testhooks
    assert set(_testhooks.__all__) == TEST_HOOKS | REPLAY_HOOKS
    for name in TEST_HOOKS | REPLAY_HOOKS:
        assert getattr(_testhooks, name) is getattr(_core, name), name


def test_a_build_without_the_hooks_says_how_to_rebuild(monkeypatch):
    monkeypatch.delattr(_core, "_fake_samples")  # as a product build's _core lacks it
    monkeypatch.delitem(sys.modules, "loopscope._testhooks", raising=False)
    with pytest.raises(ImportError, match=r"no test hooks: rebuild it with LOOPSCOPE_TEST_HOOKS=1"):
        importlib.import_module("loopscope._testhooks")


def _product_modules():
    return [p for p in sorted(PACKAGE.rglob("*.py")) if p.name != "_testhooks.py"]


def test_the_product_never_reaches_a_test_hook():
    """A release's _core has no test hooks, so no product module may import
    _testhooks or call one of them (_inject and _set_test_clock are the
    product's: a recording's replay)."""
    assert len(_product_modules()) > 20
    found = []
    for path in _product_modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr in TEST_HOOKS and (
                    ast.unparse(node.value).split(".")[-1] == "_core"):
                found.append(f"{path.name}:{node.lineno} .{node.attr}")
            elif isinstance(node, ast.ImportFrom) and (
                    "_testhooks" in (node.module or "")
                    or any(a.name == "_testhooks" or a.name in TEST_HOOKS for a in node.names)):
                found.append(f"{path.name}:{node.lineno} import")
            elif isinstance(node, ast.Import) and any("_testhooks" in a.name for a in node.names):
                found.append(f"{path.name}:{node.lineno} import")
    assert found == []


# What setup.py hands setuptools, read in a child process without building.
SETUP_PROBE = """
import json, runpy, setuptools, sys
captured = {}
setuptools.setup = lambda **kw: captured.update(kw)
sys.argv = ["setup.py", "--name"]
runpy.run_path("setup.py")
[ext] = captured["ext_modules"]
print(json.dumps({"sources": [s.replace("\\\\", "/").rsplit("/", 1)[-1] for s in ext.sources],
                  "macros": [list(m) for m in ext.define_macros]}))
"""


def setup_with(value: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LOOPSCOPE_TEST_HOOKS"}
    if value is not None:
        env["LOOPSCOPE_TEST_HOOKS"] = value
    return subprocess.run([sys.executable, "-c", SETUP_PROBE], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("value, hooks", [(None, False), ("", False), ("0", False), ("1", True)])
def test_setup_builds_the_hooks_only_when_asked(value, hooks):
    import json
    result = setup_with(value)
    assert result.returncode == 0, result.stderr
    build = json.loads(result.stdout.strip().splitlines()[-1])
    assert ("ls_test_hooks.c" in build["sources"]) is hooks
    assert "ls_inject.c" in build["sources"] and "ls_module.c" in build["sources"]
    assert (["LOOPSCOPE_TEST_HOOKS", "1"] in build["macros"]) is hooks


def test_setup_refuses_an_unknown_value():
    result = setup_with("yes")
    assert result.returncode != 0
    assert "LOOPSCOPE_TEST_HOOKS must be 1 (build the test hooks) or 0, got 'yes'" in result.stderr
