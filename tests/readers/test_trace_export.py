"""prof.export_trace(path): the Chrome/Perfetto JSON of a profile, event by
event, on the scripted clock with synthetic records (times in us from the
profile start)."""
from __future__ import annotations

import json
import threading

import loopscope
import loopscope.views._trace_export
from loopscope import _testhooks


# a host wait (start, end, stream) from after the step (read 4 is its end; the
# stop reads 5) until the copy was done: it began before the stop, so the
# analysis keeps it (one that began after would be exported but left out of
# the gaps' causes and counted in records_after_stop)
SYNC = (1_004_200, 1_201_500, 7)


def test_trace_events_exactly(test_clock, tmp_path):
    t = test_clock.at
    with loopscope.profile() as prof:          # start: read 0 = 1_000_000 ns
        with prof.step():                      # reads 1..4
            with loopscope.range("Attn"):      # reads 2..3
                pass
        _testhooks._inject("api", [(t(2) + 100, t(2) + 600, 1, 9)])   # a launch by thread 9
        _testhooks._inject("kernel", [
            (1_010_000, 1_012_000, 0, 7, 1, "gemm"),
            (1_042_000, 1_043_000, 0, 9, 2, "softmax"),   # 30 us after gemm: a warning gap
        ])
        # 157 us later: severe; a copy to pageable memory (CUPTI kinds 2 and 1)
        _testhooks._inject("memcpy", [(1_200_000, 1_201_000, 0, 7, 3, None, 4096, 2, 1)])
        _testhooks._inject("sync_record", [SYNC])
    #                                          stop: read 5
    path = prof.export_trace(tmp_path / "t.json")
    data = json.loads(open(path).read())
    assert data["displayTimeUnit"] == "ms"
    assert data["baseTimeNanoseconds"] == t(0)   # Kineto's origin of ts
    summary = prof.summary()
    # the wait overlaps both gaps: both are the sync's
    gaps = [(1_012_000, 1_042_000), (1_043_000, 1_200_000)]
    synced = [g for g in gaps if SYNC[0] < g[1] and SYNC[1] > g[0]]
    assert summary["gaps"]["by_cause"] == {"host": 0, "sync": len(synced),
                                           "other": len(gaps) - len(synced)}
    assert summary["overhead"]["records_after_stop"] == 0
    assert data["otherData"] == {
        "producer": "loopscope", "export_version": 1,
        "verdicts": [summary["diagnosis"]["verdict"]], "sources": ["injected"],
        "span_ns": [0, t(5) - t(0)], "sync_sites": [], "call_sites": [],
        "syncs_error": summary["syncs_error"], "metrics_error": summary["metrics_error"],
        "metrics_interval_us": None,  # no counters sampled
        "in_loop_estimate_ms": summary["overhead"]["in_loop_estimate_ms"]}
    x = [(e["cat"], e["name"], e["pid"], e["tid"], e["ts"], e["dur"])
         for e in data["traceEvents"] if e["ph"] == "X"]
    assert x == [
        ("user_annotation", "Step_0", 1, 3, 1.0, 3.0),   # threads after the host's lanes
        ("user_annotation", "Attn", 1, 3, 2.0, 1.0),
        ("cuda_runtime", "launch", 1, 4, 2.1, 0.5),      # on the tid of its thread (9)
        ("kernel", "gemm", 100, 1, 10.0, 2.0),           # tids: streams numbered from 1
        ("kernel", "softmax", 100, 2, 42.0, 1.0),
        ("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 100, 1, 200.0, 1.0),
        ("cuda_sync", "Sync", 1, 2, 4.2, 197.3),         # the sync records' lane is tid 2
        ("gap", "warning gap 30.0 us", 100, 0, 12.0, 30.0),   # a GPU's gaps lane is tid 0
        ("gap", "SEVERE gap 157.0 us", 100, 0, 43.0, 157.0),
    ]
    by_name = {e["name"]: e for e in data["traceEvents"] if e["ph"] == "X"}
    # gemm's launch (thread 9, no step of its own) fell inside Step_0
    assert by_name["Step_0"]["args"] == {"step": 0, "kernels": 1, "profile": 0}
    assert by_name["Memcpy DtoH (Device -> Pageable)"]["args"] == {
        "correlation": 3, "device": 0, "stream": 7, "bytes": 4096}
    assert by_name["launch"]["args"] == {"correlation": 1}
    assert by_name["Sync"]["args"] == {"stream": 7, "correlation": 0}
    assert by_name["SEVERE gap 157.0 us"]["cname"] == "terrible"
    # one flow arrow: the launch call with correlation 1 -> gemm, Perfetto's
    # v1 flow: "s" on the call's track at its start, "f" bound to the
    # enclosing slice ("bp": "e") at the op's start; same id, name, cat
    flows = [(e["ph"], e["id"], e["pid"], e["tid"], e["ts"], e.get("bp"), e["name"], e["cat"])
             for e in data["traceEvents"] if e["ph"] in "sf"]
    assert sorted(flows) == [("f", 1, 100, 1, 10.0, "e", "launch", "launch"),
                             ("s", 1, 1, 4, 2.1, None, "launch", "launch")]
    meta = {(e["name"], e["pid"], e.get("tid")): e["args"]["name"]
            for e in data["traceEvents"] if e["ph"] == "M"}
    assert meta == {
        ("process_name", 1, None): "host",
        ("process_name", 100, None): "GPU 0",
        ("thread_name", 100, 0): "gaps",
        ("thread_name", 100, 1): "stream 7",
        ("thread_name", 100, 2): "stream 9",
        ("thread_name", 1, 2): "CUDA sync records",
        ("thread_name", 1, 3): f"thread {threading.get_ident()}",
        ("thread_name", 1, 4): "thread 9",
    }


def test_counter_tracks_hold_the_samples_on_the_sampled_gpu(test_clock, tmp_path):
    """PM samples become one counter series per figure, on the process of
    the GPU they were taken on, in the summary's units; figures a sample did
    not collect are left out, and the series of a figure whose next sample
    lacks it (or does not follow at once) is ended by a counter_end instant;
    the last sample's values come again at its end, so its length is in the
    trace."""
    samples = [(1_100_000, 1_150_000, {"sm_active_pct": 40.0, "dram_throughput_pct": 12.5}),
               (1_150_000, 1_200_000, {"sm_active_pct": 62.25, "dram_read_gbps": 1234.5}),
               (1_200_000, 1_260_000, {"sm_active_pct": 0.1})]
    with loopscope.profile() as prof:          # start: read 0 = 1_000_000 ns
        _testhooks._inject("kernel", [(1_010_000, 1_012_000, 0, 7, 1, "a"),
                                 (1_020_000, 1_022_000, 3, 1, 2, "b")])
        _testhooks._inject("sample", [(a, b, v, 3) for a, b, v in samples])   # taken on GPU 3
    data = json.loads(open(prof.export_trace(tmp_path / "t.json")).read())
    pid = {e["args"]["name"]: e["pid"] for e in data["traceEvents"]
           if e["ph"] == "M" and e["name"] == "process_name"}
    assert pid["GPU 0"] == 100 and pid["GPU 3"] == 101
    counters = [(e["pid"], e["name"], e["ts"], e["args"]) for e in data["traceEvents"]
                if e["ph"] == "C"]
    label = {"sm_active_pct": ("SM active", "%"), "dram_throughput_pct": ("DRAM throughput", "%"),
             "dram_read_gbps": ("DRAM read", "GB/s")}
    expected = []
    for start, _end, values in samples:
        for figure, value in values.items():
            name, unit = label[figure]
            expected.append((101, name, (start - 1_000_000) / 1e3, {unit: value}))
    last_start, last_end, last_values = samples[-1]
    for figure, value in last_values.items():
        name, unit = label[figure]
        expected.append((101, name, (last_end - 1_000_000) / 1e3, {unit: value}))
    assert sorted(counters) == sorted(expected)
    ends = [(e["pid"], e["s"], e["args"]["series"], e["ts"]) for e in data["traceEvents"]
            if e["ph"] == "i" and e["cat"] == "counter_end"]
    expected_ends = []
    for (_, end, values), (start, _, after) in zip(samples, samples[1:]):
        for figure in values:
            if figure not in after or start != end:
                expected_ends.append((101, "p", label[figure][0], (end - 1_000_000) / 1e3))
    assert sorted(ends) == sorted(expected_ends) and len(ends) == 2  # DRAM throughput, read


def test_no_gpu_trace_has_the_host_ranges(test_clock, tmp_path):
    with loopscope.profile() as prof:
        with prof.step():
            pass
    data = json.loads(open(prof.export_trace(tmp_path / "t.json")).read())
    assert [(e["cat"], e["name"], e["ts"], e["dur"]) for e in data["traceEvents"] if e["ph"] == "X"] \
        == [("user_annotation", "Step_0", 1.0, 1.0)]
    assert data["otherData"]["sources"] == [None]


def test_names_are_escaped_and_two_profiles_share_the_time_line(test_clock, tmp_path):
    """Names with quotes, backslashes, control characters and non-ASCII text
    come back unchanged; two profiles go into one trace on one clock, their
    ranges' threads named once, their devices apart."""
    odd = 'k"q\\b\tn\u00e9\u6f22'
    with loopscope.profile() as first:          # start: read 0 = 1_000_000 ns
        with loopscope.range("r\u00e9\"1"):     # reads 1..2
            pass
        _testhooks._inject("kernel", [(1_010_000, 1_011_000, 0, 7, 1, odd)])
    with loopscope.profile() as second:         # start: read 4
        _testhooks._inject("kernel", [(1_020_000, 1_022_000, 1, 3, 1, "other")])
    path = tmp_path / "t.json"
    loopscope.views._trace_export.export_trace([first.finished, second.finished], path)
    data = json.loads(path.read_text(encoding="utf-8"))
    x = [(e["cat"], e["name"], e["pid"], e["ts"], e["dur"]) for e in data["traceEvents"]
         if e["ph"] == "X"]
    assert x == [("user_annotation", 'r\u00e9"1', 1, 1.0, 1.0), ("kernel", odd, 100, 10.0, 1.0),
                 ("kernel", "other", 101, 20.0, 2.0)]
    ranges = [e for e in data["traceEvents"] if e["ph"] == "X" and e["cat"] == "user_annotation"]
    assert ranges[0]["args"] == {"kernels": 0, "profile": 0}
    names = sorted(e["args"]["name"] for e in data["traceEvents"] if e["ph"] == "M")
    assert names == ["GPU 0", "GPU 1", "gaps", "gaps", "host",
                     "stream 3", "stream 7", f"thread {threading.get_ident()}"]
    assert data["otherData"]["sources"] == ["injected", "injected"]


def test_a_sample_begun_before_the_window_sets_the_time_origin(test_clock, tmp_path):
    """The first profile of a process sets its sampler up and starts it
    before the window (issue 30): the sample in progress at the start began
    before it, so the trace's time 0 is that sample's start, and no event
    lies before 0 (an H100 run drew it at -47.8 us)."""
    samples = [(950_000, 1_050_000, {"sm_active_pct": 30.0}),   # across the start
               (1_050_000, 1_150_000, {"sm_active_pct": 70.0})]
    with loopscope.profile() as prof:          # start: read 0 = 1_000_000 ns
        _testhooks._inject("kernel", [(1_010_000, 1_012_000, 0, 7, 1, "a")])
        _testhooks._inject("sample", [(a, b, v, 0) for a, b, v in samples])
    data = json.loads(open(prof.export_trace(tmp_path / "t.json")).read())
    counters = sorted((e["ts"], e["args"]["%"]) for e in data["traceEvents"] if e["ph"] == "C")
    assert counters == [(0.0, 30.0), (100.0, 70.0), (200.0, 70.0)]  # time 0: 950_000 ns
    assert min(e["ts"] for e in data["traceEvents"] if "ts" in e) >= 0
