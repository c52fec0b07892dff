"""Issue 41, item 6: the report says each thing once.  Without an NVIDIA
driver one reason stops the GPU time line, the sync watcher and the
counters: the report gives it in the verdict line and in one
"GPU sections missing" line (it said it five times on stdout), and `run`
warns of it once on stderr."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import loopscope
from machine import NO_DRIVER_REASON, driver_present

HERE = Path(__file__).resolve().parents[1]
PYTHON_DIR = str(Path(loopscope.__file__).resolve().parent.parent)
no_driver = pytest.mark.skipif(driver_present(), reason="an NVIDIA driver is present: the "
                               "sections are measured, there is no reason to repeat")


@no_driver
@pytest.mark.real_tracing  # the profile's own start, which finds no driver
def test_the_no_driver_reason_is_said_once_per_place():
    with loopscope.profile() as prof:
        with prof.step():
            pass
    s = prof.summary()
    assert s["gpu_error"] == s["syncs_error"] == s["metrics_error"] == NO_DRIVER_REASON
    lines = prof.report().splitlines()
    said = [line for line in lines if NO_DRIVER_REASON in line]
    assert said == [f"UNKNOWN: no GPU timeline: {NO_DRIVER_REASON}",
                    f"GPU sections missing: {NO_DRIVER_REASON}"]


def test_a_different_reason_per_section_is_still_said(run_trace):
    # syncs and counters turned off, a GPU time line there: each section's own line
    s = run_trace(kernels=[(1_000, 2_000, 0, 7, 1, "k")], syncs=False, metrics=False)
    from loopscope.views._report import format_report

    lines = format_report(s).splitlines()
    assert "Syncs: not watched: sync detection was turned off (syncs=False)" in lines
    assert "SM/DRAM: SM and DRAM sampling was turned off (metrics=False)" in lines


@no_driver
def test_run_says_the_reason_once_on_each_stream(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("x = sum(range(10))\n")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    env["PYTHONPATH"] = os.pathsep.join([PYTHON_DIR, str(HERE), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-m", "loopscope", "run", str(script)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(NO_DRIVER_REASON) == 2  # the verdict, the missing sections
    assert done.stderr.count(NO_DRIVER_REASON) == 1  # the one warning
