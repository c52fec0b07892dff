"""The GPU benchmarks of issue 11 must at least parse their arguments and
import without a GPU (CI has none): --dry lists the runs they would make.
benchmarks/cost/overhead.py's timing (issue 27: rounds, back to back, GPT-2's
steps) runs here on a fake clock and a CPU module."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import types

import pytest

import loopscope

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The loopscope this suite imports (in CI an installed one, not the source tree).
PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(loopscope.__file__)))
OVERHEAD = os.path.join(ROOT, "benchmarks", "cost", "overhead.py")


def run(script: str, *args: str, block: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """The script in a fresh Python, where importing a module in `block` fails."""
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    path = os.path.join(ROOT, "benchmarks", script)
    if block:
        code = (f"import runpy, sys; sys.modules.update(dict.fromkeys({list(block)!r})); "
                f"sys.argv = [{path!r}] + {list(args)!r}; runpy.run_path({path!r}, run_name='__main__')")
        cmd = [sys.executable, "-c", code]
    else:
        cmd = [sys.executable, path, *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)


def load_overhead():
    spec = importlib.util.spec_from_file_location("overhead_under_test", OVERHEAD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("script, loops, variants", [
    ("cost/overhead.py", {"eager", "graph", "gpt2"}, 9), ("cost/overhead_options.py", {"eager", "graph"}, 11)])
def test_dry_run_lists_every_variant_of_every_loop(script, loops, variants):
    result = run(script, "--dry", block=("torch",))  # no torch needed to list
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == len(loops) * variants
    assert {line.split()[0] for line in lines} == loops
    for loop in loops:
        assert len({line.split()[1] for line in lines if line.split()[0] == loop}) == variants


def test_dry_run_shows_the_back_to_back_series_and_the_counts():
    """--back-to-back and --quick, as each process would run them: GPT-2
    (~0.8 s a loop) runs a third of the rounds and half of K and of the
    repeats, at least 2 each."""
    quick = run("cost/overhead.py", "--dry", "--back-to-back", "--quick", block=("torch",))
    assert quick.returncode == 0, quick.stderr
    lines = quick.stdout.strip().splitlines()
    assert len(lines) == 27
    for line in lines:
        if line.startswith("gpt2 "):
            assert "; 2 rounds; back to back: 2 profiles x 2 repeats" in line, line
        else:
            assert "; 6 rounds; back to back: 4 profiles x 3 repeats" in line, line
    chosen = run("cost/overhead.py", "--dry", "--back-to-back", "--rounds", "12", "--profiles", "6",
                 "--repeats", "4", "--loops", "graph,gpt2", "--variants", "loopscope",
                 block=("torch", "transformers"))
    assert chosen.returncode == 0, chosen.stderr
    assert [line.split(";")[1:] for line in chosen.stdout.strip().splitlines()] == [
        [" 12 rounds", " back to back: 6 profiles x 4 repeats"],
        [" 4 rounds", f" back to back: 3 profiles x 2 repeats (skipped here: transformers is "
                      f"not installed in {sys.executable} (pip install transformers))"]]
    plain = run("cost/overhead.py", "--dry")
    assert plain.returncode == 0 and "back to back" not in plain.stdout
    assert all("; 20 rounds" in line for line in plain.stdout.splitlines() if line.startswith("eager"))


@pytest.mark.parametrize("script", ["cost/overhead.py", "cost/overhead_options.py"])
def test_an_unknown_variant_is_named(script):
    result = run(script, "--dry", "--variants", "nope")
    assert result.returncode == 2
    assert "unknown variant 'nope'" in result.stderr


@pytest.mark.parametrize("args, message", [
    (("--loops", "gpt3"), "unknown loop 'gpt3'"),
    (("--profiles", "0"), "--profiles must be at least 1, got 0"),
    (("--repeats", "-1"), "--repeats must be at least 1, got -1"),
])
def test_overhead_names_a_bad_option(args, message):
    result = run("cost/overhead.py", "--dry", *args)
    assert result.returncode == 2
    assert message in result.stderr


class FakeTime:
    """A clock that moves only when the fake work says so, and a log of that work."""

    def __init__(self) -> None:
        self.ns, self.log = 0, []

    def clock(self) -> int:
        return self.ns

    def work(self, what: str, ms: float, result=None):
        self.log.append(what)
        self.ns += int(ms * 1e6)
        return result

    def torch(self):
        return types.SimpleNamespace(cuda=types.SimpleNamespace(
            synchronize=lambda: self.work("sync", 0.5)))


def fake_profiler(t: FakeTime):
    """loop: 10 ms bare, 11 inside a profile; enter 2 ms, exit 3, post 7
    (a loopscope-like summary whose worker finish it waited 4 ms for)."""
    loop = lambda handle=None: t.work("loop" if handle else "bare", 11 if handle else 10)  # noqa: E731
    enter = lambda: t.work("enter", 2, result="handle")  # noqa: E731
    exit_ = lambda: t.work("exit", 3)  # noqa: E731
    post = lambda: t.work("post", 7, result={"overhead": {"finish_wait_ms": 4.0}})  # noqa: E731
    return loop, enter, exit_, post


def test_a_round_times_enter_loop_exit_and_post_apart():
    overhead = load_overhead()
    t = FakeTime()
    loop, enter, exit_, post = fake_profiler(t)
    row = overhead.one_round(t.torch(), loop, enter, exit_, post, clock=t.clock)
    assert t.log == ["sync", "enter", "loop", "sync", "exit", "post"]
    # The first sync is before the clock starts; the second ends the loop.
    assert {k: row[k] for k in ("enter", "loop", "exit", "post", "block", "block_post")} == {
        "enter": 2.0, "loop": 11.5, "exit": 3.0, "post": 7.0, "block": 16.5, "block_post": 23.5}
    assert row["loopscope"]["finish_wait_ms"] == 4.0
    assert row["loopscope"]["summary_build_ms"] == 7.0 - 4.0


def test_back_to_back_times_k_profiles_in_a_row_against_k_bare_loops():
    """Each repeat: K bare loops, one untimed profile, K timed profiles with
    no post between them, then the post untimed (the drain)."""
    overhead = load_overhead()
    t = FakeTime()
    loop, enter, exit_, post = fake_profiler(t)
    k, repeats = 3, 2
    result = overhead.back_to_back(t.torch(), loop, enter, exit_, post, k, repeats, clock=t.clock)
    one_repeat = (["sync"] + ["bare"] * k + ["sync"]
                  + ["sync", "enter", "loop", "exit", "sync"]
                  + ["sync"] + ["enter", "loop", "exit"] * k + ["sync", "post"])
    assert t.log == one_repeat * repeats
    bare_ms = k * 10 + 0.5            # K loops and the closing sync
    sequence_ms = k * (2 + 11 + 3) + 0.5
    assert result["bare_sequence_ms"] == [bare_ms] * repeats
    assert result["sequence_ms"] == [sequence_ms] * repeats
    assert result["x"] == pytest.approx(sequence_ms / bare_ms)
    assert result["per_profile_ms"] == pytest.approx(sequence_ms / k)
    assert [d["finish_wait_ms"] for d in result["drains"]] == [4.0] * repeats


def test_back_to_back_takes_the_median_of_its_repeats():
    """The middle repeat wins, for the sequences and the bare ones alike."""
    overhead = load_overhead()
    t = FakeTime()
    bare_ms = iter([10, 30, 20])            # one bare loop a repeat (K = 1)
    loop_ms = iter([0, 50, 0, 10, 0, 40])   # the untimed lead-in, then the timed one, each repeat

    def loop(handle=None):
        t.work("loop", next(loop_ms) if handle else next(bare_ms))

    enter, exit_ = (lambda: "handle"), (lambda: None)
    result = overhead.back_to_back(types.SimpleNamespace(cuda=types.SimpleNamespace(
        synchronize=lambda: None)), loop, enter, exit_, lambda: None, 1, 3, clock=t.clock)
    assert result["sequence_ms"] == [50, 10, 40] and result["bare_sequence_ms"] == [10, 30, 20]
    assert result["x"] == 40 / 20
    assert result["drains"][0].keys() == {"drain_ms"}


class RecordingProfile:
    """Stands in for a profile: step() returns a context manager that logs."""

    def __init__(self) -> None:
        self.log = []

    def step(self):
        log, i = self.log, sum(1 for e in self.log if e[0] == "enter")

        class Step:
            def __enter__(self):
                log.append(("enter", i))

            def __exit__(self, *exc):
                log.append(("exit", i))

        return Step()


def test_each_forward_of_the_module_is_one_step_while_profiled():
    torch = pytest.importorskip("torch")
    overhead = load_overhead()
    module = torch.nn.Linear(2, 2)
    prof = RecordingProfile()
    with overhead.steps_per_forward(module, prof):
        for _ in range(3):
            module(torch.zeros(1, 2))
    assert prof.log == [("enter", 0), ("exit", 0), ("enter", 1), ("exit", 1), ("enter", 2), ("exit", 2)]
    module(torch.zeros(1, 2))  # the hooks are gone
    assert len(prof.log) == 6 and not module._forward_pre_hooks and not module._forward_hooks
    with overhead.steps_per_forward(module, None):  # a bare loop: nothing hooked
        assert not module._forward_pre_hooks and not module._forward_hooks


def test_a_forward_that_raises_still_ends_its_step():
    torch = pytest.importorskip("torch")
    overhead = load_overhead()
    class Boom(torch.nn.Module):
        # A Python error: a shape error raised inside torch's C++ aborts the
        # process under CI's preloaded AddressSanitizer.
        def forward(self, x):
            raise RuntimeError("the forward failed")

    module = Boom()
    prof = RecordingProfile()
    with pytest.raises(RuntimeError, match="the forward failed"):
        with overhead.steps_per_forward(module, prof):
            module(torch.zeros(1, 3))
    assert prof.log == [("enter", 0), ("exit", 0)]
    assert not module._forward_pre_hooks and not module._forward_hooks


def test_gpt2_generate_is_one_step_a_new_token():
    """The gpt2 loop on a tiny random GPT-2 on the CPU: 64 new tokens, each
    from one forward, so 64 steps (transformers is optional here)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers", reason="the gpt2 loop needs transformers")
    overhead = load_overhead()
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, n_positions=96,
                                     vocab_size=64, bos_token_id=63, eos_token_id=63)
    model, loop = overhead.build_gpt2(torch, device="cpu", config=config)
    prof = RecordingProfile()
    out = loop(prof)
    assert out.shape == (1, 16 + 64)
    assert prof.log == [(what, i) for i in range(64) for what in ("enter", "exit")]
    assert loop().shape == (1, 16 + 64)  # bare: no steps, no hooks left
    assert len(prof.log) == 128 and not model._forward_pre_hooks


def test_the_gpt2_loop_is_skipped_with_its_reason_when_transformers_is_missing(
        monkeypatch, capsys, tmp_path):
    overhead = load_overhead()
    real = overhead.importlib.util.find_spec
    monkeypatch.setattr(overhead.importlib.util, "find_spec",
                        lambda name, *a: None if name == "transformers" else real(name, *a))
    monkeypatch.setattr(sys, "argv", ["overhead.py", "--dry", "--loops", "gpt2",
                                      "--variants", "loopscope"])
    overhead.main()
    assert "gpt2   loopscope" in capsys.readouterr().out
    out_json = tmp_path / "out.json"
    spawned = []
    monkeypatch.setattr(overhead, "spawn", lambda *a: spawned.append(a))
    monkeypatch.setattr(sys, "argv", ["overhead.py", "--loops", "gpt2", "--json", str(out_json)])
    overhead.main()
    printed = capsys.readouterr().out
    assert "the gpt2 loop is skipped: transformers is not installed" in printed
    assert printed.strip().splitlines()[-2].startswith("gpt2: skipped: transformers is not installed")
    assert spawned == []
    saved = json.loads(out_json.read_text())
    assert saved["results"] == [] and "transformers is not installed" in saved["skipped_loops"]["gpt2"]


def test_the_short_table_comes_last_with_every_column(monkeypatch, capsys):
    """main() with the processes stood in for: the table is the last lines,
    block, loop, block+post and back-to-back for each row."""
    overhead = load_overhead()

    def spawn(variant, loop_kind, counts, back):
        r = {"variant": variant, "loop": loop_kind, "device": "FakeGPU", "bare_ms": 10.0,
             "block_x": 1.25, "loop_x": 1.125, "block_post_x": 1.5, "rows": [],
             "median": {"enter": 0.5, "exit": 0.25, "post": 2.5},
             "first": {"block": 40.0, "enter": 30.0}}
        if back:
            r["back_to_back"] = {"x": 1.75, "per_profile_ms": 17.5, "bare_loop_ms": 10.0,
                                 "profiles": counts["profiles"], "repeats": counts["repeats"],
                                 "drains": []}
        return r

    monkeypatch.setattr(overhead, "spawn", spawn)
    monkeypatch.setattr(sys, "argv", ["overhead.py", "--loops", "eager", "--variants",
                                      "torch_stack,loopscope", "--back-to-back", "--quick"])
    overhead.main()
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-3].split() == ["variant", "loop", "bare", "ms", "block", "x", "loop", "x",
                                 "blk+post", "x", "b2b", "x", "enter", "exit", "post", "ms",
                                 "first", "blk", "first", "ent"]
    # The table keeps VARIANTS' order although torch_stack ran last.
    assert lines[-2].split() == ["loopscope", "eager", "10.000", "1.250", "1.125", "1.500", "1.750",
                                 "0.500", "0.250", "2.50", "40.0", "30.0"]
    assert lines[-1].split()[:2] == ["torch_stack", "eager"]


@pytest.mark.parametrize("args, shown", [
    (("--case", "steps", "--steps", "300"), "300 steps"),
    (("--case", "gpu_steps", "--steps", "200"), "200 kernels, 200 steps"),
    (("--case", "kernels", "--kernels", "2000"), "2,000 kernels, 10 steps"),
    (("--case", "kernels", "--kernels", "2000", "--shuffled"), "2,000 kernels in 10 steps, shuffled"),
])
def test_the_scale_benchmark_runs_small(args, shown):
    """benchmarks/scale/bench_scale.py (issue 14, condition 12) at a size CI
    affords: it runs each case to its end and reports what it built."""
    result = run("scale/bench_scale.py", *args, "--no-html")
    assert result.returncode == 0, result.stderr
    assert "summary():" in result.stdout and shown in result.stdout, result.stdout


PROJECTION_CHECK = os.path.join(ROOT, "benchmarks", "tour", "projection_check.py")


def load_projection_check():
    spec = importlib.util.spec_from_file_location("projection_check_under_test",
                                                  PROJECTION_CHECK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # imports no torch: a GPU-free machine can load it
    return module


def test_projection_check_runs_without_a_gpu():
    assert "bare_current_ms" in run("tour/projection_check.py", "--help").stdout
    result = run("tour/projection_check.py", "--only", "no_stall")
    assert result.returncode == 0, result.stderr
    assert "nothing to measure" in result.stdout


@pytest.mark.parametrize("measured_ms, ok, floor_holds", [
    (10.0, True, True),     # ratio 10/12 against 20/24: exact; above the 9 ms floor
    (7.2, False, True),     # ratio 0.6 against 0.833: 39% off; 7.2 = 9 x (1 - 0.2) holds
    (7.1, False, False)])   # below the floor by more than the tolerance
def test_projection_check_judges_ratios_and_the_floor_against_bare_loops(
        measured_ms, ok, floor_holds):
    """Issue 39: a projection of the profiled loop (24 -> 20 ms) is judged by
    its ratio against the bare loops' (12 ms as it is, measured_ms changed),
    and its floor (host 9 ms, above the GPU's 5) against the changed loop."""
    m = load_projection_check()
    p = {"current_ms": 24.0, "projected_ms": 20.0, "text": "t", "basis": "b",
         "floors": {"host_ms": 9.0, "gpu_busy_ms": 5.0, "kernels_change": False,
                    "profiler_ms": 1.5}}
    r = m.judge("no_stall", p, 12.0, measured_ms, tolerance=0.2, close=True)
    assert (r["ok"], r["floor_holds"]) == (ok, floor_holds)
    assert r["projected_ratio"] == round(20 / 24, 3)
    assert r["measured_ratio"] == round(measured_ms / 12.0, 3)
    assert r["ratio_error"] == round((20 / 24 - measured_ms / 12) / (measured_ms / 12), 3)
    assert (r["floor_ms"], r["inflation"], r["unaccounted_ms"]) == (9.0, 2.0, 24 - 12 - 1.5)


@pytest.mark.parametrize("floor_applies, ok", [(True, False), (False, True)])
def test_projection_check_reports_a_floor_the_change_made_may_cross(floor_applies, ok):
    """Issue 39: no_feed deletes what feeds the syncs as well, more than the
    projection's change, whose host floor keeps that work: 7.1 ms, 1.9 ms
    below the 9 ms floor, is reported there and fails only where the floor
    applies."""
    m = load_projection_check()
    p = {"current_ms": 24.0, "projected_ms": 20.0, "text": "t", "basis": "b",
         "floors": {"host_ms": 9.0, "gpu_busy_ms": 5.0, "kernels_change": False,
                    "profiler_ms": 1.5}}
    r = m.judge("no_feed", p, 12.0, 7.1, tolerance=0.2, close=False, floor_applies=floor_applies)
    assert (r["ok"], r["floor_holds"], r["floor_applies"]) == (ok, False, floor_applies)
    assert r["below_floor_ms"] == round(9.0 - 7.1, 3)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two CPUs to pin threads apart")
def test_the_taking_turns_pin_keeps_other_threads_off_the_main_threads_cpu_turn_after_turn():
    """watch_generate.py --pin: after every turn's pin (not only the first),
    the main thread is on its CPU alone and another thread of the process
    on the others.  Run in a fresh process: the pins stay with its threads."""
    code = f"""
import os, sys, threading
sys.path.insert(0, {os.path.join(ROOT, 'benchmarks', 'watch')!r})
import watch_generate
cpus = sorted(os.sched_getaffinity(0))
pinned, others = cpus[-1], set(cpus[:-1])
started, done = threading.Event(), threading.Event()
tid = []
def other():
    tid.append(threading.get_native_id()); started.set(); done.wait()
t = threading.Thread(target=other); t.start(); started.wait()
seen = []
for turn in range(3):
    watch_generate.pin_main_thread(pinned)
    seen.append((os.sched_getaffinity(0) == {{pinned}}, os.sched_getaffinity(tid[0]) == others))
done.set(); t.join()
print(seen)
"""
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str([(True, True)] * 3)


def load_probe(name: str):
    spec = importlib.util.spec_from_file_location(
        f"{name}_under_test", os.path.join(ROOT, "benchmarks", "probes", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_wait_nesting_check_counts_runtime_calls_without_a_driver_call_inside():
    """light_callbacks_probe --check's `waits` row decides whether a light
    profile may watch the driver domain alone: written out by hand, a copy
    with its driver copy inside, a free whose driver free ran on another
    thread (so not inside it), a sync whose driver call starts before it,
    and a driver call with no runtime call around it."""
    probe = load_probe("light_callbacks_probe")

    def call(api, driver, thread, enter, exit_):
        return {"api": api, "driver": driver, "thread_id": thread, "enter_ns": enter,
                "exit_ns": exit_}
    calls = [call("cudaMemcpyAsync", False, 1, 10, 50), call("cuMemcpyDtoHAsync_v2", True, 1, 12, 40),
             call("cudaFree", False, 1, 60, 70), call("cuMemFree_v2", True, 2, 61, 65),
             call("cudaStreamSynchronize", False, 1, 100, 120),
             call("cuStreamSynchronize", True, 1, 99, 119),
             call("cuCtxSynchronize", True, 1, 200, 210)]
    assert probe.wait_nesting(calls) == {
        "runtime_kept_calls": 3, "without_driver_call": 2,
        "runtime_apis_without": {"cudaFree": 1, "cudaStreamSynchronize": 1},
        "driver_kept_calls": 4, "driver_calls_alone": 3}


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_the_c_dispatch_loop_builds_and_times_a_call(tmp_path):
    """--c-dispatch's C loop compiles with cc, times a call that returns 0
    (ns a call, > 0) and reports one that fails (-1), as it would a CUDA
    error."""
    import ctypes
    probe = load_probe("light_callbacks_probe")
    src, so = tmp_path / "loops.c", tmp_path / "loops.so"
    src.write_text(probe.C_LOOPS)
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-o", str(so),
                    str(src)], check=True)
    loops = ctypes.CDLL(str(so))
    loops.loop_one.restype = ctypes.c_double
    loops.loop_one.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    libc = ctypes.CDLL(None)
    ok = ctypes.cast(libc.sched_yield, ctypes.c_void_p).value   # returns 0
    bad = ctypes.cast(libc.getpagesize, ctypes.c_void_p).value  # 4096 and the like: not 0 or 600
    assert loops.loop_one(ok, None, 1000) > 0
    assert loops.loop_one(bad, None, 10) == -1


def test_the_taking_turns_report_pools_runs_of_different_variants(tmp_path, capsys):
    """watch_generate.py --report over two runs that ran different variants
    (and a watch in one run only): each variant over the rounds that ran it,
    against the mean of both bare processes of its round.  Figures by hand:
    watch (2.2 + 0.1 enter) / 2.0 = 1.15 and 4.2 / 4.0 = 1.05, so median and
    mean 1.100, standard error 0.0707 / sqrt(2) = 0.050; watch_host 2.4 / 2.0."""
    spec = importlib.util.spec_from_file_location(
        "watch_generate_under_test", os.path.join(ROOT, "benchmarks", "watch", "watch_generate.py"))
    wg = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wg)

    def calls(*seconds):
        return [{"call_s": s, "main_cpu_s": s, "cpus": [0, 0]} for s in seconds]
    a = {"calls": {"bare": calls(1.0, 1.0, 2.0, 2.0), "bare_again": calls(1.0, 1.0, 2.0, 2.0),
                   "watch": calls(1.1, 1.1, 2.1, 2.1)},
         "ends": {"bare": [{}, {}], "bare_again": [{}, {}],
                  "watch": [{"enter_s": 0.1, "exit_s": 0.0}, {"enter_s": 0.0, "exit_s": 0.0}]}}
    b = {"calls": {"bare": calls(1.0, 1.0), "bare_again": calls(1.0, 1.0),
                   "watch_host": calls(1.2, 1.2)},
         "ends": {"bare": [{}], "bare_again": [{}], "watch_host": [{"enter_s": 0.0, "exit_s": 0.0}]}}
    paths = []
    for name, run in (("a.json", a), ("b.json", b)):
        (tmp_path / name).write_text(json.dumps(run))
        paths.append(str(tmp_path / name))
    assert wg.pooled_report(paths) == 0
    rows = {line.split("|")[1].strip(): line.split("|")[2:5] for line in capsys.readouterr().out.splitlines()
            if line.startswith("| ") and not line.startswith("| variant")}
    assert rows["watch"][0].strip() == "2"
    assert rows["watch"][1].strip().startswith("1.100 [")
    assert rows["watch"][2].strip() == "1.100 +- 0.050"
    assert rows["watch_host"][0].strip() == "1"
    assert rows["watch_host"][1].strip().startswith("1.200 [")
    assert rows["bare_again"][0].strip() == "3"
    assert rows["bare_again"][2].strip().startswith("1.000 +- 0.000")


def test_the_idle_hooks_turn_hooks_the_model_as_steps_module_does():
    """watch_generate.py's `hooks_only` turn stands for steps=module's hooks
    without loopscope: the same two hooks, of the same kinds (a pre-hook
    first, with kwargs; a forward hook always called), as profile(steps=)
    adds them; and `watch_host_nosteps` is the one watch with no steps=."""
    torch = pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location(
        "watch_generate_hooks_test", os.path.join(ROOT, "benchmarks", "watch", "watch_generate.py"))
    wg = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wg)

    def kinds(module) -> tuple:
        pre = list(module._forward_pre_hooks)
        return (len(pre), len(module._forward_hooks), [k in module._forward_pre_hooks_with_kwargs for k in pre],
                [k in module._forward_hooks_always_called for k in module._forward_hooks],
                [k in module._forward_hooks_with_kwargs for k in module._forward_hooks])
    ours, idle = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    with loopscope.profile(steps=ours, trace=False, metrics=False, syncs=False):
        seen = kinds(ours)
    wg.add_idle_step_hooks(idle)
    assert seen == kinds(idle) == (1, 1, [True], [True], [False])
    assert [v for v in wg.WATCH_OPTIONS if "steps" in wg.WATCH_OPTIONS[v]] == ["watch_host_nosteps"]
    assert wg.watch_options(idle, "watch_host_nosteps")["steps"] is None
    assert wg.watch_options(idle, "watch_host")["steps"] is idle
