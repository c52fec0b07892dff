"""The verdict rules exactly at their cut-offs (docstring of _diagnosis.py):
busy below 50%, a cause's share of the idle time at least 0.5, DRAM from
70%, SM above 60% with DRAM below 50%, and counters-only mode, where the
host's blocked time stands for the sync share.  The cut-offs are written
here as numbers from the documented rule (never imported from loopscope,
so that a changed constant fails), and each case sits on a cut-off or just
beside it."""
from __future__ import annotations

import types

import pytest

import loopscope
from loopscope import _testhooks

from fakes import c_callable, kernel, sample

MS = 1_000_000


def documented_verdict(busy_pct, idle_by_cause):
    """Rule 1 and 3 of the verdict (no counters), in plain Python."""
    idle = sum(idle_by_cause.values())
    if busy_pct < 50 and idle > 0:
        if idle_by_cause["sync"] >= 0.5 * idle:
            return "SYNC_BOUND"
        if idle_by_cause["host"] >= 0.5 * idle:
            return "CPU_LAUNCH_BOUND"
        return "BALANCED"
    return "GPU_BOUND"


def counter_verdict(sm_busy, dram_busy):
    """Rule 2, in plain Python."""
    if dram_busy >= 70:
        return "MEMORY_BOUND"
    if sm_busy > 60 and dram_busy < 50:
        return "COMPUTE_BOUND"
    return "BALANCED"


def timeline(kernel_ns, gaps):
    """Kernels of kernel_ns on one stream separated by gaps [(ns, cause)]:
    the next kernel's launch begins at the gap's start for `host` and
    `sync` (a kernel queued before the gap is no sync's), a nanosecond
    before it for `other`; a host sync record spans a `sync` gap."""
    t, corr = 10_000, 1
    kernels, apis, syncs = [kernel(t, t + kernel_ns, corr)], [(t - 5_000, t - 4_999, corr)], []
    t += kernel_ns
    for gap_ns, why in gaps:
        corr += 1
        launch = t if why in ("host", "sync") else t - 1
        apis.append((launch, launch + 1, corr))
        if why == "sync":
            syncs.append((t, t + gap_ns))
        kernels.append(kernel(t + gap_ns, t + gap_ns + kernel_ns, corr))
        t += gap_ns + kernel_ns
    return kernels, apis, syncs


CASES = {
    # busy exactly at the cut-off: 2 x 10 us busy, 20 us idle
    "busy-50-is-busy": (10_000, [(20_000, "host")]),
    # just below: 2 x 49.5 us busy, 101 us idle -> 49.5%
    "busy-49.5-is-idle": (49_500, [(101_000, "host")]),
    # shares of the idle time at and beside 0.5 (kernels of 1 us: busy < 5%)
    "sync-half": (1_000, [(50_000, "sync"), (50_000, "host")]),
    "sync-0.45": (1_000, [(45_000, "sync"), (55_000, "host")]),
    "host-half": (1_000, [(50_000, "host"), (50_000, "other")]),
    "host-0.45": (1_000, [(45_000, "host"), (55_000, "other")]),
    "thirds": (1_000, [(30_000, "sync"), (30_000, "host"), (40_000, "other")]),
}


@pytest.mark.parametrize("name", CASES)
def test_verdict_at_the_cut_offs(run_trace, name):
    kernel_ns, gaps = CASES[name]
    kernels, apis, syncs = timeline(kernel_ns, gaps)
    s = run_trace(kernels=kernels, apis=apis, syncs=syncs)
    busy = kernel_ns * len(kernels)
    idle = {k: sum(ns for ns, why in gaps if why == k) for k in ("host", "sync", "other")}
    busy_pct = round(100 * busy / (busy + sum(idle.values())), 2)
    assert s["gaps"]["busy_pct"] == busy_pct
    assert s["gaps"]["idle_by_cause_ms"] == {k: v / MS for k, v in idle.items()}
    expected = documented_verdict(busy_pct, idle)
    assert s["diagnosis"]["verdict"] == expected
    assert expected == {"busy-50-is-busy": "GPU_BOUND", "busy-49.5-is-idle": "CPU_LAUNCH_BOUND",
                        "sync-half": "SYNC_BOUND", "sync-0.45": "CPU_LAUNCH_BOUND",
                        "host-half": "CPU_LAUNCH_BOUND", "host-0.45": "BALANCED",
                        "thirds": "BALANCED"}[name]


@pytest.fixture
def scripted_host_time(monkeypatch):
    """The profile's wall time (perf_counter at enter and exit) scripted to
    10 ms, so the counters-only idle time is exact."""
    reads = iter([0, 10 * MS])
    monkeypatch.setattr("loopscope._profile.time",
                        types.SimpleNamespace(perf_counter_ns=lambda: next(reads)))
    return 10 * MS


def counters_only(test_clock, figures, steps=(), wait_ns=None):
    """trace=False: one PM sample over the whole loop (clock ticks of 1 ms),
    steps[i] says whether step i waits `wait_ns` in a device sync."""
    test_clock.set(MS, MS)
    wait = c_callable([("cudaDeviceSynchronize", wait_ns or 1)])
    with loopscope.profile(trace=False) as prof:
        for waits in steps:
            with prof.step():
                if waits:
                    wait()
        prof_sample = sample(test_clock.at(0), test_clock.at(20), **figures)
        _testhooks._inject("sample", [prof_sample])
    return prof.summary()


COUNTER_CASES = [(70.0, 50.0), (69.5, 50.0), (10.0, 60.0), (10.0, 60.5), (50.0, 90.0),
                 (49.5, 90.0)]


@pytest.mark.parametrize("dram, sm", COUNTER_CASES, ids=[f"dram{d}-sm{s}" for d, s in COUNTER_CASES])
def test_counter_verdict_at_the_cut_offs(test_clock, dram, sm):
    """GR active 100%: the GPU is busy and the busy-time figures are the
    span's; the verdict is rule 2 at its cut-offs."""
    s = counters_only(test_clock, dict(sm_active_pct=sm, dram_throughput_pct=dram,
                                       gr_active_pct=100))
    assert (s["sm"]["active_busy_pct"], s["dram"]["throughput_busy_pct"]) == (sm, dram)
    assert s["diagnosis"]["verdict"] == counter_verdict(sm, dram)


@pytest.mark.parametrize("gr", [50.0, 49.5])
def test_counters_only_busy_cut_off(test_clock, gr):
    """GR active at 50% is busy (rule 2 on figures scaled by 100/GR); just
    below it the GPU idles, nobody waited (syncs not watched here): launch
    bound."""
    s = counters_only(test_clock, dict(sm_active_pct=10, dram_throughput_pct=4,
                                       gr_active_pct=gr))
    assert s["syncs"] is None
    sm_busy, dram_busy = round(10 * 100 / gr, 2), round(4 * 100 / gr, 2)
    expected = counter_verdict(sm_busy, dram_busy) if gr >= 50 else "CPU_LAUNCH_BOUND"
    assert s["diagnosis"]["verdict"] == expected
    assert expected == ("BALANCED" if gr == 50.0 else "CPU_LAUNCH_BOUND")


@pytest.mark.parametrize("wait_ns", [4 * MS, 4 * MS - 100_000])
def test_counters_only_sync_bound(test_clock, scripted_host_time, wait_ns):
    """Counters only, GR active 20% over a 10 ms loop: the GPU idled 8 ms.
    Step 0 waits in one sync; the host blocked 4 ms (half the idle time:
    SYNC_BOUND) or 3.9 ms (less: CPU_LAUNCH_BOUND).  A step with a sync
    reads SYNC_BOUND, one without CPU_LAUNCH_BOUND."""
    s = counters_only(test_clock, dict(sm_active_pct=5, dram_throughput_pct=2,
                                       gr_active_pct=20), steps=[True, False], wait_ns=wait_ns)
    idle_ms = scripted_host_time / MS * (1 - 20 / 100)
    share = (wait_ns / MS) / idle_ms
    assert (s["gpu"], s["host_ms"], s["syncs"]["blocked_ms"]) == (None, 10.0, wait_ns / MS)
    assert (share == 0.5) == (wait_ns == 4 * MS)  # the first case sits on the cut-off
    d = s["diagnosis"]
    assert d["verdict"] == ("SYNC_BOUND" if share >= 0.5 else "CPU_LAUNCH_BOUND")
    assert d["evidence"]["sync_share_of_idle_pct"] == round(100 * share, 1)
    assert f"host blocked in syncs for {round(100 * share, 1)}% of the GPU's idle time" in d["reasons"]
    assert [st["verdict"] for st in s["steps"]] == ["SYNC_BOUND", "CPU_LAUNCH_BOUND"]


@pytest.mark.parametrize("sm, dram", [(29.5, 49.5), (30.0, 49.5), (29.5, 50.0)])
def test_counters_only_launch_corroboration(test_clock, sm, dram):
    """The reason "SM active < 30% and DRAM < 50%" is given only when both
    hold over the loop (GR 40%: launch bound)."""
    s = counters_only(test_clock, dict(sm_active_pct=sm, dram_throughput_pct=dram,
                                       gr_active_pct=40))
    assert s["diagnosis"]["verdict"] == "CPU_LAUNCH_BOUND"
    line = "SM active < 30% and DRAM < 50% over the loop: the GPU mostly waits"
    assert (line in s["diagnosis"]["reasons"]) == (sm < 30 and dram < 50)


@pytest.mark.parametrize("tensor", [None, 12.0])
def test_compute_bound_advises_tensor_cores_only_where_measured(test_clock, tensor):
    """Issue 39: COMPUTE_BOUND said "use tensor cores at lower precision" with
    tensor activity unmeasured (a loop already in fp16).  Unmeasured, the
    action says it is unknown and why; measured, it gives the figure first."""
    figures = dict(sm_active_pct=95, dram_throughput_pct=3, gr_active_pct=100)
    if tensor is not None:
        figures["tensor_active_pct"] = tensor
    s = counters_only(test_clock, figures)
    d = s["diagnosis"]
    assert d["verdict"] == "COMPUTE_BOUND"
    action = d["actions"][0]
    if tensor is None:
        assert "tensor-core activity is unknown: no tensor-pipe counter" in action
        assert "use tensor cores at lower precision" not in action
    else:
        assert action.startswith("tensor cores active 12.0% while the GPU works: the SMs are "
                                 "saturated: use tensor cores at lower precision")
