"""Issue 14, the GPU half (marked `gpu`; skipped with a reason without one):
loopscope inside and after torch.profiler, 8 threads launching kernels at
once with their own steps, 10M kernels in one profile, 1,000 profiles in a
row.  (fork, exit with a profile open and SIGINT are in
test_hostile_processes.py, host-only here and `gpu` there.)

Each test prints one JSON line of what it measured (`pytest -s` shows it)
for tests/hostile/README.md.  Kept cheap in device time: tiny kernels, CUDA
graph replays for the 10M, each heavy scenario in a fresh interpreter under
a timeout."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU visible to PyTorch", allow_module_level=True)

import loopscope  # noqa: E402

pytestmark = pytest.mark.gpu
PYTHON_DIR = str(Path(loopscope.__file__).resolve().parent.parent)


def kernels(x, n: int) -> None:
    for _ in range(n):
        x.add_(1)


def run_python(code: str, timeout: int) -> dict:
    """Runs `code` in a fresh interpreter; its last stdout line is JSON."""
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                            text=True, env=env, timeout=timeout)
    assert result.returncode == 0, result.stderr[-4000:]
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    print(json.dumps(measured))
    return measured


# ---------------------------------------------------------------------------
# torch.profiler

def test_inside_torch_profiler_says_so_and_keeps_host_figures(monkeypatch):
    """torch.profiler owns CUPTI: loopscope says which tool, keeps its steps
    (host times) and returns no silent zeros (GPU sections None).  The
    user's torch.profiler still gets its kernels."""
    from torch.profiler import ProfilerActivity, profile

    from loopscope import _profile

    monkeypatch.setattr(_profile, "_warned", set())  # said once a process: say it here
    x = torch.zeros(256, device="cuda")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as tp:
            with loopscope.profile() as prof:
                with prof.step():
                    kernels(x, 50)
                    torch.cuda.synchronize()
    s = prof.summary()
    assert [st["name"] for st in s["steps"]] == ["Step_0"] and s["steps"][0]["host_ms"] > 0
    assert s["gpu"] is None and s["gaps"] is None and s["syncs"] is None
    assert "torch.profiler" in s["gpu_error"]
    assert any("torch.profiler" in str(w.message) for w in caught)
    names = [e.name for e in tp.events()]
    assert sum("add" in n for n in names) >= 50
    print(json.dumps({"inside_torch_profiler": s["gpu_error"]}))


def test_after_torch_profiler_traces_exactly():
    """After torch.profiler ended (Kineto keeps CUPTI's callback slot):
    every kernel is traced, none dropped, and the note says what is missing."""
    from torch.profiler import ProfilerActivity, profile

    x = torch.zeros(256, device="cuda")
    with profile(activities=[ProfilerActivity.CUDA]):
        kernels(x, 10)
        torch.cuda.synchronize()
    with loopscope.profile() as prof:
        with prof.step():
            kernels(x, 300)
            torch.cuda.synchronize()
    s = prof.summary()
    json.dumps(s, allow_nan=False)
    assert s["source"] == "cupti", s["gpu_error"]
    assert s["gpu"]["kernels"] == 300 and s["dropped_records"] == 0
    assert s["steps"][0]["kernels"] == 300
    print(json.dumps({"after_torch_profiler": {"kernels": s["gpu"]["kernels"],
                                               "note": s["cupti_note"]}}))


def test_torch_profiler_after_loopscope_still_works():
    from torch.profiler import ProfilerActivity, profile

    x = torch.zeros(256, device="cuda")
    with loopscope.profile() as prof:
        kernels(x, 20)
        torch.cuda.synchronize()
    assert prof.summary()["gpu"]["kernels"] == 20
    with profile(activities=[ProfilerActivity.CUDA]) as tp:
        kernels(x, 30)
        torch.cuda.synchronize()
    assert sum("add" in e.name for e in tp.events()) >= 30


# ---------------------------------------------------------------------------
# 8 threads at once

THREADS_SCRIPT = """
    import json, threading, torch, loopscope
    AFTER_TORCH_PROFILER = {after}
    threads, steps_each = 8, 5
    xs = [torch.zeros(64, device="cuda") for _ in range(threads)]
    torch.cuda.synchronize()
    if AFTER_TORCH_PROFILER:  # Kineto keeps CUPTI's callback slot from here on
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]):
            xs[0].add_(1)
            torch.cuda.synchronize()
    start = threading.Barrier(threads, timeout=30)
    errors, idents, natives = [], set(), set()
    with loopscope.profile() as prof:
        def worker(t):
            try:
                idents.add(threading.get_ident())
                natives.add(threading.get_native_id())
                start.wait()
                for s in range(steps_each):
                    with prof.step(f"T{{t}}_S{{s}}"):
                        for _ in range(4 * (t + 1)):
                            xs[t].add_(1)
                        torch.cuda.current_stream().synchronize()
            except BaseException as error:
                errors.append(repr(error))
        pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
        for th in pool:
            th.start()
        for th in pool:
            th.join(timeout=120)
        torch.cuda.synchronize()
    s = prof.summary()
    api_ids = {{a[3] for a in prof.capture.apis()}}
    got = {{st["name"]: st["kernels"] for st in s["steps"]}}
    want = {{f"T{{t}}_S{{i}}": 4 * (t + 1) for t in range(threads) for i in range(steps_each)}}
    print(json.dumps({{"errors": errors, "alive": sum(th.is_alive() for th in pool),
                      "source": s["source"], "gpu_error": s["gpu_error"],
                      "dropped": s["dropped_records"], "note": s["cupti_note"],
                      "kernels": (s["gpu"] or {{}}).get("kernels"), "steps": len(got),
                      "wrong": {{k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}},
                      "want_kernels": sum(want.values()),
                      # which id the launch records name their threads by
                      "api_thread_ids": {{
                          "whole": len(api_ids & idents),
                          "low32_left": len(api_ids & {{i & 0xFFFFFFFF for i in idents}}),
                          "native": len(api_ids & natives), "all": len(api_ids)}}}}))
"""


@pytest.mark.parametrize("after_torch_profiler", [False, True],
                         ids=["callbacks", "activity_records"])
def test_eight_threads_each_with_its_own_steps(after_torch_profiler):
    """8 Python threads launch kernels at once, each inside its own steps
    (made and entered in the thread, on the shared default stream, a sync
    in each): thread t's steps hold exactly 4 * (t + 1) kernels each (its
    own, not those of whichever step was open in time on another thread).
    Both launch sources: CUPTI's launch callbacks (whole pthread ids), and
    after torch.profiler took CUPTI's callback slot, its API activity
    records (the lower 32 bits of the pthread id).  Each in a fresh
    interpreter, so the order of the tests does not choose the source."""
    m = run_python(THREADS_SCRIPT.format(after=after_torch_profiler), timeout=300)
    assert m["errors"] == [] and m["alive"] == 0
    assert m["source"] == "cupti" and m["dropped"] == 0, m["gpu_error"]
    assert (m["note"] is not None and "held by another client" in m["note"]) == \
        after_torch_profiler, m["note"]
    assert m["api_thread_ids"]["whole"] == 8, m["api_thread_ids"]
    assert m["steps"] == 40 and m["wrong"] == {}
    assert m["kernels"] == m["want_kernels"]


# ---------------------------------------------------------------------------
# 10M kernels in one profile

# benchmarks/scale/live_ten_million.py: CUDA-graph replays of 10,000 tiny kernels,
# 10 a step, 100 steps; it prints what it measured, summary() included.
TEN_MILLION = (Path(__file__).resolve().parents[2] / "benchmarks" / "scale" /
               "live_ten_million.py").read_text(encoding="utf-8")


def test_ten_million_kernels_bounded_and_counted():
    """10M tiny kernels (CUDA-graph replays) in one profile: every kernel is
    either counted or counted as dropped; while capturing, host memory grows
    by no more than the records kept (48 B an op; a growing array may hold
    twice that for a moment) plus the buffer pool (256 MiB by default) plus
    256 MiB; the summary's peak stays within 1 GB above the records (issue
    14 condition 12); its time is printed, not bounded here."""
    m = run_python(TEN_MILLION, timeout=600)
    assert m["kernels"] + m["dropped"] == m["launched"]
    assert m["steps"] == 100
    bound_mb = 2 * 48 * m["launched"] / 2**20 + 256 + 256
    assert m["peak_capture_mb"] - m["rss_before_mb"] <= bound_mb, (m, bound_mb)
    # issue 14's memory bound on the summary: <= 1 GB above the records (its
    # time is measured, not asserted: benchmarks/RESULTS.md)
    assert m["peak_above_records_mb"] <= 1000, m


# ---------------------------------------------------------------------------
# 1,000 profiles in a row

THOUSAND = """
    import gc, json, os, threading, time, warnings
    warnings.simplefilter("ignore")
    import torch, loopscope
    from loopscope import _testhooks

    def rss_mb():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024

    def state():
        gc.collect()
        return {"rss_mb": round(rss_mb(), 1), "fds": len(os.listdir("/proc/self/fd")),
                "threads": threading.active_count(), "tasks": len(os.listdir("/proc/self/task")),
                "decoder": _testhooks._decoder_state()}

    x = torch.zeros(256, device="cuda")
    def one():
        with loopscope.profile() as prof:
            with prof.step():
                for _ in range(10):
                    x.add_(1)
                torch.cuda.synchronize()
        s = prof.summary()
        assert s["source"] == "cupti", s["gpu_error"]
        assert s["gpu"]["kernels"] == 10 and s["dropped_records"] == 0, s["gpu"]
        return s

    for _ in range(50):  # warm-up: CUPTI, PM sampling, allocator
        one()
    first = state()
    t0 = time.perf_counter()
    for i in range(1000):
        s = one()
    last = state()
    print(json.dumps({"first": first, "last": last, "seconds": round(time.perf_counter() - t0, 1),
                      "sm_samples_last": (s["sm"] or {}).get("samples"),
                      "metrics_error": s["metrics_error"]}))
"""


def test_thousand_profiles_leave_nothing_behind():
    """1,000 profiles in a row (after 50 to warm up): memory grows by less
    than 16 MiB, and file descriptors, threads and the decoder's state are
    what they were; the last profile still traces every kernel."""
    m = run_python(THOUSAND, timeout=600)
    first, last = m["first"], m["last"]
    assert last["rss_mb"] - first["rss_mb"] < 16, m
    for key in ("fds", "threads", "tasks", "decoder"):
        assert last[key] == first[key], (key, m)
