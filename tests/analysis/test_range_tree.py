"""summary["ranges"] as a tree aggregated over steps, on the scripted clock
with synthetic kernels: exact host and GPU times, the step prefix taken off,
ops counted once per name, gap figures per name, and the report's tree.

With `test_clock`, clock read n is 1_000_000 + n * 1_000 (read 0: profile
start, then one read per range enter and exit)."""
from __future__ import annotations

import re
import threading

import pytest

import loopscope
from loopscope import _testhooks


def two_steps(clock):
    """Two steps of: Step_<i>/Embed (prefixed by hand), then Block holding
    Block/MLP twice; kernels launched in each, one gap per kernel.

        step 0 [t1, t10]: Embed [t2,t3] Block [t4,t9] MLP [t5,t6] MLP [t7,t8]
        step 1 [t11,t20]: Embed [t12,t13] Block [t14,t19] MLP [t15,t16] MLP [t17,t18]
    """
    t = clock.at
    with loopscope.profile() as prof:
        for i in range(2):
            with prof.step():
                with loopscope.range(f"Step_{i}/Embed"):
                    pass
                with loopscope.range("Block"):
                    with loopscope.range("Block/MLP"):
                        pass
                    with loopscope.range("Block/MLP"):
                        pass
        _testhooks._inject("api", [
            (t(2) + 100, t(2) + 200, 1),    # step 0 Embed
            (t(5) + 100, t(5) + 200, 2),    # step 0 MLP (first)
            (t(7) + 100, t(7) + 200, 3),    # step 0 MLP (second)
            (t(8) + 500, t(8) + 600, 4),    # step 0 Block, after the second MLP
            (t(12) + 100, t(12) + 200, 5),  # step 1 Embed
            (t(15) + 100, t(15) + 200, 6),  # step 1 MLP (first); the second launches nothing
        ])
        _testhooks._inject("kernel", [
            (3_000_000, 3_010_000, 0, 7, 1, "embed0"),
            (3_020_000, 3_040_000, 0, 7, 2, "mlp0a"),   # gap 10 us before
            (3_050_000, 3_060_000, 0, 7, 3, "mlp0b"),   # gap 10 us before
            (3_060_000, 3_065_000, 0, 7, 4, "block0"),  # back to back: no gap
            (4_000_000, 4_010_000, 0, 7, 5, "embed1"),  # gap 935 us before
            (4_100_000, 4_130_000, 0, 7, 6, "mlp1a"),   # gap 90 us before
        ])
    return prof


def by_name(summary):
    return {r["name"]: r for r in summary["ranges"]}


def test_ranges_aggregate_over_steps_into_a_tree(test_clock):
    """One entry per name without the step prefix, in order of first use,
    with its parent's name and its depth below the step."""
    s = two_steps(test_clock).summary()
    assert [(r["name"], r["parent"], r["depth"], r["count"], r["step_prefixed"])
            for r in s["ranges"]] == [
        ("Embed", None, 0, 2, True),
        ("Block", None, 0, 2, False),
        ("Block/MLP", "Block", 1, 4, False),
    ]
    assert all(not r["name"].startswith("Step_") for r in s["ranges"])


def test_range_host_and_gpu_times_are_exact(test_clock):
    """Host time sums the ranges; GPU time is the busy time of the kernels
    launched inside any of them; span sums each range's first-to-last."""
    r = by_name(two_steps(test_clock).summary())
    embed, block, mlp = r["Embed"], r["Block"], r["Block/MLP"]
    assert (embed["host_ms"], embed["gpu_ms"], embed["gpu_span_ms"], embed["kernels"]) == (
        0.002, 0.02, 0.02, 2)
    assert (block["host_ms"], block["gpu_ms"], block["gpu_span_ms"], block["kernels"]) == (
        0.01, 0.065, 0.075, 4)          # 20 + 10 + 5 + 30 us; spans 45 + 30 us
    assert (mlp["host_ms"], mlp["gpu_ms"], mlp["gpu_span_ms"], mlp["kernels"]) == (
        0.004, 0.06, 0.06, 3)           # the second MLP of step 1 launched nothing
    assert (mlp["memcpys"], mlp["memsets"], mlp["sm_active_pct"], mlp["dram_pct"]) == (
        0, 0, None, None)


def test_range_gap_figures(test_clock):
    """A name owns the gaps ended by kernels launched inside it, with the
    gap dict of the steps (shape_gaps), percentiles over all its gaps."""
    s = two_steps(test_clock).summary()
    r = by_name(s)
    g = r["Block/MLP"]["gaps"]
    assert set(g) == set(s["steps"][0]["gaps"])
    assert (g["count"], g["normal"], g["warning"], g["severe"]) == (3, 2, 0, 1)
    assert (g["p50_us"], g["p99_us"], g["max_us"], g["mean_us"]) == (10.0, 90.0, 90.0, 36.667)
    assert (g["idle_ms"], g["busy_ms"]) == (0.11, 0.06)
    assert g["by_cause"] == {"host": 0, "sync": 0, "other": 3}
    e = r["Embed"]["gaps"]
    assert (e["count"], e["severe"], e["max_us"]) == (1, 1, 935.0)
    assert r["Block"]["gaps"]["count"] == 3  # the same three: block0 followed mlp0b directly


def test_nested_ranges_of_one_name_count_each_kernel_once(test_clock):
    """A name inside itself (recursion): its kernel counts once for the name;
    the entry has no parent of its own name."""
    t = test_clock.at
    with loopscope.profile() as prof:
        with prof.step():                      # [t1, t6]
            with loopscope.range("R"):         # [t2, t5]
                with loopscope.range("R"):     # [t3, t4]
                    pass
        _testhooks._inject("api", [(t(3) + 100, t(3) + 200, 1)])
        _testhooks._inject("kernel", [(5_000_000, 5_004_000, 0, 7, 1, "k")])
    (r,) = prof.summary()["ranges"]
    assert (r["name"], r["count"], r["host_ms"], r["kernels"], r["gpu_ms"], r["parent"]) == (
        "R", 2, 0.004, 1, 0.004, None)
    assert r["gpu_span_ms"] == 0.008  # spans add up per range: 4 us each


def test_ranges_of_another_thread_lose_the_prefix_of_the_running_step(test_clock):
    """A range on another thread (no parent, like a backward hook on
    autograd's thread) loses the prefix of the step running when it began;
    after the step, nothing is taken off."""
    def worker():
        with loopscope.range("Step_0/worker"):  # [t2, t3]
            pass

    with loopscope.profile() as prof:
        with prof.step():                        # [t1, t4]
            thread = threading.Thread(target=worker)
            thread.start()
            thread.join()
        with loopscope.range("Step_0/after"):    # [t5, t6]: no step runs then
            pass
    names = [(r["name"], r["step_prefixed"]) for r in prof.summary()["ranges"]]
    assert names == [("worker", True), ("Step_0/after", False)]


def test_range_groups_unit():
    """The model's range groups on ranges injected by hand: steps get none,
    keys lose the prefix of the enclosing step only, parents come from the
    first occurrence; a range with no parent (another thread's) takes the
    step running when it began on another thread."""
    main, other = 11, 22
    records = [  # (start, end, name, parent, step, thread)
        (10, 19, "S0", -1, 0, main),            # 0: step 0
        (11, 14, "S0/a", 0, -1, main),          # 1: a
        (12, 13, "S0/a/b", 1, -1, main),        # 2: a/b under a
        (15, 16, "S1/a", 0, -1, main),          # 3: prefix of another step: kept
        (20, 29, "S1", -1, 1, main),            # 4: step 1
        (21, 22, "S1/a", 4, -1, main),          # 5: a again
        (25, 26, "S1/a", -1, -1, other),        # 6: no parent (another thread), inside S1's time
        (30, 33, "x", -1, -1, main),            # 7: outside any step
        (31, 32, "S1/a/b", 7, -1, main),        # 8: under x: no step around it -> key "S1/a/b"
    ]
    with loopscope.profile() as prof:
        assert _testhooks._inject("range", records) == len(records)
    model = prof.model
    assert [r["group"] for r in model.ranges()] == [None, 0, 1, 2, None, 0, 0, 3, 4]
    assert [r["step"] for r in model.ranges()] == [0, None, None, None, 1, None, None, None, None]
    assert [(g["name"], g["parent"], g["depth"], g["step_prefixed"], g["count"], g["host_ns"])
            for g in model.groups()] == [
        ("a", -1, 0, True, 3, 3 + 1 + 1), ("a/b", 0, 1, True, 1, 1), ("S1/a", -1, 0, False, 1, 1),
        ("x", -1, 0, False, 1, 3), ("S1/a/b", 3, 1, False, 1, 1)]


def test_model_steps_argument_is_checked(test_clock):
    """Capture.model(steps=...) wants the indices of ranges, each once."""
    with loopscope.profile() as prof:
        with prof.step():
            with loopscope.range("a"):
                pass
    capture = prof.capture
    assert capture.range_records() == [("Step_0", -1, 0, 1_001_000, 1_004_000),
                                       ("a", 0, None, 1_002_000, 1_003_000)]
    assert [s["name"] for s in capture.model().steps()] == ["Step_0"]
    assert [s["name"] for s in capture.model(steps=[1]).steps()] == ["a"]
    assert [g["name"] for g in capture.model(steps=[1]).groups()] == ["Step_0"]
    assert capture.model(steps=[]).steps() == []
    with pytest.raises(ValueError, match=r"steps\[0\] is 2: must be the index of one of the "
                                         r"capture's 2 ranges"):
        capture.model(steps=[2])
    with pytest.raises(ValueError, match=r"steps\[1\] is 'a'"):
        capture.model(steps=[0, "a"])
    with pytest.raises(ValueError, match=r"steps\[0\] is -1"):
        capture.model(steps=[-1])
    with pytest.raises(ValueError, match="given twice"):
        capture.model(steps=[1, 1])
    with pytest.raises(TypeError, match="sequence of range indices"):
        capture.model(steps=5)
    with pytest.raises(ValueError, match="gap thresholds must satisfy"):
        capture.model(30.0, 20.0)


def test_report_draws_the_tree(test_clock, monkeypatch):
    """The report lists the ranges under their parents with totals; hidden
    levels are summed up by their heaviest names (GPU time when traced)."""
    from loopscope.views import _report

    prof = two_steps(test_clock)
    report = prof.report()
    block = report.index("Ranges (totals over 2 steps")
    lines = report[block:].split("\n\n")[0].splitlines()[1:]
    assert [re.sub(r"\s+", " ", line).strip() for line in lines] == [
        "Embed x2 host 0.002 ms GPU 0.020 ms kernels 2",
        "Block x2 host 0.010 ms GPU 0.065 ms kernels 4",
        "└─ Block/MLP x4 host 0.004 ms GPU 0.060 ms kernels 3",
    ]
    monkeypatch.setattr(_report, "MAX_RANGE_ROWS", 2)
    report = prof.report()
    lines = report[report.index("Ranges ("):].split("\n\n")[0].splitlines()
    assert lines[3] == ("  (1 deeper ranges not shown: depth > 0; heaviest, GPU ms: "
                        "Block/MLP 0.060)")


def test_report_tree_stays_short_for_big_models(test_clock, monkeypatch):
    """Whole levels are shown while they fit; deeper ones are summed up in
    one line; a top level that does not fit shows its heaviest names."""
    from loopscope.views import _report

    with loopscope.profile() as prof:
        with prof.step():
            for i in range(3):
                with loopscope.range(f"L{i}"):
                    for j in range(4):
                        with loopscope.range(f"L{i}/m{j}"):
                            pass
    monkeypatch.setattr(_report, "MAX_RANGE_ROWS", 5)
    report = prof.report()
    tree = report[report.index("Ranges ("):].splitlines()
    assert [line.split()[0] for line in tree[1:4]] == ["L0", "L1", "L2"]
    assert tree[4] == ("  (12 deeper ranges not shown: depth > 0; heaviest, host ms: "
                       "L0/m0 0.001, L0/m1 0.001, L0/m2 0.001, L0/m3 0.001, L1/m0 0.001)")
    monkeypatch.setattr(_report, "MAX_RANGE_ROWS", 2)
    tree = prof.report()
    tree = tree[tree.index("Ranges ("):].splitlines()
    assert [line.split()[0] for line in tree[1:3]] == ["L0", "L1"]  # equal host times: stable order
    assert tree[3] == "  (13 ranges not shown: top 2 by host_ms)"
