"""Issue 14, the process-level conditions: os.fork() after import and inside
a profile, interpreter exit with a profile open (and the PM decoder thread
alive), SIGINT while a profile stops.  Each runs in a fresh interpreter
under a timeout, so a hang fails the test instead of hanging the suite.

Every scenario runs here host-only (trace=False: CI has no GPU) and, marked
`gpu`, again on a GPU with real tracing (skipped with a reason elsewhere).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import loopscope

PYTHON_DIR = str(Path(loopscope.__file__).resolve().parent.parent)
TIMEOUT_S = 120


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


HAS_CUDA = _cuda()
MODES = [
    pytest.param(False, id="host"),
    pytest.param(True, id="gpu", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not HAS_CUDA, reason="needs an NVIDIA GPU visible to PyTorch")]),
]

# Prepended to every script: GPU or not, a loop of work, and JSON output.
PRELUDE = """
import json, os, signal, sys, time, warnings
warnings.simplefilter("ignore")
# Ctrl-C as in a terminal: a parent started in the background (nohup, `&` in a
# script) hands its children SIGINT ignored, and Python then never raises
# KeyboardInterrupt (the Ctrl-C tests failed so under a backgrounded CI run).
signal.signal(signal.SIGINT, signal.default_int_handler)
GPU = {gpu}
{first}
if GPU:
    import torch
    X = torch.ones(256, device="cuda")
    torch.cuda.synchronize()
import loopscope
from loopscope import _core, _testhooks
from loopscope.live import _session

def work(n=20):
    # n kernels on the GPU, nothing on the host-only run; no CUDA call at all
    # for n=0 (a forked child cannot touch CUDA: torch raises)
    if GPU and n:
        for _ in range(n):
            X.add_(1)
        torch.cuda.synchronize()

def one_profile(n=20):
    with loopscope.profile(trace=GPU, metrics=GPU, syncs=GPU) as prof:
        with prof.step():
            work(n)
    s = prof.summary()
    json.dumps(s, allow_nan=False)
    return {{"steps": [x["name"] for x in s["steps"]], "source": s["source"],
            "kernels": (s["gpu"] or {{}}).get("kernels"), "gpu_error": s["gpu_error"]}}

def say(**what):
    print("RESULT " + json.dumps(what), flush=True)

def wait_child(pid, seconds=30):
    # the child's exit status, or "hung" (then it is killed)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "hung"
"""


FORK_FRESH_CUDA = """
        import json, os, sys, time, signal, warnings
        warnings.simplefilter("ignore")
        import torch, loopscope
        def say(**w): print("RESULT " + json.dumps(w), flush=True)
        pid = os.fork()
        if pid == 0:
            x = torch.ones(256, device="cuda")
            with loopscope.profile() as prof:
                with prof.step():
                    for _ in range(20):
                        x.add_(1)
                    torch.cuda.synchronize()
            s = prof.summary()
            say(who="child", steps=[t["name"] for t in s["steps"]], kernels=s["gpu"]["kernels"],
                source=s["source"])
            os._exit(0)
        end = time.monotonic() + 60
        status = "hung"
        while time.monotonic() < end:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(st)
                break
            time.sleep(0.01)
        else:
            os.kill(pid, signal.SIGKILL)
        say(who="parent", status=status)
    """

FORK_INSIDE = """
        with loopscope.no_sync(allow=loopscope.SYNC_KINDS):
            with loopscope.profile(trace=GPU, metrics=GPU) as prof:
                with prof.step():
                    work()
                    pid = os.fork()
                    if pid == 0:
                        say(who="child", inner=one_profile(0))
                        sys.stdout.flush()
                        os._exit(0)
                    status = wait_child(pid)
                    work()
        s = prof.summary()
        say(who="parent", status=status, steps=[x["name"] for x in s["steps"]],
            kernels=(s["gpu"] or {}).get("kernels"), active=_core.active())
    """

CHILD_LEAVES = """
        with loopscope.profile(trace=GPU, metrics=GPU) as prof:
            with prof.step():
                work()
                pid = os.fork()
                if pid != 0:
                    status = wait_child(pid)
        if pid == 0:
            say(who="child", error=prof.summary()["gpu_error"])
            sys.exit(0)
        say(who="parent", status=status, steps=len(prof.summary()["steps"]))
    """

EXIT_OPEN = """
        import atexit
        def last():
            say(active=_core.active(), decoder=_testhooks._decoder_state())
        atexit.register(last)
        # atexit runs handlers last-in first-out: loopscope's (registered at
        # import) is registered again after `last`, so it runs first
        from loopscope import _profile
        atexit.unregister(_profile._release_counters_at_exit)
        atexit.register(_profile._release_counters_at_exit)
        if not GPU:
            _testhooks._decoder_probe(1_000_000, 1_000_000, 60_000_000_000)  # thread stays 60 s
        prof = loopscope.profile(trace=GPU, metrics=GPU)
        prof.__enter__()
        work(200)
        say(before=_testhooks._decoder_state())
        sys.exit(0)
    """

SIGINT_STOP = """
        where = {where!r}
        sent = []
        if where == "in_stop":
            real = _core.stop
            def stop():
                if not sent:
                    sent.append(1)
                    os.kill(os.getpid(), signal.SIGINT)  # handled as soon as stop returns
                return real()
            _core.stop = stop
        else:
            real = _session._take_noted
            def take():
                if not sent:  # one Ctrl-C
                    sent.append(1)
                    os.kill(os.getpid(), signal.SIGINT)
                return real()
            _session._take_noted = take
        try:
            with loopscope.profile(trace=GPU, metrics=GPU) as prof:
                with prof.step():
                    work()
            say(interrupted=False)
        except KeyboardInterrupt:
            say(interrupted=True, active=_core.active())
        if where == "in_stop":
            _core.stop = real
        else:
            _session._take_noted = real
        say(**one_profile())
    """

SIGINT_EXIT = """
        where = {where!r}  # the stop at exit, or the release after it
        owner = _session if where == "stop" else _core
        name = "_stop_current" if where == "stop" else "_release_counters"
        real = getattr(owner, name)
        def interrupted():
            os.kill(os.getpid(), signal.SIGINT)  # KeyboardInterrupt before the real call
            return real()
        setattr(owner, name, interrupted)
        if not GPU:
            _testhooks._decoder_probe(1_000_000, 1_000_000, 60_000_000_000)  # thread stays 60 s
        prof = loopscope.profile(trace=GPU, metrics=GPU)
        prof.__enter__()
        work()
        say(open=True, decoder=_testhooks._decoder_state())
    """


# Before loopscope is imported: an atexit handler registered here runs
# after all of loopscope's (last in, first out) and says what it left.
AT_THE_VERY_END = """
import atexit
def _at_the_very_end():
    from loopscope import _core, _testhooks
    print("RESULT " + json.dumps({"at_the_very_end": {"active": _core.active(),
                                                      "decoder": _testhooks._decoder_state()}}),
          flush=True)
atexit.register(_at_the_very_end)
"""


def script(body: str, gpu: bool, first: str = "") -> str:
    return PRELUDE.format(gpu=gpu, first=first) + textwrap.dedent(body)


def run_script(body: str, gpu: bool, *, first: str = ""
               ) -> tuple[subprocess.CompletedProcess, list[dict]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    code = script(body, gpu, first)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=TIMEOUT_S)
    assert "Fatal Python error" not in result.stderr, result.stderr
    assert result.returncode >= 0, \
        f"killed by signal {-result.returncode}: {result.stderr}"
    results = [json.loads(line[7:]) for line in result.stdout.splitlines()
               if line.startswith("RESULT ")]
    return result, results


def expected_kernels(gpu: bool, n: int = 20):
    return n if gpu else None


# ---------------------------------------------------------------------------
# os.fork()

@pytest.mark.parametrize("gpu", MODES)
def test_fork_after_import_child_profiles(gpu):
    """Forked before any profile (and, on the GPU, before the parent set CUDA
    up, so the child may): the child profiles as a fresh process would."""
    if gpu:
        result, (child, parent) = _fork_fresh_cuda()
    else:
        result, (child, parent) = run_script("""
            pid = os.fork()
            if pid == 0:
                say(who="child", **one_profile())
                os._exit(0)
            say(who="parent", status=wait_child(pid))
        """, gpu=False)
    assert parent == {"who": "parent", "status": 0}, result.stderr
    assert child["steps"] == ["Step_0"]
    assert child["kernels"] == expected_kernels(gpu)


def _fork_fresh_cuda():
    """The GPU case: torch imported, CUDA not set up, then the fork."""
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = textwrap.dedent(FORK_FRESH_CUDA)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=TIMEOUT_S)
    results = [json.loads(line[7:]) for line in result.stdout.splitlines()
               if line.startswith("RESULT ")]
    assert len(results) == 2, result.stderr
    return result, results


@pytest.mark.parametrize("gpu", MODES)
def test_fork_inside_a_profile_and_a_no_sync_block(gpu):
    """Forked inside a running profile (and a no_sync block): the child does
    not hang, its copy of the parent's profile says it stays with the
    parent, and the child profiles again (host-only on a GPU machine: CUDA
    cannot be used after a fork, and the summary says why).  The parent's
    profile goes on and counts its own work exactly."""
    body = FORK_INSIDE
    result, results = run_script(body, gpu)
    said = {r.get("who"): r for r in results}
    print(json.dumps({"fork_inside": results, "returncode": result.returncode}))
    # The parent says how the child ended: 0, a negative signal, or "hung"
    assert set(said) == {"child", "parent"}, \
        f"got {results} (the child ended with {said.get('parent', {}).get('status')}): " \
        f"{result.stderr[-4000:]}"
    child, parent = said["child"], said["parent"]
    assert parent["status"] == 0, result.stderr
    assert parent["steps"] == ["Step_0"] and parent["active"] is False
    assert parent["kernels"] == expected_kernels(gpu, 40)
    inner = child["inner"]
    assert inner["steps"] == ["Step_0"]
    if gpu:
        assert inner["source"] is None and "forked" in inner["gpu_error"]


@pytest.mark.parametrize("gpu", MODES)
def test_child_leaving_the_inherited_profile_is_told_and_exits(gpu):
    """The child runs on through the parent's with-block and exits the
    normal way (atexit included): no hang, exit status 0, its copy of the
    profile reports that it was forked inside it."""
    body = CHILD_LEAVES
    result, (child, parent) = run_script(body, gpu)
    assert parent == {"who": "parent", "status": 0, "steps": 1}, result.stderr
    assert "forked inside the profile" in child["error"]


# ---------------------------------------------------------------------------
# Interpreter exit with a profile open

@pytest.mark.parametrize("gpu", MODES)
def test_exit_with_a_profile_open_and_the_decoder_thread_alive(gpu):
    """The script ends inside a profile (never exited) while loopscope's PM
    decoder thread is alive (a real one on the GPU; the thread alone,
    through its test hook, here): the process exits 0 in time, and by the
    last atexit handler the profile is stopped and the thread ended."""
    body = EXIT_OPEN
    result, (before, after) = run_script(body, gpu)
    assert result.returncode == 0, result.stderr
    # GPU: the profile's ticks are set ("ticking"), unless the worker runs
    # a task then ("busy": the PM sampler's set-up, ~0.3-0.5 s at a
    # process's first profile, or a drain's).  Host: the probe left the
    # thread with only the sampler's release due ("idle").
    assert before["before"] in (("ticking", "busy") if gpu else ("idle",))
    assert after == {"active": False, "decoder": "none"}, result.stderr


# ---------------------------------------------------------------------------
# SIGINT while stopping

@pytest.mark.parametrize("gpu", MODES)
@pytest.mark.parametrize("where", ["in_stop", "before_stop"])
def test_sigint_while_the_profile_stops(gpu, where):
    """Ctrl-C lands while the profile stops (right after the C stop, or
    before it): KeyboardInterrupt reaches the user, nothing stays running,
    and the next profile works."""
    body = SIGINT_STOP.format(where=where)
    result, (first, again) = run_script(body, gpu)
    assert result.returncode == 0, result.stderr
    assert first == {"interrupted": True, "active": False}
    assert again["steps"] == ["Step_0"] and again["kernels"] == expected_kernels(gpu)


@pytest.mark.parametrize("gpu", MODES)
@pytest.mark.parametrize("where", ["stop", "release"])
def test_sigint_during_interpreter_exit(gpu, where):
    """Ctrl-C while loopscope stops a profile left open at exit, or gives
    the counters back after that: the process still ends with status 0,
    without a crash or a hang, and by the last atexit handler the profile
    is stopped and loopscope's thread ended (its release done), though the
    Python handler never got there (_core._at_exit did it)."""
    body = SIGINT_EXIT.format(where=where)
    result, results = run_script(body, gpu, first=AT_THE_VERY_END)
    print(json.dumps({"sigint_exit": results, "returncode": result.returncode}))
    assert result.returncode == 0, result.stderr
    assert "KeyboardInterrupt" in result.stderr  # the Ctrl-C did land in loopscope's handler
    (opened, end) = results
    assert opened["open"] is True and opened["decoder"] != "none"
    # after every atexit handler: the profile stopped, the thread ended
    # (its last act being the counters' release), though the handler's
    # release was interrupted
    assert end == {"at_the_very_end": {"active": False, "decoder": "none"}}, result.stderr


def test_every_gpu_script_compiles():
    """The GPU variants run only on the GPU machine; here at least each
    script they run must compile."""
    bodies = [FORK_INSIDE, CHILD_LEAVES, EXIT_OPEN, SIGINT_STOP.format(where="in_stop"),
              SIGINT_EXIT.format(where="stop"), SIGINT_EXIT.format(where="release")]
    for body in bodies:
        compile(script(body, True, AT_THE_VERY_END), "<gpu script>", "exec")
    compile(textwrap.dedent(FORK_FRESH_CUDA), "<gpu script>", "exec")


THOUSAND_HOST = """
    import gc, threading
    def rss_mb():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) / 1024 for l in f if l.startswith("VmRSS:"))
    def state():
        gc.collect()
        # loopscope's worker settled first: one with an idle task pending
        # ends when it runs, so a snapshot during it counts a task too many
        deadline = time.monotonic() + 5
        while (_testhooks._decoder_state() in ("busy", "idle", "ticking")
               and time.monotonic() < deadline):
            time.sleep(0.01)
        # a joined thread's OS task can outlive join() for a moment (seen
        # once in CI: tasks 2 against 1): read until the count stops falling
        tasks = len(os.listdir("/proc/self/task"))
        while time.monotonic() < deadline:
            time.sleep(0.02)
            now = len(os.listdir("/proc/self/task"))
            if now >= tasks:
                break
            tasks = now
        return {"rss_mb": rss_mb(), "fds": len(os.listdir("/proc/self/fd")),
                "threads": threading.active_count(), "tasks": tasks}
    def round_trip():
        one_profile()
        with loopscope.no_sync():           # the blocks' own session, then a profile inside
            one_profile()
        worker = threading.Thread(target=one_profile)
        worker.start(); worker.join()
    for _ in range(50):
        round_trip()
    first = state()
    for _ in range(1000):
        round_trip()
    say(first=first, last=state(), active=_core.active())
"""


def test_thousand_host_profiles_leave_nothing_behind():
    """The CPU side of '1,000 profiles in a row': 1,000 rounds of a profile,
    a no_sync block with a profile inside and a profile on a thread; memory
    grows by less than 8 MiB, file descriptors and threads stay the same."""
    result, (m,) = run_script(THOUSAND_HOST, gpu=False)
    first, last = m["first"], m["last"]
    # Under CI's preloaded ASan freed memory waits in its quarantine (256 MiB
    # by default), so RSS grows there whatever the code does: the bound is
    # checked by the suite's plain run.
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):
        assert last["rss_mb"] - first["rss_mb"] < 8, m
    assert (last["fds"], last["threads"], last["tasks"]) == \
        (first["fds"], first["threads"], first["tasks"]), m
    assert m["active"] is False
    print(json.dumps(m))
