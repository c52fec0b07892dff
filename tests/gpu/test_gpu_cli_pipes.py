"""`loopscope demo | head -1` on a GPU (marked gpu; skipped with a reason
where no GPU is present): the live demo, its output cut short by the
reader, ends quietly with 128 + SIGPIPE, as on a machine without one
(tests/surfaces/test_cli_pipes.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU visible to PyTorch", allow_module_level=True)

import loopscope  # noqa: E402

pytestmark = pytest.mark.gpu
PYTHON_DIR = str(Path(loopscope.__file__).resolve().parent.parent)


def test_the_live_demo_into_a_closed_pipe_ends_quietly():
    reader, writer = os.pipe()
    os.close(reader)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PYTHON_DIR, env.get("PYTHONPATH", "")])
    try:
        result = subprocess.run([sys.executable, "-m", "loopscope", "demo"], stdout=writer,
                                stderr=subprocess.PIPE, text=True, env=env, timeout=600)
    finally:
        os.close(writer)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 128 + 13, result.stderr
