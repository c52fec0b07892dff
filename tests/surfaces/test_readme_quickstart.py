"""README's quick start stays true: the output it quotes is what the
bundled recording of its loop prints today, its example compiles, and on a
GPU it runs (marked gpu; skipped with a reason where no GPU is present)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import loopscope
from loopscope.files import _recording
from loopscope.views._report import format_report

README = Path(__file__).resolve().parents[2] / "README.md"


def quick_start() -> tuple[str, list[str]]:
    """The quick start's Python example and the output lines it quotes."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Quick start"):]
    section = section[:section.index("\n## ", 1)]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    quoted = re.search(r"Its first lines.*?```\n(.*?)```", section, re.S).group(1)
    return code, quoted.splitlines()


def test_the_quoted_output_is_what_the_recording_prints():
    if not _recording.DEMO_RECORDING.is_file():
        pytest.skip("no bundled demo recording in this checkout")
    _, quoted = quick_start()
    report = format_report(loopscope.load(_recording.DEMO_RECORDING).summary()).splitlines()
    assert len(quoted) >= 5 and report[:len(quoted)] == quoted


def test_the_example_compiles_and_profiles_ten_steps():
    code, _ = quick_start()
    compile(code, "README quick start", "exec")
    assert "range(10)" in code and "prof.step()" in code and "print(prof.report())" in code


@pytest.mark.gpu
def test_the_example_runs_on_a_gpu(capsys):
    torch = pytest.importorskip("torch", reason="needs PyTorch")
    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU visible to PyTorch")
    code, quoted = quick_start()
    scope: dict = {}
    exec(compile(code, "README quick start", "exec"), scope)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("loopscope report - ") and " - 10 steps, " in out[0]
    assert scope["prof"].summary()["gpu"]["kernels"] > 0
    # the same kind of loop as the recording: the same verdict
    assert out[1].split(":")[0] == quoted[1].split(":")[0]
