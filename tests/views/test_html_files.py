"""The notebook view outside a notebook (issue 28, item 4): Profile.to_html()
and save_html(path), and the same on a summary.  Kept apart from the other
public-surface tests: the HTML draws with matplotlib, which CI's sanitizer
run leaves out (.ci/run)."""
from __future__ import annotations

from pathlib import Path

import pytest

import loopscope

RECORDING = Path(loopscope.__file__).parent / "data" / "demo_recording.json.gz"


def test_profile_to_html_is_the_notebook_view_and_save_html_a_whole_page(tmp_path):
    prof = loopscope.load(RECORDING)
    fragment = prof.to_html()
    assert fragment == prof._repr_html_()
    assert fragment.startswith('<div class="loopscope"')
    verdict = prof.summary()["diagnosis"]["verdict"]
    steps = len(prof.summary()["steps"])
    path = tmp_path / "view.html"
    assert prof.save_html(path) == str(path)
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>\n")
    assert f"<title>loopscope - {verdict}, {steps} steps</title>" in text
    assert fragment in text and text.rstrip().endswith("</html>")
    assert [p.name for p in tmp_path.iterdir()] == ["view.html"]  # no temporary file left


def test_summary_to_html_and_save_html(tmp_path):
    summary = loopscope.load(RECORDING).summary()
    assert summary.to_html() == summary._repr_html_()
    written = summary.save_html(str(tmp_path / "summary.html"))
    assert summary.to_html() in Path(written).read_text(encoding="utf-8")


def test_save_html_names_the_file_it_cannot_write(tmp_path):
    prof = loopscope.load(RECORDING)
    with pytest.raises(OSError, match=f"save_html: {tmp_path} is a directory"):
        prof.save_html(tmp_path)
    missing = tmp_path / "nope" / "view.html"
    with pytest.raises(OSError, match=f"the folder {tmp_path / 'nope'} does not exist"):
        prof.save_html(missing)


def test_to_html_of_a_profile_not_run_says_so():
    with pytest.raises(RuntimeError, match="has not run yet"):
        loopscope.profile().to_html()
