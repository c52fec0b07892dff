"""What the diagnosis says besides the verdict, and the verdict where the
GPU did nothing: the reasons' figures (idle shares, the severe threshold,
how many steps agree, the most costly sync site), the actions (the syncs
to remove, the DRAM figure only for a memory-bound loop) and the evidence,
each worked out here from the synthetic input.  Found by the mutation run
(tests/MUTATION.md): every figure below could change with the suite green."""
from __future__ import annotations

import types

import pytest

import loopscope
from loopscope import _testhooks
from loopscope.figures._syncs import format_site

from fakes import c_callable, kernel, sample

MS = 1_000_000
NO_WORK_ACTION = "no kernel, memcpy or memset ran inside the profile"


def test_a_run_without_gpu_operations_is_no_gpu_work(run_trace):
    """A launch record but no op: the timeline exists and is empty."""
    s = run_trace(apis=[(1_000, 1_001, 1)])
    assert s["source"] == "injected" and s["gpu"]["kernels"] == 0
    assert s["diagnosis"] == {"verdict": "NO_GPU_WORK",
                              "reasons": ["no GPU operation was recorded"],
                              "actions": [NO_WORK_ACTION], "evidence": {},
                              "projections": []}  # nothing ran: nothing to project


def test_one_kernel_is_gpu_work(run_trace):
    """One 1 us kernel, nothing else: busy all its time line, no counters
    (the CPU suite turns them off): GPU_BOUND, and the reason says why it
    cannot be split."""
    s = run_trace(kernels=[kernel(1_000, 2_000, 1)])
    d = s["diagnosis"]
    assert (s["gaps"]["busy_pct"], d["verdict"]) == (100.0, "GPU_BOUND")
    assert d["evidence"]["idle_share_pct"] == {"host": 0.0, "sync": 0.0, "other": 0.0}
    assert ("no SM/DRAM counters to split GPU_BOUND: "
            "SM and DRAM sampling was turned off (metrics=False)") in d["reasons"]


def test_zero_length_work_has_no_busy_share_and_no_verdict(run_trace):
    """A kernel that began and ended at the same nanosecond: no busy time
    and no idle time, so no busy share to judge: NO_GPU_WORK, not a crash."""
    s = run_trace(kernels=[kernel(1_000, 1_000, 1)])
    assert (s["gpu"]["kernels"], s["gaps"]["busy_pct"]) == (1, None)
    assert s["diagnosis"]["verdict"] == "NO_GPU_WORK"
    assert s["diagnosis"]["reasons"][0] == "GPU busy -% of its time line (0.000 ms busy, " \
                                           "0.000 ms idle in 0 gaps)"


def test_idle_shares_and_the_severe_threshold_in_the_reasons(run_trace):
    """Three gaps of 30 us each, one per cause, 1 us kernels: each cause
    holds a third of the idle time (33.3%, one decimal); the gaps line
    names the severe threshold (custom: 25 us), not the normal one."""
    kernels = [kernel(10_000 + 31_000 * i, 11_000 + 31_000 * i, i + 1) for i in range(4)]
    starts = [k[1] for k in kernels[:-1]]  # each gap starts where a kernel ended
    apis = [(5_000, 5_001, 1), (starts[0], starts[0] + 1, 2),       # host: launched at the gap
            (starts[1] + 5, starts[1] + 6, 3), (starts[2] - 5, starts[2] - 4, 4)]
    # the second gap: sync (k3 launched while the host waited, not queued before the gap)
    syncs = [(starts[1], starts[1] + 30_000)]
    s = run_trace(kernels=kernels, apis=apis, syncs=syncs, gap_thresholds_us=(10.0, 25.0))
    g, d = s["gaps"], s["diagnosis"]
    assert g["by_cause"] == {"host": 1, "sync": 1, "other": 1}
    share = round(100 * 30_000 / 90_000, 1)
    assert d["evidence"]["idle_share_pct"] == {"host": share, "sync": share, "other": share}
    assert d["reasons"][1] == (f"idle time by cause: host launch late {share}%, host sync "
                               f"{share}%, other {share}%")
    assert d["reasons"][2].startswith(f"gaps: 3 severe (> 25 us), 0 warning, 0 normal;")


def test_the_reasons_count_the_steps_that_agree(inject, test_clock):
    """Three steps of 1 ms (clock reads 1-2, 3-4, 5-6).  Kernel i + 1 is
    launched 10 ns into step i and runs 90 ns later; kernel 0 before the
    steps.  The gaps before kernels 1 and 2 began before their launch
    (host: steps 0 and 1 launch bound); a host wait covers the gap before
    kernel 3 (step 2 sync bound).  The loop: host 2/3 of the idle time,
    launch bound; the reasons say 2 of the 3 steps agree."""
    test_clock.set(MS, MS)
    t = test_clock.at
    with loopscope.profile() as prof:
        for _ in range(3):
            with prof.step():
                pass
        launches = [t(0) + 10] + [t(1 + 2 * i) + 10 for i in range(3)]
        kernels = [kernel(a + 100, a + 200, corr) for corr, a in enumerate(launches, start=1)]
        inject("kernel", kernels)
        inject("api", [(a, a + 1, corr) for corr, a in enumerate(launches, start=1)])
        inject("sync_record", [(t(5) - 500, t(5) + 150)])  # over the last gap
    s = prof.summary()
    assert s["gaps"]["by_cause"] == {"host": 2, "sync": 1, "other": 0}
    verdicts = [st["verdict"] for st in s["steps"]]
    assert verdicts == ["CPU_LAUNCH_BOUND", "CPU_LAUNCH_BOUND", "SYNC_BOUND"]
    loop = s["diagnosis"]["verdict"]
    assert loop == "CPU_LAUNCH_BOUND"
    assert f"{verdicts.count(loop)} of {len(verdicts)} steps read {loop}" in s["diagnosis"]["reasons"]
    # no counters here either, but only GPU_BOUND needs them to be split
    assert not [r for r in s["diagnosis"]["reasons"] if r.startswith("no SM/DRAM counters")]


def five_sites():
    """Five sync sites in a step, site i blocking (i + 1) ms, and one
    outside every step blocking 10 ms (the most costly, but no step)."""
    waits = [c_callable([("cudaDeviceSynchronize", MS * (i + 1))]) for i in range(5)]
    outside = c_callable([("cudaDeviceSynchronize", 10 * MS)])
    with loopscope.profile() as prof:
        outside()
        with prof.step():
            waits[0](), waits[1](), waits[2](), waits[3](), waits[4]()
        _testhooks._inject("kernel", [kernel(1_000, 2_000, 1)])
    return prof.summary()


def test_the_most_costly_site_and_the_syncs_to_remove():
    """The reason names the most costly site (the one outside the steps);
    the action lists the three most costly sites inside steps, in order."""
    s = five_sites()
    syncs, d = s["syncs"], s["diagnosis"]
    sites = syncs["sites"]
    assert [x["blocked_ms"] for x in sites] == [10.0, 5.0, 4.0, 3.0, 2.0, 1.0]
    assert (syncs["count"], syncs["in_steps"]) == (6, 5)
    assert (f"6 host-device syncs blocked the host for {syncs['blocked_ms']:.3f} ms (5 inside "
            f"steps); most costly: {format_site(sites[0])}") in d["reasons"]
    in_steps = [x for x in sites if x["steps"]]
    assert d["actions"][1:] == ["remove these syncs from the loop: "
                                + "; ".join(format_site(x) for x in in_steps[:3])]


@pytest.fixture
def host_ms(monkeypatch):
    """The profile's wall time scripted to 7 ms (perf_counter at enter and exit)."""
    reads = iter([0, 7 * MS])
    monkeypatch.setattr("loopscope._profile.time",
                        types.SimpleNamespace(perf_counter_ns=lambda: next(reads)))
    return 7.0


def counters_only(test_clock, figures, steps=(), wait_ns=1):
    """trace=False: one PM sample over reads 0-20 (1 ms ticks); steps[i]
    says whether step i waits in a device sync."""
    test_clock.set(MS, MS)
    wait = c_callable([("cudaDeviceSynchronize", wait_ns)])
    with loopscope.profile(trace=False) as prof:
        for waits in steps:
            with prof.step():
                if waits:
                    wait()
        _testhooks._inject("sample", [sample(test_clock.at(0), test_clock.at(20), **figures)])
    return prof.summary()


def test_counters_only_evidence_is_rounded_to_the_microsecond(test_clock, host_ms):
    """GR active 12.34% over a 7 ms loop: the GPU idled 7 x 0.8766 ms,
    6.136 ms to three decimals."""
    s = counters_only(test_clock, dict(sm_active_pct=5, dram_throughput_pct=2,
                                       gr_active_pct=12.34))
    e = s["diagnosis"]["evidence"]
    assert (s["host_ms"], e["busy_pct"]) == (host_ms, 12.34)
    assert e["idle_ms"] == round(host_ms * (1 - 12.34 / 100), 3) == 6.136


def test_counters_only_a_busy_gpu_has_no_sync_share(test_clock):
    """GR active 100%: no idle time, so the syncs' share of it is 0, not a
    division by zero; the step that waited is counted."""
    s = counters_only(test_clock, dict(sm_active_pct=90, dram_throughput_pct=10,
                                       gr_active_pct=100), steps=[True], wait_ns=1_000)
    d = s["diagnosis"]
    assert s["syncs"]["count"] == 1
    assert (d["evidence"]["idle_ms"], d["evidence"]["sync_share_of_idle_pct"]) == (0.0, 0.0)
    assert d["verdict"] == "COMPUTE_BOUND"


@pytest.mark.parametrize("dram, verdict", [(80.0, "MEMORY_BOUND"), (10.0, "COMPUTE_BOUND")])
def test_only_a_memory_bound_action_quotes_dram(test_clock, dram, verdict):
    """The action of a memory-bound loop starts with its DRAM figure; any
    other verdict's action quotes no DRAM figure (a compute-bound one with
    no tensor counter says tensor activity is unknown: issue 39)."""
    s = counters_only(test_clock, dict(sm_active_pct=90, dram_throughput_pct=dram,
                                       gr_active_pct=100))
    d = s["diagnosis"]
    assert d["verdict"] == verdict
    prefix = f"DRAM runs at {dram:.1f}% of peak while the GPU works: "
    assert d["actions"][0].startswith(prefix) == (verdict == "MEMORY_BOUND")
    if verdict == "MEMORY_BOUND":
        assert d["actions"][0].removeprefix(prefix) == \
            loopscope.figures._verdicts.VERDICTS[verdict].action
    else:
        assert "tensor-core activity is unknown" in d["actions"][0]


def test_counters_only_steps_without_samples_are_not_counted(test_clock, host_ms):
    """Counters only: steps 0-1 inside the one PM sample, step 2 after it.
    Step 0 waited (SYNC_BOUND), step 1 did not (CPU_LAUNCH_BOUND), step 2
    has no figures and no verdict: the reasons count 1 of 2 steps."""
    test_clock.set(MS, MS)
    wait = c_callable([("cudaDeviceSynchronize", 3 * MS)])
    with loopscope.profile(trace=False) as prof:
        for i in range(3):
            with prof.step():  # reads 1-3 (the wait reads one), 4-5, 6-7
                if i == 0:
                    wait()
        # the sample ends before step 2 begins
        _testhooks._inject("sample", [sample(test_clock.at(0), test_clock.at(5) + 1,
                                                  sm_active_pct=5, dram_throughput_pct=2,
                                                  gr_active_pct=20)])
    s = prof.summary()
    verdicts = [st["verdict"] for st in s["steps"]]
    judged = [v for v in verdicts if v is not None]
    loop = s["diagnosis"]["verdict"]
    assert verdicts[2] is None and len(judged) == 2
    assert f"{judged.count(loop)} of {len(judged)} steps read {loop}" in s["diagnosis"]["reasons"]
    assert loop in judged and judged.count(loop) == 1


NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


@pytest.mark.parametrize("comm_ns, shown", [(20_000, True), (19_900, False)])
def test_a_fifth_of_the_busy_time_in_collectives_is_a_reason(run_trace, comm_ns, shown):
    """A collective kernel and a compute kernel, 100 us busy in all: the
    reason about collectives comes from 20% of the busy time, not below."""
    compute_ns = 100_000 - comm_ns
    s = run_trace(kernels=[kernel(1_000, 1_000 + comm_ns, 1, NCCL),
                           kernel(1_000 + comm_ns, 101_000, 2, "gemm")])
    gpu = s["gpu"]
    assert (gpu["comm_ms"], gpu["compute_ms"], gpu["busy_ms"]) == (comm_ns / MS, compute_ns / MS, 0.1)
    lines = [r for r in s["diagnosis"]["reasons"] if "in collectives" in r]
    share = 100 * comm_ns / 100_000
    assert (share >= 20) == shown
    assert lines == ([f"GPU busy 100.0%, of which {share:.1f}% in collectives ({comm_ns / MS:.3f} "
                      f"ms; compute {compute_ns / MS:.1f} ms): time in a collective includes "
                      "waiting for the slowest rank; rank 0 of a gathered profile names it"]
                     if shown else [])
