"""README.md's and its user guide's examples, run as a new user would run
them, on a machine without a GPU (CUDA_VISIBLE_DEVICES="" here, so on a GPU
machine too): the pytest example (docs/tour.md) ends in a skip with the
reason, never a traceback from loopscope.demo.build(); README's opening
example runs around a small CPU model.

The examples are found by what they contain, not by their place, so a page
can be reordered without losing them."""
from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import loopscope

ROOT = Path(__file__).resolve().parents[2]
PYTHON_DIR = str(Path(loopscope.__file__).resolve().parent.parent)


def python_blocks(page: str) -> list[str]:
    text = (ROOT / page).read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def block_with(needle: str, page: str = "README.md") -> str:
    found = [b for b in python_blocks(page) if needle in b]
    assert found, f"{page} has no python example containing {needle!r}"
    return found[0]


def cpu_env() -> dict[str, str]:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    env["PYTHONPATH"] = os.pathsep.join([PYTHON_DIR, env.get("PYTHONPATH", "")])
    return env


def plugin_args() -> list[str]:
    """[] where the entry point registers the plugin (pip install), else -p."""
    for ep in importlib.metadata.entry_points(group="pytest11"):
        if ep.value == "loopscope.pytest_plugin":
            return []
    return ["-p", "loopscope.pytest_plugin"]


def test_the_pytest_example_skips_with_the_reason_without_a_gpu(tmp_path):
    pytest.importorskip("torch", reason="the example builds the demo model with torch")
    example = block_with("def test_denoise_loop(loopscope_profile)", page="docs/tour.md")
    (tmp_path / "test_demo_budgets.py").write_text(example)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *plugin_args(), "-p", "no:cacheprovider", "-rs",
         "test_demo_budgets.py"], cwd=tmp_path, env=cpu_env(), capture_output=True, text=True,
        timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert re.search(r"\b1 skipped\b", out), out
    assert "SKIPPED [1] test_demo_budgets.py" in out
    # the reason: no driver (told without torch, issue 41), else what torch sees
    from machine import NO_DRIVER_REASON, driver_present

    why = "no CUDA GPU is visible to PyTorch" if driver_present() else NO_DRIVER_REASON
    assert f"loopscope.demo.build(device='cuda'): {why}" in out
    assert "Traceback" not in out and "AssertionError" not in out


def test_the_opening_example_runs_around_a_cpu_model():
    torch = pytest.importorskip("torch", reason="the example's model is a torch module")
    assert torch is not None
    example = block_with("with loopscope.profile() as prof:")
    # What the example leaves to the reader: a model and its input.
    prelude = "import torch\nmodel = torch.nn.Linear(8, 8)\nx = torch.zeros(2, 8)\n"
    result = subprocess.run([sys.executable, "-c", prelude + example], env=cpu_env(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("loopscope report"), result.stdout
    assert "10 steps" in result.stdout.splitlines()[0]
