"""The command line piped into a reader that stops early (`loopscope demo |
head -1`): no BrokenPipeError traceback, the exit status a shell shows for a
command that SIGPIPE ended (128 + 13), nothing more on stderr."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import loopscope

HERE = Path(__file__).resolve().parents[1]  # tests/: the shared helpers and data
PYTHON_DIR = str(Path(loopscope.__file__).resolve().parent.parent)
KINETO = HERE / "data" / "kineto" / "demo_eager.json.gz"
GRAPH = HERE / "data" / "kineto" / "demo_graph.json.gz"
SIGPIPE_STATUS = 128 + 13  # written out: a shell's status for a command SIGPIPE ended


def into_a_closed_pipe(*args: str) -> subprocess.CompletedProcess:
    """Runs `python -m loopscope ARGS` with its stdout a pipe nobody reads
    (the reader closed it before the first line, as `| head -0` would)."""
    reader, writer = os.pipe()
    os.close(reader)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONWARNINGS="ignore::RuntimeWarning")
    env["PYTHONPATH"] = os.pathsep.join([PYTHON_DIR, env.get("PYTHONPATH", "")])
    try:
        return subprocess.run([sys.executable, "-m", "loopscope", *args], stdout=writer,
                              stderr=subprocess.PIPE, text=True, env=env, timeout=300)
    finally:
        os.close(writer)


@pytest.mark.parametrize("args", [
    ("demo",),
    ("analyze", str(KINETO)),
    ("diff", str(KINETO), str(GRAPH)),
], ids=["demo", "analyze", "diff"])
def test_a_reader_that_stops_early_ends_the_command_quietly(args):
    result = into_a_closed_pipe(*args)
    assert "Traceback" not in result.stderr, result.stderr
    assert "BrokenPipeError" not in result.stderr, result.stderr
    assert result.returncode == SIGPIPE_STATUS, result.stderr


def test_help_into_a_closed_pipe_is_quiet():
    # argparse prints the help itself and drops a write error (status 0)
    result = into_a_closed_pipe("--help")
    assert result.stderr == ""
    assert result.returncode == 0


def test_a_reader_that_reads_everything_still_gets_status_0():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONWARNINGS="ignore::RuntimeWarning")
    env["PYTHONPATH"] = os.pathsep.join([PYTHON_DIR, env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, "-m", "loopscope", "analyze", str(KINETO)],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "loopscope report" in result.stdout


def test_a_script_whose_reader_stops_early_runs_on_to_its_json(tmp_path):
    """`loopscope run script.py | head`: the script's own print into the
    closed pipe ends it as it would end alone (status 128 + 13, no
    traceback), and the profile still writes its --json."""
    script = tmp_path / "chatty.py"
    script.write_text("import sys\nfor i in range(200_000):\n    print('line', i)\n"
                      "sys.stdout.flush()\nprint('never reached', file=sys.stderr)\n")
    out = tmp_path / "s.json"
    result = into_a_closed_pipe("run", "--json", str(out), str(script))
    assert "Traceback" not in result.stderr, result.stderr
    assert "BrokenPipeError" not in result.stderr, result.stderr
    assert "never reached" not in result.stderr  # the script stopped at its write
    assert result.returncode == SIGPIPE_STATUS, result.stderr
    import json

    assert json.loads(out.read_text())["schema"]  # the profile's summary was written


def test_a_script_that_fails_otherwise_still_shows_its_traceback(tmp_path):
    """The control: a script's own error, its output read to the end, keeps
    its traceback and status 1."""
    script = tmp_path / "broken.py"
    script.write_text("raise ValueError('the script broke')\n")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONWARNINGS="ignore::RuntimeWarning")
    env["PYTHONPATH"] = os.pathsep.join([PYTHON_DIR, env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, "-m", "loopscope", "run", str(script)],
                            capture_output=True, text=True, env=env, timeout=300)
    assert "ValueError: the script broke" in result.stderr
    assert result.returncode == 1
