"""Issue 14, condition 9: output paths of the command line.

`run --json/--trace` and `demo --json` check their output folder before any
work (exit 2, one line naming the option and the path, the script never
runs); when writing still fails at the end, the report is out already and
one line says which file could not be written (exit 1), never a traceback."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import loopscope

PYTHON_DIR = str(Path(loopscope.__file__).resolve().parent.parent)
TESTS_DIR = str(Path(__file__).resolve().parent.parent)


def cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PYTHON_DIR, TESTS_DIR, env.get("PYTHONPATH", "")])
    env["PYTHONWARNINGS"] = "ignore::RuntimeWarning"  # the no-GPU warning
    env["CUDA_VISIBLE_DEVICES"] = ""
    return subprocess.run([sys.executable, "-m", "loopscope", *args], capture_output=True,
                          text=True, env=env, timeout=120)


@pytest.fixture
def marker_script(tmp_path):
    """A script that leaves a file behind when it runs, and one step."""
    ran = tmp_path / "script_ran"
    path = tmp_path / "loop.py"
    path.write_text(textwrap.dedent(f"""
        import pathlib
        import loopscope
        pathlib.Path({str(ran)!r}).write_text("yes")
        with loopscope.profile(trace=False) as prof:
            with prof.step():
                pass
    """))
    return str(path), ran


@pytest.mark.parametrize("option", ["--json", "--trace"])
@pytest.mark.parametrize("where, problem", [
    ("/nonexistent/dir/out.json", "the folder /nonexistent/dir does not exist"),
    ("{tmp}", "that is a folder"),
    ("{script}/out.json", "{script} is not a folder"),
    ("", "an empty path"),
])
def test_a_bad_output_path_stops_before_the_script_runs(marker_script, tmp_path, option, where,
                                                        problem):
    script, ran = marker_script
    path = where.format(tmp=tmp_path, script=script)
    result = cli("run", option, path, script)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"python -m loopscope run: error: {option} {path}: {problem.format(script=script)}"]
    assert result.stdout == ""
    assert not ran.exists(), "the script must not run"


def test_every_bad_output_is_named_at_once(marker_script):
    script, ran = marker_script
    result = cli("run", "--json", "/nonexistent/a.json", "--trace", "/nonexistent/b.json", script)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "python -m loopscope run: error: --json /nonexistent/a.json: the folder /nonexistent "
        "does not exist",
        "python -m loopscope run: error: --trace /nonexistent/b.json: the folder /nonexistent "
        "does not exist"]
    assert not ran.exists()


def test_demo_json_is_checked_first():
    result = cli("demo", "--json", "/nonexistent/dir/demo.json")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        "python -m loopscope demo: error: --json /nonexistent/dir/demo.json: the folder "
        "/nonexistent/dir does not exist"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere: no unwritable folder")
def test_an_unwritable_folder_is_refused(marker_script, tmp_path):
    script, ran = marker_script
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        result = cli("run", "--json", str(locked / "s.json"), script)
    finally:
        locked.chmod(0o700)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"python -m loopscope run: error: --json {locked / 's.json'}: the folder {locked} is "
        "not writable"]
    assert not ran.exists()


def test_a_folder_removed_during_the_run_costs_one_line_not_the_report(tmp_path):
    """The folder exists at the start; the script removes it.  The report is
    printed, the trace (whose folder stays) is written, and one line says the
    summary could not be; exit 1."""
    out = tmp_path / "out"
    out.mkdir()
    path = tmp_path / "loop.py"
    path.write_text(textwrap.dedent(f"""
        import os
        import loopscope
        with loopscope.profile(trace=False) as prof:
            with prof.step():
                pass
        os.rmdir({str(out)!r})
        print("script ended")
    """))
    summary_path, trace_path = out / "s.json", tmp_path / "t.json"
    result = cli("run", "--json", str(summary_path), "--trace", str(trace_path), str(path))
    assert result.returncode == 1
    assert "script ended" in result.stdout
    assert "loopscope report" in result.stdout  # the report is not lost
    assert "Traceback" not in result.stderr
    assert f"loopscope: could not write --json {summary_path}: No such file or directory" \
        in result.stderr.splitlines()
    assert json.loads(trace_path.read_text())["otherData"]["producer"] == "loopscope"
    assert sorted(os.listdir(tmp_path)) == ["loop.py", "t.json"]  # no temporary file left


def test_good_outputs_are_written_whole(marker_script, tmp_path):
    script, ran = marker_script
    summary_path, trace_path = tmp_path / "s.json", tmp_path / "t.json"
    result = cli("run", "--json", str(summary_path), "--trace", str(trace_path), script)
    assert result.returncode == 0, result.stderr
    assert ran.exists()
    assert [s["name"] for s in json.loads(summary_path.read_text())["steps"]] == ["Step_0"]
    assert json.loads(trace_path.read_text())["otherData"]["producer"] == "loopscope"
