"""Real-GPU checks of SM/DRAM sampling and the diagnosis (marked gpu;
skipped with a reason where no GPU is present).  The figures seen are
written down in benchmarks/RESULTS.md; benchmarks/probes/pm_probe.py prints more."""
from __future__ import annotations

import json
import statistics

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU visible to PyTorch", allow_module_level=True)

import loopscope  # noqa: E402
from loopscope.demo import build, eager_loop, graph_loop_factory  # noqa: E402

from expected import busy_gpu_verdict  # noqa: E402

pytestmark = pytest.mark.gpu


def ready(**options):
    """Sets PM sampling up for these options before the measured profile.

    loopscope sets sampling up on its worker thread while the profile's loop
    runs (the first time in a process ~0.3-0.5 s, new options ~0.1 s), and
    samples cover the loop from then on; a test that checks the counters of
    a short loop waits for that first, as a user's second profile would."""
    with loopscope.profile(trace=False, syncs=False, **options) as prof:
        pass
    prof.summary()  # waits for the worker: set-up, start, stop


def summary_of(prof):
    s = prof.summary()
    print(json.dumps({"verdict": s["diagnosis"]["verdict"], "sm": s["sm"], "dram": s["dram"],
                      "metrics": s["metrics"], "metrics_error": s["metrics_error"]}, default=str))
    if s["sm"] is None:
        pytest.fail(f"PM sampling gave no counters: {s['metrics_error']}")
    return s


def test_streaming_copy_reads_memory_bound():
    src = torch.empty(1 << 29, dtype=torch.bfloat16, device="cuda")  # 1 GiB
    dst = torch.empty_like(src)
    dst.copy_(src)
    torch.cuda.synchronize()
    ready()
    with loopscope.profile(metrics=True) as prof:
        for _ in range(10):
            with prof.step():
                for _ in range(20):
                    dst.copy_(src)
        torch.cuda.synchronize()
    s = summary_of(prof)
    assert s["diagnosis"]["verdict"] == "MEMORY_BOUND", s["diagnosis"]
    assert s["dram"]["throughput_busy_pct"] >= 70
    assert s["metrics"]["overflows"] == 0
    assert all(step["verdict"] == "MEMORY_BOUND" for step in s["steps"])


def _fma_kernel():
    """A Triton kernel that keeps each element in a register through
    `iters` fused multiply-adds: compute bound, almost no DRAM traffic (a
    bf16 GEMM is not that: it still reads DRAM at 17-25% on the H200)."""
    triton = pytest.importorskip("triton", reason="the FMA loop is a Triton kernel")
    import triton.language as tl

    @triton.jit
    def fma(x_ptr, n, iters: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        for _ in range(iters):
            x = x * 1.0001 + 0.0001
        tl.store(x_ptr + offs, x, mask=offs < n)

    return triton, fma


def test_fma_loop_reads_compute_bound():
    triton, fma = _fma_kernel()
    n, block = 1 << 20, 1024
    x = torch.rand(n, device="cuda")
    run = lambda: fma[(triton.cdiv(n, block),)](x, n, iters=20000, BLOCK=block)  # noqa: E731
    run()  # compile outside the profile
    torch.cuda.synchronize()
    ready()
    with loopscope.profile(metrics=True) as prof:
        for _ in range(10):
            with prof.step():
                for _ in range(5):
                    run()
        torch.cuda.synchronize()
    s = summary_of(prof)
    print("FMA loop:", s["diagnosis"]["verdict"], "SM active busy", s["sm"]["active_busy_pct"],
          "DRAM busy", s["dram"]["throughput_busy_pct"])
    assert s["diagnosis"]["verdict"] == "COMPUTE_BOUND", s["diagnosis"]
    assert s["sm"]["active_busy_pct"] >= 90
    assert s["dram"]["throughput_busy_pct"] < 10


def test_demo_eager_is_launch_bound_and_graph_replay_is_not():
    model, x = build()
    eager_loop(model, x, 3)
    ready()
    with loopscope.profile(metrics=True) as prof:
        eager_loop(model, x, 10, prof)
    eager = summary_of(prof)
    assert eager["diagnosis"]["verdict"] == "CPU_LAUNCH_BOUND"
    replay = graph_loop_factory(model, x)
    replay(3)
    ready()
    with loopscope.profile(metrics=True) as prof_g:
        replay(10, prof_g)
    graph = summary_of(prof_g)
    # busy (rule 1 does not apply): the verdict of its own counters
    assert graph["diagnosis"]["verdict"] == busy_gpu_verdict(graph), graph["diagnosis"]


def test_sample_and_kernel_clocks_agree():
    """A burst of matmuls between two idle spells: the first sample with SM
    active > 50% contains the first kernel's start (within one interval),
    and the last ends with the last kernel, unless samples were lost: at
    20 us the decoder cannot keep pace on an H200 (48-54 us of host time a
    sample), the hardware buffer overflows and the burst's last ~9 ms go
    (2026-11-29).  Then the profile must say so: an overflow, the note that
    decoding fell behind, and coverage below 100%.  Without an overflow the
    samples' time line has also fallen 6-16 ms short of the kernels' over
    the ~45 ms burst, its start aligned, no sample left out for its length
    (H200, 2026-11-29 21:55Z-21:57Z; not explained): the coverage check
    says so."""
    import time

    n = 8192
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    c = torch.empty_like(a)
    torch.mm(a, a, out=c)
    torch.cuda.synchronize()
    ready(metrics_interval_us=20)
    with loopscope.profile(metrics=True, metrics_interval_us=20) as prof:
        time.sleep(0.005)
        for _ in range(30):
            torch.mm(a, a, out=c)
        torch.cuda.synchronize()
        time.sleep(0.005)
    summary = summary_of(prof)
    kernels = [o for o in prof.capture.ops() if o[0] == "kernel"]
    start, end = min(k[1] for k in kernels), max(k[2] for k in kernels)
    hot = [(s, e) for s, e, v in prof.capture.samples() if v.get("sm_active_pct", 0) > 50]
    assert hot, "no sample saw the burst"
    print({"rise_us": (hot[0][0] - start) / 1e3, "fall_us": (hot[-1][1] - end) / 1e3})
    assert abs(hot[0][0] - start) <= 40_000  # two 20 us intervals
    m = summary["metrics"]
    checks = {c["name"]: c["ok"] for c in summary["checks"]}
    if m["overflows"] == 0 and m["counter_data_full"] == 0:
        assert abs(hot[-1][1] - end) <= 40_000
    elif m["overflows"]:  # lost in the hardware buffer: said, never silent
        assert m["interval_note"] and m["interval_note"].startswith(
            "decoding fell behind the samples at metrics_interval_us=20"), m
        assert summary["sm"]["coverage_pct"] < 100, summary["sm"]
    else:  # no overflow, the end short all the same (H200 18:45Z: 9.5 ms, coverage 78%;
        # 21:55Z: 8.7 ms, 79%): said by the coverage check
        assert checks["coverage"] is False, summary["checks"]
        assert summary["sm"]["coverage_pct"] < 90, summary["sm"]


def test_sampling_does_not_change_clocks():
    """A clock-bound kernel timed with sampling off and on.

    One block of dependent FMAs per SM: its time is iterations x latency /
    SM clock, and it draws too little power to be throttled (a bf16 GEMM
    varied +-5% round to round here, from power capping alone).  The < 1%
    figure the issue asks for is measured in benchmarks/probes/pm_probe.py (part
    `clocks`, in RESULTS.md); this test catches what would matter to every
    user: sampling dropping the clocks (base vs boost is ~30% on an H200)."""
    triton, fma = _fma_kernel()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    x = torch.rand(sms * 128, device="cuda")
    run = lambda: fma[(sms,)](x, x.numel(), iters=200_000, BLOCK=128)  # noqa: E731
    run()  # compile

    def timed() -> float:
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0.record()
        for _ in range(20):
            run()
        t1.record()
        t1.synchronize()
        return t0.elapsed_time(t1)

    def sampled() -> float:
        with loopscope.profile(metrics=True, trace=False, syncs=False) as prof:
            t = timed()
        assert prof.summary()["sm"] is not None, prof.summary()["metrics_error"]
        return t

    for _ in range(3):
        timed()
    ready()
    ratios = []
    for i in range(8):  # alternating order, so any drift falls on both sides
        if i % 2 == 0:
            off = timed()
            ratios.append(sampled() / off)
        else:
            on = sampled()
            ratios.append(on / timed())
    ratio = statistics.median(ratios)
    print({"paired_ratios": [round(r, 4) for r in ratios], "median": ratio})
    assert abs(ratio - 1) < 0.03


def test_counters_only_mode_gives_busy_from_gr_active():
    src = torch.empty(1 << 28, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    torch.cuda.synchronize()
    ready()
    with loopscope.profile(metrics=True, trace=False) as prof:
        for _ in range(5):
            with prof.step():
                for _ in range(20):
                    dst.copy_(src)
        torch.cuda.synchronize()
    s = summary_of(prof)
    assert s["gpu"] is None and s["sm"]["busy_from"] == "gr_active"
    assert s["diagnosis"]["evidence"]["busy_from"] == "gr_active"
    assert s["diagnosis"]["verdict"] == "MEMORY_BOUND"


def test_metrics_false_turns_sampling_off_and_tracing_goes_on():
    x = torch.ones(16, device="cuda")
    torch.cuda.synchronize()
    with loopscope.profile(metrics=False) as prof:
        x.add_(1)  # one elementwise kernel
        torch.cuda.synchronize()
    s = prof.summary()
    assert s["sm"] is None
    assert s["metrics_error"] == "SM and DRAM sampling was turned off (metrics=False)"
    assert (s["gpu"]["kernels"], s["gpu"]["memcpys"], s["gpu"]["memsets"]) == (1, 0, 0)
    assert (s["syncs"]["count"], s["syncs"]["by_kind"]) == (1, {"synchronize": 1})


def test_a_profile_of_a_few_clock_reads_after_the_set_up_is_sampled_from_its_start():
    """tests/hostile row R3 on the GPU: once a profile has set sampling up,
    the sampler runs on (issue 43), so a profile of a few clock reads is
    sampled from its start (before, it ended before the reused sampler's
    start on the worker and read nothing); a longer profile right after is
    sampled too."""
    src = torch.empty(1 << 28, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    torch.cuda.synchronize()
    ready()
    with loopscope.profile(trace=False, syncs=False) as short:
        pass
    s = short.summary()
    print(json.dumps({"short": s["metrics_error"], "metrics": s["metrics"]}, default=str))
    assert s["metrics"]["sampler_reused"] is True
    assert s["overhead"]["metrics_start_delay_ms"] == 0  # sampling ran before it began
    # A profile shorter than one interval may fall between two samples' ends;
    # then it says so, and nothing about a late start.
    if s["sm"] is None:
        assert s["metrics_error"].startswith("PM sampling ran but no sample was decoded"), s
    else:
        assert s["metrics_error"] is None and s["sm"]["active_pct"] < 5, s["sm"]
    with loopscope.profile(trace=False, syncs=False) as longer:
        for _ in range(20):
            dst.copy_(src)
        torch.cuda.synchronize()
    summary_of(longer)
