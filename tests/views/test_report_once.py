"""Issue 41, item 6: the report says each thing once.  Without an NVIDIA
driver one reason stops the GPU time line, the sync watcher and the
counters: the report gives it in the verdict line, and the one
"GPU sections missing" line names the sections and refers to it (it said
it five times on stdout, then twice); `run` warns of it once on stderr.
A graph-replay loop too short for one PM sample (`demo --graph`) said the
sampler's reason three times: the coverage WARNING gives it, the verdict's
reason and the SM/DRAM line refer to it.  The HTML view the same."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import loopscope
from loopscope import _core, _testhooks
from loopscope._summary import NO_SAMPLES
from loopscope.views._html import render
from loopscope.views._report import format_report
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
    assert said == [f"UNKNOWN: no GPU timeline: {NO_DRIVER_REASON}"]
    assert "GPU sections missing (GPU time line, syncs, SM/DRAM): see the verdict line above" \
        in lines
    html = render(s)
    assert html.count("libcuda.so.1") == 1  # the verdict's reason
    assert "Not measured: see the verdict above" in html  # the sync sites
    assert "GPU sections missing (GPU time line, syncs, SM/DRAM): see the verdict above" in html


def test_a_different_reason_per_section_is_still_said(run_trace):
    # syncs and counters turned off, a GPU time line there: each section's own line
    s = run_trace(kernels=[(1_000, 2_000, 0, 7, 1, "k")], syncs=False, metrics=False)
    from loopscope.views._report import format_report

    lines = format_report(s).splitlines()
    assert "Syncs: not watched: sync detection was turned off (syncs=False)" in lines
    # GPU_BOUND without counters: the verdict's reason gives why, the SM/DRAM line refers
    off = "SM and DRAM sampling was turned off (metrics=False)"
    assert f"  - no SM/DRAM counters to split GPU_BOUND: {off}" in lines
    assert "SM/DRAM: see the verdict's reasons above" in lines


@no_driver
def test_run_says_the_reason_once_on_each_stream(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("x = sum(range(10))\n")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    env["PYTHONPATH"] = os.pathsep.join([PYTHON_DIR, str(HERE), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-m", "loopscope", "run", str(script)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(NO_DRIVER_REASON) == 1  # the verdict (the sections refer to it)
    assert done.stderr.count(NO_DRIVER_REASON) == 1  # the one warning


# -- the coverage warning of a graph-replay loop (issue 41, item 6) -----------
US = 1_000
REPLAY_NS = 300 * US


def graph_replay_loop(prof, steps=6):
    """One CUDA-graph replay a step, traced whole (graph-level mode's
    records), each queued behind the last: the GPU busy but for 2 us between
    replays, a GPU_BOUND loop as `demo --graph` is.  Returns the replays."""
    apis, replays, end = [], [], 0
    for corr in range(1, steps + 1):
        with prof.step():
            launch = _core.now_ns()
            start = max(launch + 5 * US, end + 2 * US)
            end = start + REPLAY_NS
            apis.append((launch, launch + US, corr, 0, 0, "cudaGraphLaunch"))
            replays.append((start, end, 0, 7, corr, "CUDA graph 1"))
    _testhooks._inject("api", apis)
    _testhooks._inject("graph", replays)
    return replays


@pytest.fixture
def _no_fake_samples_left():
    yield
    _testhooks._fake_samples([])


@pytest.mark.fake_sampler
def test_a_graph_loop_shorter_than_a_sample_says_the_reason_once(test_clock,
                                                                 _no_fake_samples_left):
    # The sampler runs (set up by an earlier profile) but its only sample
    # lies far after the loop: no sample of the loop, as on a GPU when the
    # replays end before the first interval does.
    test_clock.set(1_000_000, 100 * US)
    _testhooks._fake_samples([(10**12, 10**12 + 50 * US, {"sm_active_pct": 50.0})], 1,
                             50 * US, 0, True)
    with loopscope.profile() as prof:
        replays = graph_replay_loop(prof)
    s = prof.summary()
    assert s["sm"] is None and s["metrics_error"] == NO_SAMPLES
    assert s["gpu"]["graph_replays"] == len(replays)
    assert s["diagnosis"]["verdict"] == "GPU_BOUND"
    assert [c["name"] for c in s["checks"] if not c["ok"]] == ["coverage"]
    text = format_report(s)
    lines = text.splitlines()
    assert text.count(NO_SAMPLES) == 1  # before: three times
    assert [line for line in lines if NO_SAMPLES in line][0].startswith("WARNING (coverage): ")
    assert "  - no SM/DRAM counters to split GPU_BOUND: see the WARNING (coverage) line above" \
        in lines
    assert "SM/DRAM: see the WARNING (coverage) line above" in lines
    assert [line for line in lines if line.startswith("WARNING")] == lines[1:2]
    html = render(s)
    assert html.count(NO_SAMPLES) == 1
    assert "SM/DRAM: see the WARNING (coverage) line at the top" in html


def test_a_graph_loop_half_covered_warns_once(test_clock):
    # Samples over the first half of the replays only: coverage 50% of the
    # GPU's busy time, said by the failed check alone.
    test_clock.set(1_000_000, 100 * US)
    with loopscope.profile() as prof:
        replays = graph_replay_loop(prof)
        _testhooks._inject("sample", [(a, b, {"sm_active_pct": 50.0, "gr_active_pct": 100.0})
                                      for a, b, *_ in replays[:3]])
    s = prof.summary()
    busy = len(replays) * REPLAY_NS
    assert s["sm"]["coverage_pct"] == round(100 * 3 * REPLAY_NS / busy, 2) == 50.0
    text = format_report(s)
    assert [line for line in text.splitlines() if "WARNING" in line or "samples cover" in line] \
        == [text.splitlines()[1]]
    assert text.splitlines()[1].startswith("WARNING (coverage): PM samples cover 50% of the "
                                           "GPU's busy time")
    assert render(s).count("PM samples cover 50%") == 1


@no_driver
def test_demo_says_the_reason_once(tmp_path):
    # `loopscope demo` without a driver: the one notice on stderr, the
    # bundled recording's report on stdout (measured on a GPU: no reason)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    env["PYTHONPATH"] = os.pathsep.join([PYTHON_DIR, str(HERE), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-m", "loopscope", "demo"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("loopscope report")
    assert (done.stdout.count(NO_DRIVER_REASON), done.stderr.count(NO_DRIVER_REASON)) == (0, 1)
    assert done.stdout.count("WARNING") == 0
