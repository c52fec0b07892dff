"""prof.export_trace(path): the Chrome/Perfetto JSON of a profile, event by
event, on the scripted clock with synthetic records (times in us from the
profile start)."""
from __future__ import annotations

import json
import threading

import loopscope
import loopscope._trace_export
from loopscope import _core


SYNC = (1_004_200, 1_201_500, 7)  # a host wait: (start, end, stream)


def test_trace_events_exactly(test_clock, tmp_path):
    t = test_clock.at
    with loopscope.profile() as prof:          # start: read 0 = 1_000_000 ns
        with prof.step():                      # reads 1..4
            with loopscope.range("Attn"):      # reads 2..3
                pass
        _core._inject("api", [(t(2) + 100, t(2) + 600, 1, 9)])
        _core._inject("kernel", [
            (1_010_000, 1_012_000, 0, 7, 1, "gemm"),
            (1_042_000, 1_043_000, 0, 9, 2, "softmax"),   # 30 us after gemm: a warning gap
        ])
        _core._inject("memcpy", [(1_200_000, 1_201_000, 0, 7, 3, "DtoH", 4096)])  # 157 us: severe
        # the host waited from after the step (read 4 is its end; the stop
        # reads 5) until the copy was done: a sync record that began before
        # the stop, so the analysis keeps it (one that began after would be
        # shown here but left out of the gaps' causes)
        _core._inject("sync_record", [SYNC])
    path = prof.export_trace(tmp_path / "t.json")
    data = json.loads(open(path).read())
    assert data["displayTimeUnit"] == "ms"
    # the sync overlaps both idle gaps, the GPU is busy 4 us of 191: every
    # gap's cause is `sync` and the loop is sync bound (rule 1: busy below
    # 50%, syncs over at least half of the idle time)
    gaps = [(1_012_000, 1_042_000), (1_043_000, 1_200_000)]
    synced = [g for g in gaps if SYNC[0] < g[1] and SYNC[1] > g[0]]
    busy, span = 2_000 + 1_000 + 1_000, 1_201_000 - 1_010_000
    idle = sum(b - a for a, b in gaps)
    expected = ("SYNC_BOUND" if busy < 0.5 * span and sum(b - a for a, b in synced) >= 0.5 * idle
                else None)
    s = prof.summary()
    assert s["gaps"]["by_cause"] == {"host": 0, "sync": len(synced), "other": 0} == {
        "host": 0, "sync": 2, "other": 0}
    assert s["overhead"]["records_after_stop"] == 0
    assert data["otherData"] == {"producer": "loopscope", "verdicts": [expected],
                                 "sources": ["injected"]}
    x = [(e["cat"], e["name"], e["pid"], e["tid"], e["ts"], e["dur"])
         for e in data["traceEvents"] if e["ph"] == "X"]
    assert x == [
        ("step", "Step_0", 1, 3, 1.0, 3.0),          # range threads after the host lanes
        ("range", "Attn", 1, 3, 2.0, 1.0),
        ("kernel", "gemm", 100, 1, 10.0, 2.0),      # tids: streams numbered from 1
        ("kernel", "softmax", 100, 2, 42.0, 1.0),
        ("memcpy", "DtoH", 100, 1, 200.0, 1.0),
        ("api", "launch", 1, 1, 2.1, 0.5),           # the host's lanes: API 1, syncs 2
        ("sync", "sync (stream 7)", 1, 2, 4.2, 197.3),
        ("gap", "warning gap 30.0 us", 100, 0, 12.0, 30.0),   # a GPU's gaps lane is tid 0
        ("gap", "SEVERE gap 157.0 us", 100, 0, 43.0, 157.0),
    ]
    kernels = {e["name"]: e for e in data["traceEvents"] if e["ph"] == "X" and e["cat"] != "range"}
    assert kernels["DtoH"]["args"] == {"correlation": 3, "bytes": 4096}
    assert kernels["SEVERE gap 157.0 us"]["cname"] == "terrible"
    # one flow arrow: the launch call with correlation 1 -> gemm
    flows = [(e["ph"], e["id"], e["pid"], e["ts"]) for e in data["traceEvents"] if e["ph"] in "sf"]
    assert sorted(flows) == [("f", 1, 100, 10.0), ("s", 1, 1, 2.1)]
    meta = {(e["name"], e["pid"], e.get("tid")): e["args"]["name"]
            for e in data["traceEvents"] if e["ph"] == "M"}
    assert meta[("process_name", 1, None)] == "host"
    assert meta[("process_name", 100, None)] == "GPU 0"
    assert meta[("thread_name", 100, 1)] == "stream 7"
    assert meta[("thread_name", 100, 2)] == "stream 9"
    assert meta[("thread_name", 100, 0)] == "gaps"
    assert meta[("thread_name", 1, 1)] == "CUDA API"
    assert meta[("thread_name", 1, 2)] == "host syncs"
    assert meta[("thread_name", 1, 3)] == f"thread {threading.get_ident()}"


def test_no_gpu_trace_has_the_host_ranges(test_clock, tmp_path):
    with loopscope.profile() as prof:
        with prof.step():
            pass
    data = json.loads(open(prof.export_trace(tmp_path / "t.json")).read())
    assert [(e["cat"], e["name"], e["ts"], e["dur"]) for e in data["traceEvents"] if e["ph"] == "X"] \
        == [("step", "Step_0", 1.0, 1.0)]
    assert data["otherData"]["sources"] == [None]


def test_names_are_escaped_and_two_profiles_share_the_time_line(test_clock, tmp_path):
    """Names with quotes, backslashes, control characters and non-ASCII text
    come back unchanged; two profiles go into one trace on one clock, their
    ranges' threads named once, their devices apart."""
    odd = 'k"q\\b\tn\u00e9\u6f22'
    with loopscope.profile() as first:          # start: read 0 = 1_000_000 ns
        with loopscope.range("r\u00e9\"1"):     # reads 1..2
            pass
        _core._inject("kernel", [(1_010_000, 1_011_000, 0, 7, 1, odd)])
    with loopscope.profile() as second:         # start: read 4
        _core._inject("kernel", [(1_020_000, 1_022_000, 1, 3, 1, "other")])
    path = tmp_path / "t.json"
    loopscope._trace_export.export_trace([first, second], path)
    data = json.loads(path.read_text(encoding="utf-8"))
    x = [(e["cat"], e["name"], e["pid"], e["ts"], e["dur"]) for e in data["traceEvents"]
         if e["ph"] == "X"]
    assert x == [("range", 'r\u00e9"1', 1, 1.0, 1.0), ("kernel", odd, 100, 10.0, 1.0),
                 ("kernel", "other", 101, 20.0, 2.0)]
    ranges = [e for e in data["traceEvents"] if e["ph"] == "X" and e["cat"] == "range"]
    assert ranges[0]["args"] == {"kernels": 0, "profile": 0}
    names = sorted(e["args"]["name"] for e in data["traceEvents"] if e["ph"] == "M")
    assert names == ["CUDA API", "GPU 0", "GPU 1", "gaps", "gaps", "host", "host syncs",
                     "stream 3", "stream 7", f"thread {threading.get_ident()}"]
    assert data["otherData"]["sources"] == ["injected", "injected"]
