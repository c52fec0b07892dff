"""Saved summaries fed back to analyze and diff (issue 24 item 5): `analyze
--json` of several files writes a list; neither analyze nor diff may read
such a file (or one saved summary) as an empty trace."""
from __future__ import annotations

import gzip
import json

import pytest

import loopscope
from loopscope.__main__ import main
from loopscope.surfaces._compare import CompareError, load_summary
from loopscope.readers._sniff import TraceError

from synthetic_loop import run_loop


@pytest.fixture
def summary(test_clock):
    with loopscope.profile() as prof:
        run_loop(prof)
    return prof.summary()


def write(path, data, gz=False):
    text = json.dumps(data, indent=1).encode()
    path.write_bytes(gzip.compress(text) if gz else text)
    return str(path)


@pytest.mark.parametrize("gz", [False, True])
def test_analyze_refuses_a_saved_summary_or_a_list_of_them_by_name(tmp_path, summary, gz):
    one = write(tmp_path / "one.json", summary, gz)
    two = write(tmp_path / "two.json", [summary, summary], gz)
    with pytest.raises(TraceError, match=r"one\.json: is a loopscope summary .* not a trace"):
        loopscope.analyze(one)
    with pytest.raises(TraceError, match=r"two\.json: holds a list of loopscope summaries"):
        loopscope.analyze(two)


def test_analyze_cli_exits_2_on_a_list_of_summaries(tmp_path, summary, capsys):
    two = write(tmp_path / "two.json", [summary, summary])
    assert main(["analyze", two]) == 2
    assert "holds a list of loopscope summaries" in capsys.readouterr().err


def test_diff_reads_a_list_of_one_and_refuses_a_list_of_two_by_name(tmp_path, summary, capsys):
    one = write(tmp_path / "one.json", [summary])
    two = write(tmp_path / "two.json", [summary, summary])
    assert load_summary(one)["gaps"]["severe"] == 2  # the synthetic loop's two 80 us gaps
    with pytest.raises(CompareError, match=r"two\.json holds 2 summaries"):
        load_summary(two)
    assert main(["diff", one, one]) == 0
    capsys.readouterr()
    assert main(["diff", "--max-regression-pct", "10", one, two]) == 2
    assert "two.json holds 2 summaries" in capsys.readouterr().err
    with pytest.raises(CompareError, match="not a list of loopscope summaries"):
        load_summary(write(tmp_path / "odd.json", [{"schema": 1}]))
