"""Real-GPU checks of sync detection (issue 3), marked gpu.

A 10-step loop with syncs planted at known lines: every one must be found
with its file, line and kind, and nothing else (precision and recall 100%);
the same loop without them reports no sync inside the loop; no_sync() stops
at the .item() line.  Lines are found by their marker comments, so editing
this file does not break the expectations."""
from __future__ import annotations

import ctypes
import inspect

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU visible to PyTorch", allow_module_level=True)

import loopscope  # noqa: E402
from loopscope.demo import build, denoise_step  # noqa: E402

pytestmark = pytest.mark.gpu


def _libcuda():
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


LIBCUDA = _libcuda()


def line_of(marker: str) -> int:
    """Line number of the line in this file that ends with `# <marker>`."""
    lines = inspect.getsource(inspect.getmodule(line_of)).splitlines()
    hits = [i + 1 for i, text in enumerate(lines) if text.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, f"marker {marker!r} found {len(hits)} times"
    return hits[0]


def planted_loop(prof, model, x, host, plant: bool):
    with torch.inference_mode():
        for i in range(10):
            with prof.step():
                x = denoise_step(model, x)
                if not plant:
                    continue
                if i in (3, 7):
                    v = x.sum().item()  # SYNC_ITEM
                if i == 5:
                    print(x[0, 0, :4])  # SYNC_PRINT
                if i == 2:
                    c = x.cpu()  # SYNC_CPU
                if i == 4:
                    torch.cuda.synchronize()  # SYNC_SYNCHRONIZE
                if i == 6:
                    d = host.to("cuda", non_blocking=True)  # SYNC_PAGEABLE
                if i == 8 and LIBCUDA is not None:
                    LIBCUDA.cuCtxSynchronize()  # SYNC_DRIVER
    return x


@pytest.fixture(scope="module")
def setup():
    model, x = build(depth=4)
    host = torch.randn(4096)  # pageable host memory
    prof = loopscope.profile(syncs=False, trace=False)
    with prof:  # warm up: cuBLAS handles, allocator, the print path
        planted_loop(prof, model, x, host, plant=True)
    torch.cuda.synchronize()
    return model, x, host


def run(setup, plant: bool):
    model, x, host = setup
    with loopscope.profile() as prof:
        planted_loop(prof, model, x, host, plant)
    return prof.summary()


def test_every_planted_sync_found_with_its_line_and_kind_and_nothing_else(setup, capsys):
    summary = run(setup, plant=True)
    syncs = summary["syncs"]
    assert syncs is not None, summary["syncs_error"]
    expected = {
        (line_of("SYNC_ITEM"), "item", (3, 7)),
        (line_of("SYNC_PRINT"), "print", (5,)),
        (line_of("SYNC_CPU"), "cpu", (2,)),
        (line_of("SYNC_SYNCHRONIZE"), "synchronize", (4,)),
        (line_of("SYNC_PAGEABLE"), "memcpy", (6,)),
    }
    if LIBCUDA is not None:
        expected.add((line_of("SYNC_DRIVER"), "synchronize", (8,)))
    found = {(s["line"], s["kind"], tuple(s["steps"])) for s in syncs["sites"]}
    print("\n".join(loopscope.figures._syncs.format_site(s) for s in syncs["sites"]))
    assert found == expected
    for site in syncs["sites"]:
        assert site["file"] == __file__
        assert site["function"] == "planted_loop"
    by_line = {s["line"]: s for s in syncs["sites"]}
    assert by_line[line_of("SYNC_ITEM")]["count"] == 2  # one sync per .item(): copy + stream sync
    assert by_line[line_of("SYNC_ITEM")]["call"] == "x.sum().item()"
    assert by_line[line_of("SYNC_PRINT")]["count"] > 1  # print of a CUDA tensor syncs many times
    assert by_line[line_of("SYNC_CPU")]["count"] == 1
    assert by_line[line_of("SYNC_SYNCHRONIZE")]["count"] == 1
    assert by_line[line_of("SYNC_PAGEABLE")]["count"] == 1
    per_step = [s["syncs"] for s in summary["steps"]]
    assert per_step[0] == per_step[1] == per_step[9] == 0
    assert per_step[3] == per_step[7] == 1
    assert syncs["outside_steps"] == 0


def test_the_loop_without_planted_syncs_reports_none(setup):
    summary = run(setup, plant=False)
    assert summary["syncs"] is not None, summary["syncs_error"]
    assert summary["syncs"]["in_steps"] == 0, summary["syncs"]["sites"]
    assert [s["syncs"] for s in summary["steps"]] == [0] * 10


def test_no_sync_raises_at_the_item_line(setup):
    model, x, _ = setup
    ran_after = []
    with pytest.raises(loopscope.SyncError) as error:
        with loopscope.no_sync():
            y = denoise_step(model, x)
            v = y.sum().item()  # STRICT_ITEM
            ran_after.append(True)
    assert error.value.line == line_of("STRICT_ITEM")
    assert error.value.kind == "item"
    assert error.value.file == __file__
    assert ran_after == []  # raised before the next statement
    # The traceback's innermost entry in this file is the .item() line.
    frames = [tb for tb in error.traceback if str(tb.path) == __file__]
    assert frames[-1].lineno + 1 == line_of("STRICT_ITEM")


def test_no_sync_inside_a_profile_and_allow(setup):
    model, x, _ = setup
    with loopscope.profile() as prof:
        with loopscope.no_sync(allow={"item"}):
            y = denoise_step(model, x)
            v = y.sum().item()  # ALLOWED_ITEM
    # one .item(): one sync (its copy and stream sync), let through, and reported
    syncs = prof.summary()["syncs"]
    (site,) = syncs["sites"]
    assert (syncs["count"], syncs["by_kind"]) == (1, {"item": 1})
    assert (site["line"], site["kind"], site["count"]) == (line_of("ALLOWED_ITEM"), "item", 1)


def test_no_sync_stops_at_a_pageable_non_blocking_copy(setup):
    """An async copy from pageable memory waits; strict mode asks the driver."""
    _, _, host = setup
    with pytest.raises(loopscope.SyncError) as error:
        with loopscope.no_sync():
            d = host.to("cuda", non_blocking=True)  # STRICT_PAGEABLE
    assert error.value.line == line_of("STRICT_PAGEABLE")
    assert error.value.kind == "memcpy"


def test_no_sync_lets_a_pinned_non_blocking_copy_through(setup):
    pinned = torch.randn(4096).pin_memory()
    torch.cuda.synchronize()
    with loopscope.no_sync():
        d = pinned.to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    assert d.shape == pinned.shape


def test_a_light_profile_finds_the_same_syncs(setup):
    """A light profile (trace=False) counts launches for sync grouping from the
    driver-API callbacks only (the runtime's launches reach them nested):
    every planted sync is still found with its line, kind and steps.  The
    pageable async copy is left out of the comparison: without activity
    records a light profile cannot judge whether an async copy waited."""
    model, x, host = setup
    with loopscope.profile(trace=False, metrics=False) as prof:
        planted_loop(prof, model, x, host, plant=True)
    syncs = prof.summary()["syncs"]
    assert syncs is not None, prof.summary()["syncs_error"]
    expected = {
        (line_of("SYNC_ITEM"), "item", (3, 7), 2),
        (line_of("SYNC_CPU"), "cpu", (2,), 1),
        (line_of("SYNC_SYNCHRONIZE"), "synchronize", (4,), 1),
    }
    if LIBCUDA is not None:
        expected.add((line_of("SYNC_DRIVER"), "synchronize", (8,), 1))
    found = {(s["line"], s["kind"], tuple(s["steps"]), s["count"]) for s in syncs["sites"]
             if s["line"] not in (line_of("SYNC_PAGEABLE"), line_of("SYNC_PRINT"))}
    assert found == expected
    printed = [s for s in syncs["sites"] if s["line"] == line_of("SYNC_PRINT")]
    assert len(printed) == 1 and printed[0]["steps"] == [5] and printed[0]["count"] > 1


def test_a_watch_counts_each_steps_syncs_and_its_dump_names_their_lines(tmp_path):
    """loopscope.watch() on a real loop: each step's row holds its own syncs
    (a light block's rows are read without naming sites), and the step that
    breaks max_syncs gets one dump whose sync sites are the two lines it
    synced at."""
    import json
    import os
    x = torch.randn(256, 256, device="cuda")
    (x @ x).sum().item()  # cuBLAS's set-up before the watch, not in step 0
    planted, n = 21, 40
    with loopscope.watch(dump_dir=tmp_path, max_syncs=1, block_steps=8, warmup_steps=0,
                         profile_steps=2, p99_factor=None, min_dump_interval_s=0.0) as w:
        for i in range(n):
            with w.step():
                y = x @ x
                if i % 3 == 0:
                    y.sum().item()  # WATCH_EVERY_THIRD
                if i == planted:
                    (y * 2).max().item()  # WATCH_PLANTED
    assert w.summary()["missing"].get("syncs") is None, w.summary()["missing"]
    assert [r["syncs"] for r in w.steps()] == [(i % 3 == 0) + (i == planted) for i in range(n)]
    assert [b["step"] for b in w.breaches] == [planted] and len(w.dumps) == 1
    with open(os.path.join(w.dumps[0], "breach.json")) as f:
        breach = json.load(f)
    assert breach["step"] == planted
    assert {s["line"] for s in breach["sync_sites"]} == {line_of("WATCH_EVERY_THIRD"),
                                                         line_of("WATCH_PLANTED")}
