"""A notebook executed headless with a real IPython kernel (nbclient): the
Profile and the summary display as HTML with the verdict and the tables,
their plain text stays one line, and with matplotlib blocked the view is
tables plus one note."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import loopscope

nbformat = pytest.importorskip("nbformat", reason="needs nbformat (the test extra)")
nbclient = pytest.importorskip("nbclient", reason="needs nbclient (the test extra)")
pytest.importorskip("ipykernel", reason="needs ipykernel (the test extra)")
pytest.importorskip("matplotlib", reason="needs matplotlib (the test extra)")

HERE = Path(__file__).resolve().parents[1]  # tests/: the shared helpers and data
PYTHON_DIR = str(Path(loopscope.__file__).resolve().parent.parent)

CELLS = [
    # 0: this loopscope and the synthetic loop, whatever the kernel's folder
    f"import sys, warnings\nsys.path[:0] = [{PYTHON_DIR!r}, {str(HERE)!r}]\n"
    "warnings.simplefilter('ignore')\n"
    "import loopscope\nfrom loopscope import _testhooks\nfrom synthetic_loop import run_loop",
    # 1: profile the loop on the scripted clock; show the Profile
    "_testhooks._set_test_clock(1_000_000, 1_000)\n"
    "with loopscope.profile(trace=False) as prof:\n    run_loop(prof)\n"
    "_testhooks._set_test_clock(0, 0)\nprof",
    # 2: the summary on its own
    "prof.summary()",
    # 3: the same view where matplotlib cannot be imported
    "sys.modules['matplotlib'] = None\nsys.modules['matplotlib.figure'] = None\n"
    "from IPython.display import display\ndisplay(prof)",
]


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    folder = tmp_path_factory.mktemp("nb")
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(folder)}})
    client.execute()
    nbformat.write(nb, folder / "executed.ipynb")  # kept for a look after a failure
    return nb


def output(nb, cell: int) -> dict:
    outs = [o for o in nb.cells[cell].outputs if o.output_type in ("execute_result", "display_data")]
    assert len(outs) == 1, nb.cells[cell].outputs
    return outs[0]["data"]


def test_profile_displays_verdict_tables_and_pictures(executed):
    data = output(executed, 1)
    assert data["text/plain"] == "<loopscope.Profile steps=3 verdict=CPU_LAUNCH_BOUND>"
    h = data["text/html"]
    assert h.index("CPU LAUNCH BOUND") < h.index(">Steps (3)<") < h.index(">Sync sites<") \
        < h.index(">Gap histogram<") < h.index(">Time line<")
    assert "GPU busy 25.5% of its time line" in h
    rows = re.findall(r"<tr><td[^>]*>(\d)</td><td[^>]*>(Step_\d)</td>", h)
    assert rows == [("0", "Step_0"), ("1", "Step_1"), ("2", "Step_2")]
    # histogram, the whole run, zooms on the slowest and a typical step, per step
    assert h.count('src="data:image/png;base64,') == 5


def test_summary_displays_as_html_with_a_short_text(executed):
    data = output(executed, 2)
    assert data["text/plain"] == ("<loopscope summary: CPU_LAUNCH_BOUND, 3 steps, GPU busy 25.5%, "
                                  "2 severe gaps; a dict: summary['gaps'], ['syncs'], ['steps'], ... >")
    h = data["text/html"]
    assert "CPU LAUNCH BOUND" in h and ">Steps (3)<" in h and ">Gap histogram<" in h
    # histogram, the profile's time line, its two zooms, per-step busy/idle: the
    # summary draws the time line of the profile it came from
    assert h.count("<img") == 5 and ">Time line<" in h and ">Per step<" in h


def test_without_matplotlib_the_view_is_tables_and_one_note(executed):
    h = output(executed, 3)["text/html"]
    assert "<img" not in h
    assert h.count("matplotlib is not installed") == 1
    assert "CPU LAUNCH BOUND" in h and ">Steps (3)<" in h and ">gap us<" in h
