"""benchmarks/scale/summary_fingerprint.py: the same summary gives the same line,
run timings left out; --check exits 1 on a difference, 2 on a file it
cannot read (issue 29's byte-for-byte check of the moves)."""
from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "scale" / "summary_fingerprint.py"
DEMO = ROOT / "python" / "loopscope" / "data" / "demo_recording.json.gz"


@pytest.fixture()
def fp():
    spec = importlib.util.spec_from_file_location("summary_fingerprint_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_run_timings_are_left_out_and_the_rest_kept(fp):
    summary = {"overhead": {"summary_ms": 2.1, "start_ms": 0.3, "records": 7,
                            "in_loop_estimate_ms": 0.7},
               "trace": {"read_s": 0.002, "path": "/tmp/x/a.json", "seen": {"k": 1}},
               "loop": {"ms": 15.2}}
    kept = fp.without_run_timings(summary, "a")
    assert kept == {"overhead": {"records": 7, "in_loop_estimate_ms": 0.7},
                    "trace": {"path": "a", "seen": {"k": 1}}, "loop": {"ms": 15.2}}


def test_the_demo_recording_gives_the_same_hash_twice_and_it_is_the_summary_s(fp):
    import loopscope

    first = fp.fingerprint(DEMO, "demo", {})
    assert first == fp.fingerprint(DEMO, "demo", {})  # its replay's own timings left out
    summary = fp.without_run_timings(loopscope.analyze(DEMO, progress=False), "demo")
    assert first == hashlib.sha256(json.dumps(summary, sort_keys=True).encode()).hexdigest()
    assert fp.fingerprint(DEMO, "demo", {"gap_thresholds_us": (5.0, 100.0)}) != first


def test_a_refused_input_gets_an_error_line_not_a_crash(fp, tmp_path):
    bad = tmp_path / "not_a_trace.json"
    bad.write_text("{ nope")
    assert fp.fingerprint(bad, "bad", {}).startswith("error ")


def test_check_exits_0_when_equal_1_on_a_difference_2_on_a_bad_file(fp, tmp_path, capsys,
                                                                     monkeypatch):
    monkeypatch.setattr(fp, "lines", lambda: ["a  111", "b  222"])
    same = tmp_path / "same.txt"
    same.write_text("a  111\nb  222\n")
    assert fp.main(["--check", str(same)]) == 0
    changed = tmp_path / "changed.txt"
    changed.write_text("a  111\nb  999\n")
    assert fp.main(["--check", str(changed)]) == 1
    assert "differs: b: 999 -> 222" in capsys.readouterr().out
    fewer = tmp_path / "fewer.txt"
    fewer.write_text("a  111\n")
    assert fp.main(["--check", str(fewer)]) == 1
    assert "differs: b: absent -> 222" in capsys.readouterr().out
    assert fp.main(["--check", str(tmp_path / "missing.txt")]) == 2
    garbled = tmp_path / "garbled.txt"
    garbled.write_text("no separator here\n")
    assert fp.main(["--check", str(garbled)]) == 2
    assert "not a fingerprint file" in capsys.readouterr().err


def test_the_lines_do_not_depend_on_the_working_folder(fp, monkeypatch, tmp_path):
    # A rank trace names its script by the absolute path it had where it was
    # recorded (/work/main/benchmarks/distributed_straggler.py); a summary
    # gives a path relative to the working folder when it lies under it, so
    # the same summary read from / and from elsewhere differs: the control.
    rank = ROOT / "tests" / "data" / "ranks" / "h100x2_host" / "rank0.json.gz"
    name = "tests/data/ranks/h100x2_host/rank0.json.gz"
    monkeypatch.chdir("/")
    at_top = fp.fingerprint(rank, name, {})
    monkeypatch.chdir(tmp_path)
    elsewhere = fp.fingerprint(rank, name, {})
    assert at_top != elsewhere
    # lines() reads every input from its scratch folder: the same from both.
    monkeypatch.setattr(fp, "inputs", lambda scratch: [(name, rank)])
    monkeypatch.setattr(fp, "VARIANTS", [({}, "")])
    monkeypatch.chdir("/")
    first = fp.lines()
    monkeypatch.chdir(tmp_path)
    assert fp.lines() == first == [f"{name}  {elsewhere}"]
