"""GRAPH_CAPTURE (issue 39, "a verdict agrees with the evidence it prints"):
a profile most of whose launch calls ran nothing on the GPU recorded a
CUDA-graph capture, so the loop and its steps read GRAPH_CAPTURE with the
launch counts as evidence, not a verdict about the capture's few warm-up
kernels.  The traces are synthetic Kineto files; the expected counts are
taken from their events, written here."""
from __future__ import annotations

import os
import re

import pytest

import loopscope
from loopscope.views import _html, _report
from trace_fixtures import trace_doc, us, write


def capture_trace(steps):
    """A Kineto trace of one ProfilerStep per item of `steps`, each
    (launch calls, of them the ones that ran a kernel): the kernels run
    back to back (1 us gaps, launch shapes unknown), the other launches
    (into a capturing stream) run nothing."""
    events, corr = [], 1
    for i, (launches, ran) in enumerate(steps):
        t0 = 1_000_000 * i
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}",
                       "pid": 1, "tid": 1, "ts": us(t0), "dur": us(900_000)})
        for k in range(launches):
            at = t0 + 1_000 + 1_000 * k
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                           "pid": 1, "tid": 1, "ts": us(at), "dur": us(500),
                           "args": {"correlation": corr}})
            if k < ran:
                events.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,
                               "ts": us(t0 + 600_000 + 11_000 * k), "dur": us(10_000),
                               "args": {"correlation": corr, "device": 0, "stream": 7}})
            corr += 1
    return trace_doc(events)


def counts(doc):
    """(launch calls that ran nothing, launch calls) from the events."""
    events = doc["traceEvents"]
    ran = {e["args"]["correlation"] for e in events if e["cat"] == "kernel"}
    launches = [e["args"]["correlation"] for e in events if e["name"] == "cudaLaunchKernel"]
    return sum(1 for c in launches if c not in ran), len(launches)


def test_a_capture_reads_graph_capture_with_its_counts(tmp_path):
    """51 of 100 launch calls ran nothing: a capture; its reasons give the
    counts and what the GPU ran, its one step reads the same."""
    doc = capture_trace([(100, 49)])
    idle, calls = counts(doc)
    s = loopscope.analyze(write(tmp_path / "c.json", doc))
    d = s["diagnosis"]
    assert d["verdict"] == "GRAPH_CAPTURE"
    assert (d["evidence"]["idle_launches"], d["evidence"]["launch_calls"]) == (idle, calls) \
        == (51, 100)
    assert d["reasons"][0].startswith(f"{idle} of {calls} launch calls ran nothing on the GPU")
    assert d["reasons"][1].startswith("the GPU ran 49 ops for 0.490 ms")  # 49 x 10 us
    assert [st["verdict"] for st in s["steps"]] == ["GRAPH_CAPTURE"]
    assert "1 of 1 steps read GRAPH_CAPTURE" in d["reasons"]
    assert "profile the loop of graph replays" in d["actions"][0]
    assert not any(p["notable"] for p in d["projections"])


def test_just_below_the_cut_off_a_loop_keeps_its_verdict(tmp_path):
    """50 of 100 launch calls ran nothing: not more than half, so the loop
    reads what it reads with every launch running (busy, no counters, no
    launch shapes: GPU_BOUND)."""
    below = loopscope.analyze(write(tmp_path / "b.json", capture_trace([(100, 50)])))
    every = loopscope.analyze(write(tmp_path / "e.json", capture_trace([(50, 50)])))
    assert counts(capture_trace([(100, 50)])) == (50, 100)
    assert below["diagnosis"]["verdict"] == every["diagnosis"]["verdict"] == "GPU_BOUND"
    assert [st["verdict"] for st in below["steps"]] == ["GPU_BOUND"]
    assert "idle_launches" not in below["diagnosis"]["evidence"]


def test_the_steps_of_a_capture_follow_the_loop(tmp_path):
    """A capture step (300 launches, 2 ran) among steps that ran all their
    launches (10 each) and one that launched nothing: 298 of 330 launch
    calls ran nothing, so every step with GPU work reads GRAPH_CAPTURE,
    the empty one NO_GPU_WORK, and the steps' count says so."""
    doc = capture_trace([(300, 2), (10, 10), (0, 0), (10, 10), (10, 10)])
    idle, calls = counts(doc)
    assert (idle, calls) == (298, 330)
    s = loopscope.analyze(write(tmp_path / "m.json", doc))
    d = s["diagnosis"]
    assert d["verdict"] == "GRAPH_CAPTURE"
    verdicts = [st["verdict"] for st in s["steps"]]
    assert verdicts == ["GRAPH_CAPTURE", "GRAPH_CAPTURE", "NO_GPU_WORK", "GRAPH_CAPTURE",
                        "GRAPH_CAPTURE"]
    assert "4 of 5 steps read GRAPH_CAPTURE" in d["reasons"]
    assert any(r.startswith("1 of 5 steps read NO_GPU_WORK (the first, step 2")
               and r.endswith(f"{idle} of {calls} launch calls ran nothing")
               for r in d["reasons"])
    report = _report.format_report(s)
    assert "\nGRAPH CAPTURE: " in report  # the headline
    rows = [line.split()[-1] for line in report.splitlines()
            if re.match(r"\s+\d+ ProfilerStep#\d+ ", line)]
    assert rows == verdicts  # the step table


@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="the HTML view draws with matplotlib, which dies under CI's preloaded ASan")
@pytest.mark.parametrize("steps", [[(100, 49)], [(300, 2), (10, 10)]])
def test_the_views_show_the_capture(tmp_path, steps):
    s = loopscope.analyze(write(tmp_path / "v.json", capture_trace(steps)))
    page = _html.render(s)
    assert ">GRAPH CAPTURE</div>" in page
    assert "GRAPH_CAPTURE" in _report.short_text(s)
