"""The model's new figures, from synthetic records: how much of its GPU each
kernel can fill (grid and block against the device's SMs), the kernels by
name, and per step what a CUDA graph capture would meet (graph replays and
the host time between them, memory calls, pageable host-to-device copies,
the signature of the step's GPU work), and the idle time each sync caused.

Every expected number is worked out here from the injected records by a
few lines of plain Python (fill_rule.fill_of is the rule of
csrc/analysis/ls_kernels.h, written again)."""
from __future__ import annotations

import functools
import itertools

import pytest

import fill_rule
import loopscope
from loopscope import _core, _testhooks

H200 = (0, 132, 2048, 32, 65536, 233472)  # device, SMs, threads/SM, blocks/SM, regs, smem
MEMCPY_HTOD, PAGEABLE, PINNED = 1, 1, 2


def fill_of(grid, block, registers=0, shared=0, device=H200):
    """The share of the device's block slots the grid can occupy at once."""
    _, sms, threads_per_sm, blocks_per_sm, regs_per_sm, shared_per_sm = device
    return fill_rule.fill_of(grid, block, registers, shared, sms=sms,
                             threads_per_sm=threads_per_sm, blocks_per_sm=blocks_per_sm,
                             regs_per_sm=regs_per_sm, shared_per_sm=shared_per_sm)


def kernel(start, end, corr, name, grid=None, block=None, registers=0, shared=0, stream=7):
    if grid is None:
        return (start, end, 0, stream, corr, name)
    return (start, end, 0, stream, corr, name, 0, grid, block, registers, shared)


SHAPES = [  # (grid, block, registers, shared bytes)
    ((64, 1, 1), (256, 1, 1), 32, 0),       # small: 64 of 1,056 block slots
    ((264, 1, 1), (128, 1, 1), 0, 0),       # 264 of 2,112
    ((4096, 2, 1), (256, 1, 1), 0, 0),      # many waves: full
    ((132, 1, 1), (384, 1, 1), 168, 0),     # a big GEMM: one block per SM by registers: full
    ((50, 1, 1), (1024, 1, 1), 0, 48_000),  # shared memory allows 4 a SM
    ((7, 3, 2), (16, 8, 2), 0, 0),          # 3-D grid and block
    ((1, 1, 1), (33, 1, 1), 0, 0),          # 33 threads take 2 warps
]


@pytest.mark.parametrize("grid, block, registers, shared", SHAPES)
def test_fill_of_one_kernel(grid, block, registers, shared):
    with loopscope.profile() as prof:
        _testhooks._inject("device", [H200])
        _testhooks._inject("kernel", [kernel(1_000, 2_000, 1, "k", grid, block, registers, shared)])
    assert list(prof.model.op_column("fill")) == [pytest.approx(fill_of(grid, block, registers,
                                                                          shared), rel=1e-12)]


def test_fill_is_unknown_without_geometry_or_device_facts():
    with loopscope.profile() as prof:
        _testhooks._inject("kernel", [kernel(1_000, 2_000, 1, "with_grid", (8, 1, 1), (64, 1, 1)),
                                 kernel(3_000, 4_000, 2, "no_grid")])
        _testhooks._inject("memcpy", [(5_000, 6_000, 0, 7, 3)])
    assert list(prof.model.op_column("fill")) == [-1.0, -1.0, -1.0]  # no device facts
    with loopscope.profile() as prof:
        _testhooks._inject("device", [H200])
        _testhooks._inject("kernel", [kernel(1_000, 2_000, 1, "with_grid", (8, 1, 1), (64, 1, 1)),
                                 kernel(3_000, 4_000, 2, "no_grid")])
        _testhooks._inject("kernel", [(5_000, 6_000, 1, 7, 3, "other_device", 0, 8, 64)])
    fills = list(prof.model.op_column("fill"))
    assert fills[0] == pytest.approx(fill_of((8, 1, 1), (64, 1, 1)))
    assert fills[1:] == [-1.0, -1.0]  # no grid; a device with no facts
    total = prof.model.total()
    assert total["shaped_ns"] == 1_000
    assert total["filled_ns"] == round(1_000 * fill_of((8, 1, 1), (64, 1, 1)))


def test_kernel_geometry_columns_and_bad_geometry():
    with loopscope.profile() as prof:
        _testhooks._inject("kernel", [kernel(1_000, 2_000, 1, "k", (70_000, 3, 2), (32, 4, 2), 40,
                                        1024), (3_000, 4_000, 0, 7, 2, "k", 0, 5, 96)])
    m = prof.model
    columns = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers",
               "shared_bytes")
    assert [list(m.op_column(c)) for c in columns] == [[70_000, 5], [3, 1], [2, 1], [32, 96],
                                                       [4, 1], [2, 1], [40, 0], [1024, 0]]
    with loopscope.profile() as prof:
        for bad, error, message in (
                ((1, 2, 0, 7, 1, "k", 0, (1, 0, 1), 32), ValueError, "side 1 must be between 1"),
                ((1, 2, 0, 7, 1, "k", 0, 8, 2048), ValueError, "between 1 and 1024"),
                ((1, 2, 0, 7, 1, "k", 0, (1, 2, 3, 4), 32), TypeError, "1 to 3 ints"),
                ((1, 2, 0, 7, 1, "k", 0, 8, 32, 256), ValueError, "between 0 and 255")):
            with pytest.raises(error, match=message):
                _testhooks._inject("kernel", [bad])
        with pytest.raises(ValueError, match="sm_count and max_threads_per_sm"):
            _testhooks._inject("device", [(0, 0, 2048)])
        _testhooks._inject("device", [(1, 10, 1024)])
        with pytest.raises(ValueError, match="device record 1"):  # appends nothing
            _testhooks._inject("device", [(1, 20, 2048), (2, 0, 0)])
        _testhooks._inject("kernel", [(1, 2, 1, 7, 1, "k")])
    assert prof.summary()["gpu"]["kernels"] == 1
    assert [(d["sm_count"], d["max_threads_per_sm"]) for d in prof.model.devices()] == [(10, 1024)]


def test_device_facts_appear_with_the_device():
    with loopscope.profile() as prof:
        _testhooks._inject("device", [(0, 100, 1536), H200])  # the later facts replace the first
        _testhooks._inject("kernel", [kernel(1_000, 2_000, 1, "k")])
    (device,) = prof.model.devices()
    assert (device["sm_count"], device["max_threads_per_sm"], device["max_blocks_per_sm"],
            device["registers_per_sm"], device["shared_bytes_per_sm"]) == H200[1:]


def test_kernels_by_name_with_their_main_shape():
    small, big = ((16, 1, 1), (128, 1, 1)), ((2048, 1, 1), (256, 1, 1))
    launches = [("gemm", small, 3_000), ("gemm", small, 3_000), ("gemm", big, 5_000),
                ("norm", small, 1_000), ("gelu", None, 12_000)]
    records, t = [], 1_000
    for corr, (name, shape, ns) in enumerate(launches, 1):
        grid, block = shape if shape else (None, None)
        records.append(kernel(t, t + ns, corr, name, grid, block))
        t += ns + 500
    with loopscope.profile() as prof:
        _testhooks._inject("device", [H200])
        _testhooks._inject("kernel", records)
    table = prof.model.kernels()
    expected = {}
    for name, shape, ns in launches:
        e = expected.setdefault(name, {"count": 0, "total_ns": 0, "max_ns": 0, "shapes": set(),
                                       "shaped_ns": 0, "filled_ns": 0.0, "by_shape": {}})
        e["count"] += 1
        e["total_ns"] += ns
        e["max_ns"] = max(e["max_ns"], ns)
        e["shapes"].add(shape)
        e["by_shape"][shape] = e["by_shape"].get(shape, 0) + ns
        if shape:
            e["shaped_ns"] += ns
            e["filled_ns"] += ns * fill_of(*shape)
    order = sorted(expected, key=lambda n: -expected[n]["total_ns"])
    assert [k["name"] for k in table] == order == ["gelu", "gemm", "norm"]
    for k in table:
        e = expected[k["name"]]
        assert (k["count"], k["total_ns"], k["max_ns"], k["shapes"], k["shaped_ns"]) == (
            e["count"], e["total_ns"], e["max_ns"], len(e["shapes"]), e["shaped_ns"])
        assert k["filled_ns"] == pytest.approx(e["filled_ns"])
        main = max(e["by_shape"], key=e["by_shape"].get)
        grid, block = main if main else ((0, 0, 0), (0, 0, 0))
        assert (k["shape"]["grid"], k["shape"]["block"], k["shape"]["total_ns"]) == (
            grid, block, e["by_shape"][main])
    assert [k["name"] for k in prof.model.kernels(1)] == ["gelu"]
    assert prof.model.kernels(0) == []
    with pytest.raises(ValueError, match="n must be >= 0"):
        prof.model.kernels(-1)


# -- readiness: graph replays --------------------------------------------------

def graph_loop(prof, steps, host_ns, api="cudaGraphLaunch", domain=0, replays=1):
    """Each step replays `replays` graphs; launch calls 1 us long, `host_ns`
    of scripted clock between them."""
    launches = []
    corr = 1
    for _ in range(steps):
        with prof.step():
            for _ in range(replays):
                start = _core.now_ns()
                launches.append((start, start + 1_000, corr, 0, domain, api))
                corr += 1
    _testhooks._inject("api", launches)
    return launches


def test_graph_replays_per_step_and_the_host_time_between_them(test_clock):
    test_clock.set(1_000_000, 7_000)
    with loopscope.profile() as prof:
        launches = graph_loop(prof, 3, 7_000, replays=2)
    steps = prof.model.steps()
    assert [s["readiness"]["graph_launches"] for s in steps] == [2, 2, 2]
    # host time from each launch call's end to the next one's start
    between = [b[0] - a[1] for a, b in zip(launches, launches[1:])]
    per_step = [between[0:1], between[1:3], between[3:5]]
    assert [s["readiness"]["replay_host_ns"] for s in steps] == [sum(x) for x in per_step]
    assert [s["readiness"]["replay_pairs"] for s in steps] == [len(x) for x in per_step]
    total = prof.model.total()["readiness"]
    assert (total["graph_launches"], total["replay_host_ns"], total["replay_pairs"]) == (
        6, sum(between), 5)


def test_driver_graph_launches_count_when_no_runtime_one_does(test_clock):
    """cuGraphLaunch inside cudaGraphLaunch is the same replay: only the
    runtime calls count when there are any."""
    with loopscope.profile() as prof:
        graph_loop(prof, 2, 0, api="cuGraphLaunch", domain=1)
    assert [s["readiness"]["graph_launches"] for s in prof.model.steps()] == [1, 1]
    with loopscope.profile() as prof:
        runtime = graph_loop(prof, 2, 0)
        _testhooks._inject("api", [(a[0] + 10, a[0] + 20, a[2] + 100, 0, 1, "cuGraphLaunch")
                              for a in runtime])
    assert prof.model.total()["readiness"]["graph_launches"] == 2
    with loopscope.profile(), pytest.raises(ValueError, match="runtime .0. API call"):
        _testhooks._inject("api", [(1, 2, 1, 0, 1, "cudaGraphLaunch")])


def test_plain_launches_are_not_replays(test_clock):
    with loopscope.profile() as prof:
        with prof.step():
            now = _core.now_ns()
            _testhooks._inject("api", [(now, now + 1, 1), (now + 2, now + 3, 2, 0, 0,
                                                      "cudaLaunchKernel")])
    assert prof.model.steps()[0]["readiness"]["graph_launches"] == 0


# -- readiness: memory calls, pageable copies, signatures ------------------------

def c_callable(calls):
    """A C-only callable: the innermost Python frame of its calls is the caller's."""
    return functools.partial(next, map(_testhooks._inject_calls, itertools.repeat(calls)))


malloc = c_callable([("cudaMalloc", 1_000)])
malloc_async = c_callable([("cudaMallocAsync", 1_000)])
free = c_callable([("cudaFree", 1_000)])
copy_in = c_callable([("cudaMemcpyAsync", 1_000, 40)])


def test_memory_calls_per_step(test_clock):
    with loopscope.profile() as prof:
        with prof.step():
            malloc()
            malloc()
        with prof.step():
            malloc_async()
        with prof.step():
            free()  # also a sync (cudaFree waits for the device)
        with prof.step():
            pass
        malloc()  # outside the steps
    calls = prof.capture.calls()
    steps = [s["readiness"] for s in prof.model.steps()]
    assert [(s["memory_calls"], s["stream_ordered"]) for s in steps] == [
        (2, 0), (0, 1), (1, 0), (0, 0)]
    assert [calls[s["first_memory_call"]]["api"] if s["first_memory_call"] is not None
            else None for s in steps] == ["cudaMalloc", None, "cudaFree", None]
    assert calls[steps[0]["first_memory_call"]]["enter_ns"] < calls[1]["enter_ns"]
    assert prof.model.total()["readiness"]["memory_calls"] == 4
    assert [s["syncs"] for s in prof.summary()["steps"]] == [0, 0, 1, 0]  # malloc is no sync


def test_pageable_host_to_device_copies_per_step(test_clock):
    with loopscope.profile() as prof:
        with prof.step():
            copy_in()
        with prof.step():
            pass
        _testhooks._inject("memcpy", [
            (1_000, 2_000, 0, 7, 40, None, 64, MEMCPY_HTOD, PAGEABLE),
            (3_000, 4_000, 0, 7, 41, None, 64, MEMCPY_HTOD, PINNED),
            (5_000, 6_000, 0, 7, 42, None, 64, 2, PAGEABLE),  # device to host: not this rule
        ])
        launch = test_clock.at(2)  # the copy call's enter (reads: start 0, step enter 1)
        _testhooks._inject("api", [(launch, launch + 1, c) for c in (40, 41, 42)])
    steps = [s["readiness"] for s in prof.model.steps()]
    calls = prof.capture.calls()
    assert steps[0]["pageable_copies"] == 1 and steps[1]["pageable_copies"] == 0
    assert steps[0]["first_pageable_op"] == 0
    assert calls[steps[0]["first_pageable_call"]]["correlation_id"] == 40


def test_step_signatures_see_count_and_grid_changes(test_clock):
    same = [("a", (8, 1, 1)), ("b", (4, 1, 1))]
    plans = [same, list(reversed(same)), same + [("a", (8, 1, 1))], [("a", (9, 1, 1)),
                                                                    ("b", (4, 1, 1))]]
    with loopscope.profile() as prof:
        kernels, apis, corr, t = [], [], 1, 1_000
        for plan in plans:
            with prof.step():
                for name, grid in plan:
                    now = _core.now_ns()
                    apis.append((now, now + 1, corr))
                    kernels.append(kernel(t, t + 1_000, corr, name, grid, (128, 1, 1)))
                    corr += 1
                    t += 2_000
        _testhooks._inject("api", apis)
        _testhooks._inject("kernel", kernels)
    signatures = [s["readiness"]["signature"] for s in prof.model.steps()]
    assert signatures[0] == signatures[1]  # the same work in another order
    assert len({signatures[0], signatures[2], signatures[3]}) == 3
    assert [s["readiness"]["ops"] for s in prof.model.steps()] == [2, 2, 3, 2]


# -- the idle time each sync caused ---------------------------------------------

def test_each_sync_gets_the_gaps_it_overlapped_longest(test_clock):
    """Two syncs; gap A overlaps only the first, gap B both (longer with
    the second), gap C none (a host gap)."""
    test_clock.set(1_000_000, 1_000)
    wait_1 = c_callable([("cudaStreamSynchronize", 30_000)])
    wait_2 = c_callable([("cudaStreamSynchronize", 50_000)])
    with loopscope.profile() as prof:
        wait_1()   # enter at read 1: [1_001_000, 1_031_000]
        wait_2()   # enter at read 2: [1_002_000, 1_052_000]
        syncs = sorted(prof_sync for prof_sync in [(1_001_000, 1_031_000), (1_002_000, 1_052_000)])
        gaps = {"A": (1_000_500, 1_001_800), "B": (1_025_000, 1_045_000), "C": (2_000_000,
                                                                              2_010_000)}
        edges = [1_000_000, gaps["A"][0], gaps["A"][1], gaps["B"][0], gaps["B"][1],
                 gaps["C"][0], gaps["C"][1], 2_011_000]
        ops = [kernel(edges[i], edges[i + 1], i + 1, "k") for i in range(0, len(edges), 2)]
        _testhooks._inject("kernel", ops)
        _testhooks._inject("api", [(op[0] - 1, op[0], op[4]) for op in ops])  # launched just before
        test_clock.set(3_000_000, 1_000)  # the profile ends after the last launch: none ignored
    model = prof.model

    def overlap(gap, sync):
        return max(0, min(gap[1], sync[1]) - max(gap[0], sync[0]))

    caused = [0, 0]
    for name, gap in gaps.items():
        lengths = [overlap(gap, s) for s in syncs]
        if max(lengths) > 0:
            caused[lengths.index(max(lengths))] += gap[1] - gap[0]
    got = dict(zip([(s[0], s[1]) for s in model.syncs()], model.sync_gaps()))
    assert [got[s] for s in syncs] == caused
    assert caused == [gaps["A"][1] - gaps["A"][0], gaps["B"][1] - gaps["B"][0]]


# -- recordings keep the launch shapes, copy kinds, graph launches, device facts --

def test_a_recording_keeps_what_the_new_figures_need(test_clock, tmp_path):
    from loopscope.files._recording import load
    from loopscope.readers._replay import replay

    test_clock.set(1_000_000, 7_000)
    with loopscope.profile() as prof:
        _testhooks._inject("device", [H200])
        launches = graph_loop(prof, 3, 7_000)
        _testhooks._inject("kernel", [kernel(2_000_000 + 20_000 * i, 2_010_000 + 20_000 * i, a[2],
                                        "k", (64, 1, 1), (256, 1, 1), 32)
                                 for i, a in enumerate(launches)])
        _testhooks._inject("memcpy", [(3_000_000, 3_001_000, 0, 7, 99, None, 8, MEMCPY_HTOD,
                                  PAGEABLE)])
    path = tmp_path / "run.loopscope.json.gz"
    prof.save_recording(path)
    again = replay(load(path))
    for name in ("fill", "grid_x", "block_x", "registers", "copy_kind", "host_memory"):
        assert list(again.model.op_column(name)) == list(prof.model.op_column(name)), name
    assert again.model.devices()[0]["sm_count"] == 132
    before, after = prof.summary(), again.summary()
    for key in ("graphs", "top_kernels", "loop"):
        assert after[key] == before[key], key
    assert after["gpu"]["fill_pct"] == before["gpu"]["fill_pct"] is not None
    assert [s["graph_readiness"] for s in after["steps"]] == [
        s["graph_readiness"] for s in before["steps"]]
    # an older recording (no optional columns) still replays, those facts unknown
    data = load(path)
    for table, key in (("ops", "shape"), ("ops", "copy_kind"), ("ops", "host_memory"),
                       ("apis", "cbid")):
        del data[table][key]
    del data["shapes"], data["meta"]["device_facts"]
    old = replay(data).summary()
    assert old["gpu"]["kernels"] == before["gpu"]["kernels"]
    assert old["graphs"] is None and old["gpu"]["fill_pct"] is None
