"""What the user is told when loopscope cannot trace: another profiler owns
CUPTI (a CUDA injection tool, or torch.profiler running, which needs no GPU
to be detected), or the stop fails.  The run is never lost, nothing stays
running, and the sentences are exact."""
from __future__ import annotations

import pytest

import loopscope
from loopscope import _core

INJECTED = ("a CUDA tool is injected into this process (CUDA_INJECTION64_PATH={path}, e.g. "
            "Nsight Systems or Nsight Compute) and owns CUPTI; profile outside it. NVTX ranges "
            "still reach that tool")
TORCH_PROFILER = ("torch.profiler (Kineto) is running and owns CUPTI; only one CUPTI client may "
                  "trace a process. NVTX ranges and host step times still work")


def one_step_profile():
    with loopscope.profile() as prof:
        with prof.step():
            pass
    return prof


def assert_busy(prof, reason):
    """Every GPU section names the other tool; host steps still work."""
    s = prof.summary()
    assert (s["gpu"], s["gaps"], s["syncs"], s["sm"]) == (None, None, None, None)
    assert s["gpu_error"] == s["syncs_error"] == s["metrics_error"] == reason
    assert len(s["steps"]) == 1 and s["steps"][0]["host_ms"] >= 0
    assert s["diagnosis"]["reasons"] == [f"no GPU timeline: {reason}"]
    lines = prof.report().splitlines()
    # said once, in the verdict line; the missing sections' line refers to it (issue 41)
    assert [line for line in lines if reason in line] == [f"UNKNOWN: no GPU timeline: {reason}"]
    assert "GPU sections missing (GPU time line, syncs, SM/DRAM): see the verdict line above" \
        in lines
    assert not _core.active()


def test_a_cuda_injection_tool_is_named(monkeypatch):
    path = "/opt/nsight/libToolsInjection64.so"
    monkeypatch.setenv("CUDA_INJECTION64_PATH", path)
    assert_busy(one_step_profile(), INJECTED.format(path=path))


def test_a_running_torch_profiler_is_named():
    """torch.profiler on the CPU: its profiler is enabled while it runs."""
    torch = pytest.importorskip("torch")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        prof = one_step_profile()
    assert_busy(prof, TORCH_PROFILER)
    # once torch.profiler has ended, nothing is in the way any more
    after = one_step_profile().summary()
    assert TORCH_PROFILER not in (after["gpu_error"], after["syncs_error"], after["metrics_error"])


def test_a_failing_stop_loses_nothing_and_says_why(monkeypatch):
    """_core.stop stops the session but raises: the with-block still ends
    normally, the warning and every section name the error, the verdict is
    UNKNOWN and no profile stays running."""
    real_stop = _core.stop

    def failing_stop():
        real_stop()
        raise RuntimeError("scripted stop failure (rule test)")

    monkeypatch.setattr(_core, "stop", failing_stop)
    error = "RuntimeError: scripted stop failure (rule test)"
    with pytest.warns(loopscope.LoopscopeWarning) as caught:
        prof = one_step_profile()
    assert f"loopscope: stopping the profile failed: {error}" in [str(w.message) for w in caught]
    assert not _core.active()
    s = prof.summary()
    assert (s["gpu"], s["gaps"], s["syncs"], s["steps"], s["dropped_records"]) == (
        None, None, None, [], None)
    assert s["gpu_error"] == error
    assert s["diagnosis"]["verdict"] == "UNKNOWN"
    assert s["diagnosis"]["reasons"] == [f"no GPU timeline: {error}"]
    lines = prof.report().splitlines()
    assert [line for line in lines if error in line] == [f"UNKNOWN: no GPU timeline: {error}"]
    assert any(line.startswith("GPU sections missing (GPU time line")
               and line.endswith("): see the verdict line above") for line in lines)
    # no capture came back, so no cost was measured: each reads 0, none a placeholder
    o = s["overhead"]
    assert (o["start_ms"], o["stop_ms"], o["finish_ms"], o["decode_ms"], o["records"]) == (
        0.0, 0.0, 0.0, 0.0, 0)
