"""The GPU benchmarks of issue 11 must at least parse their arguments and
import without a GPU (CI has none): --dry lists the runs they would make."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import loopscope

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The loopscope this suite imports (in CI an installed one, not the source tree).
PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(loopscope.__file__)))


def run(script: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    return subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", script), *args],
                          capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize("script, rows", [("overhead.py", 2 * 9), ("overhead_options.py", 2 * 22)])
def test_dry_run_lists_every_variant_of_both_loops(script, rows):
    result = run(script, "--dry")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == rows
    assert {line.split()[0] for line in lines} == {"eager", "graph"}


@pytest.mark.parametrize("script", ["overhead.py", "overhead_options.py"])
def test_an_unknown_variant_is_named(script):
    result = run(script, "--dry", "--variants", "nope")
    assert result.returncode == 2
    assert "unknown variant 'nope'" in result.stderr


@pytest.mark.parametrize("args, shown", [
    (("--case", "steps", "--steps", "300"), "300 steps"),
    (("--case", "gpu_steps", "--steps", "200"), "200 kernels, 200 steps"),
    (("--case", "kernels", "--kernels", "2000"), "2,000 kernels, 10 steps"),
    (("--case", "kernels", "--kernels", "2000", "--shuffled"), "2,000 kernels in 10 steps, shuffled"),
])
def test_the_scale_benchmark_runs_small(args, shown):
    """benchmarks/bench_scale.py (issue 14, condition 12) at a size CI
    affords: it runs each case to its end and reports what it built."""
    result = run("bench_scale.py", *args, "--no-html")
    assert result.returncode == 0, result.stderr
    assert "summary():" in result.stdout and shown in result.stdout, result.stdout
