"""Graph-level mode, the analysis side (issue 27): a CUDA-graph replay traced
as ONE op (LS_OP_GRAPH, injected as a "graph" record: start, end, device,
stream, correlation id, name) is GPU work like a kernel for busy time,
gaps and their causes, steps, ranges and launches, but not a kernel: the
kernel counts, the kernel table and the fill read kernels only, and the
share of kernel time whose fill is known counts the replays as unknown.

Every expected number is worked out here from the injected records by plain
Python (merged busy intervals, idle gaps, the launch that ends each gap),
never read from another loopscope path."""
from __future__ import annotations

import json
import os

import pytest

import fill_rule
import loopscope
from loopscope import _core, _testhooks
from loopscope.files import _recording
from loopscope.readers import _replay

STREAM = 7
THRESHOLDS_US = (20, 50)  # given to the profile: the classes below use these
H200 = (0, 132, 2048, 32, 65536, 233472)  # device, SMs, threads/SM, blocks/SM, regs, smem
LAUNCH_TO_START_NS = 5_000  # a replay starts this long after its launch call (if the stream is free)
QUEUED_GAP_NS = 2_000       # a replay queued behind another starts this long after it ends


# -- plain-Python twins of what the model computes ------------------------------

def union_ns(spans):
    """Total length of the union of [start, end) spans."""
    total, cur_start, cur_end = 0, None, None
    for start, end in sorted(spans):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    return total + (cur_end - cur_start if cur_end is not None else 0)


def merged_spans(spans):
    """The union of [start, end) spans as sorted, disjoint spans."""
    out = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def idle_gaps(ops):
    """[(gap_start, gap_end, launch of the op that ends it)] of ops given as
    (start, end, launch_ns): the idle intervals between their merged spans."""
    out, end = [], None
    for start, stop, launch in sorted(ops):
        if end is not None and start > end:
            out.append((end, start, launch))
        end = stop if end is None else max(end, stop)
    return out


def cause_of(gap_start, launch):
    """No host sync here: `host` when the launch came after the GPU went
    idle, `other` when the op was queued before."""
    return "host" if launch >= gap_start else "other"


def gap_class(ns):
    normal_below, severe_above = (t * 1_000 for t in THRESHOLDS_US)
    return "normal" if ns < normal_below else "severe" if ns > severe_above else "warning"


# -- the synthetic loop -----------------------------------------------------------

def graph_loop(prof, durations, graph_names=None, api="cudaGraphLaunch", range_name=None):
    """One step per item of `durations` (ns of each replay of the step); each
    replay launched by a cudaGraphLaunch call at the scripted clock's next
    read and run on STREAM LAUNCH_TO_START_NS later, or QUEUED_GAP_NS after
    the replay before it when that one still runs.  The first replay of a
    step is launched inside `range_name` when given; api=None records the
    launch calls with no call name (as a trace whose calls are not named
    does): then no launch call is known as a graph launch.  Returns the replays
    as (start, end, launch_ns, step, correlation id, name, in_range)."""
    replays, apis, device_end, corr = [], [], 0, 1
    for step, step_durations in enumerate(durations):
        with prof.step():
            for k, duration in enumerate(step_durations):
                name = graph_names[step][k] if graph_names else "CUDA graph 1"
                in_range = range_name is not None and k == 0
                if in_range:
                    with loopscope.range(range_name):
                        launch = _core.now_ns()
                else:
                    launch = _core.now_ns()
                start = max(launch + LAUNCH_TO_START_NS, device_end + QUEUED_GAP_NS)
                device_end = start + duration
                replays.append((start, device_end, launch, step, corr, name, in_range))
                apis.append((launch, launch + 1_000, corr, 0, 0) + ((api,) if api else ()))
                corr += 1
    _testhooks._inject("api", apis)
    _testhooks._inject("graph", [(a, b, 0, STREAM, c, name) for a, b, _, _, c, name, _ in replays])
    return replays


# Replays of 20 to 150 us, launched 100 us apart in a step, 300 us between
# steps: a 150 us replay makes the next one queue (a 2 us `other` gap); the
# others leave the GPU idle until the next launch (`host` gaps).
DURATIONS = [[150_000, 30_000], [40_000, 20_000], [95_000, 60_000]]


def profile_graph_loop(test_clock, **kw):
    test_clock.set(1_000_000, 100_000)  # 100 us between clock reads
    with loopscope.profile(gap_thresholds_us=THRESHOLDS_US) as prof:
        replays = graph_loop(prof, DURATIONS, **kw)
    return prof, replays


def test_busy_time_gaps_and_causes_of_a_graph_loop(test_clock):
    prof, replays = profile_graph_loop(test_clock)
    s = prof.summary()
    spans = [(a, b) for a, b, *_ in replays]
    gaps = idle_gaps([(a, b, launch) for a, b, launch, *_ in replays])
    lengths = [b - a for a, b, _ in gaps]
    causes = [cause_of(a, launch) for a, _, launch in gaps]
    assert len(gaps) == 5 and set(causes) == {"host", "other"}  # the loop plants both
    assert s["gaps"]["count"] == len(gaps)
    assert s["gaps"]["by_cause"] == {c: causes.count(c) for c in ("host", "sync", "other")}
    classes = [gap_class(n) for n in lengths]
    assert (s["gaps"]["normal"], s["gaps"]["warning"], s["gaps"]["severe"]) == (
        classes.count("normal"), classes.count("warning"), classes.count("severe"))
    assert s["gaps"]["max_us"] == max(lengths) / 1e3
    assert s["gaps"]["idle_ms"] == pytest.approx(sum(lengths) / 1e6)
    assert sorted(g["duration_us"] for g in s["gaps"]["worst"]) == sorted(n / 1e3 for n in lengths)
    assert {g["before"] for g in s["gaps"]["worst"]} == {"CUDA graph 1"}
    gpu = s["gpu"]
    assert gpu["busy_ms"] == pytest.approx(union_ns(spans) / 1e6)
    span = max(b for _, b in spans) - min(a for a, _ in spans)
    assert gpu["busy_pct"] == round(100 * union_ns(spans) / span, 2)
    assert gpu["graph_replays"] == len(replays) == 6
    assert gpu["graph_replay_ms"] == pytest.approx(sum(b - a for a, b in spans) / 1e6)
    assert gpu["ops_without_launch_record"] == 0  # cudaGraphLaunch matched by correlation id
    # not kernels: no kernel count, no kernel table, no fill known
    assert (gpu["kernels"], gpu["memcpys"], gpu["memsets"]) == (0, 0, 0)
    assert s["top_kernels"] == []
    assert gpu["fill_pct"] is None and gpu["fill_known_pct"] == 0.0
    assert s["loop"]["ops"] == len(replays) and s["loop"]["kernels"] == 0


def test_a_host_wait_over_a_gap_before_a_replay_makes_it_a_sync_gap(test_clock):
    """A sync record overlapping the idle time before a replay launched
    late: `sync`, as before a kernel; the other late launch stays `host`."""
    test_clock.set(1_000_000, 100_000)
    with loopscope.profile() as prof:
        replays = graph_loop(prof, [[30_000], [30_000], [30_000]])
        r0, r1, r2 = ((start, end, launch) for start, end, launch, *_ in replays)
        # a host wait inside the first gap only
        _testhooks._inject("sync_record", [(r0[1] + 10_000, r1[0] - 10_000, STREAM)])
    assert idle_gaps([r0, r1, r2]) == [(r0[1], r1[0], r1[2]), (r1[1], r2[0], r2[2])]
    assert r1[2] >= r0[1] and r2[2] >= r1[1]  # both launched after the GPU went idle
    assert prof.summary()["gaps"]["by_cause"] == {"host": 1, "sync": 1, "other": 0}


def test_per_step_gpu_time_replays_and_gaps(test_clock):
    prof, replays = profile_graph_loop(test_clock)
    steps = prof.summary()["steps"]
    gaps = idle_gaps([(a, b, launch) for a, b, launch, *_ in replays])
    step_of_start = {a: step for a, _, _, step, *_ in replays}
    for i, step in enumerate(steps):
        mine = [(a, b) for a, b, _, st, *_ in replays if st == i]
        assert step["graph_replays"] == len(mine) == len(DURATIONS[i])
        assert step["gpu_ms"] == pytest.approx(union_ns(mine) / 1e6)
        assert step["kernels"] == 0
        # a gap belongs to the step of the op that ends it
        step_gaps = [b - a for a, b, _ in gaps if step_of_start[b] == i]
        assert step["gaps"]["count"] == len(step_gaps)
        assert step["gaps"]["idle_ms"] == pytest.approx(sum(step_gaps) / 1e6)
        # replays are GPU work: a verdict, never NO_GPU_WORK
        assert step["verdict"] != "NO_GPU_WORK"
    assert prof.summary()["diagnosis"]["verdict"] != "NO_GPU_WORK"


def test_a_range_holds_the_replays_launched_in_it(test_clock):
    prof, replays = profile_graph_loop(test_clock, range_name="Denoise")
    (denoise,) = [r for r in prof.summary()["ranges"] if r["name"] == "Denoise"]
    mine = [(a, b) for a, b, *_, in_range in replays if in_range]
    assert len(mine) == len(DURATIONS)
    assert denoise["gpu_ms"] == pytest.approx(union_ns(mine) / 1e6)
    assert denoise["kernels"] == 0


def test_a_graph_named_like_a_collective_is_compute(test_clock):
    """The collective rule reads kernel names; a replay is compute."""
    test_clock.set(1_000_000, 100_000)
    with loopscope.profile() as prof:
        with prof.step():
            launch = _core.now_ns()
            _testhooks._inject("api", [(launch, launch + 1, 1, 0, 0, "cudaGraphLaunch")])
            _testhooks._inject("graph", [(launch + 5_000, launch + 45_000, 0, STREAM, 1,
                                     "ncclDevKernel_AllReduce_Sum_f32_RING_LL")])
    gpu = prof.summary()["gpu"]
    assert (gpu["comm_ms"], gpu["compute_ms"]) == (0.0, 0.04)


# -- kernels and replays together ----------------------------------------------------

EAGER = [  # (duration ns, grid, block): launched outside graphs
    (10_000, (64, 1, 1), (256, 1, 1)),
    (30_000, (4096, 2, 1), (256, 1, 1)),
]


def test_mixed_profile_kernel_figures_cover_only_the_kernels(test_clock):
    test_clock.set(1_000_000, 100_000)
    with loopscope.profile() as prof:
        _testhooks._inject("device", [H200])
        ops, apis, kernels = [], [], []
        for step in range(2):
            with prof.step():
                corr = 10 * step + 1
                launch = _core.now_ns()
                apis.append((launch, launch + 1, corr, 0, 0, "cudaGraphLaunch"))
                ops.append(("graph", (launch + 5_000, launch + 85_000, 0, STREAM, corr,
                                      "CUDA graph 1")))
                for j, (duration, grid, block) in enumerate(EAGER):
                    launch = _core.now_ns()
                    start = launch + 5_000
                    apis.append((launch, launch + 1, corr + 1 + j))
                    ops.append(("kernel", (start, start + duration, 0, STREAM, corr + 1 + j,
                                           f"eager_{j}", 0, grid, block)))
                    kernels.append((duration, grid, block, f"eager_{j}"))
        _testhooks._inject("api", apis)
        for kind, op in ops:
            _testhooks._inject(kind, [op])
    s = prof.summary()
    gpu = s["gpu"]
    graph_ns = sum(op[1] - op[0] for kind, op in ops if kind == "graph")
    assert gpu["kernels"] == len(kernels) == 4
    assert gpu["graph_replays"] == 2
    assert gpu["graph_replay_ms"] == pytest.approx(graph_ns / 1e6)
    assert {k["name"] for k in s["top_kernels"]} == {"eager_0", "eager_1"}
    assert sum(k["count"] for k in s["top_kernels"]) == len(kernels)
    # fill: of the kernels only; known for the kernels' share of kernel + replay time
    _, sms, threads, blocks, regs, smem = H200
    fills = [(d, fill_rule.fill_of(g, b, sms=sms, threads_per_sm=threads, blocks_per_sm=blocks,
                                   regs_per_sm=regs, shared_per_sm=smem)) for d, g, b, _ in kernels]
    shaped = sum(d for d, _ in fills)
    filled = sum(round(d * f) for d, f in fills)
    assert gpu["fill_pct"] == round(100 * filled / shaped, 2)
    assert gpu["fill_known_pct"] == round(100 * shaped / (shaped + graph_ns), 2)
    for step in s["steps"]:
        assert (step["kernels"], step["graph_replays"]) == (2, 1)
        assert step["fill_known_pct"] == round(100 * shaped / (shaped + graph_ns), 2)
    busy = union_ns([op[:2] for _, op in ops])
    assert gpu["busy_ms"] == pytest.approx(busy / 1e6)
    assert s["loop"]["ops"] == len(ops) and s["loop"]["kernels"] == len(kernels)


def test_no_replay_gives_zero_keys(test_clock):
    with loopscope.profile() as prof:
        launch = _core.now_ns()
        _testhooks._inject("api", [(launch, launch + 1, 1)])
        _testhooks._inject("kernel", [(launch + 5_000, launch + 15_000, 0, STREAM, 1, "k")])
    s = prof.summary()
    assert (s["gpu"]["graph_replays"], s["gpu"]["graph_replay_ms"]) == (0, 0.0)
    assert "CUDA graphs:" not in prof.report()


# -- readiness -------------------------------------------------------------------------

def test_steps_of_replays_read_replays_graph(test_clock):
    prof, replays = profile_graph_loop(test_clock)
    steps = prof.summary()["steps"]
    assert [s["graph_readiness"]["status"] for s in steps] == ["replays_graph"] * 3
    # one launch call and one replay op per replay: counted once, not twice
    assert [s["graph_readiness"]["graph_replays"] for s in steps] == [len(d) for d in DURATIONS]
    # the same graph every step is the same work: no dynamic-shapes blocker
    assert all(s["graph_readiness"]["blockers"] == [] for s in steps)


def test_replays_whose_launch_calls_are_not_named_still_read_replays_graph(test_clock):
    """Launch calls recorded without their name (no graph launch known):
    the replay ops say the step replays graphs, as many as they are; a
    step with only kernels does not."""
    test_clock.set(1_000_000, 100_000)
    with loopscope.profile() as prof:
        replays = graph_loop(prof, [[30_000, 20_000], [40_000]], api=None)
        with prof.step():
            t = _core.now_ns()
            _testhooks._inject("api", [(t, t + 1, 99)])
            _testhooks._inject("kernel", [(t + 5_000, t + 15_000, 0, STREAM, 99, "eager")])
    steps = prof.summary()["steps"]
    per_step = [sum(1 for r in replays if r[3] == i) for i in range(2)]
    assert per_step == [2, 1]
    assert [s["graph_readiness"]["graph_replays"] for s in steps] == per_step + [0]
    assert [s["graph_readiness"]["status"] for s in steps[:2]] == ["replays_graph"] * 2
    assert steps[2]["graph_readiness"]["status"] != "replays_graph"  # (other work: blocked)
    assert prof.model.total()["readiness"]["graph_launches"] == len(replays) == 3


def test_a_step_replaying_another_graph_differs(test_clock):
    names = [["CUDA graph 1", "CUDA graph 1"], ["CUDA graph 1", "CUDA graph 1"],
             ["CUDA graph 2", "CUDA graph 1"]]
    prof, _ = profile_graph_loop(test_clock, graph_names=names)
    steps = prof.summary()["steps"]
    kinds = [[b["kind"] for b in s["graph_readiness"]["blockers"]] for s in steps]
    assert kinds == [[], [], ["dynamic_shapes"]]
    assert [s["graph_readiness"]["status"] for s in steps] == ["replays_graph"] * 3


# -- views --------------------------------------------------------------------------

def test_report_says_the_kernel_figures_leave_replays_out(test_clock):
    prof, replays = profile_graph_loop(test_clock)
    lines = [line for line in prof.report().splitlines() if line.startswith("CUDA graphs:")]
    assert len(lines) == 1
    assert f"{len(replays)} replays traced whole" in lines[0]
    assert "kernels launched outside graphs" in lines[0]


def test_export_writes_each_replay_on_its_stream_track(test_clock, tmp_path):
    test_clock.set(1_000_000, 100_000)
    with loopscope.profile() as prof:
        replays = graph_loop(prof, [[30_000], [40_000]])
        t = _core.now_ns()
        _testhooks._inject("api", [(t, t + 1, 50)])
        _testhooks._inject("kernel", [(t + 5_000, t + 6_000, 0, STREAM, 50, "eager")])
    path = tmp_path / "t.json"
    prof.export_trace(str(path))
    data = json.loads(path.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    graphs = [e for e in events if e.get("cat") == "cuda_graph"]
    (kernel,) = [e for e in events if e.get("cat") == "kernel"]
    assert [(e["name"], e["ph"], e["args"]["correlation"], e["args"]["stream"]) for e in graphs] \
        == [("CUDA graph 1", "X", c, STREAM) for *_, c, _, _ in replays]
    assert [e["dur"] for e in graphs] == [(b - a) / 1e3 for a, b, *_ in replays]
    assert {(e["pid"], e["tid"]) for e in graphs} == {(kernel["pid"], kernel["tid"])}
    # one microsecond apart on the device as in the records
    assert graphs[1]["ts"] - graphs[0]["ts"] == pytest.approx((replays[1][0] - replays[0][0]) / 1e3)


def test_the_exported_trace_reads_back_with_its_replays(test_clock, tmp_path):
    """loopscope.analyze of the export: the cuda_graph events are replays
    again, so the figures are those of the live profile's records."""
    prof, replays = profile_graph_loop(test_clock)
    path = tmp_path / "t.json"
    prof.export_trace(str(path))
    test_clock.set(0, 0)
    s = loopscope.analyze(str(path))
    spans = [r[:2] for r in replays]
    assert s["gpu"]["graph_replays"] == len(replays)
    assert s["gpu"]["graph_replay_ms"] == pytest.approx(sum(b - a for a, b in spans) / 1e6)
    assert s["gpu"]["busy_ms"] == pytest.approx(union_ns(spans) / 1e6)
    assert s["gpu"]["kernels"] == 0 and s["top_kernels"] == []
    gaps = idle_gaps([(a, b, launch) for a, b, launch, *_ in replays])
    causes = [cause_of(a, launch) for a, _, launch in gaps]
    assert s["gaps"]["by_cause"] == {c: causes.count(c) for c in ("host", "sync", "other")}
    assert [st["graph_replays"] for st in s["steps"]] == [len(d) for d in DURATIONS]
    assert [st["graph_readiness"]["status"] for st in s["steps"]] == ["replays_graph"] * 3


@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="matplotlib's extension dies under a preloaded ASan (as in .ci/run)")
def test_html_and_pictures_render_replays(test_clock):
    pytest.importorskip("matplotlib", reason="the pictures need matplotlib")
    prof, replays = profile_graph_loop(test_clock)
    html = prof._repr_html_()
    assert f"{len(replays)} CUDA-graph replays traced whole" in html
    # the gap histogram, the time line and its zooms are drawn from the replays' busy spans
    assert html.count('src="data:image/png;base64,') >= 2
    window = prof.model.window(replays[0][0], replays[-1][1], 100, "warning", 1)
    assert [tuple(b[:2]) for b in window["busy"]] == merged_spans([r[:2] for r in replays])


def test_recording_round_trip_keeps_the_replays(test_clock, tmp_path):
    prof, replays = profile_graph_loop(test_clock)
    original = prof.summary()
    path = prof.save_recording(tmp_path / "rec.json.gz")
    data = _recording.load(path)
    assert data["version"] == 3  # an older loopscope names the version, not "damaged"
    assert data["ops"]["kind"].count(_recording.OP_KINDS.index("graph")) == len(replays)
    test_clock.set(0, 0)
    again = _replay.replay(data).summary()
    assert again["gpu"]["graph_replays"] == len(replays)
    assert again["gpu"]["graph_replay_ms"] == original["gpu"]["graph_replay_ms"]
    assert again["gpu"]["busy_ms"] == pytest.approx(union_ns([r[:2] for r in replays]) / 1e6)
    assert again["gaps"]["by_cause"] == original["gaps"]["by_cause"]
    assert [s["graph_replays"] for s in again["steps"]] == [len(d) for d in DURATIONS]
    assert [s["graph_readiness"]["status"] for s in again["steps"]] == ["replays_graph"] * 3


def test_capture_lists_graph_ops_by_kind(test_clock):
    prof, replays = profile_graph_loop(test_clock)
    ops = prof.capture.ops()
    assert [o[0] for o in ops] == ["graph"] * len(replays)
    assert [o[1:3] for o in ops] == [r[:2] for r in replays]
    assert list(prof.model.op_column("kind")) == [3] * len(replays)
    assert list(prof.model.op_column("fill")) == [-1.0] * len(replays)


# -- bad input ---------------------------------------------------------------------

def test_bad_graph_records_are_refused_whole():
    with loopscope.profile() as prof:
        with pytest.raises(TypeError, match=r"graph record 1 must be a tuple \(start_ns, end_ns"):
            _testhooks._inject("graph", [(1_000, 2_000, 0, 7, 1), (3_000, 4_000, 0, 7, 2, "g", 64)])
        with pytest.raises(ValueError, match="graph record 0 ends before it starts"):
            _testhooks._inject("graph", [(5_000, 4_000, 0, 7, 1)])
        with pytest.raises(TypeError, match=r"graph record 0, field 5 \(name\) must be a str"):
            _testhooks._inject("graph", [(1_000, 2_000, 0, 7, 1, 5)])
    assert prof.capture.ops() == []


def test_a_recording_without_replays_keeps_format_version_2(test_clock, tmp_path):
    test_clock.set(0, 1000)
    with loopscope.profile(metrics=False) as prof:
        with prof.step():
            _testhooks._inject("kernel", [(2000, 5000, 0, 7, 1, "k")])
    data = _recording.load(prof.save_recording(tmp_path / "rec.json.gz"))
    assert data["version"] == 2


def test_compare_shows_the_replays_traced_whole(test_clock):
    """Per kernel against graph-level: the diff says how many replays the
    after side traced whole (whose kernels its kernel count leaves out)."""
    test_clock.set(0, 1000)
    with loopscope.profile(metrics=False) as before:
        with before.step():
            _testhooks._inject("kernel", [(2000, 5000, 0, 7, 1, "k"), (6000, 9000, 0, 7, 2, "k")])
    prof, replays = profile_graph_loop(test_clock)
    result = loopscope.compare(before.summary(), prof.summary())
    change = result["figures"]["graph_replays"]
    assert (change["before"], change["after"]) == (0, len(replays))
    assert "CUDA-graph replays traced whole" in loopscope.format_compare(result)
