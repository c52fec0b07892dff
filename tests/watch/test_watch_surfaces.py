"""Where a user meets loopscope.watch(): SIGUSR1 (in a subprocess), the
window's memory over many steps, loopscope.step(), steps=module, the
`loopscope run --watch` command line and the pytest option."""
from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import tracemalloc

import pytest

import loopscope
import watch_loop

ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}


def script(tmp_path, body: str) -> str:
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_sigusr1_arms_a_dump_when_asked_for(tmp_path):
    path = script(tmp_path, """
        import os, signal, sys, loopscope
        before = signal.getsignal(signal.SIGUSR1)
        with loopscope.watch(signal=True, dump_dir=sys.argv[1], profile_steps=2,
                             block_steps=4) as w:
            for i in range(12):
                with w.step():
                    if i == 5:
                        os.kill(os.getpid(), signal.SIGUSR1)
        assert signal.getsignal(signal.SIGUSR1) is before
        print(len(w.dumps), w.dumps[0].rsplit("-step", 1)[1])
    """)
    done = subprocess.run([sys.executable, path, str(tmp_path / "d")], capture_output=True,
                          text=True, env=ENV, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "5"]
    assert json.loads((tmp_path / "d" / os.listdir(tmp_path / "d")[0] / "breach.json")
                      .read_text())["source"] == "SIGUSR1"


def test_sigusr1_is_left_alone_without_signal_true(tmp_path):
    path = script(tmp_path, """
        import signal, loopscope
        with loopscope.watch(dump_dir="d") as w:
            assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL
    """)
    assert subprocess.run([sys.executable, path], env=ENV, cwd=tmp_path, timeout=120).returncode == 0


def test_memory_stays_flat_over_many_steps(tmp_path, monkeypatch):
    """With the cyclic collector off: each dropped block's profile (and its
    C records) goes by reference counting alone."""
    clock = watch_loop.install(monkeypatch)
    was_on = gc.isenabled()
    gc.disable()
    try:
        with loopscope.watch(dump_dir=tmp_path, keep_steps=200, block_steps=500) as w:
            watch_loop.run(w, clock, [1.0] * 3_000)
            tracemalloc.start()
            watch_loop.run(w, clock, [1.0] * 2_000)
            first, _ = tracemalloc.get_traced_memory()
            watch_loop.run(w, clock, [1.0] * 20_000)
            last, _ = tracemalloc.get_traced_memory()
            tracemalloc.stop()
    finally:
        if was_on:
            gc.enable()
    rows = w.steps()
    assert len(rows) == 200 and rows[-1]["step"] == 24_999
    assert last - first < 64 * 1024, (first, last)   # 20,000 more steps: no growth per step


def test_loopscope_step_marks_the_running_watch_or_profile(tmp_path):
    with loopscope.step():           # nothing runs: a no-op
        pass
    with loopscope.watch(dump_dir=tmp_path, block_steps=2) as w:
        for _ in range(3):
            with loopscope.step():
                pass
    assert [r["step"] for r in w.steps()] == [0, 1, 2]
    with loopscope.profile(trace=False) as prof:
        with loopscope.step():
            pass
    assert len(prof.summary()["steps"]) == 1


def test_steps_module_makes_each_call_a_step(tmp_path):
    torch = pytest.importorskip("torch")
    model = torch.nn.Linear(4, 4)
    x = torch.zeros(1, 4)
    with loopscope.watch(dump_dir=tmp_path, steps=model, block_steps=2) as w:
        for _ in range(5):
            model(x)
    assert [r["step"] for r in w.steps()] == [0, 1, 2, 3, 4]
    assert not model._forward_pre_hooks and not model._forward_hooks


@pytest.mark.parametrize("how", ["w.step", "loopscope.step", "steps=model"])
def test_step_indices_start_at_0_however_the_steps_are_marked(tmp_path, monkeypatch, how):
    """Call k of the loop is step k (docs/watch.md: counted from 0, as a
    profile's Step_0): its row, its breach, the dump's name and its
    profiled steps, whichever way the loop is stepped."""
    torch = pytest.importorskip("torch")
    clock = watch_loop.install(monkeypatch)
    model = torch.nn.Linear(2, 2)
    x = torch.zeros(1, 2)
    n, slow, profile_steps = 8, 3, 2
    with loopscope.watch(dump_dir=tmp_path / "d", step_budget_ms=10, warmup_steps=0,
                         block_steps=2, profile_steps=profile_steps, p99_factor=None,
                         steps=model if how == "steps=model" else None) as w:
        for i in range(n):
            clock.durations.append(20.0 if i == slow else 1.0)
            if how == "steps=model":
                model(x)
                continue
            with (w.step() if how == "w.step" else loopscope.step()):
                model(x)
    assert [r["step"] for r in w.steps()] == list(range(n))
    assert [r["step"] for r in w.steps() if r["breach"]] == [slow]
    assert [r["step"] for r in w.steps() if r["profile"] == "full"] == \
        list(range(slow + 1, slow + 1 + profile_steps))
    assert len(w.dumps) == 1 and w.dumps[0].endswith(f"-step{slow}")
    breach = json.loads(open(os.path.join(w.dumps[0], "breach.json")).read())
    assert breach["step"] == slow
    assert breach["profiled_steps"] == [slow + 1, slow + profile_steps]


def test_watches_do_not_nest(tmp_path):
    with loopscope.watch(dump_dir=tmp_path):
        with pytest.raises(RuntimeError, match="already running"):
            loopscope.watch(dump_dir=tmp_path).__enter__()


LOOP = """
    import time, loopscope
    for i in range(30):
        with loopscope.step():
            time.sleep(0.08 if i == 15 else 0.001)
"""


def test_cli_run_watch(tmp_path):
    path = script(tmp_path, LOOP)
    done = subprocess.run([sys.executable, "-m", "loopscope", "run", "--watch", "40",
                           "--watch-dir", str(tmp_path / "d"), "--json", str(tmp_path / "w.json"),
                           path], capture_output=True, text=True, env=ENV, timeout=120)
    assert done.returncode == 0, done.stderr
    dumps = os.listdir(tmp_path / "d")
    assert len(dumps) == 1 and dumps[0].endswith("-step15")
    summary = json.loads((tmp_path / "w.json").read_text())
    assert summary["steps_seen"] == 30 and summary["breaches"] == 1
    assert "watched 30 steps: 1 breach, 1 dump" in done.stderr


MODULE_JOB = """
    import time, torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.inner(x).relu()

    model = Net()
    x = torch.zeros(1, 4)
    for i in range(30):
        model(x)
        time.sleep(0.08 if i == 15 else 0.001)
"""


def test_cli_run_watch_module(tmp_path):
    """`loopscope run --watch --watch-module Net`: each top-level call of the
    script's Net is a step, the first call step 0 (the 16th call sleeps)."""
    path = script(tmp_path, MODULE_JOB)
    done = subprocess.run([sys.executable, "-m", "loopscope", "run", "--watch", "40",
                           "--watch-dir", str(tmp_path / "d"), "--watch-module", "Net",
                           "--json", str(tmp_path / "w.json"), path],
                          capture_output=True, text=True, env=ENV, timeout=120)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "w.json").read_text())
    assert summary["steps_seen"] == 30 and summary["first_step"] == 0
    assert [b["step"] for b in summary["recent_breaches"]] == [15]
    dumps = os.listdir(tmp_path / "d")
    assert len(dumps) == 1 and dumps[0].endswith("-step15")
    breach = json.loads((tmp_path / "d" / dumps[0] / "breach.json").read_text())
    assert breach["step"] == 15 and breach["profiled_steps"] == [16, 25]
    window = json.loads((tmp_path / "d" / dumps[0] / "window.json").read_text())
    assert [r["step"] for r in window["rows"] if r["breaching"]] == [15]
    assert "watched 30 steps: 1 breach, 1 dump" in done.stderr
    wrong = subprocess.run([sys.executable, "-m", "loopscope", "run", "--watch", "40",
                            "--watch-dir", str(tmp_path / "d2"), "--watch-module", "Nett", path],
                           capture_output=True, text=True, env=ENV, timeout=120)
    assert wrong.returncode == 0
    assert "no module of class 'Nett' was called: no step was watched" in wrong.stderr


@pytest.mark.parametrize("args, text", [
    (["--watch", "0"], "must be a number of ms > 0"),
    (["--watch", "10", "--trace", "t.json"], "--trace cannot go with it"),
    (["--watch", "10", "--watch-dir", "job.py"], "exists and is not a folder"),
    (["--watch-module", "Net"], "--watch-module goes with --watch BUDGET_MS"),
    (["--watch-dir", "d", "--watch-module", "Net"], "--watch-dir and --watch-module go with"),
    (["--watch", "10", "--watch-module", "torch.nn"], "--watch-module must be a class name"),
])
def test_cli_run_watch_usage_errors(tmp_path, args, text):
    path = script(tmp_path, LOOP)
    done = subprocess.run([sys.executable, "-m", "loopscope", "run", *args, path],
                          capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and text in done.stderr


def test_pytest_option_watches_marked_steps(tmp_path):
    (tmp_path / "test_inner.py").write_text(textwrap.dedent("""
        import time, loopscope
        def test_loop():
            for i in range(30):
                with loopscope.step():
                    time.sleep(0.08 if i == 15 else 0.001)
    """))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--loopscope-watch", "40", "--loopscope-watch-dir",
                           str(tmp_path / "d"), "test_inner.py"],
                          capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "loopscope watch: 1 test, 30 steps watched, 1 breaches, 1 dump" in done.stdout
    assert len(os.listdir(tmp_path / "d")) == 1
    bad = subprocess.run([sys.executable, "-m", "pytest", "-q", "--loopscope-watch", "-5",
                          "test_inner.py"], capture_output=True, text=True, env=ENV,
                         cwd=tmp_path, timeout=120)
    assert bad.returncode == 4 and "step_budget_ms must be above 0" in bad.stderr
