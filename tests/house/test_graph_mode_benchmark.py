"""benchmarks/cost/graph_mode.py (issue 27) without a GPU: its options parse and
its busy time (the union of the raw op intervals, the figure the GPU test
compares between graph-level and per-kernel tracing) is right, against a
count of covered nanoseconds done point by point."""
from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "cost", "graph_mode.py")


def load():
    spec = importlib.util.spec_from_file_location("graph_mode_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_help_names_the_options():
    p = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0
    for option in ("--rounds", "--repeat", "--loops", "--json"):
        assert option in p.stdout


def test_union_counts_each_covered_nanosecond_once():
    union_ns = load().union_ns
    rng = random.Random(7)
    for _ in range(200):
        intervals = []
        for _ in range(rng.randrange(0, 8)):
            s = rng.randrange(0, 60)
            intervals.append((s, s + rng.randrange(0, 15)))
        covered = set()
        for s, e in intervals:
            covered.update(range(s, e))
        assert union_ns(intervals) == len(covered), intervals


def test_union_of_nested_and_touching_spans():
    union_ns = load().union_ns
    assert union_ns([(0, 10), (2, 3), (10, 12)]) == 12
    assert union_ns([(5, 6), (0, 1)]) == 2
    assert union_ns([]) == 0


def test_each_variant_runs_a_child_with_its_switches_and_options(monkeypatch):
    """MODE+EXTRA...: the extras that are LOOPSCOPE_INTERNAL switches reach the
    child joined in the order given, the others as profile options."""
    module = load()
    seen = []

    class Done:
        returncode, stdout, stderr = 1, "", "no GPU here"

    def run(cmd, **kwargs):
        assert cmd[2] == "--child"
        seen.append(dict(zip(cmd[3::2], cmd[4::2])))  # the --flag value pairs after it
        return Done()

    monkeypatch.setattr(module.subprocess, "run", run)
    module.main(["--loops", "graph", "--repeat", "1", "--variants",
                 "kernels,replays+nocallbacks+ownts0,kernels+ownts0+i400+nometrics,replays+decode2,"
                 "replays+buf8+nocallbacks"])
    got = [(c["--mode"], c["--internal"], c["--options"]) for c in seen]
    assert got == [
        ("kernels", "", ""),
        ("replays", "callbacks=0,own_timestamps=0", ""),
        ("kernels", "own_timestamps=0", '{"metrics": false, "metrics_interval_us": 400}'),
        ("replays", "", '{"metrics_decode_ms": 2}'),
        ("replays", "callbacks=0", '{"metrics_buffer_mb": 8}'),
    ]


def test_medians_of_parts_and_phases():
    module = load()
    assert module.median_parts_ms([(0.001, 0.004), (0.003, 0.002), (0.002, 0.009)]) == [2.0, 4.0]
    assert module.median_parts_ms([]) is None
    infos = [{"start_phases_ns": {"wait": 1_000_000, "metrics": 0}},
             {"start_phases_ns": {"wait": 3_000_000, "metrics": 2_000_000}},
             {"start_phases_ns": {"wait": 2_000_000}}]  # a phase missing counts as 0
    assert module.median_phases_ms(infos, "start_phases_ns") == {"wait": 2.0, "metrics": 0.0}
    assert module.median_phases_ms([], "start_phases_ns") is None
