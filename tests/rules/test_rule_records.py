"""Rules of the C analysis at their edges: a launch exactly at a range's
start or end, a launch exactly when the GPU went idle, syncs that only touch
a gap, touching kernels, the gap classes at their thresholds, records that
began after the profile stopped, and calls the store had no room for.
Expected figures come from a few lines of plain Python over the same
synthetic records (the rule as documented), never from loopscope."""
from __future__ import annotations

import functools

import pytest

import loopscope
from loopscope import _testhooks
from loopscope.views._report import format_report

from fakes import kernel, sample

MS = 1_000_000


def gaps_of(kernels):
    """Idle intervals between the union of busy intervals (one device)."""
    out, end = [], None
    for start, stop, *_ in sorted(kernels):
        if end is not None and start > end:
            out.append((end, start))
        end = stop if end is None else max(end, stop)
    return out


def launched_in(launches, a, b):
    """Ops whose launch call began inside [a, b], both ends included."""
    return [corr for corr, t in launches.items() if a <= t <= b]


def test_a_launch_exactly_at_a_range_edge_is_inside_it(inject, test_clock):
    """Step 0 spans clock reads 1-2, range R reads 3-4 (1 ms apart).  Seven
    kernels are launched: 1 ns before step 0, at its first and last
    nanosecond, 1 ns after it, at R's two edges, 1 ns after R."""
    test_clock.set(MS, MS)
    with loopscope.profile() as prof:
        with prof.step():
            pass
        with loopscope.range("R"):
            pass
        step, rng = (test_clock.at(1), test_clock.at(2)), (test_clock.at(3), test_clock.at(4))
        times = [step[0] - 1, step[0], step[1], step[1] + 1, rng[0], rng[1], rng[1] + 1]
        launches = {corr: t for corr, t in enumerate(times, start=1)}
        # on the device: 10 us kernels 5 us apart, in launch order
        kernels = [kernel(10_000 + 15_000 * i, 20_000 + 15_000 * i, corr)
                   for i, corr in enumerate(launches)]
        inject("kernel", kernels)
        inject("api", [(t, t + 1, corr) for corr, t in launches.items()])
    s = prof.summary()
    in_step, in_range = launched_in(launches, *step), launched_in(launches, *rng)
    assert (len(in_step), len(in_range)) == (2, 2)
    assert s["steps"][0]["kernels"] == len(in_step)
    r, = s["ranges"]
    assert (r["name"], r["kernels"]) == ("R", len(in_range))
    # a gap belongs to the range in which the op that ends it was launched;
    # every op but the first on the device ends one
    first = min(launches, key=lambda c: kernels[c - 1][0])
    assert s["steps"][0]["gaps"]["count"] == len([c for c in in_step if c != first])
    assert r["gaps"]["count"] == len([c for c in in_range if c != first])


def cause(gap, launch, syncs):
    """The rule (issue 24 item 6): `other` when the next op's launch call
    began before the gap (it was queued: a host sync over the gap did not
    hold it back); else `sync` when a host sync overlapped the gap (by at
    least a nanosecond), `host` when the launch call began at or after the
    gap's start, `other` with no launch."""
    a, b = gap
    if launch is not None and launch < a:
        return "other"
    if any(s < b and e > a for s, e in syncs):
        return "sync"
    return "host" if launch is not None else "other"


def test_gap_causes_at_their_edges(run_trace):
    """k1 is launched at the very nanosecond the GPU went idle (host); k2 a
    nanosecond before (other); k3 and k4 inside their gaps, with a sync
    that ends exactly where gap 3 starts and one that starts exactly where
    gap 4 ends (neither overlaps: host); k5 inside gap 5, which a sync
    overlaps by one nanosecond (sync); k6 queued 10 ns before gap 6, which
    one long sync covers whole (other: the queue, not the sync, set the
    pace, as in a cudaDeviceSynchronize over a queue of kernels)."""
    kernels = [kernel(10_000 + 30_000 * i, 20_000 + 30_000 * i, i + 1) for i in range(7)]
    gaps = gaps_of(kernels)
    launches = {1: 5_000, 2: gaps[0][0], 3: gaps[1][0] - 1, 4: gaps[2][0] + 10,
                5: gaps[3][0] + 10, 6: gaps[4][0] + 10, 7: gaps[5][0] - 10}
    syncs = [(gaps[2][0] - 3_000, gaps[2][0]), (gaps[3][1], gaps[3][1] + 3_000),
             (gaps[4][1] - 1, gaps[4][1] + 500), (gaps[5][0] - 5_000, gaps[5][1] + 5_000)]
    s = run_trace(kernels=kernels, apis=[(t, t + 1, c) for c, t in launches.items()],
                  syncs=syncs)
    expected = [cause(g, launches[i + 2], syncs) for i, g in enumerate(gaps)]
    assert expected == ["host", "other", "host", "host", "sync", "other"]
    worst = sorted(s["gaps"]["worst"], key=lambda g: g["start_ns"])
    assert [g["cause"] for g in worst] == expected
    assert s["gaps"]["by_cause"] == {k: expected.count(k) for k in ("host", "sync", "other")}


def test_a_sync_over_a_gap_without_launch_records_is_its_cause(run_trace):
    """No launch record (a trace without runtime calls): a sync over the
    gap is its cause; without one the cause is unknown (other)."""
    kernels = [kernel(10_000, 20_000, 1), kernel(50_000, 60_000, 2), kernel(90_000, 100_000, 3)]
    s = run_trace(kernels=kernels, syncs=[(25_000, 30_000)])
    worst = sorted(s["gaps"]["worst"], key=lambda g: g["start_ns"])
    assert [g["cause"] for g in worst] == ["sync", "other"]


def test_short_gaps_inside_one_long_device_sync_are_not_sync(run_trace):
    """Issue 24 item 6: the host sits in one cudaDeviceSynchronize while the
    GPU works through 100 kernels queued before it, 1 us apart: 98% busy.
    None of those gaps is the sync's; only the last one is: the sync still
    ran when the queue ran dry, and the next launch came after it."""
    queued = [kernel(10_000 + 51_000 * i, 60_000 + 51_000 * i, i + 1) for i in range(100)]
    last_end = queued[-1][1]
    after = kernel(last_end + 30_000, last_end + 80_000, 101)
    launches = {i + 1: 1_000 + i for i in range(100)}
    sync = (1_200, last_end + 10_000)
    launches[101] = sync[1] + 5_000
    kernels = queued + [after]
    s = run_trace(kernels=kernels, apis=[(t, t + 1, c) for c, t in launches.items()],
                  syncs=[sync])
    gaps = gaps_of(kernels)
    expected = [cause(g, launches[i + 2], [sync]) for i, g in enumerate(gaps)]
    assert expected == ["other"] * 99 + ["sync"]
    assert s["gaps"]["by_cause"] == {k: expected.count(k) for k in ("host", "sync", "other")}


def test_touching_kernels_leave_no_gap(run_trace):
    """A kernel that starts the nanosecond the previous one ended, and one
    that overlaps it, leave the device busy: only the real hole is a gap."""
    kernels = [kernel(1_000, 2_000, 1), kernel(2_000, 3_000, 2), kernel(2_500, 4_000, 3),
               kernel(9_000, 9_500, 4)]
    s = run_trace(kernels=kernels)
    gaps = gaps_of(kernels)
    assert gaps == [(4_000, 9_000)]
    assert s["gaps"]["count"] == len(gaps)
    assert s["gaps"]["idle_ms"] == sum(b - a for a, b in gaps) / MS
    assert s["gpu"]["busy_ms"] == (4_000 - 1_000 + 500) / MS


def test_gap_classes_at_their_thresholds(run_trace):
    """Gaps of 19.999, 20, 50 and 50.001 us with the default thresholds:
    normal below 20 us, severe above 50 us, warning in between (both
    thresholds themselves are warnings)."""
    durations = [19_999, 20_000, 50_000, 50_001]
    kernels, t = [], 1_000
    for i, d in enumerate(durations + [0]):
        kernels.append(kernel(t, t + 1_000, i + 1))
        t += 1_000 + d
    s = run_trace(kernels=kernels)
    normal = sum(d < 20_000 for d in durations)
    severe = sum(d > 50_000 for d in durations)
    g = s["gaps"]
    assert (g["normal"], g["warning"], g["severe"]) == (normal, len(durations) - normal - severe,
                                                        severe) == (1, 2, 1)


def test_records_that_began_after_the_stop_are_left_out(inject, test_clock):
    """The profile starts at clock read 0 (1.000 ms) and stops at read 1
    (1.001 ms).  k1's launch record begins at 5 ms, after the stop: it is
    not k1's launch, so k1 has none and the gap before it is not `host`.
    The sync record over the gap k2 -> k3 (the GPU still ran after the
    host stopped) begins after the stop too: not a cause.  Both are counted
    in overhead.records_after_stop."""
    stop = test_clock.at(1)
    kernels = [kernel(1_000_100, 1_000_200, 1), kernel(1_000_500, 1_000_600, 2),
               kernel(1_002_000, 1_002_100, 3), kernel(1_003_000, 1_003_100, 4)]
    apis = [(1_000_050, 1_000_051, 1), (5 * MS, 5 * MS + 1, 2), (1_000_060, 1_000_061, 3),
            (1_000_070, 1_000_071, 4)]
    syncs = [(1_002_050, 1_003_050)]
    with loopscope.profile() as prof:
        inject("kernel", kernels)
        inject("api", apis)
        inject("sync_record", syncs)
    s = prof.summary()
    kept_apis = {c: t for t, _, c in apis if t <= stop}
    kept_syncs = [x for x in syncs if x[0] <= stop]
    gaps = gaps_of(kernels)
    expected = [cause(g, kept_apis.get(i + 2), kept_syncs) for i, g in enumerate(gaps)]
    assert expected == ["other", "other", "other"]
    assert s["gaps"]["by_cause"] == {k: expected.count(k) for k in ("host", "sync", "other")}
    assert s["gpu"]["ops_without_launch_record"] == len(kernels) - len(kept_apis) == 1
    assert s["overhead"]["records_after_stop"] == (len(apis) - len(kept_apis)
                                                   + len(syncs) - len(kept_syncs)) == 2


def test_calls_beyond_the_store_are_counted_as_dropped():
    """3000 device syncs from one line, no step (the call store grows only
    at step ends): every call is either a sync of the summary or a dropped
    record, some are dropped, and the report says how many."""
    calls = 3_000
    wait = functools.partial(_testhooks._inject_calls, [("cudaDeviceSynchronize", 1_000)] * 1_000)
    with loopscope.profile() as prof:
        for _ in range(calls // 1_000):
            wait()
    s = prof.summary()
    dropped = s["dropped_records"]
    assert dropped > 0
    assert s["syncs"]["count"] + dropped == calls
    assert f"Records: {s['overhead']['records']}, dropped {dropped};" in prof.report()


def test_the_report_warns_of_a_pm_buffer_overflow(inject, test_clock):
    """With counters and an overflow count in summary["metrics"] (live PM
    sampling fills it; here it is set on an injected run's summary), the
    report warns in one line; without overflows it does not."""
    with loopscope.profile() as prof:
        inject("sample", [sample(test_clock.at(0), test_clock.at(5), sm_active_pct=50,
                                 dram_throughput_pct=20)])
    s = dict(prof.summary())
    warning = ("WARNING: the PM sampling buffer overflowed 3 time(s): samples were lost; "
               "raise metrics_buffer_mb or metrics_interval_us")
    assert warning not in format_report(s).splitlines()
    s["metrics"] = dict(s["metrics"], overflows=3)
    assert warning in format_report(s).splitlines()


def test_the_runtime_launch_record_is_preferred_over_the_driver_one(run_trace):
    """torch's launches go through the runtime, which calls the driver: both
    records carry the op's correlation id.  The runtime one is the user's
    launch.  Here the driver record began before the gap (`other`), the
    runtime one at its start (`host`): the gap is `host`, whatever the
    order the records arrive in."""
    kernels = [kernel(10_000, 20_000, 1), kernel(50_000, 60_000, 2)]
    gap_start = 20_000
    driver, runtime = (gap_start - 5_000, gap_start - 4_000, 2, 0, 1), (gap_start, gap_start + 1, 2, 0, 0)
    for apis in ([driver, runtime], [runtime, driver]):
        s = run_trace(kernels=kernels, apis=[(5_000, 5_001, 1, 0, 0)] + apis)
        assert s["gaps"]["by_cause"] == {"host": 1, "sync": 0, "other": 0}
