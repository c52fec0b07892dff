"""Issue 25, the GPU half of "the counter cache never stops a run" (marked
`gpu`; skipped with a reason without one): a cache folder path over 1023
bytes, and a FIFO in place of the cache file, on a profile that samples
the counters.  The run goes on, sampled, and summary["metrics"]["cache_note"]
says why the cache was not used.  Each scenario in a fresh interpreter
under a timeout (a FIFO that blocked the worker would hang it); each
prints one JSON line of what it saw (`pytest -s`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU visible to PyTorch", allow_module_level=True)

import loopscope  # noqa: E402

pytestmark = pytest.mark.gpu
PYTHON_DIR = str(Path(loopscope.__file__).resolve().parent.parent)

SAMPLED_LOOP = """
import json, time, torch, loopscope
x = torch.zeros(1 << 20, device="cuda")
with loopscope.profile() as prof:
    for i in range(20):
        with prof.step():
            for _ in range(50):
                x.add_(1)
            torch.cuda.synchronize()
            time.sleep(0.05)
s = prof.summary()
m = s.get("metrics") or {}
print(json.dumps({"steps": len(s["steps"]), "sampled": bool(s.get("metrics")),
                  "cache_note": m.get("cache_note"), "config_source": m.get("config_source"),
                  "metrics_error": s.get("metrics_error")}))
"""


def run_loop(cache_dir: str) -> dict:
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""),
               LOOPSCOPE_CACHE_DIR=cache_dir)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(SAMPLED_LOOP)],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-4000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    print(json.dumps(seen))
    return seen


def test_a_cache_path_over_1023_bytes_leaves_the_profile_sampled(tmp_path):
    parts = "/".join(["d" * 99] * 11)  # 1,100 bytes in names under NAME_MAX
    seen = run_loop(f"{tmp_path}/{parts}")  # before: ValueError before the loop ran
    assert seen["steps"] == 20
    if seen["sampled"]:
        assert "LOOPSCOPE_CACHE_DIR" in seen["cache_note"] and "1023" in seen["cache_note"]
        assert seen["config_source"] == "built"


def test_a_fifo_in_place_of_the_cache_file_does_not_block_the_worker(tmp_path):
    folder = tmp_path / "cache"
    first = run_loop(str(folder))  # writes the cache file
    files = list(folder.glob("*.bin")) if folder.exists() else []
    if not first["sampled"] or not files:
        pytest.skip(f"the counters were not sampled here: {first['metrics_error']}")
    files[0].unlink()
    os.mkfifo(files[0])
    seen = run_loop(str(folder))  # before: the worker blocked in fopen() for ever
    assert seen["steps"] == 20 and seen["sampled"]
    assert "is not a regular file (a FIFO" in seen["cache_note"]
