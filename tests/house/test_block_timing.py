"""benchmarks/cost/_block.py: the one timing of a profiled with-block that the
cost benchmarks share (enter + loop + exit, summary() apart), run here on
the CPU with loopscope itself and a stand-in for torch.cuda."""
from __future__ import annotations

import importlib.util
import os
import types

import pytest

import loopscope

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_block():
    path = os.path.join(ROOT, "benchmarks", "cost", "_block.py")
    spec = importlib.util.spec_from_file_location("block_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeTorch:
    def __init__(self, events):
        self.cuda = types.SimpleNamespace(synchronize=lambda: events.append("sync"))


def test_the_loop_runs_inside_the_block_and_the_parts_add_up():
    events: list = []
    seen = []

    def loop(prof):
        seen.append(prof)
        events.append(("loop", loopscope._core.active()))

    prof, t = load_block().timed_block(loopscope, FakeTorch(events), loop,
                                       {"metrics": False, "gather": False})
    assert seen == [prof] and prof.is_finished
    # waits for earlier GPU work, runs the loop inside the profile, waits for its GPU work
    assert events == ["sync", ("loop", True), "sync"]
    assert t["block"] == pytest.approx(t["enter"] + t["loop"] + t["exit"])
    assert min(t["enter"], t["loop"], t["exit"], t["summary"]) >= 0
    assert prof.summary()["steps"] == []  # summary() was made (and is kept)


def test_a_series_block_neither_waits_first_nor_makes_the_summary():
    events: list = []
    prof, t = load_block().timed_block(loopscope, FakeTorch(events), lambda p: None,
                                       {"metrics": False, "gather": False},
                                       sync_first=False, summary=False)
    assert events == ["sync"]  # only the loop's own end
    assert t["summary"] is None and prof.finished._summary is None
