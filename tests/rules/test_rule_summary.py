"""Rules of the summary's own sections at their edges: how many kernels
top_kernels names, and the PM costs of a run that did no PM sampling.
Expected values from plain Python over the same input."""
from __future__ import annotations

import loopscope
from loopscope import _testhooks

from fakes import kernel

TOP = 15  # summary["top_kernels"] names this many kernels (the rest only count in the shares)


def test_top_kernels_names_the_fifteen_that_took_the_most_time(run_trace):
    """Sixteen kernels of different names and lengths, one after another:
    the longest fifteen, longest first, each with its share of all kernel
    time; the shortest is left out but still counts in the shares."""
    kernels, t = [], 1_000
    for i in range(TOP + 1):
        length = 1_000 * (i + 1)
        kernels.append(kernel(t, t + length, i + 1, name=f"k{i:02d}"))
        t += length + 100
    s = run_trace(kernels=kernels)
    total = sum(k[1] - k[0] for k in kernels)
    longest = sorted(kernels, key=lambda k: k[1] - k[0], reverse=True)[:TOP]
    assert [(k["name"], k["count"], k["share_pct"]) for k in s["top_kernels"]] == [
        (k[5], 1, round(100 * (k[1] - k[0]) / total, 2)) for k in longest]
    assert "k00" not in {k["name"] for k in s["top_kernels"]}


def test_a_run_without_pm_sampling_costs_nothing_for_it():
    """metrics=False: no decode, no set-up, no start delay (0, not a
    placeholder)."""
    with loopscope.profile(metrics=False) as prof:
        pass
    o = prof.summary()["overhead"]
    assert (o["decode_ms"], o["metrics_setup_ms"], o["metrics_start_delay_ms"]) == (0.0, 0.0, 0.0)


# The host cost of each thing the profile does inside the loop, as measured
# on an H200 host (_summary.IN_LOOP_COST_US's comment; README's overhead
# section): pinned here, since the estimate is a reported figure.
COST_US = {"op": 0.65, "launch_callback": 0.11, "blocking_call": 2.0, "range": 0.25}


def test_the_in_loop_estimate_adds_the_measured_costs():
    """3 kernels, 4 blocking calls, 1 range, no launch callback (injected
    kernels have none): the estimate is the counts times the measured costs,
    and its sentence says so."""
    ops, calls, ranges = 3, 4, 1
    with loopscope.profile() as prof:
        _testhooks._inject("kernel", [kernel(1_000 + 2_000 * i, 2_000 + 2_000 * i, i + 1)
                                 for i in range(ops)])
        _testhooks._inject_calls([("cudaDeviceSynchronize", 1_000)] * calls)
        for _ in range(ranges):
            with loopscope.range("r"):
                pass
    o = prof.summary()["overhead"]
    us = ops * COST_US["op"] + calls * COST_US["blocking_call"] + ranges * COST_US["range"]
    assert o["in_loop_estimate_ms"] == round(us / 1e3, 3) == 0.01
    assert o["in_loop_estimate"] == (
        f"{ops} GPU ops x {COST_US['op']} us + 0 launch callbacks x "
        f"{COST_US['launch_callback']} us + {calls} blocking calls x {COST_US['blocking_call']} us"
        f" + {ranges} ranges x {COST_US['range']} us (host costs measured on an H200)")
