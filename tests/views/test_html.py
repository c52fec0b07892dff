"""The notebook view rendered in this process: what comes first, the tables
and their figures, the pictures, and the view without matplotlib (in a
fresh interpreter where matplotlib cannot be imported)."""
from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import loopscope
from loopscope.views import _html

from synthetic_loop import run_loop

HERE = Path(__file__).resolve().parents[1]  # tests/: the shared helpers and data
PYTHON_DIR = str(Path(loopscope.__file__).resolve().parent.parent)

needs_matplotlib = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                      reason="needs matplotlib (the test extra) for the pictures")

SITE = {"file": "loop.py", "line": 12, "function": "step", "code": "loss.item() < 0",
        "call": "loss.item()", "kind": "item", "count": 3, "blocked_ms": 0.25,
        "steps": [0, 1, 2], "thread_id": 1, "apis": {"cudaStreamSynchronize": 3}}


@pytest.fixture
def prof(test_clock):
    with loopscope.profile() as prof:
        run_loop(prof)
    return prof


def cells(html_text: str, row_label: str) -> list[str]:
    """The cell texts of the table row whose first cell is `row_label`."""
    row = re.search(r"<tr><td[^>]*>" + re.escape(row_label) + r"</td>(.*?)</tr>", html_text)
    assert row, f"no row {row_label!r}"
    return [row_label] + [re.sub("<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))]


def test_summary_is_a_dict_that_renders(prof):
    s = prof.summary()
    assert isinstance(s, dict) and json.loads(json.dumps(s)) == s
    assert s == dict(s) and type(copy.deepcopy(s)) is type(s)
    text = _html.short_text(s)
    assert text == ("<loopscope summary: CPU_LAUNCH_BOUND, 3 steps, GPU busy 25.5%, 2 severe gaps; "
                    "a dict: summary['gaps'], ['syncs'], ['steps'], ... >")
    assert repr(prof) == "<loopscope.Profile steps=3 verdict=CPU_LAUNCH_BOUND>"
    # the summary's view is its profile's: the time line and zooms included
    assert s._repr_html_() == _html.profile_html(prof.finished)


@needs_matplotlib
def test_verdict_first_then_tables_then_pictures(prof):
    h = prof._repr_html_()
    order = [h.index(marker) for marker in (
        "CPU LAUNCH BOUND", "<b>Next:</b> capture the step in a CUDA graph",
        "GPU busy 25.5% of its time line", ">Steps (3)<", ">Sync sites<",
        ">Gap histogram<", ">Time line<")]
    assert order == sorted(order)
    # histogram, the whole run, zooms on the slowest (Step_0: its first gap is
    # only 5 us) and a typical step, busy/idle per step
    assert h.count('src="data:image/png;base64,') == 5
    assert [h.index(f">{heading}<") for heading in (
        "Gap histogram", "Time line", "Zoom: the slowest step (Step_0)",
        "Zoom: a typical step (Step_1)", "Per step")] == sorted(
        h.index(f">{heading}<") for heading in (
            "Gap histogram", "Time line", "Zoom: the slowest step (Step_0)",
            "Zoom: a typical step (Step_1)", "Per step"))
    assert "matplotlib is not installed" not in h
    # the headline figures and the per-step table, with the synthetic loop's exact values
    assert ("5: 3 normal, 0 warning, <b>2 severe</b> (&gt; 50 us); p50 5.00 us, p99 80.00 us, "
            "max 80.00 us; idle 0.175 ms") in h
    assert cells(h, "0")[1:] == ["Step_0", "0.003", "0.020", "80.0", "2", "1", "0", "5.0",
                                 "-", "-", "-", "GPU_BOUND"]
    assert cells(h, "1")[1:] == ["Step_1", "0.003", "0.020", "19.1", "2", "2", "1", "80.0",
                                 "-", "-", "-", "CPU_LAUNCH_BOUND"]
    assert "Not measured: sync detection was turned off (syncs=False)" in h
    assert "SM/DRAM: SM and DRAM sampling was turned off (metrics=False)" in h


def test_sync_sites_table(prof):
    s = copy.deepcopy(prof.summary())
    s["syncs"] = {"count": 3, "blocked_ms": 0.25, "by_kind": {"item": 3}, "sites": [SITE],
                  "in_steps": 3, "outside_steps": 0}
    h = _html.render(s)
    assert ">Sync sites (3 syncs)<" in h
    assert cells(h, "loop.py:12")[1:] == ["step", "loss.item() &lt; 0", "item", "3", "0.250", "0-2"]
    assert "3, host blocked 0.250 ms (item 3)" in h


def test_recording_banner_and_escaping(prof):
    s = copy.deepcopy(prof.summary())
    s["recording"] = {"device": "NVIDIA <H200>", "date": "2026-11-21 10:00 UTC",
                      "loopscope": "0.1.0", "command": "python demo.py", "note": None,
                      "recorded_source": "cupti", "as_recorded": []}
    h = _html.render(s)
    assert ("RECORDING: this report analyses the records of `python demo.py`, made on "
            "NVIDIA &lt;H200&gt; on 2026-11-21 10:00 UTC") in h
    assert "<H200>" not in h


def test_no_gpu_view(test_clock):
    with loopscope.profile() as prof:
        with prof.step():
            pass
    h = prof._repr_html_()
    assert "UNKNOWN" in h and "no GPU timeline" in h
    assert cells(h, "0")[1:4] == ["Step_0", "0.001", "-"]
    # the host's time line: the whole run and its one step (no GPU lanes, no per-step chart)
    assert re.findall(r'<img alt="([^"]*)"', h) == [
        "Host time line of the whole run: 1 step, 0 ranges drawn",
        "Zoom on the slowest step Step_0: 1 ranges"]


def test_running_and_unstarted_profiles():
    prof = loopscope.profile()
    assert prof._repr_html_() == "<div class='loopscope'>loopscope profile: not started</div>"
    with prof:
        assert prof._repr_html_() == "<div class='loopscope'>loopscope profile: running</div>"


def test_without_matplotlib_tables_and_one_note():
    code = textwrap.dedent("""
        import sys, warnings
        sys.modules["matplotlib"] = None          # import matplotlib -> ImportError
        warnings.simplefilter("ignore")
        import loopscope
        from loopscope import _testhooks
        from synthetic_loop import run_loop
        _testhooks._set_test_clock(1_000_000, 1_000)
        with loopscope.profile(trace=False) as prof:
            run_loop(prof)
        print(prof._repr_html_())
        print("matplotlib loaded:", "matplotlib.figure" in sys.modules)
    """)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PYTHON_DIR, str(HERE), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    h = out.stdout
    assert "<img" not in h
    assert h.count("matplotlib is not installed") == 1
    assert "CPU LAUNCH BOUND" in h and ">Steps (3)<" in h
    # the histogram as a table: 3 gaps of 5 us, 2 of 80 us (bin 50-100)
    assert cells(h, "5 - 10")[1:] == ["3"]
    assert cells(h, "50 - 100")[1:] == ["2"]
    assert "matplotlib loaded: False" in h
