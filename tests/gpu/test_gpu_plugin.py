"""The pytest marker on the real demo loop (marked gpu; skipped with a reason
where no GPU is present): the eager loop fails its budgets with severe
gaps and idle time, the CUDA-graph version of the same loop passes.  The
inner run's output is printed (-s) for benchmarks/RESULTS.md."""
from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU visible to PyTorch", allow_module_level=True)

import loopscope  # noqa: E402

pytestmark = pytest.mark.gpu
pytest_plugins = ["pytester"]

DEMO_TESTS = '''
import pytest
import torch
from loopscope.demo import build, eager_loop, graph_loop_factory

BUDGETS = dict(max_severe_gaps=0, max_idle_pct=50, steps="Step_*")


@pytest.fixture(scope="module")
def demo():
    model, x = build()
    graph_loop = graph_loop_factory(model, x)
    for _ in range(3):  # warm-up: cuBLAS handles, allocator, lazy modules
        eager_loop(model, x)
        graph_loop()
    torch.cuda.synchronize()
    return model, x, graph_loop


@pytest.mark.loopscope(**BUDGETS)
def test_eager_denoise_loop(demo, loopscope_profile):
    model, x, _ = demo
    eager_loop(model, x, 10, loopscope_profile)


@pytest.mark.loopscope(**BUDGETS)
def test_cuda_graph_denoise_loop(demo, loopscope_profile):
    _, _, graph_loop = demo
    graph_loop(1)  # outside the steps: CUPTI's one-time set-up for this graph
    graph_loop(10, loopscope_profile)
'''


def plugin_args() -> list[str]:
    for ep in importlib.metadata.entry_points(group="pytest11"):
        if ep.value == "loopscope.pytest_plugin":
            return []
    return ["-p", "loopscope.pytest_plugin"]


def test_marker_fails_the_eager_loop_and_passes_the_graph(pytester, monkeypatch, tmp_path):
    python_dir = str(Path(loopscope.__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", python_dir + os.pathsep + os.environ.get("PYTHONPATH", ""))
    pytester.makepyfile(test_demo_budgets=DEMO_TESTS)
    report = tmp_path / "loopscope.json"
    result = pytester.runpytest_subprocess(*plugin_args(), "-v", "-rs",
                                           f"--loopscope-report={report}")
    print(result.stdout.str())
    print(result.stderr.str())
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*test_eager_denoise_loop FAILED*",
        "*test_cuda_graph_denoise_loop PASSED*",
    ])
    result.stdout.fnmatch_lines([
        "*_ test_eager_denoise_loop _*",
        "loopscope: * of 2 budgets failed, steps matching 'Step_*' (10 of 10 steps)",
        "  FAILED max_idle_pct: GPU idle time *",
        "Worst gaps:",
        "Verdict: CPU_LAUNCH_BOUND: *",
    ])
    import json

    tests = json.loads(report.read_text())["tests"]
    eager = tests["test_demo_budgets.py::test_eager_denoise_loop"]
    graph = tests["test_demo_budgets.py::test_cuda_graph_denoise_loop"]
    assert eager["summary"]["source"] == graph["summary"]["source"] == "cupti"
    print("eager severe gaps in steps:", eager["budgets"]["budgets"]["max_severe_gaps"]["measured"],
          "idle %:", eager["budgets"]["budgets"]["max_idle_pct"]["measured"])
    print("graph severe gaps in steps:", graph["budgets"]["budgets"]["max_severe_gaps"]["measured"],
          "idle %:", graph["budgets"]["budgets"]["max_idle_pct"]["measured"])
    assert graph["budgets"]["budgets"]["max_severe_gaps"]["measured"] == 0
