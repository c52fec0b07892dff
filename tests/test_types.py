"""Type checks, run as tests so CI runs them: mypy over python/loopscope
(configured in pyproject.toml; the C core typed by _core.pyi), and mypy's
stubtest, which fails when _core.pyi and the built C core disagree (a
function, method or argument added, removed or renamed on one side only)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

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
