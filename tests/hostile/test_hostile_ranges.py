"""Hostile conditions for ranges and steps (issue 14: 1, 2, 3, 4, 5, 11):
each test asserts the exact behaviour on the scripted clock and that the
user's code ran to completion.

With `test_clock`, clock read n is 1_000_000 + n * 1_000 ns (read 0: the
profile's start, then one read per range enter and exit that records)."""
from __future__ import annotations

import gc
import os
import re

import pytest

import loopscope
from loopscope import _core, _testhooks


def steps_of(prof):
    return [(s["index"], s["name"], s["host_ms"]) for s in prof.summary()["steps"]]


def ranges_of(prof):
    return [(r["name"], r["count"], r["host_ms"]) for r in prof.summary()["ranges"]]


def test_1_a_stray_range_exit_inside_a_step_closes_nothing(test_clock):
    """One exit too many of a Range inside a step: it finds no open enter
    of that object on the thread, so it closes nothing (no clock read, no
    NVTX pop) and is counted; the step, and every later step, go on."""
    finished = []
    with loopscope.profile() as prof:
        with prof.step():                             # [t1, t4]
            r = loopscope.range("R")
            with r:                                   # [t2, t3]
                pass
            r.__exit__(None, None, None)              # stray: nothing happens
        for _ in range(3):
            with prof.step():                         # [t5, t6] [t7, t8] [t9, t10]
                pass
        finished.append(True)
    assert finished == [True]
    assert steps_of(prof) == [(0, "Step_0", 0.003), (1, "Step_1", 0.001), (2, "Step_2", 0.001),
                              (3, "Step_3", 0.001)]
    assert ranges_of(prof) == [("R", 1, 0.001)]
    o = prof.summary()["overhead"]
    assert (o["range_mismatches"], o["ranges_left_open"]) == (1, 0)
    assert _testhooks._open_ranges() == 0


def test_2_exits_out_of_order_close_their_own_ranges(test_clock):
    """A enters, B enters, A exits, B exits: each exit closes its own
    range.  Time between the edges is made of clock reads (now_ns), on a
    1 ms tick: A spans 202 reads, B 402 (the issue's ~200 / ~400 ms; before,
    A got B's end and B got A's).  The exit out of order is counted."""
    test_clock.set(1_000_000_000, 1_000_000)  # 1 ms per read

    def wait(reads):
        for _ in range(reads):
            _core.now_ns()

    finished = []
    with loopscope.profile() as prof:              # read 0
        a, b = loopscope.range("A"), loopscope.range("B")
        a.__enter__()                              # read 1
        wait(100)                                  # reads 2..101
        b.__enter__()                              # read 102
        wait(100)                                  # reads 103..202
        a.__exit__(None, None, None)               # read 203
        wait(300)                                  # reads 204..503
        b.__exit__(None, None, None)               # read 504
        finished.append(True)
    t = test_clock.at
    expected_a = (t(203) - t(1)) / 1e6
    expected_b = (t(504) - t(102)) / 1e6
    assert (expected_a, expected_b) == (202.0, 402.0)
    assert finished == [True]
    assert prof.capture.range_records() == [("A", -1, None, t(1), t(203)),
                                             ("B", 0, None, t(102), t(504))]
    assert ranges_of(prof) == [("A", 1, expected_a), ("B", 1, expected_b)]
    assert prof.summary()["overhead"]["range_mismatches"] == 1
    assert prof.summary()["overhead"]["ranges_left_open"] == 0


def test_2b_one_object_nested_in_itself_closes_innermost_first(test_clock):
    """loopscope.range(name) returns one object per name; entered twice on
    a thread, its first exit closes the inner enter."""
    r = loopscope.range("Same")
    with loopscope.profile() as prof:
        r.__enter__()                              # t1
        r.__enter__()                              # t2
        r.__exit__(None, None, None)               # t3: closes the inner one
        r.__exit__(None, None, None)               # t4
    t = test_clock.at
    assert prof.capture.range_records() == [("Same", -1, None, t(1), t(4)),
                                             ("Same", 0, None, t(2), t(3))]
    assert prof.summary()["overhead"]["range_mismatches"] == 0


@pytest.mark.parametrize("depth", [300, 5000])
def test_3_deep_nesting_has_no_fixed_depth(test_clock, depth):
    """`depth` nested ranges in a step: every one has its exact host time,
    its depth and its parent; nothing is left open or mismatched (before, a
    fixed stack of 256 broke at depth 256)."""
    ranges = [loopscope.range(f"d{i}") for i in range(depth)]
    finished = []
    with loopscope.profile() as prof:
        with prof.step():                                   # read 1 .. 2 * depth + 2
            for r in ranges:                                # reads 2 .. depth + 1
                r.__enter__()
            for r in reversed(ranges):                      # reads depth + 2 .. 2 * depth + 1
                r.__exit__(None, None, None)
        finished.append(True)
    assert finished == [True]
    t = test_clock.at
    records = prof.capture.range_records()
    assert records[0] == ("Step_0", -1, 0, t(1), t(2 * depth + 2))
    expected = [(f"d{i}", i, None, t(2 + i), t(2 * depth + 1 - i)) for i in range(depth)]
    assert records[1:] == expected                   # parent of d_i is record i (d_{i-1} / the step)
    s = prof.summary()
    by_name = {r["name"]: r for r in s["ranges"]}
    for i in (0, 255, 256, 299, depth - 1):
        assert by_name[f"d{i}"]["depth"] == i
        assert by_name[f"d{i}"]["host_ms"] == (2 * depth - 1 - 2 * i) / 1000
    assert (s["overhead"]["range_mismatches"], s["overhead"]["ranges_left_open"]) == (0, 0)
    assert s["steps"][0]["host_ms"] == (2 * depth + 1) / 1000
    assert _testhooks._open_ranges() == 0


def test_3c_deep_chain_with_kernels_counts_each_kernel_once_per_name(test_clock):
    """5,000 nested ranges whose names cycle over three (each name's group
    holds a third of the chain), kernels launched at a few levels: every
    name's count, kernels, GPU time and host time are those plain Python
    finds (a kernel counts once for a name however many of its ranges hold
    it).  The attribution walks each kernel's chain once (it walked the
    chain below each range of it again: cubic in the depth; timing in
    benchmarks/scale/bench_nested_ranges.py)."""
    depth, names = 5_000, ("attn", "mlp", "norm")
    levels = [0, 1, 2, 3, 1_000, 2_501, depth - 1]  # a kernel launched right after each enter
    ranges = [loopscope.range(names[i % 3]) for i in range(depth)]
    t = test_clock.at
    with loopscope.profile() as prof:
        with prof.step():                           # read 1 .. 2 * depth + 2
            for r in ranges:                        # level i entered at read 2 + i
                r.__enter__()
            for r in reversed(ranges):              # level i left at read 2 * depth + 1 - i
                r.__exit__(None, None, None)
        _testhooks._inject("api", [(t(2 + i) + 100, t(2 + i) + 200, k + 1)
                              for k, i in enumerate(levels)])
        _testhooks._inject("kernel", [(10**9 + 10_000 * k, 10**9 + 10_000 * k + 1_000, 0, 7, k + 1, "k")
                                 for k in range(len(levels))])
    got = {r["name"]: r for r in prof.summary()["ranges"]}
    assert set(got) == set(names)
    for first, name in enumerate(names):            # the name's outermost level is `first`
        mine = range(first, depth, 3)
        kernels = sum(1 for i in levels if i >= first)
        assert (got[name]["count"], got[name]["kernels"]) == (len(mine), kernels)
        assert got[name]["gpu_ms"] == pytest.approx(kernels * 0.001, abs=1e-9)
        assert got[name]["host_ms"] == pytest.approx(
            sum(2 * depth - 1 - 2 * j for j in mine) / 1_000, abs=1e-9)
        assert got[name]["depth"] == first


def test_3b_threads_that_end_with_ranges_open(test_clock):
    """Worker threads that end with ranges still open (no exit ever comes):
    each thread's stack goes with it, the ranges are closed by the stop and
    counted as left open; the main thread's ranges are untouched."""
    import threading

    def worker(name):
        for depth in range(3):
            loopscope.range(f"{name}/{depth}").__enter__()

    with loopscope.profile() as prof:
        with loopscope.range("main"):
            threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(8)]
            for t in threads:
                t.start()
                t.join()  # one at a time: the clock reads stay in order
    s = prof.summary()
    assert s["overhead"]["ranges_left_open"] == 24
    assert s["overhead"]["range_mismatches"] == 0
    records = prof.capture.range_records()
    t = test_clock.at
    assert records[0] == ("main", -1, None, t(1), t(26))
    stop = records[1][4]
    assert [(r[0], r[1]) for r in records[1:4]] == [("w0/0", -1), ("w0/1", 1), ("w0/2", 2)]
    assert all(r[4] == stop for r in records[1:]) and stop == t(27)
    assert _testhooks._open_ranges() == 0


@pytest.mark.parametrize("make", [
    lambda: loopscope.range("r\x00x"),
    lambda: loopscope.profile(step_name="Step\x00{i}"),
    lambda: loopscope.profile().step("a\x00{i}"),
], ids=["range", "step_name", "step"])
def test_4_a_nul_in_a_name_is_refused_with_a_clear_error(make):
    """Names are C strings for NVTX: a NUL would cut them there (and merge
    "r\\x00x" with "r"), so it is refused where the name is given, with the
    option and the problem named; nothing was recorded or left open."""
    with pytest.raises(ValueError, match=r"contains a NUL character \(U\+0000\).*remove it"):
        make()
    assert _testhooks._open_ranges() == 0
    # the run goes on: "r" is its own name
    with loopscope.profile() as prof:
        with loopscope.range("r"):
            pass
    assert [r["name"] for r in prof.summary()["ranges"]] == ["r"]


def test_4b_nul_in_instrument_names_is_refused():
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Identity())
    with pytest.raises(ValueError, match=r"names\['0'\] = 'a\\x00b' contains a NUL character"):
        loopscope.instrument(model, names={"0": "a\x00b"})
    assert "_call_impl" not in vars(model) and "_call_impl" not in vars(model[0])


# Under AddressSanitizer (CI's second run) freed memory sits in its quarantine,
# so RSS says nothing there: the exact name counts and table bytes still hold.
UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_5_distinct_step_names_are_freed_with_their_profile():
    """10 profiles x 100k distinct step names: the names live as long as a
    capture holds them and are freed with it (before: +108 MiB kept for
    good).  Exact: the name table's count; bounded: its bytes, and the
    process's RSS grows by no more than a fraction of one profile's names
    over the ten rounds."""
    gc.collect()
    base = _testhooks._names()
    grown, rss = [], []
    for round_ in range(10):
        with loopscope.profile(trace=False, syncs=False, metrics=False) as prof:
            for j in range(100_000):
                with prof.step(f"r{round_}_sample_{j:06d}"):
                    pass
        grown.append(_testhooks._names()["count"] - base["count"])
        last = prof.capture.range_records()[-1]
        assert last[0] == f"r{round_}_sample_099999" and last[2] == 99_999
        del prof, last
        gc.collect()
        after = _testhooks._names()
        assert after["count"] == base["count"] and after["check"] == 0
        assert after["bytes"] <= base["bytes"] + (1 << 20)
        rss.append(rss_bytes())
    assert grown == [100_001] * 10  # held while the profile lived (+ its "Step_{i}")
    if not UNDER_ASAN:
        assert max(rss) - rss[0] < 24 << 20, [r >> 20 for r in rss]


def test_5b_a_million_default_steps_make_no_names():
    """1M steps named Step_{i}: a step record keeps the template and its
    index, so the name table does not grow at all (before: +90 MiB kept);
    the records go with the capture."""
    gc.collect()
    base = _testhooks._names()
    rss0 = rss_bytes()
    with loopscope.profile(trace=False, syncs=False, metrics=False) as prof:
        for _ in range(1_000_000):
            with prof.step():
                pass
    assert _testhooks._names()["count"] == base["count"] + 1  # "Step_{i}", the profile's template
    records = prof.capture.range_records()
    assert (len(records), records[-1][0], records[-1][2]) == (1_000_000, "Step_999999", 999_999)
    del records, prof
    gc.collect()
    assert _testhooks._names()["count"] == base["count"]
    assert _testhooks._names()["bytes"] <= base["bytes"] + (1 << 20)
    if not UNDER_ASAN:
        assert rss_bytes() - rss0 < 24 << 20


def test_5c_range_objects_of_loopscope_range_are_bounded():
    """loopscope.range(name) caches one object per name, up to 4096 names;
    past it the cache starts over (objects the user holds live on), so
    100k distinct names leave no growth behind."""
    gc.collect()
    base = _testhooks._names()["count"]
    held = loopscope.range("held")
    for j in range(100_000):
        with loopscope.range(f"req_{j}"):
            pass
    gc.collect()
    assert _testhooks._names()["count"] - base <= 4096 + 1
    again = loopscope.range("held")   # the cache started over since: a new object
    assert again is not held and again.name == held.name == "held"
    with loopscope.profile() as prof:
        with held:                     # the object the user kept works as before
            with again:
                pass
    assert [(r["name"], r["count"]) for r in prof.summary()["ranges"]] == [("held", 2)]


def test_5d_names_stay_right_through_heavy_churn():
    """Thousands of names made and freed in a random order (ids reused,
    hash slots emptied and refilled, text chunks dropped): every range
    recorded keeps its own name, and everything is freed at the end."""
    import random

    rng = random.Random(5)
    gc.collect()
    base = _testhooks._names()["count"]
    alive: dict[str, object] = {}
    expected: list[str] = []
    with loopscope.profile() as prof:
        for _ in range(20_000):
            name = f"n{rng.randrange(3000)}" + "x" * rng.randrange(40)
            if name in alive and rng.random() < 0.5:
                del alive[name]  # the object goes; the records keep the name
                continue
            r = alive.setdefault(name, loopscope.range(name))
            with r:
                expected.append(name)
            _core.range(f"flush{rng.randrange(10_000)}")  # churn the bounded cache
            if rng.random() < 0.002:
                assert _testhooks._names()["check"] == 0
    assert [rec[0] for rec in prof.capture.range_records()] == expected
    assert _testhooks._names()["check"] == 0
    alive.clear()
    del prof
    gc.collect()
    assert _testhooks._names()["count"] - base <= 4096  # only what the bounded cache still holds
    assert _testhooks._names()["check"] == 0


def test_5e_names_stay_right_while_other_threads_intern_without_the_gil():
    """loopscope's worker interns kernel names without the GIL while Python
    threads make and drop ranges, steps and their names.  Here two threads
    do what the worker does (the hook: intern into a list of their own,
    hold again, read back without a lock, release; 300 times over 3,000
    names, half of them shared by all threads) while a third churns range
    objects inside a profile (the bounded cache starting over frees their
    names): every name reads back as itself everywhere, the table's
    invariants hold, and nothing is left behind.  (Without the table's lock
    this run crashes the process or breaks the invariants.)"""
    import threading

    gc.collect()
    base = _testhooks._names()["count"]
    texts = [f"kernel_{i % 1500}" if i % 2 else f"void gemm<{i}>(float*)" for i in range(3000)]
    other = [f"kernel_{i % 1500}" if i % 2 else f"other<{i}>" for i in range(3000)]
    done = threading.Event()
    seen: list[tuple[str, str]] = []
    second_bad: list[int] = []

    def churn():
        j = 0
        with loopscope.profile(trace=False, syncs=False, metrics=False) as prof:
            while not done.is_set():
                name = f"kernel_{j % 1500}" if j % 3 else f"py_{j}"
                r = _core.range(name)
                with r:
                    pass
                seen.append((name, r.name))
                j += 1
        seen.append(("records", str(len(prof.capture.range_records()) == j)))

    churner = threading.Thread(target=churn)
    second = threading.Thread(target=lambda: second_bad.append(_testhooks._names_hammer(other, 300)))
    churner.start()
    second.start()
    try:
        bad = _testhooks._names_hammer(texts, 300)
    finally:
        second.join()
        done.set()
        churner.join()
    assert (bad, second_bad) == (0, [0])
    assert seen[-1] == ("records", "True") and len(seen) > 1
    assert all(name == back for name, back in seen[:-1])
    assert _testhooks._names()["check"] == 0
    gc.collect()
    assert _testhooks._names()["count"] - base <= 4096  # only what the bounded cache still holds
    assert _testhooks._names()["check"] == 0


def test_11_a_step_whose_enter_failed_uses_no_index(test_clock):
    """A step entered while another is open raises and takes no index: the
    next good step is Step_1 (before: Step_2)."""
    finished = []
    with loopscope.profile() as prof:
        with prof.step():                                  # Step_0 [t1, t2]
            with pytest.raises(RuntimeError, match="steps do not nest"):
                with prof.step():
                    pass
        with prof.step() as later:                         # Step_1 [t3, t4]
            assert (later.step, later.name) == (1, "Step_1")
        finished.append(True)
    assert finished == [True]
    assert steps_of(prof) == [(0, "Step_0", 0.001), (1, "Step_1", 0.001)]
    assert prof._steps.count == 2
    assert prof.summary()["overhead"]["range_mismatches"] == 0


def test_11b_the_index_is_taken_in_the_order_steps_are_entered(test_clock):
    """Step objects made ahead take their index when entered."""
    with loopscope.profile() as prof:
        first, second = prof.step(), prof.step("Named_{i}")
        assert (first.step, first.name, second.step) == (None, None, None)
        with second:
            pass
        with first:
            pass
    assert steps_of(prof) == [(0, "Named_0", 0.001), (1, "Step_1", 0.001)]
    assert repr(first) == "<loopscope step 'Step_1' index=1>"


# -- what an NVTX tool receives ----------------------------------------------

def nvtx_include_dir() -> str | None:
    """A folder holding nvtx3/nvToolsExt.h, found as setup.py finds it."""
    import sys
    from pathlib import Path

    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    candidates = [Path(r) / "include" for r in roots if r]
    for entry in sys.path:
        base = Path(entry or ".") / "nvidia"
        if base.is_dir():
            candidates += [sub / "include" for sub in sorted(base.iterdir())]
    for folder in candidates:
        if (folder / "nvtx3" / "nvToolsExt.h").is_file():
            return str(folder)
    return None


@pytest.fixture(scope="module")
def nvtx_probe(tmp_path_factory):
    """Builds tests/hostile/nvtx_probe.c (a stand-in NVTX tool)."""
    import shutil
    import subprocess

    include = nvtx_include_dir()
    cc = shutil.which("cc") or shutil.which("gcc")
    if include is None or cc is None:
        pytest.skip("no C compiler or no NVTX headers (nvtx3/) to build the probe tool")
    out = tmp_path_factory.mktemp("nvtx") / "libnvtx_probe.so"
    source = os.path.join(os.path.dirname(__file__), "nvtx_probe.c")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-I", include, source, "-o", str(out),
                    "-lpthread"], check=True, capture_output=True)
    return out


HOSTILE_SCRIPT = r'''
import threading, warnings
warnings.simplefilter("ignore")
import loopscope
import torch
from torch import nn

with loopscope.profile() as prof:
    with prof.step():                                   # 1: a stray exit
        r = loopscope.range("R")
        with r:
            pass
        r.__exit__(None, None, None)
    a, b = loopscope.range("A"), loopscope.range("B")   # 2: out of order
    a.__enter__(); b.__enter__(); a.__exit__(None, None, None); b.__exit__(None, None, None)
    deep = [loopscope.range(f"d{i}") for i in range(300)]    # 3: deep nesting
    with prof.step():
        for x in deep: x.__enter__()
        for x in reversed(deep): x.__exit__(None, None, None)
        try:                                            # 11: a refused step
            with prof.step():
                pass
        except RuntimeError:
            pass
    def worker():
        with prof.step("Worker_{i}"):
            with loopscope.range("W"):
                pass
    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    class Stop(nn.Module):                              # instrument, with an interrupt
        def forward(self, x):
            raise KeyboardInterrupt
    model = nn.Sequential(nn.Identity(), nn.Sequential(Stop()))
    with loopscope.instrument(model) as handle:
        for _ in range(2):
            with prof.step():
                try:
                    model(torch.zeros(1))
                except KeyboardInterrupt:
                    pass
    assert handle.mismatches == 6  # 1.0, 1 and the root, twice
    for j in range(20000):                              # more names than may be registered
        with loopscope.range(f"n{j}"):
            pass
print("done")
'''


def test_nvtx_pairs_stay_balanced_per_thread_in_the_hostile_cases(nvtx_probe, tmp_path):
    """Through a real NVTX injection (what Nsight Systems receives): in the
    hostile cases above every thread's pushes and pops pair up and no pop
    ever comes with nothing open; steps arrive as text "Step_<i>"
    (registered strings are kept by the tool for good), layer names as
    text "Step_<i>/<path>", and at most 16384 strings are registered."""
    import subprocess
    import sys

    pytest.importorskip("torch")
    log = tmp_path / "nvtx.log"
    env = dict(os.environ, NVTX_INJECTION64_PATH=str(nvtx_probe), NVTX_PROBE_LOG=str(log))
    result = subprocess.run([sys.executable, "-c", HOSTILE_SCRIPT], capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "done", result.stderr
    depth: dict[str, int] = {}
    pushes: dict[str, int] = {}
    texts, registered = [], 0
    for line in log.read_text().splitlines():
        kind, tid, after, *rest = line.split(" ", 4)
        if kind == "push":
            depth[tid] = depth.get(tid, 0) + 1
            pushes[tid] = pushes.get(tid, 0) + 1
            if rest[0] == "text":
                texts.append(rest[1])
        elif kind == "pop":
            depth[tid] = depth.get(tid, 0) - 1
            assert depth[tid] >= 0, f"a pop with nothing open on thread {tid}"
        elif kind == "register":
            registered = int(rest[0])
        assert int(after) == depth.get(tid, 0), line
    assert all(d == 0 for d in depth.values()), depth
    assert len(pushes) == 5  # the main thread and the 4 workers
    steps = [t for t in texts if re.fullmatch(r"(Step|Worker)_\d+", t)]
    assert steps[:2] == ["Step_0", "Step_1"]  # the refused step took no index
    assert sorted(steps[2:6]) == ["Worker_2", "Worker_3", "Worker_4", "Worker_5"]
    assert steps[6:] == ["Step_6", "Step_7"]
    layers = [t for t in texts if re.fullmatch(r"Step_[67]/.*", t)]
    assert layers == [f"Step_{i}/{name}" for i in (6, 7) for name in ("Sequential", "0", "1", "1.0")]
    assert registered == 16384
    assert "n19999" in texts  # past the cap: pushed as text


MARKED_SCRIPT = r'''
import warnings
warnings.simplefilter("ignore")
import loopscope

with loopscope.profile() as prof:
    s = prof.step(); s.__enter__(); s._mark_end()          # ends here: popped now
    with loopscope.range("after_mark"):
        pass
    s.__exit__(None, None, None)                            # no second pop
    s = prof.step(); s.__enter__()
    r = loopscope.range("inner"); r.__enter__()
    s._mark_end()                                           # not innermost: popped at its exit
    r.__exit__(None, None, None); s.__exit__(None, None, None)
    s = prof.step(); s.__enter__(); s._mark_end(); s._unmark_end()   # popped, not pushed again
    s.__exit__(None, None, None)
    s = prof.step(); s.__enter__()
    r = loopscope.range("inner2"); r.__enter__()
    s._mark_end(); r.__exit__(None, None, None)             # its NVTX range still open
    with prof.step():                                       # it yields: popped before the push
        pass
    s.__exit__(None, None, None)                            # nothing left to pop
print("done")
'''


def test_a_step_whose_end_is_marked_keeps_nvtx_balanced(nvtx_probe, tmp_path):
    """steps=module marks a step's end when its caller returns and may take
    the mark back: an NVTX tool sees the step's range end at the mark when
    it is the innermost (else at its exit, or when a new step ends it),
    once, never pushed again."""
    import subprocess
    import sys

    log = tmp_path / "nvtx.log"
    env = dict(os.environ, NVTX_INJECTION64_PATH=str(nvtx_probe), NVTX_PROBE_LOG=str(log))
    result = subprocess.run([sys.executable, "-c", MARKED_SCRIPT], capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "done", result.stderr
    events = []
    for line in log.read_text().splitlines():
        kind, _tid, _after, *rest = line.split(" ", 4)
        if kind == "push":
            events.append(rest[1].rsplit("/", 1)[-1])
        elif kind == "pop":
            events.append("pop")
    assert events == ["Step_0", "pop", "after_mark", "pop", "Step_1", "inner", "pop", "pop",
                      "Step_2", "pop", "Step_3", "inner2", "pop", "pop", "Step_4", "pop"]
