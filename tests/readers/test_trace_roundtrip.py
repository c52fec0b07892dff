"""The round trip: `prof.export_trace(path)` read back with
`loopscope.analyze(path)` gives the live summary again: the same gaps
(count, class, cause, step, worst), GPU busy time, steps, syncs with their
sites, SM/DRAM, and how much of the GPU the kernels could fill (their
launch geometry and the devices' facts).  Synthetic records enter through
the test hooks (ops with grid and block, launch records, sync records, PM
samples and device facts on several devices and streams; steps and ranges
on the scripted clock; syncs as fake API calls through the real
switchboard), and the gap and fill figures are also checked against a few
lines of plain Python over the same records.

The export must stay valid for Perfetto / chrome://tracing: integer pid and
tid, times in microseconds, slices of one track nested, every flow arrow
with both ends on slices."""
from __future__ import annotations

import functools
import itertools
import json
import sys
import threading
from collections import defaultdict

import pytest

import fill_rule
import loopscope
from loopscope import _core, _testhooks
from loopscope.figures._names import display_path

DATA = "python/loopscope/data/demo_recording.json.gz"
NORMAL_BELOW_NS, SEVERE_ABOVE_NS = 20_000, 50_000
PAGEABLE, DTOH = 1, 2
# device facts: (device, SMs, threads/SM, blocks/SM, registers/SM, shared bytes/SM);
# GPU 1's driver told only the first two
DEVICES = [(0, 132, 2048, 32, 65536, 233472), (1, 108, 2048)]
# launch shapes: (grid, block, registers, shared bytes); None: the kernel has none
SHAPES = [((50, 1, 1), (32, 4, 1), 32, 24), ((4, 22, 1), (384, 1, 1), 168, 231868), None,
          ((200, 1, 1), (128, 1, 1), 32, 0), ((7, 3, 2), (16, 8, 2), 0, 0),
          ((4096, 2, 1), (256, 1, 1), 0, 49152), ((1, 1, 1), (33, 1, 1), 255, 0)]


def fake_call(calls):
    """A C-level callable that sends `calls` through the switchboard, so the
    innermost Python frame (the site) is the caller's own line."""
    return functools.partial(next, map(_testhooks._inject_calls, itertools.repeat(calls)))


# What torch's .item() does: an async copy to pageable memory, then a stream
# sync; what torch.cuda.synchronize() does: a device sync.
def item(correlation):
    return fake_call([("cudaMemcpyAsync", 3_000, correlation), ("cudaStreamSynchronize", 2_000)])


synchronize = fake_call([("cudaDeviceSynchronize", 4_000)])


def build_profile(tmp_path):
    """A three-step loop on two GPUs (three streams) with launches from the
    loop's thread and from a helper thread, host, sync and unexplained
    gaps, syncs at three sites, a sync record and PM samples.  Returns the
    finished profile."""
    me = threading.get_ident()
    helper = me + 1  # a launching thread without ranges of its own
    _testhooks._set_test_clock(1_000_000, 100_000)  # host reads: 100 us apart from 1 ms
    try:
        with loopscope.profile() as prof:
            apis = []
            for step in range(3):
                with prof.step():
                    with loopscope.range("Attn"):
                        if step < 2:
                            item(900 + step)()          # a sync: a copy, then a stream sync
                        else:                           # the same, its copy's launch recorded
                            tokens = _testhooks._inject_calls([("cudaMemcpyAsync", 3_000, 902),
                                                          ("cudaStreamSynchronize", 2_000)])
                            enter = _core._live_call(tokens[0])["enter_ns"]
                            apis.append((enter, enter, 902, me))
                    if step == 1:
                        synchronize()                   # a second site in step 1
                    with loopscope.range("MLP"):
                        pass
            ops = []
            t, corr = 1_150_000, 1  # the ops run while the loop's steps do
            for i in range(36):
                device, stream = (0, 7) if i % 3 else ((0, 9) if i % 2 else (1, 3))
                gap = [4_000, 25_000, 70_000, 9_000][i % 4]    # normal, warning, severe
                start, end = t, t + 5_000 + 1_000 * (i % 5)
                # one kernel name mangled: the export shows it short, reads it back whole
                name = "_Z6gemm_0Pfi" if i % 6 == 0 else f"kern_{i % 6}"
                shape = SHAPES[i % len(SHAPES)]
                ops.append(("kernel", (start, end, device, stream, corr, name)
                            + ((0,) + shape if shape else ())))
                if i % 7 != 3:                                 # some ops have no launch record
                    launch = start - 3_000 if i % 2 else start - gap - 2_000   # late and early
                    apis.append((launch, launch + 800, corr, helper if i % 5 == 0 else me))
                t, corr = end + gap, corr + 1
            # the copies of the three item() syncs: pageable, so they waited
            for step in range(3):
                ops.append(("memcpy", (t, t + 2_000, 0, 7, 900 + step, None, 64, DTOH, PAGEABLE)))
                t += 30_000
            ops.append(("memset", (t, t + 1_000, 1, 3, corr, None, 128)))
            _testhooks._inject("device", DEVICES)
            for kind in ("kernel", "memcpy", "memset"):
                _testhooks._inject(kind, [r for k, r in ops if k == kind])
            _testhooks._inject("api", apis)
            _testhooks._inject("sync_record", [(1_400_000, 1_460_000, 7)])
            # PM samples on GPU 0, one after the other as the sampler takes
            # them, but for a pause (sample 20 lost) and a figure missing once
            _testhooks._inject("sample", [
                (1_000_000 + 60_000 * k, 1_060_000 + 60_000 * k,
                 {"sm_active_pct": 20.0 + k, "dram_throughput_pct": 61.5 - k,
                  "gr_active_pct": 55.0, **({"dram_read_gbps": 800.25 + k} if k != 30 else {})},
                 0)
                for k in range(40) if k != 20])
    finally:
        _testhooks._set_test_clock(0, 0)
    return prof


def without_thread_ids(syncs):
    """The syncs section with the sites' thread ids left out (a trace names
    its threads by tid), and what a trace's summary adds (where the sites
    came from)."""
    out = {k: v for k, v in syncs.items() if k not in ("sites_from", "sites_unknown")}
    out["sites"] = [{k: v for k, v in s.items() if k != "thread_id"} for s in syncs["sites"]]
    return out


SAME = ("gaps", "gpu", "steps", "ranges", "sm", "dram", "pcie", "diagnosis")


def test_export_read_back_gives_the_live_summary(tmp_path):
    prof = build_profile(tmp_path)
    live = prof.summary()
    assert live["syncs"]["count"] == 4 and len(live["syncs"]["sites"]) == 3
    assert all(live["gaps"]["by_cause"].values())  # host, sync and other gaps, all present
    path = prof.export_trace(tmp_path / "t.json")
    back = loopscope.analyze(path)
    for key in SAME:
        assert back[key] == live[key], key
    assert without_thread_ids(back["syncs"]) == without_thread_ids(live["syncs"])
    # what the capture added inside the loop travels with the export, so the
    # projections' host floors read back the same (on a GPU the live counts
    # hold records outside the window that the file does not)
    data = json.loads(open(path).read())
    assert data["otherData"]["in_loop_estimate_ms"] == live["overhead"]["in_loop_estimate_ms"] > 0
    assert back["overhead"]["in_loop_estimate_ms"] == live["overhead"]["in_loop_estimate_ms"]
    assert back["trace"]["producer"] == "loopscope"
    assert back["syncs"]["sites_from"] == "loopscope export"
    assert back["trace"]["kernel_geometry"] == {
        "kernels": 36, "missing": sum(SHAPES[i % len(SHAPES)] is None for i in range(36)),
        "bad": 0, "why": None}

    # the gaps once more, from the ops alone: per device, the idle time
    # between the union of their intervals
    data = json.loads(open(path).read())
    base = data["baseTimeNanoseconds"]
    spans = defaultdict(list)
    for e in data["traceEvents"]:
        if e["ph"] == "X" and e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset"):
            start = base + round(e["ts"] * 1000)
            spans[e["args"]["device"]].append((start, start + round(e["dur"] * 1000)))
    gaps = []
    for intervals in spans.values():
        intervals.sort()
        end = intervals[0][1]
        for a, b in intervals[1:]:
            if a > end:
                gaps.append(a - end)
            end = max(end, b)
    assert back["gaps"]["count"] == len(gaps)
    assert back["gaps"]["normal"] == sum(g < NORMAL_BELOW_NS for g in gaps)
    assert back["gaps"]["severe"] == sum(g > SEVERE_ABOVE_NS for g in gaps)
    assert back["gaps"]["idle_ms"] == pytest.approx(sum(gaps) / 1e6, abs=1e-6)

    # the fill once more, from the kernels' args and the devices' properties
    props = {p["id"]: p for p in data["deviceProperties"]}
    assert props[0]["numSms"] == 132 and "maxBlocksPerMultiProcessor" not in props[1]
    kernels = []
    for e in data["traceEvents"]:
        if e["ph"] == "X" and e["cat"] == "kernel":
            a, p = e["args"], props[e["args"]["device"]]
            fill = None
            if "grid" in a:
                fill = fill_rule.fill_of(
                    a["grid"], a["block"], a["registers per thread"], a["shared memory"],
                    sms=p["numSms"], threads_per_sm=p["maxThreadsPerMultiprocessor"],
                    blocks_per_sm=p.get("maxBlocksPerMultiProcessor"),
                    regs_per_sm=p.get("regsPerMultiprocessor"),
                    shared_per_sm=p.get("sharedMemPerMultiprocessor"))
            kernels.append((round(e["dur"] * 1000), fill))
    fill_pct, known_pct = fill_rule.weighted_fill_pct(kernels)
    assert 0 < fill_pct < 100 and 0 < known_pct < 100
    assert back["gpu"]["fill_pct"] == pytest.approx(fill_pct, abs=0.01)
    assert back["gpu"]["fill_known_pct"] == pytest.approx(known_pct, abs=0.01)
    assert [(d["sm_count"], d["max_threads_per_sm"]) for d in back["gpu"]["devices"]] == \
        [(132, 2048), (108, 2048)]


def test_a_profile_without_syncs_or_samples_says_so_again(tmp_path):
    """What the live summary could not measure, the read-back summary does
    not measure either, for the same reason."""
    with loopscope.profile() as prof:
        _testhooks._inject("kernel", [(1_000_000, 1_002_000, 0, 7, 1, "a"),
                                 (1_090_000, 1_092_000, 0, 7, 2, "b")])
        _testhooks._inject("api", [(1_050_000, 1_050_000, 2, threading.get_ident())])
    live = prof.summary()
    assert live["syncs"] is None and live["sm"] is None
    back = loopscope.analyze(prof.export_trace(tmp_path / "t.json"))
    assert (back["syncs"], back["sm"]) == (None, None)
    assert (back["syncs_error"], back["metrics_error"]) == \
        (live["syncs_error"], live["metrics_error"])
    assert back["gaps"] == live["gaps"] and back["gaps"]["by_cause"]["host"] == 1


def test_the_export_is_valid_for_perfetto(tmp_path):
    data = json.loads(open(build_profile(tmp_path).export_trace(tmp_path / "t.json")).read())
    events = data["traceEvents"]
    slices = defaultdict(list)
    for e in events:
        if e["ph"] != "M" or "tid" in e:
            assert type(e["pid"]) is int
        if "tid" in e:
            assert type(e["tid"]) is int
        if e["ph"] in "XCsf":
            assert isinstance(e["ts"], (int, float))
        if e["ph"] == "X":
            assert e["dur"] >= 0
            slices[e["pid"], e["tid"]].append((e["ts"], -e["dur"], e))
    # slices of one track nest: each begins and ends inside the one it opens in
    for track in slices.values():
        track.sort(key=lambda s: (s[0], s[1]))
        open_ends: list[float] = []
        for ts, neg_dur, _ in track:
            while open_ends and open_ends[-1] <= ts:
                open_ends.pop()
            assert not open_ends or ts - neg_dur <= open_ends[-1] + 1e-9
            open_ends.append(ts - neg_dur)
    # arrows: one start per id, at a launch call's start on its track; each
    # end at an op's start on the op's track, bound to it
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = [e for e in events if e["ph"] == "f"]
    assert len(starts) == len([e for e in events if e["ph"] == "s"]) > 0
    for e in ends:
        s = starts[e["id"]]
        assert e["bp"] == "e" and (e["name"], e["cat"]) == (s["name"], s["cat"])
        assert any(x["ts"] == e["ts"] and x["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")
                   for _, _, x in slices[e["pid"], e["tid"]])
    for s in starts.values():
        assert any(x["ts"] == s["ts"] and x["cat"] in ("cuda_runtime", "cuda_driver")
                   and x["args"]["correlation"] == s["id"]
                   for _, _, x in slices[s["pid"], s["tid"]])
    assert {e["id"] for e in ends} == set(starts)


def test_syncs_are_slices_on_the_thread_that_waited(tmp_path):
    prof = build_profile(tmp_path)
    data = json.loads(open(prof.export_trace(tmp_path / "t.json")).read())
    threads = {e["args"]["name"]: e["tid"] for e in data["traceEvents"]
               if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == 1}
    mine = threads[f"thread {threading.get_ident()}"]
    syncs = [e for e in data["traceEvents"] if e["ph"] == "X" and e["cat"] == "sync"]
    model = prof.model.syncs()
    assert len(syncs) == len(model) == 4
    live_sites = prof.summary()["syncs"]["sites"]
    base = data["baseTimeNanoseconds"]
    for e, (start, end, blocked, _thread, step, wait, _calls) in zip(syncs, model):
        assert (e["pid"], e["tid"]) == (1, mine)
        assert (round(e["ts"] * 1000) + base, round(e["dur"] * 1000)) == (start, end - start)
        site = live_sites[e["args"]["site"]]
        assert e["args"]["site"] is not None and site["file"] == __file__
        assert e["args"]["kind"] == site["kind"]
        assert e["args"]["code"] == site["code"]
        assert e["args"]["blocked_us"] == blocked / 1000
        assert e["args"]["step"] == step and e["args"]["wait"] == wait
        assert e["name"] == f"sync {site['kind']} {display_path(site['file'])}:{site['line']}"
    # the calls inside, each tagged with its sync; the copy whose launch was
    # recorded is written once, as the launch and the call
    calls = [e for e in data["traceEvents"] if e["ph"] == "X" and "sync" in e.get("args", {})
             and e["cat"] in ("cuda_runtime", "cuda_driver")]
    assert sorted((e["name"], e["args"].get("launch", 0)) for e in calls) == sorted(
        [("cudaMemcpyAsync", 0)] * 2 + [("cudaMemcpyAsync", 1)]
        + [("cudaStreamSynchronize", 0)] * 3 + [("cudaDeviceSynchronize", 0)])
    assert {e["args"]["sync"] for e in calls} == {e["args"]["sync"] for e in syncs}


def test_steps_of_the_export_are_the_recorded_ones_unless_asked(tmp_path):
    prof = build_profile(tmp_path)
    path = prof.export_trace(tmp_path / "t.json")
    assert [s["name"] for s in loopscope.analyze(path)["steps"]] == ["Step_0", "Step_1", "Step_2"]
    by_range = loopscope.analyze(path, steps=r"^Attn$")
    assert [s["name"] for s in by_range["steps"]] == ["Attn", "Attn", "Attn"]


def test_the_bundled_recording_round_trips(tmp_path):
    prof = loopscope.load(DATA)
    live = prof.summary()
    back = loopscope.analyze(prof.export_trace(tmp_path / "demo.json"))
    assert back["gaps"] == live["gaps"]
    assert back["gpu"] == live["gpu"]
    # SM/DRAM of a recording are put back as recorded (its samples are not
    # in it), so only the steps' GPU figures are compared
    fields = ("index", "name", "host_ms", "gpu_ms", "gpu_span_ms", "kernels", "gaps")
    assert [{k: s[k] for k in fields} for s in back["steps"]] == \
        [{k: s[k] for k in fields} for s in live["steps"]]


def test_copies_keep_their_kind_and_host_memory(tmp_path):
    """A copy's kind and the memory kind of its host side are in its name,
    as Kineto writes it, and come back: whether a copy made the host wait
    depends on them (a synchronous copy waits unless device to device, an
    async one only with pageable memory)."""
    htod, dtoh, htoh = 1, 2, 9
    pageable, pinned, managed = 1, 2, 5
    with loopscope.profile() as prof:
        _testhooks._inject_calls([("cudaMemcpy", 1_000, 11)])        # waits: managed host memory
        _testhooks._inject_calls([("cudaMemcpyAsync", 1_000, 12)])   # does not: pinned
        _testhooks._inject_calls([("cudaMemcpyAsync", 1_000, 13)])   # waits: pageable
        _testhooks._inject("memcpy", [(5_000, 6_000, 0, 7, 11, None, 64, htod, managed),
                                 (7_000, 8_000, 0, 7, 12, None, 64, dtoh, pinned),
                                 (9_000, 9_500, 0, 7, 13, None, 64, htoh, pageable)])
    live = prof.summary()
    assert live["syncs"]["count"] == 2
    path = prof.export_trace(tmp_path / "t.json")
    names = [e["name"] for e in json.loads(open(path).read())["traceEvents"]
             if e["ph"] == "X" and e["cat"] == "gpu_memcpy"]
    assert names == ["Memcpy HtoD (Managed -> Device)", "Memcpy DtoH (Device -> Pinned)",
                     "Memcpy HtoH (Pageable -> Pageable)"]
    back = loopscope.analyze(path)
    assert without_thread_ids(back["syncs"]) == without_thread_ids(live["syncs"])
    assert back["gaps"] == live["gaps"]


# What a capture refuses, each made by a fake API call at a line of this file
malloc = fake_call([("cudaMalloc", 1_500)])                  # memory, no sync
malloc_async = fake_call([("cudaMallocAsync", 1_500)])       # stream ordered: no blocker
free = fake_call([("cudaFree", 2_500)])                      # memory, and a sync
MEMORY_APIS = ("cudaMalloc", "cudaFree")                     # of them, what a capture refuses
HTOD, PINNED = 1, 2


def copy_in(correlation):
    return fake_call([("cudaMemcpyAsync", 2_000, correlation)])


def caller_line():
    return sys._getframe(1).f_lineno


def test_readiness_blockers_come_back_with_their_sites(tmp_path):
    """A step's memory calls (an allocation that is no sync, a free that is
    one) and its pageable host-to-device copy are blockers of its graph
    readiness, each at its line; the export carries those calls (the ones
    that made no sync too), so analyze() gives the same steps."""
    made = []  # per step: (api, line, correlation or None)
    with loopscope.profile() as prof:
        apis, ops, corr, t = [], [], 100, 2_000_000
        for step in range(3):
            calls = []
            with prof.step():
                launch = _core.now_ns()
                for name in ("k1", "k2"):
                    apis.append((launch, launch + 1, corr))
                    ops.append(("kernel", (t, t + 5_000, 0, 7, corr, name)))
                    corr, t = corr + 1, t + 10_000
                # every step copies in as much; only step 0 from pageable memory
                copy_in(corr)(); calls.append(("cudaMemcpyAsync", caller_line(), corr))
                ops.append(("memcpy", (t, t + 2_000, 0, 7, corr, None, 64, HTOD,
                                       PAGEABLE if step == 0 else PINNED)))
                apis.append((launch, launch + 1, corr))
                corr, t = corr + 1, t + 10_000
                if step == 0:
                    malloc(); calls.append(("cudaMalloc", caller_line(), None))
                    malloc(); calls.append(("cudaMalloc", caller_line(), None))
                elif step == 1:
                    free(); calls.append(("cudaFree", caller_line(), None))
                else:
                    malloc_async(); calls.append(("cudaMallocAsync", caller_line(), None))
            made.append(calls)
        for kind in ("kernel", "memcpy"):
            _testhooks._inject(kind, [r for k, r in ops if k == kind])
        _testhooks._inject("api", apis)
    live = prof.summary()

    here = display_path(__file__)
    source = open(__file__).read().splitlines()
    for step, calls in zip(live["steps"], made):
        blockers = {b["kind"]: b for b in step["graph_readiness"]["blockers"]}
        memory = [(api, line) for api, line, _ in calls if api in MEMORY_APIS]
        pageable = [line for api, line, _ in calls if api == "cudaMemcpyAsync"
                    and step["index"] == 0]
        waits = [line for api, line, _ in calls if api == "cudaFree"] + pageable
        expected = {kind for kind, found in (("sync", waits), ("memory", memory),
                                             ("pageable_copy", pageable)) if found}
        assert set(blockers) == expected, step["index"]
        if memory:
            b = blockers["memory"]
            assert (b["count"], b["where"]) == (len(memory), f"{here}:{memory[0][1]}")
            assert b["code"] and b["code"] in source[memory[0][1] - 1]
        if pageable:
            b = blockers["pageable_copy"]
            assert (b["count"], b["where"]) == (1, f"{here}:{pageable[0]}")
            assert b["code"] and b["code"] in source[pageable[0] - 1]
        if waits:
            assert blockers["sync"]["where"] == f"{here}:{waits[0]}"
        assert step["graph_readiness"]["status"] == ("blocked" if expected else "capturable")

    path = prof.export_trace(tmp_path / "t.json")
    data = json.loads(open(path).read())
    # the calls outside syncs are on their thread's track, Kineto's category
    # and name, each with its site
    outside = [e for e in data["traceEvents"] if e["ph"] == "X" and e["cat"] == "cuda_runtime"
               and "call_site" in e["args"]]
    assert sorted(e["name"] for e in outside) == sorted(
        api for calls in made for api, _, _ in calls
        if api in ("cudaMalloc", "cudaMallocAsync")) + ["cudaMemcpyAsync"] * 2
    for e in outside:
        site = data["otherData"]["call_sites"][e["args"]["call_site"]]
        assert site["file"] == __file__ and "sync" not in e["args"]
    back = loopscope.analyze(path)
    assert back["steps"] == live["steps"]
    assert back["graph_readiness"] == live["graph_readiness"]
    assert without_thread_ids(back["syncs"]) == without_thread_ids(live["syncs"])


@pytest.mark.fake_sampler
def test_the_counters_sampling_interval_comes_back(tmp_path, test_clock):
    """The read-back summary gives the interval the live one sampled at
    (the samples' own lengths only approach it), and a damaged one reads
    as unknown."""
    us = 1_000
    samples = [(t, t + 50 * us, {"sm_active_pct": float(t // (50 * us))})
               for t in range(800 * us, 1_200 * us, 50 * us)]
    _testhooks._fake_samples(samples, 2, 50 * us)
    test_clock.set(1_000_000, 20 * us)
    try:
        with loopscope.profile(metrics=True, metrics_decode_ms=1, metrics_interval_us=50) as prof:
            for _ in range(3):
                with prof.step():
                    pass
            _testhooks._inject("kernel", [(1_000_000, 1_002_000, 0, 7, 1, "a")])
    finally:
        _testhooks._fake_samples([])
    live = prof.summary()
    assert live["sm"]["interval_us"] == 50.0 and live["sm"]["samples"] > 0
    path = prof.export_trace(tmp_path / "t.json")
    back = loopscope.analyze(path, progress=False)
    assert back["sm"] == live["sm"]
    data = json.loads(open(path).read())
    data["otherData"]["metrics_interval_us"] = "fifty"
    damaged = tmp_path / "damaged.json"
    damaged.write_text(json.dumps(data))
    again = loopscope.analyze(damaged, progress=False)
    assert again["sm"]["interval_us"] is None
    assert {k: v for k, v in again["sm"].items() if k != "interval_us"} == \
        {k: v for k, v in live["sm"].items() if k != "interval_us"}


def test_the_read_back_takes_the_live_estimate_of_the_captures_cost(tmp_path):
    # the live counts (records outside the window, launch callbacks) are not all
    # in the file, so the reader takes the estimate the export carries, not a
    # recount: a file saying 7.5 ms reads back 7.5 ms, and its host floors with it
    prof = build_profile(tmp_path)
    path = prof.export_trace(tmp_path / "t.json")
    data = json.loads(open(path).read())
    data["otherData"]["in_loop_estimate_ms"] = 7.5
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    back = loopscope.analyze(edited)
    assert back["overhead"]["in_loop_estimate_ms"] == 7.5
    floors = [p["floors"] for p in back["diagnosis"]["projections"] if "profiler_ms" in p.get("floors", {})]
    assert floors and all(f["profiler_ms"] == 7.5 for f in floors)
