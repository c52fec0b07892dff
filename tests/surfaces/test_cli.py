"""The command line in fresh interpreters: --help, exit codes (0 ok, 1 a
budget failed or the script raised, 2 usage error), `run` with the script's
own steps, with ranges as steps, with budgets, --json and --trace; the demo
on a machine without a GPU.  Scripts inject synthetic GPU records, so every
figure is exact."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import loopscope
from machine import driver_present
from loopscope.files import _recording
from loopscope.surfaces import _cli


# These scripts feed synthetic records to a profile started by the CLI; on a
# machine with a GPU that profile traces for real, and real tracing keeps
# only records on its own clock (and watches syncs): the expectations are for
# a machine without one, like CI.
cpu_only = pytest.mark.skipif(driver_present(), reason="an NVIDIA driver is present: the CLI's "
                              "profile traces for real instead of taking the synthetic records")

HERE = Path(__file__).resolve().parents[1]  # tests/: the shared helpers and data
PYTHON_DIR = str(Path(loopscope.__file__).resolve().parent.parent)
# what the help calls the command when run as `python -m loopscope`: the
# interpreter's name as typed (here the full path of sys.executable, shown
# by its base name, as argparse shows a script's)
PROG = f"{os.path.basename(sys.executable)} -m loopscope"
# the console script pip installed beside this interpreter, if any
CONSOLE_SCRIPT = Path(sys.executable).with_name("loopscope")


def cli(*args: str, cwd: Path | None = None, command: list[str] | None = None
        ) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PYTHON_DIR, str(HERE), env.get("PYTHONPATH", "")])
    env["PYTHONWARNINGS"] = "ignore::RuntimeWarning"  # the no-GPU warning, checked elsewhere
    env["CUDA_VISIBLE_DEVICES"] = ""  # synthetic records only, on a GPU machine too
    command = command or [sys.executable, "-m", "loopscope"]
    return subprocess.run([*command, *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120)


def script(tmp_path: Path, body: str, name: str = "loop.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


# A script that profiles itself: the synthetic loop on the scripted clock.
OWN_PROFILE = """
    import sys
    import loopscope
    from loopscope import _testhooks
    from synthetic_loop import run_loop

    print("script args:", sys.argv[1:])
    _testhooks._set_test_clock(1_000_000, 1_000)
    with loopscope.profile(trace=False) as prof:
        run_loop(prof)
    _testhooks._set_test_clock(0, 0)
    print("script verdict:", prof.summary()["diagnosis"]["verdict"])
"""

# A script that knows nothing of profiles: its loop is marked with ranges.
RANGES_ONLY = """
    import loopscope
    from synthetic_loop import run_loop

    class Steps:
        n = 0
        def step(self):
            self.n += 1
            return loopscope.range(f"denoise_step_{self.n - 1}")

    with loopscope.range("setup"):
        pass
    run_loop(Steps())
"""


def test_help_explains_each_command_with_an_example():
    top = cli("--help")
    assert top.returncode == 0
    assert "demo         profile a built-in 10-step denoise loop" in top.stdout
    assert "run          run a script under the profiler" in top.stdout
    assert top.stdout.startswith(f"usage: {PROG} [-h] [-V] COMMAND ...")
    assert f"{PROG} run train.py --epochs 1" in top.stdout
    assert f"'{PROG} COMMAND --help' explains each command." in top.stdout
    run = cli("run", "--help")
    assert run.returncode == 0
    for text in ("--steps REGEX", "--json OUT", "--trace OUT", "--max-syncs N",
                 "--max-severe-gaps N", "exit status: 0 ok; 1 a budget failed",
                 f"{PROG} run --max-syncs 0 --max-severe-gaps 0 infer.py"):
        assert text in run.stdout, text
    demo = cli("demo", "--help")
    assert demo.returncode == 0 and f"{PROG} demo --graph --json demo.json" in demo.stdout


@pytest.mark.skipif(not CONSOLE_SCRIPT.is_file(), reason=f"no console script {CONSOLE_SCRIPT} "
                    "beside this Python (loopscope not installed by pip into it)")
def test_the_console_script_calls_itself_loopscope():
    top = cli("--help", command=[str(CONSOLE_SCRIPT)])
    assert top.returncode == 0, top.stderr
    assert top.stdout.startswith("usage: loopscope [-h] [-V] COMMAND ...")
    assert "\n  loopscope run train.py --epochs 1\n" in top.stdout
    assert "-m loopscope" not in top.stdout
    run = cli("run", "--help", command=[str(CONSOLE_SCRIPT)])
    assert run.stdout.startswith("usage: loopscope run [-h]")
    assert "  loopscope run --max-syncs 0 --max-severe-gaps 0 infer.py" in run.stdout
    wrong = cli("analyse", command=[str(CONSOLE_SCRIPT)])
    assert wrong.returncode == 2 and wrong.stderr.startswith("usage: loopscope [-h] [-V] COMMAND ...")


def test_called_from_python_it_is_loopscope(capsys):
    from loopscope.__main__ import main

    with pytest.raises(SystemExit):
        main(["--help"])
    assert capsys.readouterr().out.startswith("usage: loopscope [-h] [-V] COMMAND ...")


@pytest.mark.parametrize("args, message", [
    ((), "the following arguments are required: COMMAND"),
    (("analyse",), "invalid choice: 'analyse'"),
    (("run",), "the following arguments are required: script"),
    (("run", "no_such_script.py"), "cannot run 'no_such_script.py': no such file"),
    (("run", "--steps", "(", "x.py"), "--steps '(' is not a valid regular expression"),
    (("run", "--max-syncs", "-1", "x.py"), "argument --max-syncs: must be a whole number >= 0, got '-1'"),
    (("run", "--max-severe-gaps", "two", "x.py"), "must be a whole number >= 0, got 'two'"),
])
def test_usage_errors_exit_2(args, message):
    result = cli(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stderr.startswith(f"usage: {PROG}")


def test_run_a_script_that_profiles_itself(tmp_path):
    path = script(tmp_path, OWN_PROFILE)
    out_json = tmp_path / "summary.json"
    result = cli("run", "--json", str(out_json), path, "--epochs", "1")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "script args: ['--epochs', '1']"
    assert lines[1] == "script verdict: CPU_LAUNCH_BOUND"  # the script's own summary() works
    assert lines[2].startswith("loopscope report - synthetic records - 3 steps")
    assert lines[3].startswith("CPU LAUNCH BOUND: GPU busy 25.5%, 2 severe gaps (> 50 us)")
    assert f"loopscope: profiling {path}" in result.stderr
    s = json.loads(out_json.read_text())
    assert (s["gaps"]["count"], s["gaps"]["severe"], s["gpu"]["kernels"]) == (5, 2, 6)
    assert [st["name"] for st in s["steps"]] == ["Step_0", "Step_1", "Step_2"]


def test_budgets_exit_1_with_the_evidence(tmp_path):
    path = script(tmp_path, OWN_PROFILE)
    failed = cli("run", "--max-severe-gaps", "1", path)
    assert failed.returncode == 1
    assert ("BUDGET FAILED\nloopscope: 1 of 1 budget failed, whole profile\n"
            "  FAILED max_severe_gaps: severe gaps 2 (> 50 us), budget <= 1\nWorst gaps:\n"
            "        80.0 us  [host] step Step_1, stream 7, before gemm_0\n") in failed.stderr
    met = cli("run", "--max-severe-gaps", "2", path)
    assert met.returncode == 0
    assert "loopscope: budgets met: max_severe_gaps: severe gaps 2 (> 50 us), budget <= 2" in met.stderr


@cpu_only
def test_an_unmeasured_budget_is_not_checked_says_so_and_fails_the_gate(tmp_path):
    """Issue 24: a CI gate never passes on a figure that was not measured."""
    path = script(tmp_path, OWN_PROFILE)
    result = cli("run", "--max-syncs", "0", path)
    assert result.returncode == 1
    assert "NOT CHECKED: max_syncs: not measured (sync detection unavailable: " in result.stderr
    assert "the gate fails" in result.stderr


@cpu_only
def test_ranges_as_steps_and_the_trace(tmp_path):
    """A script without its own profile: the whole script is profiled, and
    --steps takes the ranges whose names match as steps."""
    path = script(tmp_path, RANGES_ONLY)
    out_json, out_trace = tmp_path / "s.json", tmp_path / "trace.json"
    result = cli("run", "--steps", r"^denoise_step_\d+$", "--json", str(out_json),
                 "--trace", str(out_trace), "--max-severe-gaps", "0", path)
    assert result.returncode == 1  # the two severe gaps
    s = json.loads(out_json.read_text())
    assert s["steps_from"] == "ranges"
    assert [(st["index"], st["name"], st["kernels"], st["gaps"]["severe"]) for st in s["steps"]] == [
        (0, "denoise_step_0", 2, 0), (1, "denoise_step_1", 2, 1), (2, "denoise_step_2", 2, 1)]
    assert [(g["duration_us"], g["step_name"]) for g in s["gaps"]["worst"][:2]] == [
        (80.0, "denoise_step_1"), (80.0, "denoise_step_2")]
    assert ("loopscope: 1 of 1 budget failed, ranges matching '^denoise_step_\\d+$' as steps "
            "(3 steps)\n  FAILED max_severe_gaps: severe gaps 2 (> 50 us), budget <= 0") in result.stderr
    assert "Severe gaps per step: denoise_step_1 1, denoise_step_2 1" in result.stderr

    trace = json.loads(out_trace.read_text())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    by_cat: dict[str, list] = {}
    for e in events:
        by_cat.setdefault(e["cat"], []).append(e)
    assert sorted(by_cat) == ["cuda_runtime", "gap", "kernel", "user_annotation"]
    assert [e["name"] for e in by_cat["user_annotation"]] == ["setup", "denoise_step_0",
                                                              "denoise_step_1", "denoise_step_2"]
    # the steps the run took from the ranges are marked so
    assert [e["args"].get("step") for e in by_cat["user_annotation"]] == [None, 0, 1, 2]
    assert [(e["name"], e["ts"], e["dur"]) for e in by_cat["kernel"][:3]] == [
        ("gemm_0", 0.0, 10.0), ("gemm_1", 15.0, 10.0), ("gemm_0", 105.0, 10.0)]
    assert [(e["name"], e["dur"]) for e in by_cat["gap"]] == [
        ("SEVERE gap 80.0 us", 80.0), ("SEVERE gap 80.0 us", 80.0)]
    assert len(by_cat["cuda_runtime"]) == 6
    flows = [e for e in trace["traceEvents"] if e["ph"] in ("s", "f")]
    assert len(flows) == 12  # one arrow (start + end) per launch
    assert trace["otherData"]["verdicts"] == ["CPU_LAUNCH_BOUND"]


def test_steps_pattern_matching_nothing_says_so(tmp_path):
    path = script(tmp_path, RANGES_ONLY)
    result = cli("run", "--steps", "nope", path)
    assert result.returncode == 0
    assert ("loopscope: no range name matched --steps 'nope'; the report has no steps (range names: "
            "denoise_step_0, denoise_step_1, denoise_step_2, setup)") in result.stderr


@cpu_only
def test_a_failing_script_exits_1_after_the_report(tmp_path):
    path = script(tmp_path, textwrap.dedent(RANGES_ONLY) + "raise RuntimeError('boom in the script')\n")
    result = cli("run", path)
    assert result.returncode == 1
    assert "RuntimeError: boom in the script" in result.stderr
    assert "loopscope: the script raised RuntimeError: boom in the script" in result.stderr
    assert result.stdout.startswith("loopscope report - synthetic records - 0 steps")


def test_the_scripts_exit_status_is_passed_on(tmp_path):
    assert cli("run", script(tmp_path, "import sys\nsys.exit(3)\n")).returncode == 3
    assert cli("run", script(tmp_path, "import sys\nsys.exit(0)\n", "ok.py")).returncode == 0


def test_torch_ranges_are_mirrored(monkeypatch):
    """With --steps, torch NVTX pushes/pops and record_function blocks open
    loopscope ranges of the same name (NVTX itself stubbed: a CPU build of
    torch has none)."""
    torch = pytest.importorskip("torch", reason="needs PyTorch")
    import torch.cuda.nvtx as nvtx

    monkeypatch.setattr(nvtx, "range_push", lambda msg: 0)
    monkeypatch.setattr(nvtx, "range_pop", lambda: 0)
    mirror = _cli._TorchRanges()
    assert mirror.install()
    try:
        with loopscope.profile() as prof:
            for i in range(2):
                with torch.profiler.record_function(f"denoise_{i}"):
                    with torch.cuda.nvtx.range("attention"):
                        pass
    finally:
        mirror.remove()
    assert [(r["name"], r["count"]) for r in prof.summary()["ranges"]] == [
        ("denoise_0", 1), ("attention", 2), ("denoise_1", 1)]
    with loopscope.profile() as after:  # removed: nothing mirrored any more
        with torch.profiler.record_function("late"):
            pass
    assert after.summary()["ranges"] == []


def test_torch_record_function_steps_in_a_script(tmp_path):
    pytest.importorskip("torch", reason="needs PyTorch")
    path = script(tmp_path, """
        import torch
        x = torch.ones(4)
        for i in range(4):
            with torch.profiler.record_function("sample_step"):
                x = x * 2
    """)
    result = cli("run", "--steps", "sample_step", "--json", str(tmp_path / "s.json"), path)
    assert result.returncode == 0, result.stderr
    s = json.loads((tmp_path / "s.json").read_text())
    assert [st["name"] for st in s["steps"]] == [f"sample_step#{i}" for i in range(4)]


def test_demo_without_a_gpu():
    """On a machine without a GPU the demo exits 0 and says so; with the
    bundled recording it shows the recorded loop and says it is one."""
    from loopscope.demo import gpu_available

    if gpu_available()[0]:
        pytest.skip("this machine has a GPU: the demo runs for real (see tests/gpu)")
    result = cli("demo")
    assert result.returncode == 0, result.stderr
    notices = result.stderr.splitlines()  # notices on stderr, the report alone on stdout
    assert notices[0].startswith("loopscope demo: no GPU here (")
    if _recording.DEMO_RECORDING.is_file():
        assert notices[1].startswith("RECORDING: this report analyses the records of ")
        assert "nothing ran on a GPU now" in notices[1]
        assert result.stdout.splitlines()[0].startswith("loopscope report - NVIDIA ")
    else:
        assert notices[1] == "The demo profiles a 10-step denoise loop on an NVIDIA GPU; " \
                             "nothing to run."
        assert result.stdout == ""


def test_a_script_with_two_profiles_reports_both(tmp_path):
    path = script(tmp_path, """
        import loopscope
        from synthetic_loop import run_loop, run_graph_like
        for loop in (run_loop, run_graph_like):
            with loopscope.profile(trace=False) as prof:
                loop(prof)
    """)
    out_json = tmp_path / "s.json"
    result = cli("run", "--json", str(out_json), "--max-severe-gaps", "0", path)
    assert result.returncode == 1  # the first profile has 2 severe gaps
    assert "=== profile 1 of 2 ===" in result.stdout and "=== profile 2 of 2 ===" in result.stdout
    assert "BUDGET FAILED (profile 1)" in result.stderr
    assert "loopscope: budgets met (profile 2): max_severe_gaps" in result.stderr
    summaries = json.loads(out_json.read_text())
    assert [s["diagnosis"]["verdict"] for s in summaries] == ["CPU_LAUNCH_BOUND", "GPU_BOUND"]


def test_progress_is_said_only_for_big_captures(tmp_path, monkeypatch, capsys, test_clock):
    """In this process: the threshold lowered to 5 records, the 12 records
    of the synthetic loop get a progress line; at the real threshold, none."""
    from loopscope.__main__ import main

    path = script(tmp_path, RANGES_ONLY)
    monkeypatch.setattr(_cli, "PROGRESS_RECORDS", 5)
    assert main(["run", "--steps", "denoise", path]) == 0
    err = capsys.readouterr().err
    assert "loopscope: taking ranges matching 'denoise' as steps (12 records)..." in err
    assert "loopscope: analysing 12 records..." in err
    monkeypatch.setattr(_cli, "PROGRESS_RECORDS", 500_000)
    assert main(["run", "--steps", "denoise", path]) == 0
    assert "records..." not in capsys.readouterr().err


def test_analyze_fails_the_gate_on_a_budget_it_could_not_measure(tmp_path):
    """The same rule as run (one report_budgets): a trace with no runtime
    calls cannot show syncs, so --max-syncs 0 is not met by it."""
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7,
               "ts": 10 + 100 * i, "dur": 20, "args": {"device": 0, "stream": 7,
                                                       "correlation": i + 1}}
              for i in range(3)]
    path = tmp_path / "kernels_only.json"
    path.write_text(json.dumps({"traceEvents": events}))
    result = cli("analyze", str(path), "--max-syncs", "0")
    assert result.returncode == 1
    assert "NOT CHECKED: max_syncs: not measured" in result.stderr
    met = cli("analyze", str(path), "--max-severe-gaps", "5")
    assert met.returncode == 0 and "budgets met" in met.stderr


@pytest.mark.skipif(driver_present(), reason="an NVIDIA driver is here: the demo asks torch")
def test_demo_without_a_driver_never_imports_torch():
    """Issue 41: on a CPU machine with torch installed the demo took 2.5-3 s
    and 654 MB to learn there was no GPU (torch imported to ask)."""
    probe = textwrap.dedent("""
        import contextlib, io, sys
        from loopscope.__main__ import main
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(["demo"])
        print(status, "torch" in sys.modules, err.getvalue().splitlines()[0])
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PYTHON_DIR, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    status, imported, first = done.stdout.strip().split(" ", 2)
    assert (status, imported) == ("0", "False")
    from machine import NO_DRIVER_REASON

    assert first == f"loopscope demo: no GPU here ({NO_DRIVER_REASON})."
