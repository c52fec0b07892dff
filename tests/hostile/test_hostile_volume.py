"""Issue 25, range-name volume: summary() of many distinct range names and
of many ranges from several threads stays fast, small and exact.  The
bounds here are the issue's scaled down with room for a loaded CI machine
(1M names in <= 2 s and <= 500 MB; here 50k names of two ranges each in
< 0.5 s and < 60 MiB: 0.08 s and +26 MiB after the fix, 0.98 s and +126
MiB before it on this 2-core machine); the full sizes are measured by
benchmarks/scale/bench_range_volume.py (figures in benchmarks/RESULTS.md).
Expected figures come from plain Python over the same scripted clock or
injected records."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import loopscope
from loopscope import _core, _testhooks

# The benchmarks' own memory figures (benchmarks/scale/_memory.py), so the test
# and bench_range_volume.py measure alike.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "scale"))
from _memory import reset_peak_rss, rss_mb  # noqa: E402

TICK = 1_000  # scripted clock: 1 us a read
START = 1_000_000_000
PREFIX = "Step_0/"


def timed_summary(prof) -> tuple[dict, float, float | None]:
    """(summary, seconds, peak RSS growth in MiB or None where it cannot be
    measured), the summary computed cold."""
    resettable = reset_peak_rss()
    before = rss_mb("VmHWM")
    t0 = time.perf_counter()
    summary = prof.summary()
    took = time.perf_counter() - t0
    return summary, took, (rss_mb("VmHWM") - before) if resettable else None


def test_100k_distinct_names_in_a_step_are_each_exact_and_quick():
    """100,000 ranges, each its own name, half of them written with the
    step's prefix ("Step_0/x7" is x7 under Step_0): 50,000 entries of two
    ranges each.  Each range holds one clock read of its own, so it lasts
    2 ticks; entry k's first range is the k-th, its parent none."""
    n = 50_000
    order = [f"x{k}" for k in range(n)]
    written = order + [PREFIX + name for name in reversed(order)]
    ranges = [loopscope.range(name) for name in written]
    _testhooks._set_test_clock(START, TICK)
    try:
        with loopscope.profile() as prof:
            with prof.step():
                for r in ranges:
                    with r:
                        _core.now_ns()
    finally:
        _testhooks._set_test_clock(0, 0)
    summary, took, grew = timed_summary(prof)
    want = {}  # key -> [count, host ticks, prefixed], in order of first use
    for name in written:
        key = name[len(PREFIX):] if name.startswith(PREFIX) else name
        entry = want.setdefault(key, [0, 0, False])
        entry[0] += 1
        entry[1] += 2
        entry[2] |= name.startswith(PREFIX)
    got = summary["ranges"]
    assert [(r["name"], r["count"], r["host_ms"], r["step_prefixed"], r["parent"], r["depth"])
            for r in got] == [(key, c, t * TICK / 1e6, p, None, 0)
                              for key, (c, t, p) in want.items()]
    assert len(got) == n and all(r["gpu_ms"] is None and r["samples"] == 0 for r in got)
    assert took < 0.5, f"summary() of 100k ranges of 50k names took {took:.2f} s"
    if grew is not None:
        assert grew < 60, f"summary() of 50k names grew the peak RSS by {grew:.0f} MiB"


def test_distinct_names_outside_any_step_keep_their_names():
    """20,000 names outside any step: no prefix is taken off, each entry
    its own name once, in order."""
    n = 20_000
    ranges = [loopscope.range(f"{PREFIX}y{k}") for k in range(n)]
    _testhooks._set_test_clock(START, TICK)
    try:
        with loopscope.profile() as prof:
            for r in ranges:
                with r:
                    pass
    finally:
        _testhooks._set_test_clock(0, 0)
    got = prof.summary()["ranges"]
    assert [(r["name"], r["count"], r["host_ms"], r["step_prefixed"]) for r in got] == [
        (f"{PREFIX}y{k}", 1, TICK / 1e6, False) for k in range(n)]


def injected_threads(rng: random.Random, per_thread: int, threads: int):
    """Records of a step on the main thread and `threads` other threads'
    ranges of their own (no parent), some inside the step's time, some
    before or after it, named with and without the step's prefix."""
    main = 1
    step = (10_000, 10_000 + 10 * per_thread)
    records = [(step[0], step[1], "Step_0", -1, 0, main)]
    for k in range(threads):
        t = rng.randrange(0, 1_000)
        for _ in range(per_thread):
            start = t + rng.randrange(1, 25)
            end = start + rng.randrange(0, 40)
            name = rng.choice(["attn", "mlp", f"t{k}", PREFIX + "attn", PREFIX + f"t{k}"])
            records.append((start, end, name, -1, -1, 100 + k))
            t = end
    # The threads' records interleave in time, as they come in.
    head, rest = records[:1], records[1:]
    rest.sort(key=lambda r: (r[0], r[5]))
    return step, head + rest


@pytest.mark.parametrize("seed", [0, 1])
def test_ranges_of_many_threads_take_the_step_running_when_they_began(seed):
    """200,000 ranges of 8 threads beside one step: a range that began
    within the step (starts, then points, then ends at one time: both ends
    inclusive) has the step's prefix taken off its key; the others keep
    their names.  Entries in order of first use, counts and host times
    summed: a plain-Python pass over the same records."""
    rng = random.Random(seed)
    step, records = injected_threads(rng, 25_000, 8)
    with loopscope.profile() as prof:
        for at in range(0, len(records), 50_000):
            assert _testhooks._inject("range", records[at:at + 50_000]) == len(records[at:at + 50_000])
    want = {}
    for start, end, name, _, _, _ in records[1:]:
        inside = step[0] <= start <= step[1]
        key = name[len(PREFIX):] if inside and name.startswith(PREFIX) else name
        entry = want.setdefault(key, [0, 0, False])
        entry[0] += 1
        entry[1] += end - start
        entry[2] |= inside and name.startswith(PREFIX)
    summary, took, _ = timed_summary(prof)
    got = summary["ranges"]
    assert [(r["name"], r["count"], r["host_ms"], r["step_prefixed"]) for r in got] == [
        (key, c, ns / 1e6, p) for key, (c, ns, p) in want.items()]
    assert took < 2.0, f"summary() of 200k thread ranges took {took:.2f} s"


def test_live_threads_without_steps_count_every_range():
    """8 threads, 30,000 ranges each, named by their thread, no step: one
    entry per thread holding all its ranges; the model's memory a few
    bytes a range (+1.8 MiB here; before the fix ~110 B a range: +22 MiB)."""
    threads, each = 8, 30_000

    def work(k: int) -> None:
        r = loopscope.range(f"t{k}")
        for _ in range(each):
            with r:
                pass

    with loopscope.profile() as prof:
        workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    summary, took, grew = timed_summary(prof)
    assert sorted((r["name"], r["count"], r["parent"], r["step_prefixed"])
                  for r in summary["ranges"]) == [
        (f"t{k}", each, None, False) for k in range(threads)]
    assert summary["overhead"]["ranges"] == threads * each
    assert took < 2.0, f"summary() of {threads * each:,} thread ranges took {took:.2f} s"
    if grew is not None:
        assert grew < 10, f"summary() of {threads * each:,} grew the peak RSS by {grew:.0f} MiB"


def test_group_table_columns_are_the_groups_figures():
    """Model.group_table gives, column by column, what groups() gives per
    dict (the summary reads the columns; a million names make no dicts)."""
    records = [(10, 19, "S0", -1, 0, 11), (11, 14, "S0/a", 0, -1, 11),
               (12, 13, "S0/a/b", 1, -1, 11), (15, 16, "b", 0, -1, 11), (30, 33, "x", -1, -1, 11),
               (31, 32, "S0/a/b", 4, -1, 11)]
    with loopscope.profile() as prof:
        _testhooks._inject("range", records)
    model = prof.model
    table = model.group_table()
    groups = model.groups()
    assert table["name"] == [g["name"] for g in groups] == ["a", "a/b", "b", "x", "S0/a/b"]
    for column, key in [("count", "count"), ("host_ns", "host_ns"), ("span_ns", "span_ns"),
                        ("parent", "parent"), ("depth", "depth"), ("busy_ns", "busy_ns"),
                        ("kernels", "kernels"), ("gap_count", None)]:
        want = [g[key] for g in groups] if key else [g["gaps"]["count"] for g in groups]
        assert list(table[column]) == want, column
    assert list(table["parent"]) == [-1, 0, -1, -1, 3]  # b and a sit directly under the step
    assert [bool(p) for p in table["step_prefixed"]] == [g["step_prefixed"] for g in groups]
    assert list(model.group_table(["count"])) == ["count"]
    with pytest.raises(ValueError, match="group_table: no column 'nope'"):
        model.group_table(["nope"])
    with pytest.raises(TypeError, match="group_table: columns must be a sequence"):
        model.group_table(5)
    assert model.group_metrics() is None  # no samples


@pytest.mark.parametrize("args, shown", [
    (("names", "--count", "3000"), "3,000 ranges in one step"),
    (("names", "--count", "3000", "--no-step"), "3,000 ranges outside any step"),
    (("threads", "--count", "4000", "--threads", "3"), "4,000 ranges from 3 threads"),
    (("threads", "--count", "4000", "--step"), "4,000 ranges from 8 threads inside a step"),
])
def test_the_volume_benchmark_runs_small(args, shown):
    """benchmarks/scale/bench_range_volume.py at a size CI affords: each case runs
    to its end and its ranges' counts add up to what it made."""
    root = Path(__file__).resolve().parents[2]
    python_dir = Path(loopscope.__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "scale" / "bench_range_volume.py"), *args],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=str(python_dir)))
    assert result.returncode == 0, result.stderr
    assert shown in result.stdout and "(right)" in result.stdout, result.stdout


def test_each_range_averages_the_samples_over_its_own_kernels(test_clock):
    """A step holding range A (a kernel over [100, 200] us) then range B (a
    kernel over [300, 400] us); SM 10% sampled over A's kernel, 70% over
    B's: A's busy figure is 10, B's 70, the step's 40 (each range reads the
    busy intervals of its own ops, swept just before: the per-range lines
    moved in this change, and a range must not read the one before it)."""
    t = test_clock.at
    with loopscope.profile() as prof:
        with prof.step():          # reads 1 .. 6
            with loopscope.range("A"):  # 2 .. 3
                pass
            with loopscope.range("B"):  # 4 .. 5
                pass
        _testhooks._inject("api", [(t(2) + 100, t(2) + 200, 1), (t(4) + 100, t(4) + 200, 2)])
        _testhooks._inject("kernel", [(100_000_000, 200_000_000, 0, 7, 1, "a"),
                                 (300_000_000, 400_000_000, 0, 7, 2, "b")])
        _testhooks._inject("sample", [(100_000_000, 200_000_000, {"sm_active_pct": 10.0}),
                                 (300_000_000, 400_000_000, {"sm_active_pct": 70.0})])
    s = prof.summary()
    assert [(r["name"], r["kernels"], r["sm_active_busy_pct"]) for r in s["ranges"]] == [
        ("A", 1, 10.0), ("B", 1, 70.0)]
    assert s["steps"][0]["sm_active_busy_pct"] == (10.0 * 100 + 70.0 * 100) / 200
