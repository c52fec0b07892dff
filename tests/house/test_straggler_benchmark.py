"""benchmarks/ranks/distributed_straggler.py (issue 26): the truth it keeps (each
rank's own step timestamps), how it judges a host run against the planted
delay and that truth, and a CPU run of the whole script (gloo, no GPU: the
plumbing, not the figures).  Expected numbers are worked out here."""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys

import pytest

import loopscope

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "ranks", "distributed_straggler.py")
PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(loopscope.__file__)))


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("distributed_straggler", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def times(into_us: list[float], spin_us: float = 0.0, period_us: float = 2000.0) -> list:
    """One rank's [t0, t1, t2] per step (ns): the spin, then the call
    into_us after the step's start."""
    return [[round(k * period_us * 1e3), round((k * period_us + spin_us) * 1e3),
             round((k * period_us + v) * 1e3)] for k, v in enumerate(into_us)]


def test_truth_is_the_median_extra_time_to_the_call(bench):
    # three ranks, four steps; rank 2 spins 1500 us, then is a little slower
    host = [times([300, 310, 900, 305]),           # rank 0: a 900 us stall in step 2
            times([320, 290, 330, 300]),
            times([1820, 1800, 1850, 1790], spin_us=1502)]
    t = bench.truth(host, 2)
    excess = [1820 - 310, 1800 - 300, 1850 - 615, 1790 - 302.5]
    assert t["steps_ms"] == pytest.approx([e / 1e3 for e in excess])
    assert t["host_late_ms"] == pytest.approx(statistics.median(excess) / 1e3)
    assert t["spin_ms"] == pytest.approx(1.502)
    rest = [318 - 310, 298 - 300, 348 - 615, 288 - 302.5]  # after the spin, against the others
    assert t["rest_ms"] == pytest.approx(statistics.median(rest) / 1e3)
    assert bench.truth(None, 1) is None and bench.truth([host[0], []], 1) is None


def host_row(measure_ms: float, truth_ms: float | None, planted_ms: float = 1.5) -> dict:
    host = None if truth_ms is None else [times([300.0] * 3),
                                          times([300.0 + truth_ms * 1e3] * 3, spin_us=1500)]
    return {"kind": "host", "planted_ms": planted_ms, "host_times": host,
            "live": {"rank": 1, "cause": "host late", "late_ms": 2.2, "host_late_ms": measure_ms,
                     "not_measured": [], "max_step_late_ms": 2.2}}


@pytest.mark.parametrize("measure, truth, ok", [
    (1.64, 1.63, True),    # 9.3% over the planted 1.5, 0.6% off the truth
    (1.66, 1.65, False),   # 10.7% over the planted delay
    (1.36, 1.40, True),    # 9.3% under it
    (1.34, 1.40, False),   # 10.7% under it
    (1.50, 1.66, True),    # 9.6% under the truth
    (1.50, 1.68, False),   # 10.7% under the truth: the planted delay is not what was spent
    (1.50, None, False),   # no truth recorded: not judged ok
])
def test_a_host_run_is_ok_within_10pct_of_the_planted_delay_and_the_truth(bench, measure,
                                                                           truth, ok):
    args = argparse.Namespace(late_rank=1)
    assert bench.judge(host_row(measure, truth), args) is ok


def test_a_compute_run_is_judged_on_its_arrival_alone(bench):
    args = argparse.Namespace(late_rank=1)
    row = host_row(0.2, 0.25, planted_ms=3.5)
    row["kind"] = "compute"
    row["live"].update(cause="compute", late_ms=3.6)
    assert bench.judge(row, args) is True
    row["live"]["late_ms"] = 3.9  # 11.4% over
    assert bench.judge(row, args) is False


def test_step_agreement_is_the_largest_per_step_difference(bench):
    true = {"steps_ms": [1.6, 1.7, 1.65]}
    figures = {"host_into_ms": [[0.30, 1.90], [0.32, 2.00], [None, 1.9]]}
    # step 2 has no rank-0 figure: left out
    assert bench.step_agreement(figures, true, 1) == pytest.approx(max(
        abs(1.90 - 0.30 - 1.6), abs(2.00 - 0.32 - 1.7)))
    assert bench.step_agreement(figures, None, 1) is None


def test_the_script_runs_on_cpu_and_keeps_every_ranks_timestamps(tmp_path):
    """gloo on CPU: no collective kernels, so nothing is judged, but every
    rank's step timestamps come back in the figures."""
    out = tmp_path / "figures.json"
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR, CUDA_VISIBLE_DEVICES="")
    run = subprocess.run([sys.executable, SCRIPT, "--nproc", "2", "--runs", "1", "--steps", "4",
                          "--warmup", "1", "--dim", "32", "--batch", "4", "--host-ms", "2",
                          "--out", str(tmp_path / "traces"), "--json", str(out)],
                         capture_output=True, text=True, env=env, timeout=240)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert [r["kind"] for r in rows] == ["host", "compute", "control"]
    for r in rows:
        assert len(r["host_times"]) == 2 and all(len(t) == 4 for t in r["host_times"])
        for t in r["host_times"]:
            assert all(t0 <= t1 <= t2 for t0, t1, t2 in t)
        late = r["host_times"][1]
        spin = statistics.median(t1 - t0 for t0, t1, _ in late) / 1e6
        assert (spin >= 2.0) == (r["kind"] == "host")  # the spin runs until 2 ms have passed
        excess = [b[2] - b[0] - (a[2] - a[0]) for a, b in zip(*r["host_times"])]
        assert r["truth"]["host_late_ms"] == pytest.approx(statistics.median(excess) / 1e6)
    assert "host runs: loopscope's host late within 10% of the truth in" in run.stdout


@pytest.mark.parametrize("cpus, local, world, block", [
    (range(16), 1, 4, [4, 5, 6, 7]),
    (range(16), 3, 4, [12, 13, 14, 15]),
    ([0, 2, 4, 6, 8], 1, 2, [4, 6]),    # 5 CPUs, 2 ranks: 2 each, the odd one unused
    ([3], 1, 2, [3]),                   # fewer CPUs than ranks: all of them
])
def test_pin_gives_each_local_rank_its_own_block(bench, monkeypatch, cpus, local, world, block):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(cpus))
    assert bench.pin_cpus(local, world) == block


def test_clock_line_says_how_the_traces_clocks_were_put_together(bench):
    ends = {"aligned": True, "reference_rank": 0,
            "per_rank": [{"rank": 0, "offset_us": 0.0, "steps": 30, "min_launch_lag_us": 12.5},
                         {"rank": 1, "offset_us": -2480.5, "steps": 30,
                          "min_launch_lag_us": None}],
            "residual_us": {"median": 0.25, "max": 0.5, "steps": 30}, "why": "they disagree"}
    row = {"world": 4, "kind": "host", "run": "kineto", "offline": {"clock_ends": ends}}
    assert bench.clock_line(row) == (
        "offline clocks, 4 ranks, host-kineto: moved (offsets us: rank 1 -2480.500; the ends "
        "then 0.250 us apart, median; each rank's smallest collective launch -> start, us: "
        "12.5, -): they disagree")
    row["offline"]["clock_ends"] = dict(ends, per_rank=None, why="rank 1: no end")
    assert bench.clock_line(row) == ("offline clocks, 4 ranks, host-kineto: not checked "
                                     "(rank 1: no end)")
    assert bench.clock_line({"offline": {"error": "x"}}) is None


def test_control_line_tells_what_the_named_ranks_own_timestamps_say(bench):
    # rank 2 named in a control run: its host 0.3 ms later in three steps, 5 ms in one
    host = [times([300] * 4), times([310] * 4), times([600, 610, 5300, 600]), times([305] * 4)]
    row = {"world": 4, "run": "kineto", "kind": "control", "host_times": host,
           "live": {"rank": 2}}
    excess = [600 - 305, 610 - 305, 5300 - 305, 600 - 305]  # against the others' median
    assert bench.control_line(row) == (
        f"control, 4 ranks, run kineto: rank 2 named; its own timestamps: its host reached the "
        f"all_reduce {statistics.median(excess) / 1e3:.3f} ms (median; mean "
        f"{statistics.mean(excess) / 1e3:.3f}) later into its steps than the others', over 1 ms "
        f"later in 1 of 4 steps")
    assert bench.control_line(dict(row, live={"rank": None})) is None
    assert bench.control_line(dict(row, kind="host")) is None


def test_backlog_line_says_why_the_offline_read_measured_no_straggler(bench):
    """The real 4 x H100 torch.profiler host folder (tests/data/ranks): the
    offline figures carry the backlog, and the table prints its sentence."""
    path = os.path.join(ROOT, "tests", "data", "ranks", "h100x4_kineto_host")
    skew = loopscope.analyze(path, workers=1, progress=False)["skew"]
    figures = bench._figures(skew)
    assert figures["rank"] is None and figures["backlog"]["rank"] == 1
    row = {"world": 4, "kind": "host", "run": "kineto", "offline": figures}
    assert bench.backlog_line(row) == ("offline, 4 ranks, host-kineto: "
                                       + loopscope.figures._ranks.backlog_text(skew["backlog"]))
    assert bench.backlog_line({"world": 4, "kind": "host", "run": 0,
                               "offline": bench._figures({})}) is None
