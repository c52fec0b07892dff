"""ROCm Kineto traces, made here in the shape real ones have
(tests/data/public: HIP runtime names under cat "cuda_runtime", copies named
"Memcpy HtoD (Host -> Device)", kernels on device 2 or 9 while
deviceProperties lists id 0, consecutive kernels 1 ns apart): each rule
checked on both sides, the expected figures worked out by hand."""
from __future__ import annotations

import json

import pytest

import loopscope

PID, TID = 4242, 4242


def kernel(start_ns, dur_ns, corr, device=0, name="k"):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": 0,
            "ts": start_ns / 1000, "dur": dur_ns / 1000,
            "args": {"device": device, "stream": 0, "correlation": corr}}


def copy(start_ns, dur_ns, corr, name, device=0):
    return {"ph": "X", "cat": "gpu_memcpy", "name": name, "pid": device, "tid": 0,
            "ts": start_ns / 1000, "dur": dur_ns / 1000,
            "args": {"device": device, "stream": 0, "correlation": corr, "bytes": 64}}


def call(name, start_ns, dur_ns, corr):
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": PID, "tid": TID,
            "ts": start_ns / 1000, "dur": dur_ns / 1000, "args": {"correlation": corr}}


def write(tmp_path, events, props=({"id": 0, "name": "AMD Instinct MI300X", "numSms": 304,
                                    "maxThreadsPerMultiprocessor": 2048},), name="t.json"):
    doc = {"schemaVersion": 1, "deviceProperties": list(props), "traceEvents": events,
           "baseTimeNanoseconds": 1_700_000_000_000_000_000}
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


# -- idle intervals below the trace's resolution ------------------------------

def test_one_ns_apart_is_merged_two_ns_apart_is_a_gap(tmp_path):
    """Kernels at [1000, 2000], [2001, 3000] (1 ns idle: merged),
    [3002, 4000] (2 ns idle: a gap), [4001, 5000] (merged again)."""
    events = [kernel(1000, 1000, 1), kernel(2001, 999, 2), kernel(3002, 998, 3),
              kernel(4001, 999, 4)]
    events += [call("hipLaunchKernel", 500 + i, 1, i + 1) for i in range(4)]
    prof = loopscope.load(write(tmp_path, events))
    summary = prof.summary()
    gaps = summary["gaps"]
    assert gaps["count"] == 1 and gaps["max_us"] == 0.002
    assert gaps["merged_below_resolution"] == 2
    # busy [1000, 3000] (the merged ns inside) and [3002, 5000]
    assert summary["gpu"]["busy_ms"] == ((3000 - 1000) + (5000 - 3002)) / 1e6
    assert summary["trace"]["merge_idle_upto_ns"] == 1
    assert "Gaps: 2 idle intervals of 1 ns or less (below the trace's time resolution) merged" \
        in prof.report()


def test_touching_ops_are_neither_gaps_nor_merged(tmp_path):
    events = [kernel(1000, 1000, 1), kernel(2000, 1000, 2)]
    summary = loopscope.analyze(write(tmp_path, events))
    assert summary["gaps"]["count"] == 0 and summary["gaps"]["merged_below_resolution"] == 0


def test_each_device_merges_its_own(tmp_path):
    """Two devices, one 1 ns idle on each: two merged, no gap."""
    events = [kernel(1000, 1000, 1, device=0), kernel(2001, 10, 2, device=0),
              kernel(5000, 1000, 3, device=1), kernel(6001, 10, 4, device=1)]
    props = [{"id": 0, "name": "A"}, {"id": 1, "name": "B"}]
    summary = loopscope.analyze(write(tmp_path, events, props))
    assert summary["gaps"]["count"] == 0 and summary["gaps"]["merged_below_resolution"] == 2


# -- HIP runtime names -----------------------------------------------------------

def test_hip_waits_are_syncs(tmp_path):
    """hipStreamSynchronize, hipEventSynchronize, hipFree: one sync each
    (a launch between them); a blocking hipMemcpy from "Host" waits, one
    between devices does not; hipMemcpyAsync waits only from pageable memory."""
    events, t = [], 0

    def launch(corr):
        nonlocal t
        events.append(call("hipLaunchKernel", t, 100, corr))
        events.append(kernel(t + 1000, 100, corr))
        t += 10_000

    for i, name in enumerate(["hipStreamSynchronize", "hipEventSynchronize", "hipFree"]):
        launch(100 + i)
        events.append(call(name, t, 2000, 200 + i))
        t += 10_000
    launch(110)
    events += [call("hipMemcpy", t, 3000, 300), copy(t + 500, 1000, 300,
                                                     "Memcpy HtoD (Host -> Device)")]
    t += 10_000
    launch(111)
    events += [call("hipMemcpy", t, 3000, 301), copy(t + 500, 1000, 301,
                                                     "Memcpy DtoD (Device -> Device)")]
    t += 10_000
    launch(112)
    events += [call("hipMemcpyAsync", t, 3000, 302), copy(t + 500, 1000, 302,
                                                          "Memcpy DtoH (Device -> Pageable)")]
    t += 10_000
    launch(113)
    events += [call("hipMemcpyAsync", t, 300, 303), copy(t + 500, 1000, 303,
                                                         "Memcpy HtoD (Pinned -> Device)")]
    summary = loopscope.analyze(write(tmp_path, events))
    syncs = summary["syncs"]
    assert syncs["count"] == 5  # 3 waits + the host copy + the pageable async copy
    assert syncs["by_kind"] and sum(syncs["by_kind"].values()) == 5
    apis = {api for site in syncs["sites"] for api in site["apis"]}
    # the calls keep the names the trace gave them, not their CUDA twins'
    assert apis == {"hipStreamSynchronize", "hipEventSynchronize", "hipFree", "hipMemcpy",
                    "hipMemcpyAsync"}


def test_the_export_keeps_hip_names(tmp_path):
    events = [call("hipLaunchKernel", 0, 100, 1), kernel(1000, 1000, 1),
              call("hipDeviceSynchronize", 3000, 100, 2)]
    prof = loopscope.load(write(tmp_path, events))
    out = tmp_path / "out.json"
    prof.export_trace(out)
    names = {e.get("name") for e in json.loads(out.read_text())["traceEvents"]
             if e.get("cat") == "cuda_runtime"}
    assert names == {"hipLaunchKernel", "hipDeviceSynchronize"}


def test_hip_launch_names_launch(tmp_path):
    """A kernel whose hipExtModuleLaunchKernel began after the GPU went idle:
    the gap's cause is the host."""
    events = [call("hipLaunchKernel", 0, 100, 1), kernel(1000, 1000, 1),
              call("hipExtModuleLaunchKernel", 100_000, 100, 2), kernel(101_000, 1000, 2)]
    summary = loopscope.analyze(write(tmp_path, events))
    assert summary["gaps"]["count"] == 1
    assert summary["gaps"]["by_cause"] == {"host": 1, "sync": 0, "other": 0}
    assert summary["gpu"]["ops_without_launch_record"] == 0


def test_hip_graph_launch_is_a_replay(tmp_path):
    events = [call("hipGraphLaunch", 0, 100, 7)] + [kernel(1000 + 2000 * i, 1000, 7)
                                                    for i in range(3)]
    events += [call("hipGraphLaunch", 50_000, 100, 8), kernel(51_000, 1000, 8)]
    summary = loopscope.analyze(write(tmp_path, events))
    assert summary["graphs"]["replays"] == 2


def test_per_thread_stream_variants_are_their_calls(tmp_path):
    """hipStreamSynchronize_spt waits like hipStreamSynchronize;
    hipLaunchKernel_spt launches (its kernel has a launch record, so the gap
    before it is the host's)."""
    events = [call("hipLaunchKernel_spt", 0, 100, 1), kernel(1000, 1000, 1),
              call("hipStreamSynchronize_spt", 1100, 800, 2),  # before the gap
              call("hipLaunchKernel_spt", 100_000, 100, 3), kernel(101_000, 1000, 3)]
    summary = loopscope.analyze(write(tmp_path, events))
    assert summary["syncs"]["count"] == 1
    assert summary["syncs"]["sites"][0]["apis"] == {"hipStreamSynchronize": 1}
    assert summary["gaps"]["by_cause"]["host"] == 1


def test_unknown_hip_call_has_no_role(tmp_path):
    """hipGetDevicePropertiesR0600 neither launches nor waits."""
    events = [call("hipGetDevicePropertiesR0600", 0, 5000, 9), kernel(1000, 1000, 1)]
    summary = loopscope.analyze(write(tmp_path, events))
    assert summary["syncs"]["count"] == 0


# -- device ids matched to deviceProperties ---------------------------------------

def test_the_only_entry_describes_the_only_device(tmp_path):
    prof = loopscope.load(write(tmp_path, [kernel(1000, 1000, 1, device=9)]))
    summary = prof.summary()
    assert summary["gpu"]["device"] == "AMD Instinct MI300X"
    assert summary["gpu"]["devices"][0]["sm_count"] == 304
    assert summary["trace"]["device_match"]["only_entry"] == {"device": 9, "entry_id": 0}
    assert "only deviceProperties entry (id 0) describes GPU 9" in prof.report()


def test_matching_ids_are_used_as_they_are(tmp_path):
    props = [{"id": 0, "name": "A"}, {"id": 2, "name": "B"}]
    summary = loopscope.analyze(write(tmp_path, [kernel(1000, 1000, 1, device=2)], props))
    assert summary["gpu"]["device"] == "B"
    assert summary["trace"]["device_match"] == {"by_id": [2], "only_entry": None,
                                                "unmatched": [], "listed": [0, 2]}


@pytest.mark.parametrize("devices, props", [
    ([2, 3], [{"id": 0, "name": "A"}]),                        # one entry, two devices
    ([9], [{"id": 0, "name": "A"}, {"id": 1, "name": "B"}]),   # two entries, none is 9
])
def test_no_guess_when_the_trace_does_not_say(tmp_path, devices, props):
    events = [kernel(1000 + 5000 * i, 1000, i + 1, device=d) for i, d in enumerate(devices)]
    prof = loopscope.load(write(tmp_path, events, props))
    summary = prof.summary()
    assert [d["name"] for d in summary["gpu"]["devices"]] == [None] * len(devices)
    assert summary["trace"]["device_match"]["unmatched"] == devices
    assert f"Device unmatched: GPU {', '.join(map(str, devices))} has no deviceProperties" \
        in prof.report()


def test_an_empty_device_name_is_no_name(tmp_path):
    """vLLM's ROCm traces list every GPU with name "": no name, not ""."""
    props = [{"id": 0, "name": ""}, {"id": 2, "name": " "}]
    summary = loopscope.analyze(write(tmp_path, [kernel(1000, 1000, 1, device=2)], props))
    assert summary["gpu"]["device"] is None


def test_public_rocm_trace_on_device_9_gets_its_name():
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "data" / "public" / "tracelens_mi300x_sglang_decode.json.gz"
    summary = loopscope.analyze(path)
    assert summary["gpu"]["device"] == "AMD Instinct MI300X"
    assert summary["gpu"]["devices"][0]["id"] == 9
    assert summary["gpu"]["devices"][0]["sm_count"] == 304


def test_hip_sync_aliases_each_have_their_kind(tmp_path):
    """Issue 39: the HIP waits asserted kind by kind, not only as a total.
    The kinds, by what each call waits for (HIP's manual): a stream, an
    event, the whole device (hipDeviceSynchronize, hipCtxSynchronize), a
    copy to or from host memory (hipMemcpy, hipMemcpyWithStream, a
    pageable hipMemcpyAsync), and hipFree (it waits for the device too)."""
    expected = {"hipStreamSynchronize": "stream_sync", "hipEventSynchronize": "event_sync",
                "hipDeviceSynchronize": "synchronize", "hipCtxSynchronize": "synchronize",
                "hipMemcpy": "memcpy", "hipMemcpyWithStream": "memcpy",
                "hipMemcpyAsync": "memcpy", "hipFree": "other"}
    events, t = [], 0
    for i, name in enumerate(expected):
        events += [call("hipLaunchKernel", t, 100, 100 + i), kernel(t + 1000, 100, 100 + i)]
        t += 10_000
        events.append(call(name, t, 2000, 200 + i))
        if "Memcpy" in name:
            events.append(copy(t + 500, 1000, 200 + i, "Memcpy DtoH (Device -> Pageable)"))
        t += 10_000
    summary = loopscope.analyze(write(tmp_path, events))
    got = {api: site["kind"] for site in summary["syncs"]["sites"] for api in site["apis"]}
    assert got == expected
    counted: dict[str, int] = {}
    for kind in expected.values():
        counted[kind] = counted.get(kind, 0) + 1
    assert summary["syncs"]["by_kind"] == counted
