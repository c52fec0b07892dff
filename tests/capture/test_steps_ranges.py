"""Steps and ranges on the scripted clock: names, exact host times, which
kernels and gaps each step owns, nesting rules, errors, and the verdict.

With the `test_clock` fixture, clock read n returns 1_000_000 + n * 1_000:
read 0 is the profile start, then one read per range enter and exit."""
from __future__ import annotations

import re
import threading

import pytest

import loopscope
from loopscope import _core, _testhooks


def test_default_step_names_and_host_times(test_clock):
    """Steps are numbered 0..n-1 and named Step_<i>; each lasts two clock reads."""
    with loopscope.profile() as prof:
        for _ in range(3):
            with prof.step():
                pass
    steps = prof.summary()["steps"]
    assert [(s["index"], s["name"], s["host_ms"]) for s in steps] == [
        (0, "Step_0", 0.001), (1, "Step_1", 0.001), (2, "Step_2", 0.001)]
    # no GPU and nothing injected: the GPU fields of a step are None
    assert all(s["gpu_ms"] is None and s["kernels"] is None and s["gaps"] is None
               and s["verdict"] is None for s in steps)


def test_custom_step_names(test_clock):
    """step_name= sets the default; step(name) overrides it; every "{i}" is replaced."""
    with loopscope.profile(step_name="Denoise_{i}") as prof:
        with prof.step():
            pass
        with prof.step("Warmup"):
            pass
        with prof.step("L{i}/x{i}"):
            pass
        with prof.step():
            pass
    assert [(s["index"], s["name"]) for s in prof.summary()["steps"]] == [
        (0, "Denoise_0"), (1, "Warmup"), (2, "L2/x2"), (3, "Denoise_3")]


def test_step_host_time_counts_nested_ranges(test_clock):
    """A step around three ranges spans reads 1..8: 7 us."""
    with loopscope.profile() as prof:
        with prof.step():
            for name in ("a", "b", "c"):
                with loopscope.range(name):
                    pass
    s = prof.summary()
    assert s["steps"][0]["host_ms"] == 0.007
    assert [(r["name"], r["count"], r["host_ms"]) for r in s["ranges"]] == [
        ("a", 1, 0.001), ("b", 1, 0.001), ("c", 1, 0.001)]
    # The stop's own cost is host time (CLOCK_MONOTONIC), not the test clock.
    assert s["overhead"]["stop_ms"] >= 0 and s["overhead"]["stop_phases_ms"]["records"] >= 0
    assert s["overhead"]["ranges"] == 4


def test_step_attribution_of_kernels_and_gaps(test_clock):
    """Kernels belong to the step whose host range holds their launch call;
    a gap belongs to the step of the op that ends it."""
    t = test_clock.at
    with loopscope.profile() as prof:
        with prof.step():                      # [t(1), t(2)]
            pass
        with prof.step():                      # [t(3), t(6)]
            with loopscope.range("Attn"):      # [t(4), t(5)]
                pass
        _testhooks._inject("api", [
            (t(1) + 100, t(1) + 200, 1),       # step 0
            (t(1) + 900, t(1) + 950, 2),       # step 0
            (t(2) + 500, t(2) + 600, 4),       # between the steps
            (t(4) + 500, t(4) + 600, 3),       # step 1, inside Attn
        ])
        _testhooks._inject("kernel", [
            (2_000_000, 2_010_000, 0, 7, 1, "s0a"),
            (2_020_000, 2_030_000, 0, 7, 2, "s0b"),    # gap 10 us -> step 0
            (2_040_000, 2_050_000, 0, 7, 4, "free"),   # gap 10 us -> no step
            (2_100_000, 2_150_000, 0, 7, 3, "s1"),     # gap 50 us -> step 1
            (2_200_000, 2_201_000, 0, 7, 99, "orphan"),  # gap 50 us, no launch -> no step
        ])
    s = prof.summary()
    print(s["steps"])
    step0, step1 = s["steps"]
    assert (step0["host_ms"], step1["host_ms"]) == (0.001, 0.003)
    assert (step0["kernels"], step0["gpu_ms"], step0["gpu_span_ms"]) == (2, 0.02, 0.03)
    assert (step1["kernels"], step1["gpu_ms"], step1["gpu_span_ms"]) == (1, 0.05, 0.05)
    assert (step0["gaps"]["count"], step0["gaps"]["normal"], step0["gaps"]["max_us"]) == (1, 1, 10.0)
    assert (step1["gaps"]["count"], step1["gaps"]["warning"], step1["gaps"]["max_us"]) == (1, 1, 50.0)
    assert step0["gaps"]["busy_pct"] == 66.67
    assert step1["gaps"]["busy_pct"] == 50.0
    assert step0["memcpys"] == 0
    worst = [(w["duration_us"], w["before"], w["step"], w["step_name"]) for w in s["gaps"]["worst"]]
    assert worst == [
        (50.0, "s1", 1, "Step_1"),
        (50.0, "orphan", None, None),
        (10.0, "s0b", 0, "Step_0"),
        (10.0, "free", None, None),
    ]
    # the keys PRODUCT.md names, then those added with instrument() (tree, gaps, span)
    (attn,) = s["ranges"]
    assert {k: attn[k] for k in list(attn)[:7]} == {
        "name": "Attn", "count": 1, "host_ms": 0.001, "gpu_ms": 0.05,
        "kernels": 1, "sm_active_pct": None, "dram_pct": None}
    assert (attn["gpu_span_ms"], attn["memcpys"], attn["memsets"]) == (0.05, 0, 0)
    assert (attn["parent"], attn["depth"], attn["step_prefixed"]) == (None, 0, False)
    assert (attn["gaps"]["count"], attn["gaps"]["warning"], attn["gaps"]["max_us"]) == (1, 1, 50.0)
    assert s["gpu"]["kernels"] == 5
    assert s["gpu"]["ops_without_launch_record"] == 1


def test_step_without_launches_has_no_gpu_work(test_clock, inject):
    """A step that launched nothing reads NO_GPU_WORK with zero GPU time."""
    t = test_clock.at
    with loopscope.profile() as prof:
        with prof.step():   # [t(1), t(2)]
            pass
        with prof.step():   # [t(3), t(4)]
            pass
        inject("api", [(t(1) + 10, t(1) + 20, 1)])
        inject("kernel", [(5_000_000, 5_001_000, 0, 1, 1)])
    busy, idle = prof.summary()["steps"]
    assert (busy["kernels"], busy["gpu_ms"], busy["gaps"]["count"]) == (1, 0.001, 0)
    assert (idle["kernels"], idle["gpu_ms"], idle["gpu_span_ms"]) == (0, 0.0, 0.0)
    assert idle["verdict"] == "NO_GPU_WORK"


def test_ranges_nest_and_aggregate_by_name(test_clock):
    """A kernel launched in B (inside A, inside a step) counts for B, A and
    the step; a name used twice is one entry with count 2."""
    t = test_clock.at
    with loopscope.profile() as prof:
        with prof.step():                       # [t(1), t(8)]
            with loopscope.range("A"):          # [t(2), t(5)]
                with loopscope.range("B"):      # [t(3), t(4)]
                    pass
            with loopscope.range("A"):          # [t(6), t(7)]
                pass
        _testhooks._inject("api", [(t(3) + 500, t(3) + 600, 1), (t(6) + 500, t(6) + 600, 2)])
        _testhooks._inject("kernel", [(3_000_000, 3_010_000, 0, 1, 1, "inB"),
                                 (3_020_000, 3_030_000, 0, 1, 2, "inA")])
    s = prof.summary()
    assert [(r["name"], r["count"], r["host_ms"], r["gpu_ms"], r["kernels"]) for r in s["ranges"]] == [
        ("A", 2, 0.004, 0.02, 2),
        ("B", 1, 0.001, 0.01, 1),
    ]
    assert (s["steps"][0]["kernels"], s["steps"][0]["host_ms"]) == (2, 0.007)
    assert all(r["name"] != "Step_0" for r in s["ranges"])
    report = prof.report()
    # the report draws the ranges as a tree (B under A), with kernel counts
    assert re.search(r"^  A\s+x2\s+host 0\.004 ms  GPU 0\.020 ms  kernels 2$", report, re.M), report
    assert re.search(r"^  └─ B\s+x1\s+host 0\.001 ms  GPU 0\.010 ms  kernels 1$", report, re.M), report


def test_range_objects_are_cached_per_name():
    """loopscope.range(name) returns one reusable object per name."""
    r = loopscope.range("cached")
    assert loopscope.range("cached") is r
    assert loopscope.range("other") is not r
    assert r.name == "cached" and r.step is None
    with r:
        with r:  # re-entrant: the same object nests
            pass


def test_nested_step_raises_and_leaves_state_consistent(test_clock):
    """Entering a step inside a step raises RuntimeError without pushing a
    range; the open step, later ranges and later steps still work."""
    with loopscope.profile() as prof:
        with prof.step():                       # [t(1), t(4)]
            with pytest.raises(RuntimeError, match="do not nest"):
                with prof.step():
                    pass
            with loopscope.range("inner"):      # [t(2), t(3)]
                pass
        with prof.step() as later:              # [t(5), t(6)]
            pass
    s = prof.summary()
    first, second = s["steps"]
    assert (first["index"], first["name"], first["host_ms"]) == (0, "Step_0", 0.003)
    assert second["name"] == f"Step_{later.step}"
    assert second["index"] == later.step and second["host_ms"] == 0.001
    assert [(r["name"], r["count"], r["host_ms"]) for r in s["ranges"]] == [("inner", 1, 0.001)]
    assert s["overhead"]["ranges"] == 3
    assert s["overhead"]["range_mismatches"] == 0
    assert s["overhead"]["ranges_left_open"] == 0


def test_steps_on_two_threads_do_not_conflict(test_clock):
    """The no-nesting rule is per thread: another thread may run a step while
    the main thread's step is open."""
    errors = []

    def worker(prof):
        try:
            with prof.step("Worker_{i}"):       # [t(2), t(3)]
                pass
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    with loopscope.profile() as prof:
        with prof.step():                        # [t(1), t(4)]
            thread = threading.Thread(target=worker, args=(prof,))
            thread.start()
            thread.join()
    assert errors == []
    assert [(s["index"], s["name"], s["host_ms"]) for s in prof.summary()["steps"]] == [
        (0, "Step_0", 0.003), (1, "Worker_1", 0.001)]


def test_exception_in_step_propagates_and_closes_ranges(test_clock):
    """An exception inside a step (and a range) is not swallowed; the ranges
    are closed where it passed, so the summary builds with nothing left open."""
    with pytest.raises(ZeroDivisionError):
        with loopscope.profile() as prof:
            with prof.step():                    # [t(1), t(4)]
                with loopscope.range("boom"):    # [t(2), t(3)]
                    1 / 0
    s = prof.summary()
    assert [(st["name"], st["host_ms"]) for st in s["steps"]] == [("Step_0", 0.003)]
    assert [(r["name"], r["host_ms"]) for r in s["ranges"]] == [("boom", 0.001)]
    assert s["overhead"]["ranges_left_open"] == 0
    assert s["overhead"]["range_mismatches"] == 0


def test_exception_caught_between_steps(test_clock):
    """A step that raised is closed; the next step is recorded normally."""
    with loopscope.profile() as prof:
        with pytest.raises(KeyError):
            with prof.step():                    # [t(1), t(2)]
                raise KeyError("x")
        with prof.step():                        # [t(3), t(4)]
            pass
    assert [(s["index"], s["host_ms"]) for s in prof.summary()["steps"]] == [
        (0, 0.001), (1, 0.001)]


def test_range_left_open_is_closed_at_stop(test_clock):
    """A range entered by hand and never exited ends at the profile's stop."""
    with loopscope.profile() as prof:
        with prof.step():                        # [t(1), t(2)]
            pass
        opened = loopscope.range("never_closed")
        opened.__enter__()                       # t(3); stop is t(4)
    opened.__exit__(None, None, None)            # after the profile: harmless
    s = prof.summary()
    assert s["overhead"]["ranges_left_open"] == 1
    assert [(r["name"], r["host_ms"]) for r in s["ranges"]] == [("never_closed", 0.001)]


def test_range_outside_a_profile_is_harmless():
    """A range with no profile running is NVTX only: no error, nothing recorded."""
    with loopscope.range("outside"):
        assert not _core.active()
    with loopscope.profile() as prof:
        with prof.step():
            pass
    with loopscope.range("outside"):
        pass
    s = prof.summary()
    assert s["ranges"] == []
    assert s["overhead"]["ranges"] == 1
    assert s["overhead"]["range_mismatches"] == 0


@pytest.mark.parametrize("name, error, message", [
    (1, TypeError, "must be a str"),
    (None, TypeError, "must be a str"),
    (b"bytes", TypeError, "must be a str"),
    ("", ValueError, "must not be empty"),
])
def test_range_name_validation(name, error, message):
    """Range names must be non-empty str."""
    with pytest.raises(error, match=message):
        loopscope.range(name)


def test_step_name_validation():
    """Step names must be str; step_name= must be a non-empty str."""
    with loopscope.profile() as prof:
        with pytest.raises(TypeError, match="step name must be a str"):
            prof.step(5)
        with pytest.raises(ValueError, match="must not be empty"):
            prof.step("")
    with pytest.raises(TypeError, match="step_name"):
        loopscope.profile(step_name="")
    with pytest.raises(TypeError, match="step_name"):
        loopscope.profile(step_name=3)


def test_nested_profile_raises_and_the_outer_one_survives(test_clock):
    """A second profile inside a running one raises RuntimeError; the outer
    profile keeps recording."""
    with loopscope.profile() as outer:
        with pytest.raises(RuntimeError, match="already running"):
            with loopscope.profile():
                pass
        with outer.step():
            pass
    assert [s["name"] for s in outer.summary()["steps"]] == ["Step_0"]


def test_profile_lifecycle_errors():
    """summary() before or inside the block, and re-entering a used profile,
    raise RuntimeError."""
    prof = loopscope.profile(trace=False)
    with pytest.raises(RuntimeError, match="has not run yet"):
        prof.summary()
    with prof:
        with pytest.raises(RuntimeError, match="still running"):
            prof.summary()
        with pytest.raises(RuntimeError, match="still running"):
            prof.report()
    assert prof.summary() is prof.summary()  # computed once
    with pytest.raises(RuntimeError, match="already used"):
        with prof:
            pass
    assert not _core.active()


# -- the verdict on synthetic traces ----------------------------------------

def _one_step_trace(clock, kernel_starts, duration, launch_of, syncs=()):
    """One step spanning [2 ms, 3 ms] on a 1 ms clock; kernel i starts at
    kernel_starts[i], lasts `duration`, and is launched at launch_of(i, start)."""
    clock.set(1_000_000, 1_000_000)
    with loopscope.profile() as prof:
        with prof.step():   # [2_000_000, 3_000_000]
            pass
        _testhooks._inject("kernel", [(s, s + duration, 0, 7, i + 1, f"k{i}")
                                 for i, s in enumerate(kernel_starts)])
        _testhooks._inject("api", [(launch_of(i, s), launch_of(i, s) + 500, i + 1)
                              for i, s in enumerate(kernel_starts)])
        if syncs:
            _testhooks._inject("sync_record", list(syncs))
    return prof


LAUNCH_BOUND_STARTS = [2_001_000 + i * 102_000 for i in range(5)]  # 2 us kernels, 100 us gaps


def test_verdict_cpu_launch_bound(test_clock):
    """Short kernels each launched after the GPU went idle: CPU_LAUNCH_BOUND."""
    prof = _one_step_trace(test_clock, LAUNCH_BOUND_STARTS, 2_000, lambda i, s: s - 500)
    s = prof.summary()
    d = s["diagnosis"]
    assert d["verdict"] == "CPU_LAUNCH_BOUND"
    assert s["gaps"]["by_cause"] == {"host": 4, "sync": 0, "other": 0}
    assert (s["gaps"]["count"], s["gaps"]["severe"], s["gaps"]["idle_ms"]) == (4, 4, 0.4)
    assert d["evidence"]["busy_pct"] == 2.44  # 10 us busy of 410 us
    assert d["evidence"]["idle_share_pct"] == {"host": 100.0, "sync": 0.0, "other": 0.0}
    assert "CUDA graph" in d["actions"][0]
    assert "1 of 1 steps read CPU_LAUNCH_BOUND" in d["reasons"]
    step = s["steps"][0]
    assert (step["verdict"], step["kernels"], step["gpu_ms"]) == ("CPU_LAUNCH_BOUND", 5, 0.01)
    assert prof.report().splitlines()[1].startswith("CPU LAUNCH BOUND")


def test_verdict_sync_bound(test_clock):
    """The same trace with a host sync over every gap: SYNC_BOUND."""
    syncs = [(s - 100_000, s) for s in LAUNCH_BOUND_STARTS[1:]]
    prof = _one_step_trace(test_clock, LAUNCH_BOUND_STARTS, 2_000, lambda i, s: s - 500, syncs)
    s = prof.summary()
    assert s["diagnosis"]["verdict"] == "SYNC_BOUND"
    assert s["gaps"]["by_cause"] == {"host": 0, "sync": 4, "other": 0}
    assert s["steps"][0]["verdict"] == "SYNC_BOUND"


def test_verdict_balanced(test_clock):
    """Mostly idle, but every launch came early (cause other): BALANCED."""
    prof = _one_step_trace(test_clock, LAUNCH_BOUND_STARTS, 2_000, lambda i, s: 2_000_100 + i)
    s = prof.summary()
    assert s["gaps"]["by_cause"] == {"host": 0, "sync": 0, "other": 4}
    assert s["diagnosis"]["verdict"] == "BALANCED"


def test_verdict_gpu_bound(test_clock):
    """100 us kernels 5 us apart, all launched early: GPU_BOUND."""
    starts = [2_001_000 + i * 105_000 for i in range(5)]
    prof = _one_step_trace(test_clock, starts, 100_000, lambda i, s: 2_000_100 + i)
    s = prof.summary()
    assert s["diagnosis"]["verdict"] == "GPU_BOUND"
    assert s["gaps"]["busy_pct"] == 96.15  # 500 us of 520 us
    assert (s["gaps"]["count"], s["gaps"]["normal"]) == (4, 4)
    assert s["steps"][0]["verdict"] == "GPU_BOUND"


def test_verdict_no_gpu_work_when_nothing_ran(test_clock, inject):
    """Injected launch records but no op: NO_GPU_WORK, not a division by zero."""
    with loopscope.profile() as prof:
        with prof.step():
            pass
        inject("api", [(test_clock.at(1), test_clock.at(1) + 10, 1)])
    s = prof.summary()
    assert s["source"] == "injected"
    assert s["gpu"]["kernels"] == 0
    assert s["diagnosis"]["verdict"] == "NO_GPU_WORK"
    assert s["steps"][0]["verdict"] == "NO_GPU_WORK"
    assert prof.report().splitlines()[1].startswith("NO GPU WORK")
