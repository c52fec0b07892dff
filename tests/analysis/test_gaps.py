"""Gap analysis on synthetic records: exact counts, classes, statistics,
causes, streams and devices.  All times are in ns; 1 us = 1_000 ns."""
from __future__ import annotations

import random

import pytest

import loopscope
from loopscope import _testhooks

US = 1_000


def kernels(*intervals, device=0, stream=7, first_corr=1, prefix="k"):
    """Kernel records for (start_ns, end_ns) intervals: correlation ids
    first_corr, first_corr+1, ...; names k0, k1, ..."""
    return [
        (start, end, device, stream, first_corr + i, f"{prefix}{i}")
        for i, (start, end) in enumerate(intervals)
    ]


# 1 us kernels separated by gaps of exactly 5, 30 and 80 us.
THREE_GAPS = kernels((1_000, 2_000), (7_000, 8_000), (38_000, 39_000), (119_000, 120_000))


def without_timing(summary):
    """The summary minus the wall-clock fields that differ between runs (every
    host cost in summary["overhead"] ends in _ms)."""
    overhead = {k: v for k, v in summary["overhead"].items() if not k.endswith("_ms")}
    return {**summary, "overhead": overhead, "host_ms": None}


def test_gaps_of_5_30_80_us_are_normal_warning_severe(run_trace):
    """One gap per class; every statistic exact."""
    s = run_trace(kernels=THREE_GAPS)
    g = s["gaps"]
    assert s["source"] == "injected"
    assert s["gpu_error"] is None
    assert (g["count"], g["normal"], g["warning"], g["severe"]) == (3, 1, 1, 1)
    assert g["mean_us"] == 38.333  # 115 us / 3
    assert g["p50_us"] == 30.0
    assert g["p99_us"] == 80.0
    assert g["max_us"] == 80.0
    assert g["idle_ms"] == 0.115
    assert g["busy_ms"] == 0.004
    assert g["busy_pct"] == 3.36  # 4 us busy of 119 us
    assert g["thresholds_us"] == [20.0, 50.0]
    # no launch records: the cause cannot be told
    assert g["by_cause"] == {"host": 0, "sync": 0, "other": 3}
    assert g["idle_by_cause_ms"] == {"host": 0.0, "sync": 0.0, "other": 0.115}


def test_histogram_and_worst_gaps(run_trace):
    """Histogram bins by lower edge; worst gaps longest first, with the
    kernels on either side."""
    g = run_trace(kernels=THREE_GAPS)["gaps"]
    edges = g["histogram"]["edges_us"]
    counts = g["histogram"]["counts"]
    assert len(edges) == len(counts)
    assert sum(counts) == 3
    assert {edges[i]: c for i, c in enumerate(counts) if c} == {5.0: 1, 20.0: 1, 50.0: 1}
    worst = [(w["duration_us"], w["after"], w["before"], w["cause"], w["step"], w["step_name"])
             for w in g["worst"]]
    assert worst == [
        (80.0, "k2", "k3", "other", None, None),
        (30.0, "k1", "k2", "other", None, None),
        (5.0, "k0", "k1", "other", None, None),
    ]


def test_gpu_section(run_trace):
    """Busy time, span and operation counts of the GPU section."""
    gpu = run_trace(kernels=THREE_GAPS)["gpu"]
    assert gpu["kernels"] == 4
    assert (gpu["memcpys"], gpu["memsets"]) == (0, 0)
    assert gpu["busy_ms"] == 0.004
    assert gpu["span_ms"] == 0.119
    assert gpu["busy_pct"] == 3.36
    assert gpu["ops_without_launch_record"] == 4
    assert [d["id"] for d in gpu["devices"]] == [0]


def test_nearest_rank_percentiles(run_trace):
    """Gaps of 1, 2, ..., 100 us: p50 = 50 us, p99 = 99 us (nearest rank)."""
    intervals, t = [], 1_000
    for gap_us in range(1, 101):
        intervals.append((t, t + 1_000))
        t += 1_000 + gap_us * US
    intervals.append((t, t + 1_000))
    g = run_trace(kernels=kernels(*intervals))["gaps"]
    assert g["count"] == 100
    assert g["p50_us"] == 50.0
    assert g["p99_us"] == 99.0
    assert g["max_us"] == 100.0
    assert g["mean_us"] == 50.5
    assert (g["normal"], g["warning"], g["severe"]) == (19, 31, 50)  # <20, 20..50, >50
    assert [w["duration_us"] for w in g["worst"]] == [float(d) for d in range(100, 90, -1)]


def test_threshold_edges_are_warnings(run_trace):
    """Exactly 20 us and exactly 50 us are warnings; 19.999 normal, 50.001 severe."""
    intervals, t = [], 1_000
    for gap_ns in (19_999, 20_000, 50_000, 50_001):
        intervals.append((t, t + 1_000))
        t += 1_000 + gap_ns
    intervals.append((t, t + 1_000))
    g = run_trace(kernels=kernels(*intervals))["gaps"]
    assert (g["normal"], g["warning"], g["severe"]) == (1, 2, 1)


@pytest.mark.parametrize(
    "thresholds, classes",
    [
        ((10, 40), (1, 1, 1)),
        ((40, 100), (2, 1, 0)),
        ((1, 4), (0, 0, 3)),
        ((30, 30), (1, 1, 1)),  # exactly 30 is neither below nor above
    ],
)
def test_custom_thresholds_change_the_classes(run_trace, thresholds, classes):
    """gap_thresholds_us=(normal_below, severe_above) reclassifies the same gaps."""
    g = run_trace(kernels=THREE_GAPS, gap_thresholds_us=thresholds)["gaps"]
    assert (g["normal"], g["warning"], g["severe"]) == classes
    assert g["thresholds_us"] == [float(v) for v in thresholds]
    assert g["count"] == 3 and g["max_us"] == 80.0


def test_overlapping_streams_leave_no_device_gap(run_trace):
    """Stream 1 has its own 10 us gap, but stream 2 keeps the device busy
    through it: no device gap; per_stream shows each stream's own gaps."""
    s1 = kernels((1_000, 11_000), (21_000, 31_000), stream=1, prefix="a")
    s2 = kernels((9_000, 23_000), stream=2, first_corr=10, prefix="b")
    s = run_trace(kernels=s1 + s2)
    g = s["gaps"]
    assert g["count"] == 0
    assert (g["normal"], g["warning"], g["severe"]) == (0, 0, 0)
    # no gap: no gap statistics (None, never a 0.0 that reads as measured); idle 0
    assert (g["mean_us"], g["p50_us"], g["p99_us"], g["max_us"], g["idle_ms"]) == (
        None, None, None, None, 0.0)
    assert g["busy_ms"] == 0.03
    assert g["busy_pct"] == 100.0
    assert g["worst"] == []
    assert s["gpu"]["kernels"] == 3
    streams = {(p["device"], p["stream"]): p for p in g["per_stream"]}
    assert sorted(streams) == [(0, 1), (0, 2)]
    one, two = streams[(0, 1)], streams[(0, 2)]
    assert one["kernels"] == 2 and two["kernels"] == 1
    assert (one["gaps"]["count"], one["gaps"]["normal"], one["gaps"]["max_us"]) == (1, 1, 10.0)
    assert one["gaps"]["busy_ms"] == 0.02
    assert one["gaps"]["busy_pct"] == 66.67
    assert two["gaps"]["count"] == 0
    assert two["gaps"]["busy_ms"] == 0.014


def test_records_out_of_order_give_the_same_answer(run_trace):
    """Injection order (shuffled, split over calls, API records first) does
    not change the analysis."""
    ks = kernels((1_000, 2_000), (7_000, 8_000), (38_000, 39_000), (119_000, 120_000),
                 (119_500, 125_000), (200_000, 201_000))
    ks += kernels((50_000, 60_000), stream=3, first_corr=20, prefix="s")
    apis = [(500, 600, 1), (7_500, 7_600, 2), (10_000, 10_100, 3), (100_000, 100_100, 4),
            (110_000, 110_100, 5), (150_000, 150_100, 6), (40_000, 40_100, 20)]
    syncs = [(121_000, 140_000)]
    in_order = run_trace(kernels=ks, apis=apis, syncs=syncs)

    shuffled = ks[:]
    random.Random(4).shuffle(shuffled)
    assert shuffled != ks
    with loopscope.profile() as prof:
        _testhooks._inject("api", list(reversed(apis)))
        _testhooks._inject("kernel", shuffled[:3])
        _testhooks._inject("sync_record", syncs)
        _testhooks._inject("kernel", shuffled[3:])
    mixed = prof.summary()

    assert in_order["gaps"]["count"] == 5
    assert without_timing(mixed) == without_timing(in_order)



def test_kernels_of_equal_time_list_the_earlier_first_launch_first():
    """A tie in top_kernels is broken by the records' time, not by the order
    names were interned (which follows injection order and what other live
    captures hold): `late` seen first still lists after `early`."""
    late, early = (10_000, 11_000, 0, 7, 1, "late_tie"), (1_000, 2_000, 0, 7, 2, "early_tie")
    for order in ([late, early], [early, late]):
        with loopscope.profile() as prof:
            _testhooks._inject("kernel", order)
        names = [k["name"] for k in prof.summary()["top_kernels"]]
        assert names == ["early_tie", "late_tie"], order

def test_one_record_out_of_order(run_trace):
    """A single late-injected record (the earliest kernel last) changes nothing."""
    late_first = THREE_GAPS[1:] + THREE_GAPS[:1]
    assert without_timing(run_trace(kernels=late_first)) == without_timing(
        run_trace(kernels=THREE_GAPS))


def test_causes_host_sync_other(run_trace):
    """other: the next op's launch began before the gap (queued: no host
    sync held it back), or no launch record and no sync; sync: a host sync
    overlaps the gap (wins over host); host: the next op's launch began
    at/after the gap start."""
    ks = kernels(
        (1_000, 2_000),        # k0
        (12_000, 13_000),      # k1: gap 10 us, launched at 5_000 >= 2_000      -> host
        (43_000, 44_000),      # k2: gap 30 us, launched at 25_000 in the sync   -> sync
        (124_000, 125_000),    # k3: gap 80 us, launched at 43_500 < 44_000      -> other
        (130_000, 131_000),    # k4: gap 5 us, no launch record                  -> other
        (140_000, 141_000),    # k5: gap 9 us, launched exactly at gap start     -> host
        (200_000, 201_000),    # k6: gap 59 us, launched late but a sync overlaps -> sync
    )
    apis = [(500, 900, 1), (5_000, 6_000, 2), (25_000, 25_400, 3), (43_500, 43_900, 4),
            (131_000, 131_500, 6), (150_000, 150_500, 7)]
    syncs = [
        (20_000, 40_000),
        (130_500, 131_000),    # ends exactly at the k4->k5 gap start: no overlap
        (140_000, 140_500),    # starts exactly at the k4->k5 gap end: no overlap
        (199_999, 200_000, 7),  # 1 ns of overlap with the k5->k6 gap
    ]
    g = run_trace(kernels=ks, apis=apis, syncs=syncs)["gaps"]
    causes = {(w["after"], w["before"]): w["cause"] for w in g["worst"]}
    assert causes == {
        ("k0", "k1"): "host",
        ("k1", "k2"): "sync",
        ("k2", "k3"): "other",
        ("k3", "k4"): "other",
        ("k4", "k5"): "host",
        ("k5", "k6"): "sync",
    }
    assert g["by_cause"] == {"host": 2, "sync": 2, "other": 2}
    assert g["idle_by_cause_ms"] == {"host": 0.019, "sync": 0.089, "other": 0.085}


def test_api_records_without_ops_are_harmless(run_trace):
    """API records whose correlation id matches no op are ignored; ops without
    one are counted."""
    s = run_trace(kernels=THREE_GAPS[:2], apis=[(1_500, 1_600, 2), (9_000, 9_100, 999)])
    assert s["gpu"]["ops_without_launch_record"] == 1
    assert s["gaps"]["by_cause"] == {"host": 0, "sync": 0, "other": 1}  # 1_500 < gap start


def test_two_devices_are_analysed_separately(run_trace):
    """A 100 us idle gap on device 0 counts although device 1 is busy then;
    the same stream id on two devices is two streams."""
    dev0 = kernels((1_000, 2_000), (102_000, 103_000), device=0, stream=7, prefix="d0_")
    dev1 = kernels((2_000, 102_000), device=1, stream=7, first_corr=10, prefix="d1_")
    s = run_trace(kernels=dev0 + dev1)
    g = s["gaps"]
    assert (g["count"], g["severe"], g["max_us"]) == (1, 1, 100.0)
    assert (g["worst"][0]["after"], g["worst"][0]["before"]) == ("d0_0", "d0_1")
    assert g["worst"][0]["device"] == 0
    gpu = s["gpu"]
    assert gpu["busy_ms"] == 0.102
    assert gpu["span_ms"] == 0.202
    assert gpu["busy_pct"] == 50.5
    assert [(d["id"], d["kernels"], d["busy_pct"]) for d in gpu["devices"]] == [
        (0, 2, 1.96), (1, 1, 100.0)]
    streams = [(p["device"], p["stream"], p["gaps"]["count"]) for p in g["per_stream"]]
    assert sorted(streams) == [(0, 7, 1), (1, 7, 0)]


def test_memcpy_and_memset_count_as_busy(run_trace):
    """Copies and sets fill the timeline like kernels and are counted apart."""
    s = run_trace(
        kernels=[(1_000, 2_000, 0, 7, 1, "k0"), (11_000, 12_000, 0, 7, 4, "k1")],
        memcpys=[(2_000, 5_000, 0, 7, 2, "copy", 4096)],    # touches k0
        memsets=[(10_000, 11_000, 0, 8, 3, "set", 128)],    # 5 us after the copy
    )
    g, gpu = s["gaps"], s["gpu"]
    assert (gpu["kernels"], gpu["memcpys"], gpu["memsets"]) == (2, 1, 1)
    assert g["count"] == 1
    assert g["max_us"] == 5.0
    assert (g["worst"][0]["after"], g["worst"][0]["before"]) == ("copy", "set")
    assert g["busy_ms"] == 0.006
    assert gpu["span_ms"] == 0.011


def test_only_memcpys_make_a_timeline(run_trace):
    """A trace of copies alone has gaps too."""
    s = run_trace(memcpys=[(1_000, 2_000, 0, 1, 1), (62_000, 63_000, 0, 1, 2)])
    assert (s["gpu"]["kernels"], s["gpu"]["memcpys"]) == (0, 2)
    assert (s["gaps"]["count"], s["gaps"]["severe"], s["gaps"]["max_us"]) == (1, 1, 60.0)


def test_touching_intervals_make_no_gap(run_trace):
    """end == next start is not a gap (gaps are strictly positive)."""
    s = run_trace(kernels=kernels((1_000, 2_000), (2_000, 3_000), (3_000, 4_000)))
    assert s["gaps"]["count"] == 0
    assert s["gaps"]["busy_ms"] == 0.003
    assert s["gpu"]["busy_pct"] == 100.0


def test_kernel_inside_a_longer_one(run_trace):
    """A short kernel contained in a long one adds no busy time, and the gap
    after both is measured from the long kernel's end."""
    ks = kernels((1_000, 10_000), (2_000, 3_000), (11_000, 12_000))
    g = run_trace(kernels=ks)["gaps"]
    assert g["count"] == 1
    assert g["max_us"] == 1.0
    assert g["busy_ms"] == 0.01
    assert (g["worst"][0]["after"], g["worst"][0]["before"]) == ("k0", "k2")


def test_zero_length_kernel_is_counted(run_trace):
    """A kernel with end == start is valid: counted, adds no busy time."""
    s = run_trace(kernels=kernels((1_000, 2_000), (5_000, 5_000), (9_000, 10_000)))
    assert s["gpu"]["kernels"] == 3
    assert s["gaps"]["count"] == 2
    assert s["gaps"]["idle_ms"] == 0.007
    assert s["gaps"]["busy_ms"] == 0.002


def test_report_shows_the_gap_figures(run_trace):
    """The text report carries the verdict and the gap line."""
    with loopscope.profile() as prof:
        _testhooks._inject("kernel", THREE_GAPS)
    text = prof.report()
    assert "synthetic records" in text
    assert "Gaps: 3 (normal 1, warning 1, severe 1)" in text
    assert "max 80.00 us" in text
    assert text.splitlines()[1].startswith(prof.summary()["diagnosis"]["verdict"].replace("_", " "))


def merged_busy(records):
    """Each device's busy intervals, computed here: its ops by start, an op
    that starts after the busy stretch ends opens a new one (one starting
    exactly at its end continues it)."""
    out = []
    for device in sorted({r[2] for r in records}):
        spans = []
        for start, end in sorted((r[0], r[1]) for r in records if r[2] == device):
            if spans and start <= spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], end)
            else:
                spans.append([start, end])
        out += [(s, e, device) for s, e in spans]
    return out


def test_busy_intervals_and_bins_are_the_union_of_the_ops():
    """The model keeps no busy intervals of its own (a device's are the
    stretches between its gaps): overlapping, nested and touching ops on
    two streams of one device and on a second device give the union of
    their intervals, whole, in a window, and per bin."""
    rng = random.Random(7)
    records, corr = [], 1
    for device in (0, 3):
        t = 1_000_000
        for _ in range(400):
            t += rng.choice((0, 0, 200, 5_000, 60_000))  # touching, close, far
            length = rng.choice((1, 500, 3_000, 40_000))
            stream = rng.choice((7, 8))
            records.append((t, t + length, device, stream, corr, "k"))
            corr += 1
            t += rng.choice((0, length // 2, length))  # nested, overlapping, back to back
    rng.shuffle(records)
    with loopscope.profile() as prof:
        _testhooks._inject("kernel", records)
    model = prof.model
    want = merged_busy(records)
    assert len(want) > 200  # many stretches: the gaps between them are real
    whole = model.window(0, 2**62, limit=10**6, kinds=("busy",))
    assert whole["busy"] == want and whole["busy_count"] == len(want)
    lo, hi = sorted(rng.sample(range(1_000_000, max(e for _, e, _ in want)), 2))
    part = model.window(lo, hi, limit=10**6, kinds=("busy",))
    assert part["busy"] == [w for w in want if w[1] >= lo and w[0] <= hi]
    bins, start, end = 97, 900_000, max(e for _, e, _ in want) + 1_000
    width = (end - start) / bins
    for device in (None, 3):
        expected = [0] * bins
        for s, e, d in want:
            if device is not None and d != device:
                continue
            for b in range(bins):  # the overlap of [s, e) with each slice, in whole ns
                a0, a1 = start + b * width, start + (b + 1) * width
                expected[b] += max(0.0, min(e, a1) - max(s, a0))
        got = model.busy_bins(start, end, bins, device=device)
        assert sum(got) == pytest.approx(sum(expected), abs=bins)
        assert list(got) == pytest.approx(expected, abs=2)


@pytest.mark.parametrize("corr, gaps", [(5, 0), (0, 2)])
def test_idle_between_the_kernels_of_one_graph_launch_is_no_gap(run_trace, corr, gaps):
    """Issue 39: kernels queued by one call (one known correlation id: a CUDA
    graph's replay traced per kernel): the two 30 us idle intervals between
    them are no gap (no launch the user could move) and not busy either
    (mostly the tracer's own time; a replay traced whole runs its nodes
    back to back): busy is the three kernels' 30 us, the busy share 100%,
    and the 60 us are summed apart as replay_idle_ms.  Correlation 0 says
    nothing: the same kernels are then three ops apart, two gaps."""
    ks = [(s, e, 0, 7, corr, f"node{i}") for i, (s, e) in
          enumerate([(1 * US, 11 * US), (41 * US, 51 * US), (81 * US, 91 * US)])]
    s = run_trace(kernels=ks)
    assert s["gaps"]["count"] == gaps
    assert s["gaps"]["busy_ms"] == s["gpu"]["busy_ms"] == 30 * US / 1e6
    assert s["gaps"]["merged_below_resolution"] == 0
    assert s["gpu"]["span_ms"] == 90 * US / 1e6
    if gaps:
        assert s["gaps"]["idle_ms"] == 60 * US / 1e6
        assert s["gpu"]["replay_idle_ms"] == 0
        assert s["gaps"]["busy_pct"] == s["gpu"]["busy_pct"] == 33.33
    else:
        assert s["gaps"]["idle_ms"] == 0
        assert s["gpu"]["replay_idle_ms"] == 60 * US / 1e6
        assert s["gaps"]["busy_pct"] == s["gpu"]["busy_pct"] == 100.0
