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


# -- issue 41, item 3: output that pipes ------------------------------------------
def loopscope_cli(*args: str, cwd=None, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONWARNINGS="ignore::RuntimeWarning")
    env["PYTHONPATH"] = os.pathsep.join([PYTHON_DIR, str(HERE), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "loopscope", *args], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, env=env, timeout=300, cwd=cwd)


def test_json_dash_writes_json_alone_to_stdout(tmp_path):
    import json

    to_file = loopscope_cli("analyze", str(KINETO), "--json", str(tmp_path / "s.json"))
    assert to_file.returncode == 0, to_file.stderr
    piped = loopscope_cli("analyze", str(KINETO), "--json", "-", cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    got, saved = json.loads(piped.stdout), json.loads((tmp_path / "s.json").read_text())
    for timing in ("overhead", "trace"):  # the analysis's and the read's own times
        got.pop(timing), saved.pop(timing)
    assert got == saved
    # the report went to stderr, whole: its first line as the file run printed it
    assert to_file.stdout.splitlines()[0] in piped.stderr.splitlines()
    assert "summary written to stdout" in piped.stderr
    assert not (tmp_path / "-").exists()  # no file named "-"


def test_json_to_this_processs_stdout_by_name_is_json_alone(tmp_path):
    import json

    out = tmp_path / "redirected.txt"
    with open(out, "w") as f:  # `loopscope analyze T --json /proc/self/fd/1 > redirected.txt`
        done = loopscope_cli("analyze", str(KINETO), "--json", "/proc/self/fd/1", stdout=f)
    assert done.returncode == 0, done.stderr
    assert isinstance(json.loads(out.read_text()), dict)  # no report mixed in
    assert "loopscope report" in done.stderr


def test_run_json_dash_sends_the_scripts_prints_to_stderr(tmp_path):
    import json

    script = tmp_path / "loop.py"
    script.write_text("print('from the script')\n")
    done = loopscope_cli("run", "--json", "-", str(script))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["schema"] == 1
    assert "from the script" in done.stderr


def test_diff_json_dash_and_two_outputs_on_stdout(tmp_path):
    import json

    done = loopscope_cli("diff", str(KINETO), str(GRAPH), "--json", "-")
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)) >= {"before", "after"}
    script = tmp_path / "loop.py"
    script.write_text("pass\n")
    both = loopscope_cli("run", "--json", "-", "--trace", "/proc/self/fd/1", str(script))
    assert both.returncode == 2
    assert "--json and --trace name stdout: only one output can go there" in both.stderr
    ranks = loopscope_cli("analyze", str(HERE / "data"), "--ranks-out", "-")
    assert ranks.returncode == 2 and "--ranks-out writes a file" in ranks.stderr


def test_demo_stdout_is_the_report_and_notices_go_to_stderr():
    done = loopscope_cli("demo")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("loopscope report - ")
    if "no GPU here" in done.stderr:  # the recording's notices, not on stdout
        assert "no GPU here" not in done.stdout
        assert "recording" not in done.stdout.splitlines()[0]


def test_dash_capital_v_prints_the_version():
    short, long = loopscope_cli("-V"), loopscope_cli("--version")
    assert short.returncode == 0 and short.stdout == long.stdout == \
        f"loopscope {loopscope.__version__}\n"
