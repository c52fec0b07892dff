"""loopscope.watch(all_ranks=True): one rank's breach arms every rank.

In this process, over one HashStore shared by two RankArms (two ranks at
step counts set exactly): the start of an arm, the rank that is just in
time and the one that is late, the arms merged and accepted, the checks'
cadence.  Then two gloo ranks on CPU (watch_ranks_worker.py, forked by
tests/dist_worker.py's launcher): rank 1's slow step arms both ranks for
the same steps, and rank 0's dump names rank 1 the straggler from
injected NCCL kernels; ranks that step different counts end without a
wait.  Every expected figure is computed here, from the figures given."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import loopscope
from loopscope.watching import _ranks

torch = pytest.importorskip("torch", reason="torch.distributed needs PyTorch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("this torch has no torch.distributed", allow_module_level=True)

HERE = Path(__file__).resolve().parent
K = 8  # rank_check_steps


def first_start(next_step: int, k: int) -> int:
    """The first multiple of k at least k + 1 steps after next_step."""
    return next(s for s in range(next_step + k + 1, next_step + 3 * k) if s % k == 0)


def pair(k: int = K) -> tuple[_ranks.RankArms, _ranks.RankArms]:
    store = dist.HashStore()
    return _ranks.RankArms(store, 0, 2, k), _ranks.RankArms(store, 1, 2, k)


def follow(arms: _ranks.RankArms, next_step: int) -> tuple[int, dict]:
    """Steps a rank whose next step is next_step (its check there done)
    until a check reads an arm: (the next step then, the arm)."""
    while True:
        next_step += 1
        if arms.due(next_step):
            read = arms.poll(next_step)
            if read:
                return next_step, read[0]


@pytest.mark.parametrize("next_step", [0, 1, 7, 8, 11, 15, 16, 100])
def test_an_arm_starts_at_a_check_more_than_k_steps_ahead(next_step):
    one, _ = pair()
    arm = one.publish(next_step, 4, next_step - 1, ["r"], "breach")
    assert arm["start"] == first_start(next_step, K) == _ranks.arm_start(next_step, K)


@pytest.mark.parametrize("ahead, late", [(K + 4, False), (K + 5, True)])
def test_a_rank_up_to_k_steps_ahead_is_in_time_one_further_is_late(ahead, late):
    """Published at next step 11 (start 24): a rank at 23 checks next at 24,
    in time; one at 24 has checked there already and next checks at 32."""
    publisher, follower = pair()
    arm = publisher.publish(11, 4, 10, ["r"], "breach")
    seen_at, read = follow(follower, 11 + ahead)
    assert read["accepted"] and read["late"] is late
    assert seen_at == (24 if not late else 32)
    assert follower.queued == [read] and follower.counts["late"] == int(late)
    assert (read["start"], read["steps"], read["rank"], read["step"]) == (arm["start"], 4, 0, 10)


@pytest.mark.parametrize("steps, accepted", [(8, True), (9, False)])
def test_an_arm_starting_inside_the_last_one_is_merged(steps, accepted):
    """Arm 1 starts at 24 for `steps` steps; arm 2 (published at next step
    16) starts at 32: accepted when arm 1 ends at 31, merged when at 32.
    Both ranks read both slots alike."""
    zero, one = pair()
    zero.publish(11, steps, 10, ["a"], "breach")
    one.publish(16, 4, 15, ["b"], "breach")
    for arms in (zero, one):
        read = arms.poll(16)
        assert [a["start"] for a in read] == [24, 32]
        assert [a["accepted"] for a in read] == [True, accepted]
        assert arms.counts["merged"] == int(not accepted)
    assert not one.busy() or one.queued  # its own arm read back: nothing unread
    assert one.own_unread == 0 and zero.own_unread == 0


def test_two_ranks_publishing_at_once_take_two_slots():
    zero, one = pair()
    zero.publish(11, 4, 10, ["a"], "breach")
    one.publish(11, 4, 10, ["b"], "breach")   # its slot 0 is taken: slot 1
    assert zero.busy() and one.busy()
    read = one.poll(16)
    assert [(a["rank"], a["accepted"]) for a in read] == [(0, True), (1, False)]


@pytest.mark.parametrize("k", [1, 3, K])
def test_checks_every_k_steps(k):
    zero, _ = pair(k)
    due = [n for n in range(1, 41) if zero.due(n)]
    assert due == list(range(k, 41, k))


def test_leaving_is_seen_by_the_others():
    zero, one = pair()
    assert not zero.someone_left()
    one.leave()
    assert zero.someone_left()


def test_off_and_said_why_without_torch_distributed(tmp_path):
    assert not dist.is_initialized()
    with loopscope.watch(dump_dir=tmp_path, all_ranks=True, rank_check_steps=2,
                         block_steps=2) as w:
        for _ in range(5):
            with w.step():
                pass
    ranks = w.summary()["ranks"]
    assert ranks["all_ranks"] is True and ranks["rank"] is None
    assert ranks["status"].startswith("off: torch.distributed is not initialised")
    assert [r["step"] for r in w.steps()] == [0, 1, 2, 3, 4]
    with loopscope.watch(dump_dir=tmp_path) as w:
        pass
    assert w.summary()["ranks"]["status"] == "off (all_ranks=False)"


# -- two gloo ranks ----------------------------------------------------------------
SPEC = {
    "world": 2, "deadline_s": 60, "budget_ms": 50.0, "slow_ms": 80.0, "block_steps": 4,
    "profile_steps": 4, "check_steps": K, "timeout_s": 10.0,
    "steps": 40, "slow_step": 10,
    "gemm_us": 300, "comm_us": [2_050, 50], "idle_us": [10, 2_010],  # rank 1 arrives 2 ms late
    "apart_steps": [24, 12], "apart_slow": 3, "apart_wait": 6,
}


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    tmp = tmp_path_factory.mktemp("watch_ranks")
    spec = {**SPEC, "port_file": str(tmp / "port"), "out": str(tmp / "rank{rank}.json"),
            "dumps": str(tmp / "dumps")}
    (tmp / "spec.json").write_text(json.dumps(spec))
    began = time.monotonic()
    run = subprocess.run([sys.executable, str(HERE / "watch_ranks_worker.py"),
                          str(tmp / "spec.json")], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=SPEC["deadline_s"] + 30)
    assert run.returncode == 0, run.stdout
    assert time.monotonic() - began < SPEC["deadline_s"]
    out = [json.loads((tmp / f"rank{r}.json").read_text()) for r in range(2)]
    for r, result in enumerate(out):
        for name, got in result.items():
            folder = tmp / "dumps" / f"{name}-rank{r}"
            got["dumps"] = sorted(folder.iterdir()) if folder.exists() else []
    return out


def breach_of(dump: Path) -> dict:
    return json.loads((dump / "breach.json").read_text())


def test_one_ranks_breach_profiles_every_rank_for_the_same_steps(ranks):
    start = first_start(SPEC["slow_step"] + 1, K)
    steps = list(range(start, start + SPEC["profile_steps"]))
    for r in range(2):
        got = ranks[r]["straggler"]
        full = [row["step"] for row in got["rows"] if row["profile"] == "full"]
        assert full == steps
        assert len(got["dumps"]) == 1 and got["dumps"][0].name.endswith(
            f"-step{SPEC['slow_step']}-rank{r}")
        b = breach_of(got["dumps"][0])
        assert b["profiled_steps"] == [steps[0], steps[-1]]
        assert {k: b["ranks"][k] for k in ("armed_by", "breach_step", "rank", "steps", "late",
                                           "gathered")} == {
            "armed_by": 1, "breach_step": SPEC["slow_step"], "rank": r,
            "steps": [steps[0], steps[-1]], "late": False, "gathered": True}
        summary = got["summary"]
        assert summary["breaches"] == (1 if r == 1 else 0)
        assert summary["ranks"]["counts"]["checks"] == SPEC["steps"] // K
        assert summary["ranks"]["counts"]["accepted"] == 1
        assert summary["ranks"]["status"].startswith(f"on: rank {r} of 2 (gloo)")
    assert ranks[1]["straggler"]["summary"]["recent_breaches"][0]["dump"] == \
        str(ranks[1]["straggler"]["dumps"][0])


def test_rank_0s_dump_names_the_straggler_as_gather_does(ranks):
    p = SPEC["profile_steps"]
    b = breach_of(ranks[0]["straggler"]["dumps"][0])
    s = b["ranks"]["straggler"]
    assert (s["rank"], s["last_in_steps"], s["steps_compared"], s["cause"]) == (1, p, p,
                                                                               "host late")
    assert s["late_ms"] == pytest.approx((SPEC["comm_us"][0] - SPEC["comm_us"][1]) / 1e3)
    # no gap before the profile's first kernel: the host excess shows in the other steps
    late = (SPEC["idle_us"][1] - SPEC["idle_us"][0]) / 1e3
    assert s["excess_ms"]["host late"] == pytest.approx(late * (p - 1) / p)
    readme = (ranks[0]["straggler"]["dumps"][0] / "README.txt").read_text()
    assert "every rank armed by rank 1 for steps" in readme
    assert "STRAGGLER: rank 1 is the straggler" in readme
    assert "STRAGGLER: rank 1 is the straggler" in \
        (ranks[0]["straggler"]["dumps"][0] / "report.txt").read_text()
    assert breach_of(ranks[1]["straggler"]["dumps"][0])["ranks"]["straggler"] is None


def test_ranks_stepping_apart_end_without_waiting(ranks):
    """Rank 1 breaches at step 3 (arm from step 16) and leaves after step 11;
    rank 0 profiles steps 16-19 ungathered, at once."""
    start = first_start(SPEC["apart_slow"] + 1, K)
    zero, one = ranks[0]["apart"], ranks[1]["apart"]
    assert [r["step"] for r in zero["rows"] if r["profile"] == "full"] == \
        list(range(start, start + SPEC["profile_steps"]))
    assert breach_of(zero["dumps"][0])["ranks"]["gathered"] is False
    assert zero["seconds"] < SPEC["timeout_s"]
    assert any("ran ungathered" in n for n in zero["summary"]["notes"])
    assert one["dumps"] == [] and one["summary"]["ranks"]["dropped_at_end"] == 1
    assert one["summary"]["recent_breaches"][0]["dump"] == (
        "not written: the watch ended before the steps it armed")
    assert [s["summary"]["ranks"]["counts"]["checks"] for s in (zero, one)] == [
        n // K for n in SPEC["apart_steps"]]
