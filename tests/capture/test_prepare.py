"""loopscope.prepare() (graph-level mode, issue 27) where it cannot be
turned on: each refusal is a RuntimeError that says why, nothing is left
half on, and profiles and `loopscope run` go on per kernel.  (Where it can,
on a GPU: tests/gpu/test_gpu_graph_replays.py.)"""
from __future__ import annotations

import subprocess
import sys

import pytest

import loopscope
from loopscope import _core
from loopscope.live import _prepare


def no_driver() -> bool:
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return True
    return False


pytestmark = pytest.mark.skipif(not no_driver(), reason="this machine has an NVIDIA driver: "
                                "tests/gpu/test_gpu_graph_replays.py covers it")


def test_prepare_is_public():
    assert "prepare" in loopscope.__all__
    assert loopscope.prepare is _prepare.prepare


def test_without_a_driver_prepare_says_so_and_stays_off():
    with pytest.raises(RuntimeError, match=r"graph-level mode is off: no NVIDIA GPU driver"):
        loopscope.prepare()
    assert _prepare.prepared() is False
    assert _core.graphs_prepared() is False
    with loopscope.profile() as prof:  # profiles are unchanged
        with prof.step():
            pass
    assert prof.summary()["steps"][0]["index"] == 0


def test_inside_a_profile_prepare_refuses():
    with loopscope.profile():
        with pytest.raises(RuntimeError, match="cannot run inside a profile"):
            loopscope.prepare()
    assert _prepare.prepared() is False


def test_cupti_paths_must_be_strings():
    with pytest.raises(TypeError, match=r"cupti_paths\[0\] must be a str"):
        _core.prepare_graphs([3])


def test_run_with_graph_replays_says_why_it_is_off_and_runs_the_script(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('the script ran')\n")
    p = subprocess.run([sys.executable, "-m", "loopscope", "run", "--graph-replays", str(script)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "the script ran" in p.stdout
    assert "graph-level mode is off: no NVIDIA GPU driver" in p.stderr
    assert "traced one by one" in p.stderr


def test_graph_kernels_is_a_checked_flag_and_harmless_without_prepare():
    with pytest.raises(TypeError, match="graph_kernels must be True or False"):
        loopscope.profile(graph_kernels="yes")
    with loopscope.profile(graph_kernels=True) as prof:
        with prof.step():
            pass
    info = prof.capture.info()
    assert info["graph_kernels"] is False and info["graph_level"] is False
    assert info["graph_level_ended"] is False
    assert prof.summary()["cupti_note"] is None
