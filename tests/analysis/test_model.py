"""The analysed model (Capture.model(), Profile.model): computed once and
cached, its per-op and per-gap columns, steps from chosen ranges (syncs per
step included), attribution by the launching thread, inclusive range
edges, and busy time split into compute and collective communication.

Records are injected by hand (ranges included, with their threads), and
every expected figure is worked out here from those records by a few lines
of plain Python."""
from __future__ import annotations

import threading

import pytest

import loopscope
from loopscope import _core, _testhooks
from loopscope._range_steps import summary_with_range_steps

MAIN, WORKER, AUTOGRAD = 101, 202, 303  # thread ids of injected records


def profile_of(ranges=(), apis=(), kernels=(), memcpys=(), **options):
    with loopscope.profile(**options) as prof:
        if ranges:
            _testhooks._inject("range", list(ranges))
        if apis:
            _testhooks._inject("api", list(apis))
        if kernels:
            _testhooks._inject("kernel", list(kernels))
        if memcpys:
            _testhooks._inject("memcpy", list(memcpys))
    return prof


def union_ns(intervals):
    """Length of the union of (start, end) intervals: plain Python."""
    total, end = 0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


# -- one model, computed once ------------------------------------------------

def test_the_model_is_computed_once_per_thresholds_and_steps(test_clock):
    prof = profile_of(
        ranges=[(1_000, 9_000, "Step_0", -1, 0, MAIN), (2_000, 3_000, "r", 0, -1, MAIN)],
        apis=[(2_500, 2_600, 1, MAIN)], kernels=[(10_000, 11_000, 0, 7, 1, "k")])
    capture = prof.capture
    model = prof.model
    assert model is prof.model is capture.model() is capture.model(20.0, 50.0)
    assert isinstance(model, _core.Model)
    assert capture.model(10.0, 50.0) is not model
    assert capture.model(steps=[1]) is capture.model(steps=(1,)) is not model
    prof.summary()
    assert prof.model is model  # the summary read the same one
    capture.forget_models()
    assert prof.model is not model
    assert prof.model.thresholds_ns == (20_000, 50_000)


def test_no_model_before_the_end_or_without_records():
    prof = loopscope.profile(trace=False)
    assert prof.model is None and prof.capture is None
    assert not prof.is_running and not prof.is_finished
    with prof:
        assert prof.is_running and not prof.is_finished
        assert prof.model is None
    assert prof.is_finished and not prof.is_running
    assert prof.model is not None


# -- columns -------------------------------------------------------------------

def test_op_and_gap_columns(test_clock):
    """Two devices; ops overlap on device 0 (one busy interval); each gap
    ends at an op whose launch call came from a step's thread."""
    ranges = [(1_000, 5_000, "Step_0", -1, 0, MAIN), (6_000, 9_000, "Step_1", -1, 1, MAIN),
              (6_500, 7_000, "attn", 1, -1, MAIN)]
    apis = [(1_500, 1_600, 1, MAIN), (2_000, 2_100, 2, MAIN), (6_600, 6_700, 3, MAIN),
            (8_000, 8_100, 4, MAIN)]
    kernels = [(20_000, 30_000, 0, 7, 1, "a"), (25_000, 35_000, 0, 8, 2, "b"),
               (100_000, 101_000, 0, 7, 3, "c"), (40_000, 41_000, 1, 7, 4, "d"),
               (500_000, 501_000, 1, 7, 99, "orphan")]
    prof = profile_of(ranges, apis, kernels)
    model = prof.model
    launch = {a[2]: a[0] for a in apis}
    assert list(model.op_column("start_ns")) == [k[0] for k in kernels]
    assert list(model.op_column("device")) == [k[2] for k in kernels]
    assert list(model.op_column("stream")) == [k[3] for k in kernels]
    assert list(model.op_column("kind")) == [0] * 5
    assert list(model.op_column("launch_ns")) == [launch.get(k[4], 2**64 - 1) for k in kernels]
    assert list(model.op_column("step")) == [0, 0, 1, 1, -1]
    assert list(model.op_column("range")) == [0, 0, 2, 1, -1]
    assert list(model.op_column("group")) == [-1, -1, 0, -1, -1]
    assert list(model.op_column("comm")) == [0] * 5
    # gaps, by device then time: the idle time between merged busy intervals
    expected = []
    for device in (0, 1):
        ops = sorted((k[0], k[1], i) for i, k in enumerate(kernels) if k[2] == device)
        end, last = ops[0][1], ops[0][2]
        for start, stop, i in ops[1:]:
            if start > end:
                expected.append((start - end, device, kernels[i][3], i, last))
            if stop > end:
                end, last = stop, i
    gaps = list(zip(*(model.gap_column(c) for c in ("start_ns", "end_ns", "device", "stream",
                                                     "next_op", "prev_op", "step", "class",
                                                     "cause"))))
    assert [(e - s, d, st, n, p) for s, e, d, st, n, p, *_ in gaps] == expected
    assert [g[6] for g in gaps] == [1, -1]        # the steps of the ops ending them
    assert [g[7] for g in gaps] == [2, 2]         # 65 us and 459 us: severe
    # cause: host when the next op's launch call began after the gap began, else other
    assert [g[8] for g in gaps] == [0 if launch.get(kernels[g[4]][4], -1) >= g[0] else 2
                                    for g in gaps] == [2, 2]
    assert model.gap_count == len(expected) == prof.summary()["gaps"]["count"]
    assert model.op_count == 5 and model.ops_without_launch == 1
    with pytest.raises(ValueError, match="no column 'nope'"):
        model.op_column("nope")
    with pytest.raises(ValueError, match="no column 'start'"):
        model.gap_column("start")


def test_worst_gaps_and_bins(test_clock):
    """The n longest gaps, ties by time; busy and severe-gap time per slice."""
    kernels = [(10_000, 20_000, 0, 7, 1, "a"), (80_000, 90_000, 0, 7, 2, "b"),
               (150_000, 160_000, 0, 7, 3, "c"), (165_000, 175_000, 0, 7, 4, "d")]
    prof = profile_of(kernels=kernels)
    model = prof.model
    worst = model.worst_gaps(2)
    assert [(g["duration_ns"], g["start_ns"], g["before"], g["after"], g["class"])
            for g in worst] == [(60_000, 20_000, "b", "a", "severe"),
                                (60_000, 90_000, "c", "b", "severe")]
    assert len(model.worst_gaps(10)) == 3 and model.worst_gaps(0) == []
    start, end, bins = 0, 200_000, 8
    width = (end - start) // bins

    def overlap(a, b, k):
        return max(0, min(b, start + (k + 1) * width) - max(a, start + k * width))

    busy = [sum(overlap(k[0], k[1], i) for k in kernels) for i in range(bins)]
    assert list(model.busy_bins(start, end, bins)) == busy
    assert list(model.busy_bins(start, end, bins, device=0)) == busy
    assert list(model.busy_bins(start, end, bins, device=3)) == [0] * bins
    severe = [(20_000, 80_000), (90_000, 150_000)]  # the 5 us gap is normal
    assert list(model.gap_bins(start, end, bins)) == [
        sum(overlap(a, b, i) for a, b in severe) for i in range(bins)]
    assert sum(model.gap_bins(start, end, bins, "normal")) == 60_000 + 60_000 + 5_000
    # a window inside the run (found by binary search): the same sums, clipped
    for start, end, bins in [(85_000, 155_000, 7), (20_000, 80_000, 3), (159_999, 166_001, 2)]:
        edges = [start + (end - start) * k // bins for k in range(bins + 1)]

        def clipped(a, b, k):
            return max(0, min(b, edges[k + 1]) - max(a, edges[k]))

        assert list(model.busy_bins(start, end, bins)) == [
            sum(clipped(k[0], k[1], i) for k in kernels) for i in range(bins)]
        assert list(model.gap_bins(start, end, bins)) == [
            sum(clipped(a, b, i) for a, b in severe) for i in range(bins)]
    with pytest.raises(ValueError, match="start_ns < end_ns"):
        model.busy_bins(10, 10, 4)
    with pytest.raises(ValueError, match="min_class must be"):
        model.gap_bins(0, 10, 4, "big")


def merged(intervals):
    """The union of (start, end) intervals as disjoint intervals: plain Python."""
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [tuple(x) for x in out]


def test_a_window_holds_what_meets_it(test_clock):
    """window(): the busy intervals, gaps (of a class or worse), ranges and
    syncs that meet [start, end] (touching counts), each list cut at
    `limit` while the counts stay whole."""
    ranges = [(1_000, 5_000, "Step_0", -1, 0, MAIN), (6_000, 9_000, "Step_1", -1, 1, MAIN),
              (6_500, 7_000, "attn", 1, -1, MAIN)]
    apis = [(1_500, 1_600, 1, MAIN), (2_000, 2_100, 2, MAIN), (6_600, 6_700, 3, MAIN),
            (8_000, 8_100, 4, MAIN), (8_100, 8_200, 5, MAIN), (8_200, 8_300, 6, MAIN)]
    kernels = [(10_000, 20_000, 0, 7, 1, "a"), (12_000, 25_000, 0, 8, 2, "b"),
               (80_000, 90_000, 0, 7, 3, "c"), (150_000, 160_000, 0, 7, 4, "d"),
               (165_000, 175_000, 0, 7, 5, "e"), (40_000, 41_000, 1, 7, 6, "f"),
               (500_000, 501_000, 1, 7, 7, "g")]
    prof = profile_of(ranges, apis, kernels)
    model = prof.model
    normal_ns, severe_ns = model.thresholds_ns
    busy, gaps = [], []
    for device in (0, 1):
        spans = merged([(k[0], k[1]) for k in kernels if k[2] == device])
        busy += [(a, b, device) for a, b in spans]
        for (_, end), (start, _) in zip(spans, spans[1:]):
            cls = ("normal" if start - end < normal_ns else
                   "severe" if start - end > severe_ns else "warning")
            gaps.append((end, start - end, device, cls))

    def meets(a, b, lo, hi):
        return b >= lo and a <= hi

    rank = {"normal": 0, "warning": 1, "severe": 2}
    for lo, hi in [(0, 10**6), (25_000, 150_000), (20_000, 21_000), (175_001, 499_999),
                   (4_000, 6_000)]:
        for min_class in ("normal", "warning", "severe"):
            w = model.window(lo, hi, min_class=min_class)
            assert w["busy"] == [x for x in busy if meets(x[0], x[1], lo, hi)]
            assert w["busy_count"] == len(w["busy"])
            want = [g for g in gaps if meets(g[0], g[0] + g[1], lo, hi)
                    and rank[g[3]] >= rank[min_class]]
            assert [(g["start_ns"], g["duration_ns"], g["device"], g["class"])
                    for g in w["gaps"]] == want
            assert w["gap_count"] == len(want)
            # the last member: the group's name (no step prefix here), None for a step
            assert w["ranges"] == [(i, r[0], r[1], 1 if r[3] >= 0 else 0, MAIN,
                                    r[4] if r[4] >= 0 else None, r[2],
                                    r[2] if r[4] < 0 else None)
                                   for i, r in enumerate(ranges) if meets(r[0], r[1], lo, hi)]
    w_all = model.window(0, 10**6)
    # gaps carry their step, cause and the ops on either side, as worst_gaps
    w = model.window(0, 10**6, min_class="severe")
    assert w["gaps"] == sorted(model.worst_gaps(10)[:w["gap_count"]],
                               key=lambda g: (g["device"], g["start_ns"]))
    # limit cuts the lists, not the counts; min_range_ns drops short ranges
    w = model.window(0, 10**6, limit=1, min_class="normal", min_range_ns=3_001)
    assert [len(w[k]) for k in ("busy", "gaps", "ranges")] == [1, 1, 1]
    assert (w["busy_count"], w["gap_count"], w["range_count"]) == (len(busy), len(gaps), 1)
    assert w["ranges"][0][6] == "Step_0"  # 4 us; Step_1 (3 us) and attn are shorter
    assert model.window(0, 10**6, limit=0)["busy"] == []
    # kinds: only those are looked at and returned
    assert model.window(0, 10**6, kinds=("ranges",)) == {"ranges": w_all["ranges"],
                                                         "range_count": 3}
    assert set(model.window(0, 10**6, kinds=["busy", "syncs"])) == {
        "busy", "busy_count", "syncs", "sync_count"}
    with pytest.raises(ValueError, match="kinds must name 'busy', 'gaps', 'ranges' or 'syncs', "
                                         "got 'ops'"):
        model.window(0, 10, kinds=("busy", "ops"))
    with pytest.raises(TypeError, match="kinds must be a sequence"):
        model.window(0, 10, kinds=3)
    with pytest.raises(ValueError, match="start_ns <= end_ns"):
        model.window(10, 9)
    with pytest.raises(ValueError, match="limit >= 0"):
        model.window(0, 10, limit=-1)
    with pytest.raises(ValueError, match="window: min_class must be"):
        model.window(0, 10, min_class="big")
    # the steps as columns, as steps() has them
    steps = model.steps()
    for column in ("index", "start_ns", "end_ns", "first_ns", "last_ns", "busy_ns"):
        assert list(model.step_column(column)) == [st[column] for st in steps]
    assert list(model.step_column("idle_ns")) == [st["gaps"]["total_ns"] for st in steps]
    # Step_0 launched a and b; Step_1 the rest, f (device 1, at 40 us) first
    assert list(model.step_column("first_ns")) == [10_000, 40_000]
    with pytest.raises(ValueError, match="no column 'name'"):
        model.step_column("name")


def test_a_window_holds_the_syncs_that_meet_it(test_clock):
    """Syncs in a window: those whose host wait meets it, as syncs() has
    them (step included)."""
    with loopscope.profile() as prof:
        for i in range(3):
            with prof.step():
                _testhooks._inject_calls([("cudaStreamSynchronize", 1_000)] * (i + 1))
    model = prof.model
    every = sorted(model.syncs(), key=lambda x: x[0])
    assert len(every) == 6
    lo, hi = every[1][1], every[4][0]  # from the end of the 2nd to the start of the 5th
    w = model.window(lo, hi)
    assert w["syncs"] == [x[:6] for x in every[1:5]] and w["sync_count"] == 4
    assert [x[4] for x in w["syncs"]] == [1, 1, 2, 2]
    # live steps' ranges carry the step's own name (not its "Step_{i}" template)
    assert [r[6] for r in model.window(0, 2**64 - 1)["ranges"]] == [
        r["name"] for r in model.ranges()] == ["Step_0", "Step_1", "Step_2"]


# -- attribution ---------------------------------------------------------------

def test_range_edges_are_inclusive(test_clock):
    """A launch exactly at a range's start or exactly at its end belongs to
    it: making either end exclusive moves one of these kernels out."""
    ranges = [(1_000, 2_000, "Step_0", -1, 0, MAIN), (3_000, 4_000, "Step_1", -1, 1, MAIN),
              (3_000, 3_500, "inner", 1, -1, MAIN)]
    apis = [(1_000, 1_010, 1, MAIN),    # at Step_0's start
            (2_000, 2_010, 2, MAIN),    # at Step_0's end
            (3_500, 3_510, 3, MAIN),    # at inner's end (and inside Step_1)
            (3_000, 3_010, 4, MAIN),    # at inner's and Step_1's start
            (2_001, 2_011, 5, MAIN)]    # just after Step_0: in nothing
    kernels = [(10_000 * i, 10_000 * i + 1_000, 0, 7, i, f"k{i}") for i in range(1, 6)]
    prof = profile_of(ranges, apis, kernels)
    assert list(prof.model.op_column("step")) == [0, 0, 1, 1, -1]
    assert list(prof.model.op_column("range")) == [0, 0, 2, 2, -1]
    steps = prof.summary()["steps"]
    assert [s["kernels"] for s in steps] == [2, 2]
    assert prof.summary()["ranges"][0]["kernels"] == 2


def test_launches_go_to_the_step_of_their_own_thread(test_clock):
    """Two threads run their own steps over the same time: each kernel goes
    to the step (and range) of the thread that launched it, not to the
    step that happens to contain its launch in time."""
    ranges = [(1_000, 10_000, "Main_0", -1, 0, MAIN),
              (2_000, 12_000, "Worker_0", -1, 1, WORKER),
              (3_000, 4_000, "w_attn", 1, -1, WORKER),
              (11_000, 20_000, "Main_1", -1, 2, MAIN)]
    apis = [(3_500, 3_600, 1, MAIN),      # both steps open; MAIN's is Main_0
            (3_600, 3_700, 2, WORKER),    # WORKER's, inside w_attn
            (11_500, 11_600, 3, WORKER),  # Main_1 began later, but this is WORKER's
            (11_600, 11_700, 4, MAIN)]
    kernels = [(100_000 * i, 100_000 * i + 1_000, 0, 7, i, f"k{i}") for i in range(1, 5)]
    prof = profile_of(ranges, apis, kernels)
    assert list(prof.model.op_column("step")) == [0, 1, 1, 2]
    assert list(prof.model.op_column("range")) == [0, 2, 1, 3]
    s = prof.summary()
    assert [(st["name"], st["kernels"]) for st in s["steps"]] == [
        ("Main_0", 1), ("Worker_0", 2), ("Main_1", 1)]
    assert [(r["name"], r["kernels"]) for r in s["ranges"]] == [("w_attn", 1)]
    # each gap belongs to the step of the op that ends it
    assert [g["step_name"] for g in sorted(s["gaps"]["worst"], key=lambda g: g["start_ns"])] == [
        "Worker_0", "Worker_0", "Main_1"]


def test_a_thread_without_a_step_falls_back_to_the_step_open_in_time(test_clock):
    """autograd's backward thread launches while the main thread's step
    runs: with no step of its own, its launches go to that step; with no
    range of its own either, to the innermost range open on that step's
    thread.  A launch whose thread is unknown (0) is placed the same way."""
    ranges = [(1_000, 10_000, "Step_0", -1, 0, MAIN),
              (2_000, 9_000, "backward", 0, -1, MAIN),
              (5_000, 6_000, "hook", -1, -1, AUTOGRAD),   # a range of its own, no step
              (11_000, 20_000, "Step_1", -1, 1, MAIN)]
    apis = [(3_000, 3_100, 1, AUTOGRAD),   # no range of its own open: Step_0 / backward
            (5_500, 5_600, 2, AUTOGRAD),   # its own range: hook, step Step_0
            (12_000, 12_100, 3, 0),        # thread unknown: Step_1
            (10_500, 10_600, 4, AUTOGRAD)]  # no step open anywhere
    kernels = [(100_000 * i, 100_000 * i + 1_000, 0, 7, i, f"k{i}") for i in range(1, 5)]
    prof = profile_of(ranges, apis, kernels)
    assert list(prof.model.op_column("step")) == [0, 0, 1, -1]
    assert list(prof.model.op_column("range")) == [1, 2, 3, -1]
    s = prof.summary()
    assert [st["kernels"] for st in s["steps"]] == [2, 1]
    assert [(r["name"], r["kernels"]) for r in s["ranges"]] == [("backward", 1), ("hook", 1)]


def test_syncs_go_to_the_step_of_the_thread_that_waited(test_clock):
    """A sync in a worker thread's step counts there, not in the main
    thread's step open at the same time."""
    results = {}

    def worker(prof):
        with prof.step("Worker_{i}"):
            _testhooks._inject_calls([("cudaStreamSynchronize", 1_000)])
        results["done"] = True

    with loopscope.profile() as prof:
        with prof.step("Main_{i}"):
            thread = threading.Thread(target=worker, args=(prof,))
            thread.start()
            thread.join()
            _testhooks._inject_calls([("cudaDeviceSynchronize", 1_000)] * 2)
    assert results["done"]
    steps = prof.summary()["steps"]
    assert [(st["name"], st["syncs"]) for st in steps] == [("Main_0", 2), ("Worker_1", 1)]
    assert [sync[4] for sync in sorted(prof.model.syncs(), key=lambda x: x[0])] == [1, 0, 0]


# -- steps from ranges ------------------------------------------------------

def test_range_steps_get_every_figure_live_steps_get(test_clock):
    """Ranges chosen as steps: ops, gaps, worst gaps' steps and syncs per
    step, computed as for live steps."""
    with loopscope.profile() as prof:
        for i in range(3):
            with loopscope.range("denoise"):
                launch = _core.now_ns()
                _testhooks._inject("api", [(launch, launch + 1, i + 1)])
                _testhooks._inject_calls([("cudaStreamSynchronize", 100)] * i)
        _testhooks._inject("kernel", [(5_000_000 + 100_000 * i, 5_000_000 + 100_000 * i + 1_000, 0, 7,
                                  i + 1, f"k{i}") for i in range(3)])
    assert prof.summary()["steps"] == []
    s = summary_with_range_steps(prof.finished, lambda name: name == "denoise")
    assert s["steps_from"] == "ranges"
    assert [(st["index"], st["name"], st["kernels"], st["syncs"]) for st in s["steps"]] == [
        (0, "denoise#0", 1, 0), (1, "denoise#1", 1, 1), (2, "denoise#2", 1, 2)]
    assert [(g["duration_us"], g["step"], g["step_name"]) for g in s["gaps"]["worst"]] == [
        (99.0, 1, "denoise#1"), (99.0, 2, "denoise#2")]
    assert s["syncs"]["count"] == 3 and s["syncs"]["in_steps"] == 3
    assert s["ranges"] == []  # the ranges are the steps now
    assert summary_with_range_steps(prof.finished, lambda name: False) is None


# -- compute and communication ------------------------------------------------

def test_busy_time_splits_into_compute_and_comm(test_clock):
    """Collective kernels (NCCL's, raw or mangled names) apart from the
    rest: the union of each class, over the run, per device, step and
    range group; overlap counts in both."""
    ranges = [(1_000, 9_000, "Step_0", -1, 0, MAIN), (2_000, 3_000, "allreduce", 0, -1, MAIN),
              (10_000, 19_000, "Step_1", -1, 1, MAIN)]
    names = ["ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "gemm",
             "_Z40ncclDevKernel_AllGather_RING_LLP24ncclDevKernelArgsStorage", "gemm",
             "ncclKernel_Broadcast_RING_LL_Sum_int8_t", "elementwise"]
    apis = [(2_100, 2_200, 1, MAIN), (4_000, 4_100, 2, MAIN), (2_500, 2_600, 3, MAIN),
            (11_000, 11_100, 4, MAIN), (12_000, 12_100, 5, MAIN), (13_000, 13_100, 6, MAIN)]
    kernels = [(100_000, 150_000, 0, 20, 1, names[0]),   # comm, overlaps the gemm
               (120_000, 200_000, 0, 7, 2, names[1]),
               (210_000, 220_000, 0, 20, 3, names[2]),   # comm
               (300_000, 340_000, 0, 7, 4, names[3]),
               (330_000, 360_000, 0, 20, 5, names[4]),   # comm
               (400_000, 410_000, 1, 7, 6, names[5])]
    memcpys = [(205_000, 208_000, 0, 7, 7, "HtoD", 64)]  # no launch: compute, no step
    prof = profile_of(ranges, apis, kernels, memcpys)
    is_comm = [1, 0, 1, 0, 1, 0]
    assert list(prof.model.op_column("comm")) == is_comm + [0]
    ops = [(k[0], k[1], k[2], c, s) for k, c, s in zip(kernels, is_comm, [0, 0, 0, 1, 1, 1])]
    ops.append((205_000, 208_000, 0, 0, -1))

    def split(pick):
        chosen = [o for o in ops if pick(o)]
        comm = sum(union_ns([(a, b) for a, b, d, c, _ in chosen if c and d == dev]) for dev in (0, 1))
        compute = sum(union_ns([(a, b) for a, b, d, c, _ in chosen if not c and d == dev])
                      for dev in (0, 1))
        return round(comm / 1e6, 6), round(compute / 1e6, 6)

    s = prof.summary()
    assert (s["gpu"]["comm_ms"], s["gpu"]["compute_ms"]) == split(lambda o: True)
    assert (s["gpu"]["comm_ms"], s["gpu"]["compute_ms"]) == (0.09, 0.133)
    span = sum(max(o[1] for o in ops if o[2] == d) - min(o[0] for o in ops if o[2] == d)
               for d in (0, 1))
    assert s["gpu"]["comm_pct"] == round(100 * 90_000 / span, 2)
    assert [(d["comm_ms"], d["compute_ms"]) for d in s["gpu"]["devices"]] == [
        split(lambda o: o[2] == 0), split(lambda o: o[2] == 1)]
    assert [(st["comm_ms"], st["compute_ms"]) for st in s["steps"]] == [
        split(lambda o: o[4] == 0), split(lambda o: o[4] == 1)]
    (allreduce,) = s["ranges"]
    assert (allreduce["comm_ms"], allreduce["compute_ms"]) == (0.06, 0.0)  # kernels 1 and 3


def test_comm_figures_are_none_without_a_trace(test_clock):
    with loopscope.profile() as prof:
        with prof.step():
            pass
    s = prof.summary()
    assert s["gpu"] is None
    assert (s["steps"][0]["comm_ms"], s["steps"][0]["compute_ms"]) == (None, None)


@pytest.mark.parametrize("name, comm", [
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", True),
    ("ncclKernel_AllGather_RING_LL_Sum_int8_t", True),
    ("_Z40ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE", True),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", True),
    ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(...)", True),
    ("_ZN3c1016symmetric_memory26one_shot_all_reduce_kernelIfEEvPPT_", True),
    ("nvshmemi_transfer_rma_kernel", True),
    ("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEE", False),
    ("nvjet_sm90_tst_48x64_64x15_4x1_v_bz_bias_TNN", False),
    ("my_nccl_like_kernel", False),
])
def test_which_kernels_are_collectives(test_clock, name, comm):
    prof = profile_of(kernels=[(1_000, 2_000, 0, 7, 1, name)])
    assert list(prof.model.op_column("comm")) == [int(comm)]


def test_percentiles_of_many_gap_mixes():
    """p50 and p99 (nearest rank) of seeded random gap lengths, many of them
    equal, against sorted() of the same lengths."""
    import random

    rng = random.Random(5)
    for _ in range(40):
        t, kernels, lengths = 1_000, [], []
        for i in range(rng.randint(2, 80)):
            gap = (rng.choice([1, 2, 3, 5, 8, 8, 8, 13]) * 1_000 if rng.random() < 0.9
                   else rng.randint(1, 90_000))
            kernels.append((t, t + 500, 0, 7, i + 1, "k"))
            t += 500 + gap
            lengths.append(gap)
        lengths = sorted(lengths[:-1])
        n = len(lengths)
        prof = profile_of(kernels=kernels, trace=False)
        gaps = prof.model.total()["gaps"]
        assert (gaps["p50_ns"], gaps["p99_ns"]) == (lengths[(n * 50 + 99) // 100 - 1],
                                                    lengths[(n * 99 + 99) // 100 - 1])


def test_launches_and_their_ranges_whatever_order_the_records_come_in(test_clock):
    """Each op's launch is the API record with its correlation id (a
    runtime record before a driver one, then the earliest; none begun after
    the stop), and its range and step those holding that launch on its
    thread.  The analysis walks ops and records side by side when both come
    in correlation order (live), sorts them first when either does not, and
    reads the launch times in place when they are in time order: every mix
    of orders gives what plain Python works out here.  Some ops share a
    correlation id (a graph launch's kernels), some have no record, some
    records launched nothing."""
    import random

    rng = random.Random(12)
    stop = test_clock.at(1)
    steps = [(1_000_000 + 100 * i, 1_000_000 + 100 * i + 80) for i in range(12)]
    ranges = [(a, b, f"Step_{i}", -1, i, MAIN) for i, (a, b) in enumerate(steps)]
    ranges += [(a + 20, a + 50, "inner", i, -1, MAIN) for i, (a, _) in enumerate(steps)]
    apis, kernels = [], []
    t = 999_990
    for corr in range(1, 400):
        for domain in rng.sample([0, 1, 1, 0], rng.choice([0, 1, 1, 2, 3])):
            t += rng.randint(1, 6)  # one start per record: ties cannot pick the thread
            apis.append((t, t + 1, corr, MAIN, domain))
        for _ in range(rng.choice([0, 1, 1, 1, 3])):
            kernels.append((1_000_100 + len(kernels), 1_000_100 + len(kernels) + 1, 0, 7, corr,
                            "k"))
    assert apis[-1][0] > stop  # some records begin after the stop

    best = {}
    for a in apis:
        if a[0] <= stop and (a[2] not in best or (a[4], a[0]) < (best[a[2]][4], best[a[2]][0])):
            best[a[2]] = a

    def where(launch):  # one thread, nested ranges: plain time containment
        inside = [i for i, r in enumerate(ranges) if r[0] <= launch <= r[1]]
        if not inside:
            return -1, -1
        innermost = max(inside, key=lambda i: ranges[i][0])
        return innermost, next(r[4] for r in ranges if r[4] >= 0 and r[0] <= launch <= r[1])

    for ops_shuffled, apis_shuffled in ((False, False), (True, False), (False, True),
                                        (True, True)):
        ops, records = list(kernels), list(apis)
        if ops_shuffled:
            rng.shuffle(ops)
        if apis_shuffled:
            rng.shuffle(records)
        _testhooks._set_test_clock(test_clock.start, test_clock.tick)  # the same stop each time
        model = profile_of(ranges, records, ops).model
        launch = [best[k[4]][0] if k[4] in best else 2**64 - 1 for k in ops]
        assert list(model.op_column("launch_ns")) == launch
        placed = [where(t) if t != 2**64 - 1 else (-1, -1) for t in launch]
        assert list(model.op_column("range")) == [p[0] for p in placed]
        assert list(model.op_column("step")) == [p[1] for p in placed]
        assert model.ops_without_launch == sum(t == 2**64 - 1 for t in launch) > 0


def test_step_range_and_group_lines_whether_their_ops_come_in_slices_or_not(test_clock):
    """Each step, range and group sweeps the ops it owns and sums the gaps
    ending at them.  When the ops, in device order, already come owner by
    owner (one device, steps in time order, ops before the first step and
    after the last) each owner's ops are a slice of that order; otherwise
    (two devices, an op launched between steps, nested ranges) they are
    bucketed first.  Every case gives what plain Python works out here from
    the ops' own step and range."""
    import random

    rng = random.Random(7)

    def run(devices, between, nested):
        ranges, apis, kernels = [], [], []
        for s in range(6):
            start = 10_000 + 1_000 * s
            ranges.append((start, start + 800, f"Step_{s}", -1, s, MAIN))
            step_at = len(ranges) - 1
            if nested:
                ranges.append((start + 100, start + 500, "layer", step_at, -1, MAIN))
                ranges.append((start + 200, start + 300, "attn", len(ranges) - 1, -1, MAIN))
        launches = [5_000, 6_000] + [10_000 + 1_000 * (i // 8) + 50 * (i % 8) for i in range(48)]
        launches += [17_000] + ([12_900] if between else [])  # after the last step; between two
        t = 100_000
        for corr, launch in enumerate(sorted(launches), start=1):
            apis.append((launch, launch + 10, corr, MAIN))
            t += rng.choice([500, 2_000, 30_000])
            kernels.append((t, t + 1_000, rng.randrange(devices), 7, corr, "k"))
        model = profile_of(ranges, apis, kernels).model
        step = list(model.op_column("step"))
        op_range = list(model.op_column("range"))
        group_of = [r["group"] for r in model.ranges()]
        parent = [r[3] for r in ranges]

        def chain(r):
            while r >= 0:
                yield r
                r = parent[r]

        def line(ops):
            busy = 0
            for device in range(devices):
                busy += union_ns([kernels[i][:2] for i in ops if kernels[i][2] == device])
            return (len(ops), busy, min((kernels[i][0] for i in ops), default=0),
                    max((kernels[i][1] for i in ops), default=0))

        def figures(got):
            return (got["kernels"], got["busy_ns"], got["first_ns"], got["last_ns"])

        gaps = list(zip(model.gap_column("start_ns"), model.gap_column("end_ns"),
                        model.gap_column("next_op")))
        for s, got in enumerate(model.steps()):
            ops = [i for i in range(len(kernels)) if step[i] == s]
            assert figures(got) == line(ops)
            mine = [b - a for a, b, nxt in gaps if step[nxt] == s]
            assert (got["gaps"]["count"], got["gaps"]["total_ns"]) == (len(mine), sum(mine))
        for r, got in enumerate(model.ranges()):
            assert figures(got) == line([i for i in range(len(kernels))
                                         if r in chain(op_range[i])])
        for g, got in enumerate(model.groups()):
            ops = [i for i in range(len(kernels))
                   if g in {group_of[x] for x in chain(op_range[i])}]
            assert figures(got) == line(ops)
            mine = [b - a for a, b, nxt in gaps
                    if g in {group_of[x] for x in chain(op_range[nxt])}]
            assert (got["gaps"]["count"], got["gaps"]["total_ns"]) == (len(mine), sum(mine))
        return model

    sliced = run(devices=1, between=False, nested=False)
    assert sliced.op_column("step")[0] == -1 and sliced.op_column("step")[-1] == -1
    for devices, between, nested in ((2, False, False), (1, True, False), (1, False, True),
                                     (2, True, True)):
        run(devices, between, nested)


def test_a_step_range_sweeps_its_own_ops_when_the_step_holds_others(test_clock):
    """A step's range usually holds exactly the step's ops, and its line is
    then the step's; here as many but other ops: a nested step's kernel is
    in the outer step's range but in the nested step, and a kernel launched
    by a thread with a range but no step of its own is in the outer step
    (the fallback) but in its own thread's range."""
    ranges = [(1_000, 9_000, "Step_0", -1, 0, MAIN), (2_000, 3_000, "Step_1", 0, 1, MAIN),
              (4_000, 5_000, "hook", -1, -1, AUTOGRAD)]
    apis = [(1_500, 1_600, 1, MAIN), (2_500, 2_600, 2, MAIN), (4_500, 4_600, 3, AUTOGRAD)]
    kernels = [(10_000, 11_000, 0, 7, 1, "a"), (20_000, 22_000, 0, 7, 2, "b"),
               (30_000, 34_000, 0, 7, 3, "c")]
    model = profile_of(ranges, apis, kernels).model
    assert list(model.op_column("step")) == [0, 1, 0]
    assert list(model.op_column("range")) == [0, 1, 2]
    step, step_range = model.steps()[0], model.ranges()[0]
    assert (step["kernels"], step["busy_ns"]) == (2, 1_000 + 4_000)
    assert (step_range["kernels"], step_range["busy_ns"]) == (2, 1_000 + 2_000)


def test_stream_lines_of_ops_taking_turns_on_streams_of_like_ids(test_clock):
    """Kernels take turns on streams whose ids share their low bits (7, 15,
    23, on two devices: the stream lookup keeps the last few streams by
    those bits) and each stream's line holds its own kernels: one line per
    (device, stream) in that order, counts and busy time as plain Python
    finds them."""
    kernels = [(10_000 + 1_000 * i, 10_000 + 1_000 * i + 100 + 10 * i, i % 2, 7 + 8 * (i % 3),
                i + 1, "k") for i in range(60)]
    kernels.append((200_000, 201_000, 1, 2**32 - 2, 61, "k"))  # a large stream id too
    streams = sorted({(k[2], k[3]) for k in kernels})
    got = profile_of(kernels=kernels).model.streams()
    assert [(g["device"], g["stream"]) for g in got] == streams
    for (device, stream), g in zip(streams, got):
        mine = [k[:2] for k in kernels if (k[2], k[3]) == (device, stream)]
        assert (g["kernels"], g["busy_ns"]) == (len(mine), union_ns(mine))
        assert g["gaps"]["count"] == len(mine) - 1
