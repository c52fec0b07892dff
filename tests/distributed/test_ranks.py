"""Cross-rank figures (_ranks.merge) on compact per-rank summaries built
here, as rank 0 would receive them: waits, the straggler and its cause,
the verdicts, the clock arithmetic, what is not measured; then how rank 0's
diagnosis, report, HTML and the max_rank_skew_us budget read them.  The
expected numbers are computed in the tests from the same inputs.

The compact summaries carry comm_ms / compute_ms per step, as the C
analysis will once collective kernels are classified (issue 12's keys);
they are written by hand here, which is what the merge receives."""
from __future__ import annotations

import copy
import json
import random
import statistics
import sys

import pytest

import loopscope
from loopscope.distributed import _distributed
from loopscope.figures import _ranks
from loopscope.figures._budgets import evaluate
from loopscope.figures._diagnosis import communication_reasons, diagnose, diagnose_ranks

from synthetic_loop import run_loop

STEP_NS = 10_000_000  # 10 ms steps on every rank's clock


def compact(rank: int, comm: list[float | None], *, idle_host=None, idle_sync=None,
            compute=None, gpu=None, starts=None, clock=True, devices=None, host=None,
            world_size: int = 3, verdict="GPU_BOUND") -> dict:
    """A compact summary as _ranks.compact makes it: steps of 10 ms, the
    per-step figures given, one clock pair with slope 1 (profile clock =
    exchange clock - 1 s), one GPU per rank (device id = rank) on one host."""
    n = len(comm)
    starts = starts or [k * STEP_NS for k in range(n)]
    steps = []
    for k in range(n):
        steps.append({
            "index": k, "name": f"Step_{k}", "start_ns": starts[k], "end_ns": starts[k] + 9_000_000,
            "host_ms": 9.0, "gpu_ms": (gpu or [8.0] * n)[k], "comm_ms": comm[k],
            "compute_ms": (compute or [None] * n)[k], "syncs": 0,
            "idle_host_ms": (idle_host or [0.0] * n)[k], "idle_sync_ms": (idle_sync or [0.0] * n)[k],
            "verdict": verdict,
        })
    return {
        "compact": 1, "rank": rank, "world_size": world_size, "host": host or "node0",
        "devices": [rank] if devices is None else list(devices),
        "gpus": [f"{host or 'node0'} GPU {d}" for d in ([rank] if devices is None else devices)],
        "device": "GPU", "source": "injected", "gpu_error": None,
        "host_ms": 9.0 * n, "busy_pct": 90.0, "gpu_busy_ms": 8.0 * n, "comm_ms": None,
        "compute_ms": None, "comm_pct": None, "syncs": 0, "sync_blocked_ms": 0.0,
        "verdict": verdict, "cause": "compute", "steps": steps,
        "clock": {"profile_ns": [0, 100 * STEP_NS], "exchange_ns": [1_000_000_000,
                                                                    1_000_000_000 + 100 * STEP_NS]}
        if clock else None,
        "raised": None,
    }


def exchange(offset_ns: int, rtt_ns: int = 20_000, at: int = 5_000_000_000) -> dict:
    """One round per phase, the rank reading its clock in the middle: the
    offset is exact, the error rtt/2."""
    a, b = at, at + rtt_ns
    return {"start": [(a, b, a + rtt_ns // 2 + offset_ns)], "end": None}


# Rank 2 arrives last in steps 0-4 (the smallest comm time); step 5's
# spread is 50 us, noise.  Its GPU waits longer for its host.
COMM = {0: [3.0, 2.5, 3.2, 2.8, 3.0, 1.05],
        1: [2.6, 2.4, 2.2, 2.9, 2.1, 1.00],
        2: [0.5, 0.4, 0.6, 0.5, 0.4, 1.02]}
IDLE_HOST = {0: [0.1] * 6, 1: [0.2] * 6, 2: [2.4, 2.2, 2.6, 2.5, 2.3, 0.1]}


COMPUTE_MS = 5.0  # every rank computes as much; GPU busy = compute + collectives


def three_ranks(**overrides) -> list[dict]:
    return [compact(r, COMM[r], idle_host=IDLE_HOST[r], gpu=[COMPUTE_MS + c for c in COMM[r]],
                    **overrides) for r in range(3)]


def exchanges3() -> dict:
    return {1: exchange(0), 2: exchange(0)}


def test_waits_straggler_and_its_cause():
    skew = _ranks.merge(three_ranks(), exchanges3(), {}, "nccl")
    for k, row in enumerate(skew["steps"]):
        least = min(COMM[r][k] for r in range(3))
        assert row["wait_ms"] == [pytest.approx(COMM[r][k] - least) for r in range(3)]
        assert row["max_wait_ms"] == pytest.approx(max(COMM[r][k] for r in range(3)) - least)
        assert row["last_arrival_rank"] == (2 if k < 5 else None)  # step 5: 50 us < 100 us
    s = skew["straggler"]
    assert (s["rank"], s["last_in_steps"], s["steps_compared"]) == (2, 5, 6)
    waits = [max(COMM[r][k] for r in range(3)) - COMM[2][k] for k in range(5)]
    assert s["late_ms"] == pytest.approx(sum(waits) / 5)
    host_excess = [IDLE_HOST[2][k] - statistics.median([IDLE_HOST[0][k], IDLE_HOST[1][k]])
                   for k in range(5)]
    assert s["excess_ms"]["host late"] == pytest.approx(sum(host_excess) / 5)
    assert s["excess_ms"]["sync"] == 0.0
    assert s["excess_ms"]["compute"] == 0.0  # GPU busy minus collectives, the same everywhere
    assert s["cause"] == "host late"
    # each rank's wait, and the verdict of those that waited for the straggler
    for r in range(3):
        total = sum(COMM[r][k] - min(COMM[q][k] for q in range(3)) for k in range(6))
        cross = skew["per_rank"][r]
        assert cross["wait_ms"] == pytest.approx(total)
        busy = sum(COMPUTE_MS + c for c in COMM[r])
        assert cross["wait_pct_of_gpu_busy"] == pytest.approx(round(100 * total / busy, 2))
        assert cross["verdict"] == ("COMMUNICATION_WAIT" if r != 2 else "GPU_BOUND")
        assert cross["waits_for"] == (2 if r != 2 else None)
    assert [c["last_arrivals"] for c in skew["per_rank"]] == [0, 0, 5]
    assert skew["not_measured"] == []


def test_compute_excess_from_gpu_minus_comm_when_not_split():
    """compute_ms missing per step: GPU busy minus collective time stands in."""
    ranks = three_ranks()
    for c in ranks:  # the straggler computes 2 ms more per step, its host is on time
        for s in c["steps"]:
            s["idle_host_ms"] = 0.1
            s["gpu_ms"] = s["comm_ms"] + (7.0 if c["rank"] == 2 else 5.0)
    s = _ranks.merge(ranks, exchanges3(), {}, "nccl")["straggler"]
    assert s["excess_ms"]["compute"] == pytest.approx(2.0)
    assert s["cause"] == "compute"


def test_no_cause_when_every_excess_is_small():
    ranks = three_ranks()
    for c in ranks:
        for s in c["steps"]:
            s["idle_host_ms"] = 0.1
    s = _ranks.merge(ranks, exchanges3(), {}, "nccl")["straggler"]
    assert s["rank"] == 2 and s["cause"] is None
    assert _ranks.straggler_text(s).endswith("no cause shows in its profiled steps")


def test_no_straggler_below_the_noise_floor_or_without_a_majority():
    quiet = [compact(r, [1.0 + 0.00001 * r] * 4) for r in range(3)]  # 0.02 us spreads
    skew = _ranks.merge(quiet, exchanges3(), {}, "nccl")
    assert skew["straggler"] is None and all(r["last_arrival_rank"] is None for r in skew["steps"])
    # long steps: 0.5 ms of jitter in 100 ms of GPU time is noise (floor 2 ms), 3 ms is not
    long = [compact(r, [1.0 + 0.5 * (r == 0), 1.0 + 3.0 * (r != 2)], gpu=[100.0, 100.0])
            for r in range(3)]
    skew = _ranks.merge(long, exchanges3(), {}, "nccl")
    assert [r["last_arrival_rank"] for r in skew["steps"]] == [None, 2]
    # rank 1 last once, rank 2 once, two quiet steps: nobody last in half the steps
    comm = {0: [2.0, 2.0, 1.0, 1.0], 1: [0.5, 2.0, 1.0, 1.0], 2: [2.0, 0.5, 1.0, 1.0]}
    skew = _ranks.merge([compact(r, comm[r]) for r in range(3)], exchanges3(), {}, "nccl")
    assert [r["last_arrival_rank"] for r in skew["steps"]] == [1, 2, None, None]
    assert skew["straggler"] is None
    assert all(c["verdict"] == "GPU_BOUND" for c in skew["per_rank"])


def test_skews_after_alignment_with_drift():
    """Rank 1's exchange clock is 3 ms ahead at the start exchange and 3.1
    ms ahead at the end one (100 us drift over 100 ms); its steps start 2 ms
    after rank 0's in true time."""
    true_start = [k * STEP_NS for k in range(4)]
    r0 = compact(0, [None] * 4, world_size=2, starts=true_start)
    r1 = compact(1, [None] * 4, world_size=2, starts=[t + 2_000_000 for t in true_start])
    # rank 1's pair: its exchange clock = true + 3 ms + drift; profile = exchange - 1 s - 3 ms
    r1["clock"] = {"profile_ns": [0, 100 * STEP_NS],
                   "exchange_ns": [1_003_000_000, 1_003_000_000 + 100 * STEP_NS + 100_000]}
    t_s, t_e = 1_000_000_000, 1_000_000_000 + 100 * STEP_NS
    x = {"start": [(t_s - 10_000, t_s + 10_000, t_s + 3_000_000)],
         "end": [(t_e - 10_000, t_e + 10_000, t_e + 3_100_000)]}
    skew = _ranks.merge([r0, r1], {1: x}, {}, "nccl")
    assert skew["clock"]["error_us"] == 10.0
    assert skew["clock"]["per_rank"][0]["drift_ppm"] == pytest.approx(100.0)
    for k, row in enumerate(skew["steps"]):
        # independent: rank 1's profile time p -> its exchange time e (slope from its pairs)
        # -> minus the offset interpolated at that time -> rank 0's profile time (slope 1)
        p = true_start[k] + 2_000_000
        slope = (100 * STEP_NS + 100_000) / (100 * STEP_NS)
        e = 1_003_000_000 + p * slope
        t0 = e - 3_000_000
        offset = 3_000_000 + 100_000 * (t0 - t_s) / (t_e - t_s)
        expected = (e - offset - 1_000_000_000) - true_start[k]
        assert row["start_skew_us"] == pytest.approx(expected / 1e3, abs=1e-3)
        assert row["last_start_rank"] == 1
        assert _ranks.above_error(row["start_skew_us"], skew)


def test_clock_error_is_the_two_largest_residuals():
    ranks = [compact(r, [None] * 2, world_size=4) for r in range(4)]
    x = {1: exchange(0, rtt_ns=40_000), 2: exchange(0, rtt_ns=100_000), 3: exchange(0, rtt_ns=60_000)}
    skew = _ranks.merge(ranks, x, {}, "nccl")
    assert skew["clock"]["error_us"] == 50.0 + 30.0  # ranks 2 and 3 may be off in opposite ways
    assert [c["error_us"] for c in skew["clock"]["per_rank"]] == [20.0, 50.0, 30.0]
    # skews of 0: not above the error, shown as such
    assert skew["steps"][0]["start_skew_us"] == 0.0
    assert not _ranks.above_error(0.0, skew)


def test_best_round_is_the_shortest_round_trip():
    rounds = [(0, 900, 10_450), (2_000, 2_300, 12_100), (5_000, 5_300, 15_000)]
    assert _ranks.best_round(rounds) == {"offset_ns": 12_100 - 2_150, "error_ns": 150,
                                         "at_ns": 2_150}
    assert _ranks.best_round([]) is None and _ranks.best_round(None) is None


def test_what_is_not_measured_is_said():
    ranks = [compact(r, [None] * 2, world_size=3, devices=(0,), host="n1") for r in range(3)]
    ranks[2]["clock"] = None
    ranks[0]["gpu_error"] = "no NVIDIA GPU driver on this machine"
    skew = _ranks.merge(ranks, {1: exchange(0), 2: exchange(0)}, {}, "gloo")
    assert skew["not_measured"] == [
        "backend gloo: its collectives run on the CPU, so no collective kernel times: wait per "
        "rank and the straggler are not measured",
        "ranks 0, 1, 2: no collective time per step (needs GPU tracing with collective kernels "
        "classified; no NVIDIA GPU driver on this machine): wait and straggler not measured",
        "rank 2: clocks not exchanged with rank 0: left out of the skews",
        "ranks 0, 1, 2 share one GPU (n1 GPU 0): their kernels interleave, so their comm, wait "
        "and compute times mix",
    ]
    assert all(row["ranks"] == [0, 1, 2] and row["wait_ms"] is None for row in skew["steps"])
    single = _ranks.merge([compact(0, [1.0], world_size=1)], {}, {}, "nccl")
    assert single["not_measured"] == [
        "a single rank: no cross-rank skew, wait or straggler to measure"]


def test_a_missing_rank_is_left_out_and_named():
    ranks = three_ranks()
    ranks[1] = None
    skew = _ranks.merge(ranks, {2: exchange(0)}, {1: "did not reach the profile's end within 5 s"},
                        "nccl")
    assert skew["missing"] == [{"rank": 1, "reason": "did not reach the profile's end within 5 s"}]
    assert skew["ranks_present"] == [0, 2]
    assert skew["per_rank"][1] is None
    assert skew["steps"][0]["ranks"] == [0, 2]
    assert skew["straggler"]["rank"] == 2


def test_compact_is_plain_and_small(test_clock):
    with loopscope.profile() as prof:
        run_loop(prof, steps=3)
    summary = prof.summary()
    c = _ranks.compact(summary, rank=1, world_size=2, host="n", step_times={0: (5, 9)},
                       clock=None)
    assert json.loads(json.dumps(c)) == c
    assert [s["host_ms"] for s in c["steps"]] == [s["host_ms"] for s in summary["steps"]]
    assert [s["idle_host_ms"] for s in c["steps"]] == [
        s["gaps"]["idle_by_cause_ms"]["host"] for s in summary["steps"]]
    assert (c["steps"][0]["start_ns"], c["steps"][1]["start_ns"]) == (5, None)
    # the loop's kernels are not collectives: no time in communication
    assert (c["comm_ms"], c["steps"][0]["comm_ms"]) == (0.0, 0.0)
    assert c["comm_ms"] == summary["gpu"]["comm_ms"]
    assert c["devices"] == [0] and c["gpus"] == ["n/0"]  # no identity given: host/ordinal
    uuid = _ranks.compact(summary, rank=1, world_size=2, host="n", step_times={}, clock=None,
                          gpu_ids=lambda d: f"GPU-abc{d}")
    assert uuid["gpus"] == ["GPU-abc0"]
    # the loop idles for its host (2 severe host gaps), far more than it computes
    assert c["cause"] == "host late"


def test_gpu_identity_without_cuda(monkeypatch):
    """Without torch's CUDA (no UUID): host, the visible set, the ordinal."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        pytest.skip("torch's CUDA is up here: the identity is the GPU's UUID")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert _distributed._gpu_identity(1, "n") == "n GPU 1 of CUDA_VISIBLE_DEVICES=2,3"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert _distributed._gpu_identity(1, "n") == "n GPU 1"


# -- rank 0's diagnosis, report, HTML and budget --------------------------------------
@pytest.fixture
def rank0_summary(test_clock):
    """A real rank-0 summary of the synthetic loop, with the three ranks
    above gathered into it (as _distributed.attach does on rank 0)."""
    with loopscope.profile() as prof:
        run_loop(prof, steps=3)
    base = copy.deepcopy(prof.finished.local_summary())
    session = _distributed.Session(_distributed.check_options(True, 5.0))
    session.rank, session.world_size, session.backend = 0, 3, "nccl"
    session.index, session.status = 0, "gathered"
    session.compacts = three_ranks()
    session.exchanges = exchanges3()
    return base, _distributed.attach(session, copy.deepcopy(base))


def test_rank_0_waits_for_the_straggler(rank0_summary):
    base, summary = rank0_summary
    d = summary["diagnosis"]
    assert base["diagnosis"]["verdict"] == "CPU_LAUNCH_BOUND"
    assert d["verdict"] == "COMMUNICATION_WAIT"
    s = summary["skew"]["straggler"]
    me = summary["skew"]["per_rank"][0]
    assert d["reasons"][0] == (
        f"rank 0 waited {me['wait_ms']:.3f} ms in collectives ({me['wait_pct_of_gpu_busy']:.1f}% "
        "of its GPU busy time in steps) for rank 2, the straggler (host late); before the ranks "
        "were compared it read CPU_LAUNCH_BOUND")
    assert d["reasons"][1:] == base["diagnosis"]["reasons"]
    assert d["actions"][0].startswith("make rank 2's host launch sooner: its GPU waits "
                                      f"{s['excess_ms']['host late']:.3f} ms per step")
    assert d["evidence"]["own_verdict"] == "CPU_LAUNCH_BOUND" and d["evidence"]["waits_for"] == 2
    assert summary["ranks"] == three_ranks()
    assert (summary["rank"], summary["world_size"]) == (0, 3)


def test_rank_0_as_the_straggler_or_barely_waiting(rank0_summary):
    base, _ = rank0_summary
    session = _distributed.Session(_distributed.check_options(True, 5.0))
    session.rank, session.world_size, session.backend, session.status = 0, 3, "nccl", "gathered"
    comm = {0: COMM[2], 1: COMM[1], 2: COMM[0]}  # rank 0 now arrives last
    session.compacts = [compact(r, comm[r], gpu=[COMPUTE_MS + c for c in comm[r]]) for r in range(3)]
    session.exchanges = exchanges3()
    d = _distributed.attach(session, copy.deepcopy(base))["diagnosis"]
    assert d["verdict"] == "CPU_LAUNCH_BOUND"  # its own
    assert d["reasons"][0] == ("this rank is the straggler (no cause in its profiled steps): the "
                               "others waited for it in 5 of 6 steps, 2.440 ms on average")
    # rank 0 waits 0.1 ms a step for rank 2 out of 100 ms busy, rank 1 and 3 wait 2 ms of
    # 7: rank 2 is the straggler (over 10% of the others' median step), rank 0 barely waits
    session.world_size = 4
    comm = {0: [c + 0.1 for c in COMM[2]], 1: COMM[1], 2: COMM[2], 3: COMM[1]}
    gpu = {0: 95.0, 1: COMPUTE_MS, 2: COMPUTE_MS, 3: COMPUTE_MS}
    session.compacts = [compact(r, comm[r], gpu=[gpu[r] + c for c in comm[r]], world_size=4)
                        for r in range(4)]
    session.exchanges = {1: exchange(0), 2: exchange(0), 3: exchange(0)}
    summary = _distributed.attach(session, copy.deepcopy(base))
    me = summary["skew"]["per_rank"][0]
    assert summary["skew"]["straggler"]["rank"] == 2
    assert summary["diagnosis"]["verdict"] == "CPU_LAUNCH_BOUND"
    assert summary["diagnosis"]["reasons"][0] == (
        f"rank 2 is the straggler (no cause in its profiled steps); rank 0 waited "
        f"{me['wait_ms']:.3f} ms in collectives ({me['wait_pct_of_gpu_busy']:.1f}% of its GPU "
        "busy time in steps), too little to read COMMUNICATION_WAIT")
    assert me["wait_pct_of_gpu_busy"] < 10


def test_report_puts_the_straggler_first_then_the_rank_table(rank0_summary):
    _, summary = rank0_summary
    text = loopscope.views._report.format_report(summary).splitlines()
    s = summary["skew"]["straggler"]
    assert text[1] == "STRAGGLER: " + _ranks.straggler_text(s)
    assert text[2] == "Rank 0 of 3 (nccl); gathering: gathered"
    assert text[3].startswith("COMMUNICATION WAIT: ")
    head = next(i for i, line in enumerate(text) if line.startswith("Ranks (3 of 3 gathered"))
    assert text[head].endswith("clocks aligned to +-20 us, skews within that shown as ~)")
    rows = text[head + 2: head + 5]
    assert rows[0].split()[:2] == ["0", "COMMUNICATION_WAIT"]
    assert rows[2].split()[:3] == ["2", "GPU_BOUND", "GPU_BOUND"]
    assert rows[0].endswith("(waits for rank 2)")
    per_step = text.index("Per step (per rank: host ms, or host ms/wait ms with the collectives "
                          "timed):")
    step0 = text[per_step + 2]
    # same true start on every rank: no skew above the clocks' error; rank 2 arrived last
    cells = step0.split()
    assert cells[2:4] == ["~", "~"] and cells[6] == "2"
    assert cells[7:] == [f"9.000/{COMM[r][0] - COMM[2][0]:.3f}" for r in range(3)]


def test_html_shows_the_straggler_above_the_verdict(rank0_summary, monkeypatch):
    _, summary = rank0_summary
    # tables only: matplotlib's extension dies under CI's preloaded ASan (.ci/run)
    monkeypatch.setattr(loopscope.views._html, "_matplotlib", lambda: None)
    page = loopscope.views._html.render(summary)
    straggler = page.index("<b>Straggler:</b> rank 2 is the straggler")
    assert straggler < page.index("COMMUNICATION WAIT") < page.index("Ranks per step")
    assert "waits for rank 2" in page


def test_trace_draws_the_other_ranks_on_rank_0s_clock(rank0_summary):
    _, summary = rank0_summary
    events = loopscope.distributed._ranks_view.rank_trace_events(summary, t0_ns=-1_000_000_000, profile=0)
    steps = [e for e in events if e["ph"] == "X"]
    # every rank's pair: profile = exchange - 1 s, offsets 0: its steps where it ran them
    assert [(e["pid"], e["ts"], e["dur"]) for e in steps] == [
        (1000 + r, (k * STEP_NS + 1_000_000_000) / 1e3, 9_000.0) for k in range(6) for r in (1, 2)]
    assert steps[0]["args"] == {"rank": 1, "step": 0, "profile": 0, "host_ms": 9.0,
                                "wait_ms": pytest.approx(COMM[1][0] - COMM[2][0])}
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
    assert names == {1001: "rank 1: steps on rank 0's clock (+-20 us)",
                     1002: "rank 2: steps on rank 0's clock (+-20 us)"}
    assert loopscope.distributed._ranks_view.rank_trace_events(dict(summary, skew=None), 0, 0) == []


def test_max_rank_skew_us_budget(rank0_summary):
    _, summary = rank0_summary
    out = evaluate(summary, {"max_rank_skew_us": 5.0}).outcomes[0]
    assert (out.measured, out.ok) == (0.0, True)  # skews of 0, within the +-20 us clocks
    assert out.detail == "clocks aligned to +-20 us"
    skewed = copy.deepcopy(summary)
    skewed["skew"]["steps"][1]["end_skew_us"] = 150.0
    skewed["skew"]["steps"][2]["start_skew_us"] = 19.0  # within the error: not counted
    out = evaluate(skewed, {"max_rank_skew_us": 100.0}).outcomes[0]
    assert (out.measured, out.ok) == (150.0, False)
    other = dict(summary, rank=1, skew=None, ranks=None)
    out = evaluate(other, {"max_rank_skew_us": 100.0}).outcomes[0]
    assert out.ok is None and out.reason == "rank 1: only rank 0 gathers the ranks' figures"
    alone = dict(summary, rank=None, skew=None)
    assert evaluate(alone, {"max_rank_skew_us": 1.0}).outcomes[0].reason == (
        "not under torch.distributed")


def test_collective_share_is_a_reason_without_the_ranks(test_clock):
    with loopscope.profile() as prof:
        run_loop(prof, steps=3)
    summary = copy.deepcopy(prof.finished.local_summary())
    busy = summary["gpu"]["busy_ms"]
    summary["gpu"].update(comm_ms=round(busy * 0.4, 6), compute_ms=round(busy * 0.6, 6))
    line = (f"GPU busy {summary['gaps']['busy_pct']:.1f}%, of which 40.0% in collectives "
            f"({busy * 0.4:.3f} ms; compute {busy * 0.6:.1f} ms): time in a collective includes "
            "waiting for the slowest rank; rank 0 of a gathered profile names it")
    assert communication_reasons(summary) == [line]
    assert line in diagnose(summary)["reasons"]
    summary["gpu"]["comm_ms"] = round(busy * 0.1, 6)
    assert communication_reasons(summary) == []


def test_options_and_output_paths():
    assert _distributed.check_options(False, 2) == {"gather": False, "timeout_s": 2.0}
    with pytest.raises(TypeError, match=r"gather must be True or False, got 'yes' \(str\)"):
        loopscope.profile(gather="yes")
    with pytest.raises(ValueError, match="gather_timeout_s must be above 0 and at most 3600 s"):
        loopscope.profile(gather_timeout_s=0)
    with pytest.raises(TypeError, match="gather_timeout_s must be a number"):
        loopscope.profile(gather_timeout_s="5")
    assert _distributed.rank_path("out.json", 1) == "out.rank1.json"
    assert _distributed.rank_path("t.json.gz", 3) == "t.rank3.json.gz"
    assert _distributed.rank_path("out", 0) == "out.rank0.json"
    assert _distributed.output_paths("o.json", None) == ["o.json"]
    assert _distributed.output_paths("o.json", (0, 2)) == ["o.rank0.json", "o.json"]
    assert _distributed.output_paths("o.json", (1, 2)) == ["o.rank1.json"]
    # --json - under torchrun (issue 41): rank 0's job summary on stdout, nothing else
    assert _distributed.output_paths("-", (0, 2)) == ["-"]
    assert _distributed.output_paths("-", (1, 2)) == []
    assert _distributed.output_paths("-", None) == ["-"]


def test_launcher_rank(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert _distributed.launcher_rank() == (1, 4)
    assert _distributed.output_rank([{"rank": None, "world_size": 1}]) == (1, 4)
    assert _distributed.output_rank([{"rank": 2, "world_size": 3}]) == (2, 3)
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert _distributed.launcher_rank() is None
    monkeypatch.setenv("WORLD_SIZE", "x")
    assert _distributed.launcher_rank() is None


# -- the store protocol's failure paths, with an in-memory store -------------------
class FakeStore:
    """The c10d Store calls the protocol uses, in memory (one process);
    `broken` makes every call raise."""

    def __init__(self, broken: bool = False) -> None:
        self.data: dict[str, bytes] = {}
        self.broken = broken

    def _check_broken(self) -> None:
        if self.broken:
            raise RuntimeError("Connection reset by peer")

    def set(self, key, value):
        self._check_broken()
        self.data[key] = value if isinstance(value, bytes) else str(value).encode()

    def get(self, key):
        self._check_broken()
        return self.data[key]

    def check(self, keys):
        self._check_broken()
        return all(k in self.data for k in keys)

    def wait(self, keys, timeout):
        self._check_broken()
        if not self.check(keys):
            raise RuntimeError("wait timeout")

    def delete_key(self, key):
        return self.data.pop(key, None) is not None


class FakeDist:
    """What _distributed reads of torch.distributed."""

    def __init__(self, rank: int, world: int, store: FakeStore) -> None:
        self.rank, self.world, self.store = rank, world, store

        class C10d:
            @staticmethod
            def _get_default_store():
                return store

        self.distributed_c10d = C10d

    def is_available(self):
        return True

    def is_initialized(self):
        return True

    def get_rank(self):
        return self.rank

    def get_world_size(self):
        return self.world

    def get_backend(self):
        return "nccl"

    @staticmethod
    def PrefixStore(prefix, store):  # noqa: N802  (torch's name)
        return store


@pytest.fixture
def fake_job(monkeypatch):
    def make(rank: int, world: int, store: FakeStore):
        monkeypatch.setitem(sys.modules, "torch.distributed",
                            FakeDist(rank, world, store))
    return make


def test_a_store_that_breaks_leaves_the_profile_ungathered(fake_job):
    fake_job(0, 2, FakeStore(broken=True))
    with pytest.warns(loopscope.LoopscopeWarning, match="gathering the ranks failed: "
                      "RuntimeError: Connection reset by peer"):
        with loopscope.profile(gather_timeout_s=0.05) as prof:
            with prof.step():
                pass
    d = prof.summary()["distributed"]
    assert d["gather"] == ("not gathered: the store failed (RuntimeError: Connection reset by "
                           "peer)")
    assert prof.summary()["rank"] == 0 and prof.summary()["skew"] is None
    assert len(prof.summary()["steps"]) == 1


def test_rank_0_absent_costs_the_others_two_timeouts_per_phase_and_is_said(fake_job):
    store = FakeStore()
    fake_job(1, 2, store)
    with pytest.warns(loopscope.LoopscopeWarning) as caught:
        with loopscope.profile(gather_timeout_s=0.05) as prof:
            pass
    s = prof.summary()
    why = "rank 0 did not answer within 0.1 s (did it reach the profile's end?)"
    assert s["distributed"]["gather"] == f"not taken by rank 0: {why}"
    assert s["distributed"]["notes"] == [
        "start: rank 0 did not answer within 0.1 s (did it reach the profile's start?)"]
    assert any(f"rank 1: {why}; this rank's summary did not reach rank 0" in str(w.message)
               for w in caught)
    assert all(t >= 100 for t in s["distributed"]["exchange_ms"].values())
    # what it left for rank 0: its arrival and its compact summary
    assert set(store.data) == {"here/start/1", "here/end/1", "summary/1"}
    assert json.loads(store.data["summary/1"])["rank"] == 1


def test_an_abort_from_rank_0_releases_a_rank_at_once(fake_job):
    store = FakeStore()
    store.data["go/start/1/0"] = b"abort: rank 0 stopped waiting after 5 s"
    store.data["go/end/1/0"] = b"abort: rank 0 raised (ValueError: x)"
    fake_job(1, 2, store)
    with loopscope.profile(gather_timeout_s=30) as prof:
        pass
    d = prof.summary()["distributed"]
    assert d["gather"] == "not taken by rank 0: abort: rank 0 raised (ValueError: x)"
    assert d["notes"] == ["start: abort: rank 0 stopped waiting after 5 s"]
    assert all(t < 5_000 for t in d["exchange_ms"].values())  # not the 60 s it could wait


def with_straggler(summary, **changes):
    """The summary with its straggler changed (and its own diagnosis given
    a second action, so where the straggler's action goes is seen)."""
    out = copy.deepcopy(summary)
    out["skew"]["straggler"].update(changes)
    out["diagnosis"] = dict(out["diagnosis"],
                            actions=out["diagnosis"]["actions"] + ["a second action"])
    return out


@pytest.mark.parametrize("cause, action", [
    ("sync", "remove the host-device syncs on rank 2: its GPU idles 1.250 ms per step more than "
             "the others' while its host waits (its report lists the sites)"),
    ("compute", "balance the work: rank 2 computes 1.250 ms per step more than the others "
                "(uneven batches or sequence lengths, or a slower GPU)"),
    (None, "rank 2 arrives late with no cause in its profiled steps: look at what it does "
           "outside them (data loading, checkpoints) or at its GPU and links"),
])
def test_the_straggler_action_follows_its_cause(rank0_summary, cause, action):
    """Rank 0 waits for rank 2: the action for the straggler's cause comes
    first, then rank 0's own actions; its own evidence is kept."""
    base, summary = rank0_summary
    own = with_straggler(dict(base, skew=summary["skew"]), cause=cause,
                         excess_ms={"host late": 0.0, "sync": 1.25, "compute": 1.25})
    d = diagnose_ranks(own)
    assert d["verdict"] == "COMMUNICATION_WAIT"
    assert d["actions"] == [action] + own["diagnosis"]["actions"]
    assert {k: d["evidence"][k] for k in base["diagnosis"]["evidence"]} == base["diagnosis"]["evidence"]


def test_rank_0_as_the_straggler_puts_its_action_first(rank0_summary):
    base, summary = rank0_summary
    own = with_straggler(dict(base, skew=summary["skew"]), rank=0, cause="compute",
                         excess_ms={"host late": 0.0, "sync": 0.0, "compute": 2.0})
    own["skew"]["per_rank"][0] = dict(own["skew"]["per_rank"][0], waits_for=None)
    d = diagnose_ranks(own)
    assert d["verdict"] == base["diagnosis"]["verdict"]
    assert d["actions"] == ["balance the work: rank 0 computes 2.000 ms per step more than the "
                            "others (uneven batches or sequence lengths, or a slower GPU)"
                            ] + own["diagnosis"]["actions"]


def test_no_straggler_leaves_rank_0s_own_diagnosis(rank0_summary):
    """Ranks gathered, none arriving last more than the noise: rank 0's own
    diagnosis, unchanged (and none at all without the ranks)."""
    base, summary = rank0_summary
    calm = copy.deepcopy(dict(base, skew=summary["skew"]))
    calm["skew"]["straggler"] = calm["skew"]["balance"] = None
    assert diagnose_ranks(calm) == base["diagnosis"]
    assert diagnose_ranks(dict(base, skew=None)) == base["diagnosis"]
    session = _distributed.Session(_distributed.check_options(True, 5.0))
    session.rank, session.world_size, session.backend, session.status = 0, 3, "nccl", "gathered"
    session.compacts = [compact(r, [2.0] * 6, gpu=[COMPUTE_MS + 2.0] * 6) for r in range(3)]
    session.exchanges = exchanges3()
    gathered = _distributed.attach(session, copy.deepcopy(base))
    assert gathered["skew"]["straggler"] is None
    balance = gathered["skew"]["balance"]
    assert (balance["rank"], balance["late_ms"], balance["share_of_step_pct"]) == (None, 0.0, 0.0)
    # balanced ranks: rank 0's own verdict, the balance said first
    assert gathered["diagnosis"] == dict(base["diagnosis"], reasons=[
        "the ranks are balanced: no rank stood out; the largest lateness in a step: 0.000 ms "
        "after the first rank, 0.0% of the other ranks' step time (no rank arrived last in "
        "half the steps compared)"] + base["diagnosis"]["reasons"])


# -- issue 26: a straggler only when there is one; lateness from the arrivals -------------
def two_ranks(late_ms: float, step_gpu_ms: float, steps: int = 4) -> list[dict]:
    """Rank 1 arrives late_ms after rank 0 in every step: rank 0's collective
    is late_ms longer (it waited); both ranks' GPU time per step is step_gpu_ms."""
    return [compact(0, [0.5 + late_ms] * steps, gpu=[step_gpu_ms] * steps, world_size=2),
            compact(1, [0.5] * steps, gpu=[step_gpu_ms] * steps, world_size=2)]


@pytest.mark.parametrize("late_ms, named", [(0.9, False), (1.0, False), (1.1, True)])
def test_straggler_only_beyond_the_no_straggler_spread(late_ms, named):
    """0.33-0.50 ms of arrival spread is what ranks show with no straggler
    (H100s): a rank later than that by too little is no straggler, even
    when its wait is a large share of a short step; 1 ms itself is within it."""
    skew = _ranks.merge(two_ranks(late_ms, 4.0), {1: exchange(0)}, {}, "nccl")
    assert [r["last_arrival_rank"] for r in skew["steps"]] == [1] * 4
    share = round(100 * late_ms / max(4.0, 9.0), 2)  # rank 0's step: 9 ms host, 4 ms GPU
    if named:
        s = skew["straggler"]
        assert (s["rank"], s["late_ms"], s["share_of_step_pct"]) == (1, pytest.approx(late_ms),
                                                                      pytest.approx(share))
        assert skew["balance"] is None
    else:
        assert skew["straggler"] is None
        b = skew["balance"]
        assert (b["rank"], b["late_ms"], b["share_of_step_pct"]) == (1, pytest.approx(late_ms),
                                                                      pytest.approx(share))
        assert _ranks.balance_text(b) == (
            f"the ranks are balanced: rank 1 arrived last most often, {late_ms:.3f} ms after the "
            f"first rank, {share:.1f}% of the other ranks' step time (its lateness is within the "
            "1 ms spread of arrival order seen with no straggler)")
        assert all(c["verdict"] == "GPU_BOUND" for c in skew["per_rank"])


@pytest.mark.parametrize("step_ms, named", [(16.0, False), (15.0, True), (14.0, True)])
def test_straggler_only_when_its_wait_is_a_tenth_of_the_step(step_ms, named):
    """1.5 ms late: 9.4% of a 16 ms step is not worth naming, exactly 10%
    of 15 ms and 10.7% of 14 ms are."""
    skew = _ranks.merge(two_ranks(1.5, step_ms), {1: exchange(0)}, {}, "nccl")
    share = 100 * 1.5 / step_ms
    assert (share >= 10) == named
    if named:
        assert skew["straggler"]["rank"] == 1 and skew["balance"] is None
    else:
        assert skew["straggler"] is None
        assert skew["balance"]["why"] == "the wait it causes is under 10% of the other ranks' step time"
        assert skew["balance"]["share_of_step_pct"] == pytest.approx(round(share, 2))


def test_lateness_is_the_arrival_at_the_collective():
    """Rank 1's collective starts 3.0 ms after rank 0's (on rank 0's clock),
    but rank 0's collective is 3.9 ms longer (it also did 0.9 ms more of the
    collective's own work): the lateness is the arrival, 3.0 ms."""
    ranks = two_ranks(3.9, 20.0)
    offset = 7_000_000  # rank 1's profile clock runs 7 ms ahead of rank 0's
    for k in range(4):
        ranks[0]["steps"][k].update(arrive_ns=k * STEP_NS + 1_000_000, call_ns=k * STEP_NS)
        ranks[1]["steps"][k].update(arrive_ns=k * STEP_NS + 4_000_000 + offset,
                                    call_ns=k * STEP_NS + 3_990_000 + offset,
                                    start_ns=k * STEP_NS + offset,
                                    end_ns=k * STEP_NS + 9_000_000 + offset)
    ranks[1]["clock"]["profile_ns"] = [p + offset for p in ranks[1]["clock"]["profile_ns"]]
    skew = _ranks.merge(ranks, {1: exchange(0)}, {}, "nccl")
    for k, row in enumerate(skew["steps"]):
        assert row["arrive_ns"] == [k * STEP_NS + 1_000_000, k * STEP_NS + 4_000_000]
        assert row["call_ns"] == [k * STEP_NS, k * STEP_NS + 3_990_000]
        assert (row["late_ms"], row["late_from"], row["max_wait_ms"]) == (
            pytest.approx(3.0), "arrival", pytest.approx(3.9))
    s = skew["straggler"]
    assert (s["rank"], s["late_ms"], s["comm_late_ms"], s["late_from"]) == (
        1, pytest.approx(3.0), pytest.approx(3.9), "arrival")
    # each rank's host called the collective (call_ns - start_ns, its own clock): rank 1
    # 3.99 ms into its steps, rank 0 at their start
    assert s["host_late_ms"] == pytest.approx(3.99)
    assert "(its host called the collective 3.990 ms later into the step than the others')" \
        in _ranks.straggler_text(s)
    # one rank without an arrival in a step: that step falls back on the comm times
    ranks[0]["steps"][2]["arrive_ns"] = None
    rows = _ranks.merge(ranks, {1: exchange(0)}, {}, "nccl")["steps"]
    assert [r["late_from"] for r in rows] == ["arrival", "arrival", "comm", "arrival"]
    assert rows[2]["late_ms"] == pytest.approx(3.9)


def test_collective_arrivals_read_from_the_model(test_clock):
    """Per step: the GPU start of its first collective kernel and the host
    time of that kernel's launch call (injected records, as dist_worker.py
    makes them)."""
    from loopscope import _core, _testhooks

    prof = loopscope.profile(trace=False, syncs=False, metrics=False, gather=False)
    device_ns, corr, expected = 5_000_000, 1, {}
    with prof:
        for k in range(3):
            with prof.step():
                for name, us in (("gemm", 40), ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 30),
                                 ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 20)):
                    now = _core.now_ns()
                    _testhooks._inject("api", [(now, now + 1, corr)])
                    _testhooks._inject("kernel", [(device_ns, device_ns + us * 1000, 0, 7, corr, name)])
                    if name != "gemm" and k not in expected:  # the first collective of the step
                        expected[k] = (device_ns, now)
                    device_ns += us * 1000 + 1_000
                    corr += 1
    assert _ranks.collective_arrivals(prof.model) == expected
    assert _ranks.collective_arrivals(None) == {}


@pytest.mark.parametrize("span_ns, slope_used", [(900_000, False), (1_100_000, True)])
def test_clock_pairs_too_close_give_no_slope(span_ns, slope_used):
    """Rank 1's pairs say its exchange clock ran 1.5x its profile clock, but
    over under 1 ms that is read jitter: slope 1 then."""
    r0 = compact(0, [None] * 2, world_size=2)
    r1 = compact(1, [None] * 2, world_size=2, starts=[5 * STEP_NS, 6 * STEP_NS])
    r1["clock"] = {"profile_ns": [0, span_ns], "exchange_ns": [1_000_000_000,
                                                              1_000_000_000 + span_ns * 3 // 2]}
    rows = _ranks.merge([r0, r1], {1: exchange(0)}, {}, "nccl")["steps"]
    slope = 1.5 if slope_used else 1.0
    # rank 0: profile = exchange - 1 s (slope 1): rank 1's start p lands at p * slope
    assert rows[0]["aligned_ns"][1][0] == round(5 * STEP_NS * slope)


@pytest.mark.parametrize("arrive_at, aligned", [(100 * STEP_NS, True), (100 * STEP_NS + 1, False)])
def test_an_arrival_outside_the_clock_pairs_is_not_aligned(arrive_at, aligned):
    """The pairs span [0, 100 steps]: an arrival after the last pair would be
    extrapolated, so the step falls back on the collectives' times."""
    ranks = two_ranks(3.0, 20.0, steps=1)
    ranks[0]["steps"][0]["arrive_ns"] = 0
    ranks[1]["steps"][0]["arrive_ns"] = arrive_at
    row = _ranks.merge(ranks, {1: exchange(0)}, {}, "nccl")["steps"][0]
    assert row["late_from"] == ("arrival" if aligned else "comm")
    assert row["arrive_ns"][1] == (arrive_at if aligned else None)


@pytest.mark.parametrize("rank1_last, named", [(2, False), (3, True)])
def test_no_straggler_when_two_ranks_are_last_as_often(rank1_last, named):
    """4 steps: rank 0 last in 2, rank 1 in the rest: a tie names nobody."""
    comm = {0: [], 1: []}
    for k in range(4):
        one_late = k < rank1_last
        comm[0].append(3.5 if one_late else 0.5)
        comm[1].append(0.5 if one_late else 3.5)
    ranks = [compact(r, comm[r], gpu=[8.0] * 4, world_size=2) for r in range(2)]
    skew = _ranks.merge(ranks, {1: exchange(0)}, {}, "nccl")
    if named:
        assert skew["straggler"]["rank"] == 1 and skew["straggler"]["last_in_steps"] == 3
    else:
        assert skew["straggler"] is None
        assert skew["balance"]["why"] == "no rank arrived last in more steps than every other rank"


@pytest.mark.parametrize("host_ms, named", [(16.0, False), (6.0, True)])
def test_the_step_is_the_longer_of_host_and_gpu_time(host_ms, named):
    """1.5 ms late, the others' GPU busy 8 ms a step: 18.8% of it; but when
    their host steps take 16 ms (the GPU idles for its host), the step is 16
    ms and 1.5 ms is 9.4% of it."""
    ranks = two_ranks(1.5, 8.0)
    for c in ranks:
        for s in c["steps"]:
            s["host_ms"] = host_ms
    skew = _ranks.merge(ranks, {1: exchange(0)}, {}, "nccl")
    assert (skew["straggler"] is not None) == named
    share = skew["straggler"]["share_of_step_pct"] if named else skew["balance"]["share_of_step_pct"]
    assert share == pytest.approx(round(100 * 1.5 / max(host_ms, 8.0), 2))


# -- issue 26: a host straggler's lateness, its host's extra time before the call ---------
PLANTED_HOST_MS = 1.5


def host_straggler_job(seed: int = 26, steps: int = 30, world: int = 4) -> tuple[list, list]:
    """The last rank's host spins PLANTED_HOST_MS (+ up to 5 us of overshoot) at the
    start of every step; then every rank launches the same work, 0.30 ms
    with jitter (a spread of 40 us and a tail of small delays), before it
    calls the collective.  Outliers as seen on H100s: rank 0's first step
    allocates (+0.8 ms), the next-to-last rank stalls 2 ms in step 5, and
    the last rank (the straggler) has a 9 ms garbage-collector pause in
    step 11.  Returns the compacts and each
    rank's call time into each step (ms), as written."""
    rnd = random.Random(seed)
    into = {r: [0.30 + rnd.gauss(0.0, 0.04) + rnd.expovariate(1 / 0.03) for _ in range(steps)]
            for r in range(world)}
    late = world - 1
    into[late] = [v + PLANTED_HOST_MS + rnd.uniform(0.0, 0.005) for v in into[late]]
    into[0][0] += 0.8
    into[world - 2][5] += 2.0
    into[late][11] += 9.0
    comm = {r: 0.5 + (0.0 if r == late else 2.0) for r in range(world)}  # the others wait 2 ms
    ranks = [compact(r, [comm[r]] * steps, gpu=[5.0 + comm[r]] * steps, world_size=world,
                     idle_host=[1.6 if r == late else 0.0] * steps) for r in range(world)]
    for r, c in enumerate(ranks):
        for k, s in enumerate(c["steps"]):
            arrive_ms = 1.0 + (2.0 if r == late else 0.0)  # its GPU reaches the collective later
            s["arrive_ns"] = s["start_ns"] + round(arrive_ms * 1e6)
            s["call_ns"] = s["start_ns"] + round(into[r][k] * 1e6)
    return ranks, [[into[r][k] for r in range(world)] for k in range(steps)]


def test_host_lateness_is_the_median_extra_host_time_before_the_call():
    """The straggler's extra host time before the collective, per step
    against the others' median, then the median over its steps: the planted
    delay within 10% despite jitter and outliers, where a mean over the
    steps is pulled 0.3 ms by one pause."""
    ranks, into = host_straggler_job()
    skew = _ranks.merge(ranks, {r: exchange(0) for r in range(1, 4)}, {}, "nccl")
    s = skew["straggler"]
    assert (s["rank"], s["last_in_steps"], s["cause"]) == (3, 30, "host late")
    # the same from the times written (rounded to whole ns as the compact holds them)
    per_step = [round(v[3] * 1e6) / 1e6 - statistics.median(round(x * 1e6) / 1e6 for x in v[:3])
                for v in into]
    expected = sorted(per_step)[14:16]
    assert s["host_late_ms"] == pytest.approx(sum(expected) / 2, abs=1e-6)
    assert abs(s["host_late_ms"] - PLANTED_HOST_MS) <= 0.1 * PLANTED_HOST_MS
    assert abs(sum(per_step) / len(per_step) - PLANTED_HOST_MS) > 0.1 * PLANTED_HOST_MS


@pytest.mark.parametrize("seed", range(5))
def test_host_lateness_reads_the_planted_delay_through_jitter(seed):
    ranks, into = host_straggler_job(seed=seed, world=2 + seed % 3)
    skew = _ranks.merge(ranks, {r: exchange(0) for r in range(1, len(ranks))}, {}, "nccl")
    assert abs(skew["straggler"]["host_late_ms"] - PLANTED_HOST_MS) <= 0.1 * PLANTED_HOST_MS


def test_host_lateness_needs_every_step_timed():
    ranks, _ = host_straggler_job()
    ranks[3]["steps"][4]["call_ns"] = None
    assert _ranks.merge(ranks, {r: exchange(0) for r in range(1, 4)}, {},
                        "nccl")["straggler"]["host_late_ms"] is None


@pytest.mark.parametrize("step_comm_ms, unplaced", [(0.0, True), (0.3, False)])
def test_collectives_outside_every_step_are_not_read_as_balanced(step_comm_ms, unplaced):
    """Both ranks ran 3 ms of collectives, but their steps hold none (zero
    comm time, no arrival): comparing those zeros would say "balanced"."""
    ranks = [compact(r, [0.0, 0.0, 0.0, step_comm_ms], gpu=[8.0] * 4, world_size=2)
             for r in range(2)]
    for c in ranks:
        c["comm_ms"] = 3.0
    skew = _ranks.merge(ranks, {1: exchange(0)}, {}, "nccl")
    note = ("ranks 0, 1: collective kernels ran, but none in a step (their launch calls are not "
            "in the trace -- a torch.profiler that records no driver-API launches, which NCCL "
            "uses -- or the collectives ran outside the steps): wait and straggler not measured")
    assert (note in skew["not_measured"]) == unplaced
    assert (skew["balance"] is None) == unplaced
    assert all((row["wait_ms"] is None) == unplaced for row in skew["steps"])


@pytest.mark.parametrize("rtt_ns, named", [(5_980_000, True), (6_020_000, False)])
def test_a_lateness_within_the_clocks_error_names_nobody(rtt_ns, named):
    """Rank 1 arrives 3.0 ms after rank 0 by their aligned clocks, but the
    only clock exchange took rtt_ns, so the clocks are known to +-rtt/2:
    2.99 ms names it, 3.01 ms cannot tell it from the clocks' error."""
    ranks = two_ranks(3.0, 20.0)
    for k in range(4):
        ranks[0]["steps"][k].update(arrive_ns=k * STEP_NS + 1_000_000, call_ns=k * STEP_NS)
        ranks[1]["steps"][k].update(arrive_ns=k * STEP_NS + 4_000_000, call_ns=k * STEP_NS)
    skew = _ranks.merge(ranks, {1: exchange(0, rtt_ns=rtt_ns)}, {}, "nccl")
    assert skew["clock"]["error_us"] == rtt_ns / 2 / 1e3
    assert [r["late_ms"] for r in skew["steps"]] == [pytest.approx(3.0)] * 4
    if named:
        assert skew["straggler"]["rank"] == 1 and skew["balance"] is None
    else:
        assert skew["straggler"] is None
        assert (skew["balance"]["rank"], skew["balance"]["late_ms"]) == (1, pytest.approx(3.0))
        assert skew["balance"]["why"] == ("its lateness is within the clocks' error "
                                          f"(+-{rtt_ns / 2 / 1e3:g} us): the ranks' arrival "
                                          "times cannot tell it")
    # the same lateness from the comm times alone needs no clock: named either way
    for c in ranks:
        for s in c["steps"]:
            s["arrive_ns"] = None
    again = _ranks.merge(ranks, {1: exchange(0, rtt_ns=rtt_ns)}, {}, "nccl")
    assert again["straggler"]["rank"] == 1


# -- the cut-offs of the merge, each on the cut-off and just beside it ---------------------
@pytest.mark.parametrize("late_ms, gpu_ms, last", [
    (0.1, 4.0, True), (0.099, 4.0, False),      # floor 100 us (2% of 4 ms is 80 us)
    (0.2, 10.0, True), (0.199, 10.0, False),    # floor 2% of the step's GPU time: 200 us
    (0.25, 10.0, True)])                        # 2.5%: over the floor
def test_a_step_names_its_last_rank_from_the_noise_floor_on(late_ms, gpu_ms, last):
    """A step's last rank is named when its lateness reaches the floor:
    100 us, or 2% of the median GPU time of the step when that is more
    (arrivals in whole ns: the lateness is exact)."""
    floor_ms = max(0.1, 0.02 * gpu_ms)
    assert (late_ms >= floor_ms) == last
    ranks = two_ranks(0.0, gpu_ms, steps=1)
    ranks[0]["steps"][0]["arrive_ns"] = 1_000_000
    ranks[1]["steps"][0]["arrive_ns"] = 1_000_000 + round(late_ms * 1e6)
    (row,) = _ranks.merge(ranks, {1: exchange(0)}, {}, "nccl")["steps"]
    assert (row["late_ms"], row["late_from"]) == (pytest.approx(late_ms, abs=1e-9), "arrival")
    assert row["last_arrival_rank"] == (1 if last else None)


@pytest.mark.parametrize("late_steps, named", [(2, True), (1, False)])
def test_a_rank_last_in_half_the_steps_is_named(late_steps, named):
    """4 steps compared, rank 1 arriving 3 ms late in some, the ranks even in
    the rest: last in half of them (2 of 4) is enough, 1 of 4 is not."""
    comm = {0: [3.5 if k < late_steps else 0.5 for k in range(4)], 1: [0.5] * 4}
    ranks = [compact(r, comm[r], gpu=[8.0] * 4, world_size=2) for r in range(2)]
    skew = _ranks.merge(ranks, {1: exchange(0)}, {}, "nccl")
    assert [r["last_arrival_rank"] for r in skew["steps"]] == (
        [1] * late_steps + [None] * (4 - late_steps))
    assert (late_steps >= 0.5 * 4) == named
    if named:
        s = skew["straggler"]
        assert (s["rank"], s["last_in_steps"], s["steps_compared"]) == (1, late_steps, 4)
        assert s["late_ms"] == pytest.approx(3.0)
    else:
        assert skew["straggler"] is None
        assert skew["balance"]["why"] == "no rank arrived last in half the steps compared"


@pytest.mark.parametrize("extra_ms, waiting", [(1.0, True), (0.99, False)])
def test_communication_wait_from_a_tenth_of_the_gpu_busy_time(extra_ms, waiting):
    """Rank 2 is the straggler (3 ms late in 10 ms steps); rank 0 waits
    extra_ms per step out of 10 ms of GPU time: 10% reads COMMUNICATION_WAIT,
    9.9% keeps its own verdict."""
    comm = {0: [0.5 + extra_ms] * 4, 1: [3.5] * 4, 2: [0.5] * 4}
    skew = _ranks.merge([compact(r, comm[r], gpu=[10.0] * 4) for r in range(3)],
                        exchanges3(), {}, "nccl")
    assert skew["straggler"]["rank"] == 2
    share = 100 * (4 * extra_ms) / (4 * 10.0)
    assert (round(share, 2) >= 10) == waiting
    me = skew["per_rank"][0]
    assert me["wait_pct_of_gpu_busy"] == pytest.approx(share)
    assert (me["verdict"], me["waits_for"]) == (
        ("COMMUNICATION_WAIT", 2) if waiting else ("GPU_BOUND", None))
    other = skew["per_rank"][1]  # 3 ms of 10: waits for the straggler either way
    assert (other["verdict"], other["waits_for"]) == ("COMMUNICATION_WAIT", 2)


@pytest.mark.parametrize("host_excess_ms, cause", [(0.5, "host late"), (0.49, None)])
def test_a_cause_explains_from_a_quarter_of_the_lateness(host_excess_ms, cause):
    """Rank 1 is 2 ms late each step; its GPU idles host_excess_ms more for
    its host than rank 0's, both compute 5 ms: a quarter of the lateness
    (0.5 ms) is a cause, less is none."""
    ranks = two_ranks(2.0, 10.0)
    for c in ranks:
        for s in c["steps"]:
            s["compute_ms"] = 5.0
            s["idle_host_ms"] = host_excess_ms if c["rank"] == 1 else 0.0
    s = _ranks.merge(ranks, {1: exchange(0)}, {}, "nccl")["straggler"]
    assert (s["rank"], s["late_ms"]) == (1, pytest.approx(2.0))
    assert s["excess_ms"] == {"host late": pytest.approx(host_excess_ms), "sync": 0.0,
                              "compute": 0.0}
    assert (host_excess_ms >= 0.25 * 2.0) == (cause is not None)
    assert s["cause"] == cause


@pytest.mark.parametrize("host_late_ms, said", [(0.5, True), (0.49, False)])
def test_the_host_lateness_is_said_from_a_quarter_of_the_lateness(host_late_ms, said):
    """The straggler's sentence names its host's lateness when it is at
    least a quarter of how late it arrived (0.5 of 2 ms), not below."""
    s = _ranks.merge(two_ranks(2.0, 10.0), {1: exchange(0)}, {}, "nccl")["straggler"]
    assert s["late_ms"] == pytest.approx(2.0)
    text = _ranks.straggler_text(dict(s, host_late_ms=host_late_ms))
    clause = (f" (its host called the collective {host_late_ms:.3f} ms later into the step "
              "than the others')")
    assert (host_late_ms >= 0.25 * 2.0) == said
    assert (clause in text) == said
    assert text.startswith("rank 1 is the straggler: it arrived last at the collectives in 4 of 4 "
                           "steps, 2.000 ms after the first rank on average")


@pytest.mark.parametrize("skew_us, resolved", [(20.0, False), (20.5, True)])
def test_a_skew_counts_only_above_the_clocks_error(rank0_summary, skew_us, resolved):
    """The clocks are aligned to +-20 us here (asserted below): a skew of
    exactly 20 us is within that error -- shown "~", 0 for the budget --
    and 20.5 us is not."""
    _, summary = rank0_summary
    skewed = copy.deepcopy(summary)
    assert skewed["skew"]["clock"]["error_us"] == 20.0
    for row in skewed["skew"]["steps"]:
        row["start_skew_us"] = row["end_skew_us"] = 0.0
    skewed["skew"]["steps"][0]["start_skew_us"] = skew_us
    out = evaluate(skewed, {"max_rank_skew_us": 10.0}).outcomes[0]
    assert (out.measured, out.ok) == ((skew_us, False) if resolved else (0.0, True))
    text = loopscope.views._report.format_report(skewed).splitlines()
    per_step = text.index("Per step (per rank: host ms, or host ms/wait ms with the collectives "
                          "timed):")
    assert text[per_step + 2].split()[2:4] == [f"{skew_us:.1f}" if resolved else "~", "~"]


# -- a host lateness a GPU queue hid (issue 26, 4 x H100 torch.profiler) -----------------
def backlog_job(late_ms: float = 2.5, lead_ms: tuple[float, float] = (900.0, 800.0),
                others_step_ms: float = 9.0, steps: int = 5) -> list[dict]:
    """Two ranks on one clock.  Rank 0's host calls the collective 0.3 ms into
    each step and its GPU starts it 10 us later.  Rank 1's host calls it
    late_ms later into its steps, but its GPU starts each collective
    lead_ms after the call (from the first value at the first step to the
    second at the last, linearly): its steps began that long before rank
    0's, so it reaches every collective 0.3 ms before rank 0 (rank 0 waits
    for nobody, rank 1 0.3 ms).  Rank 0's step is others_step_ms long."""
    base = 2_000_000_000  # both ranks' clocks run from 0: room before rank 0's steps
    r0_start = [base + k * STEP_NS for k in range(steps)]
    r0_call = [s + 300_000 for s in r0_start]
    r0_arrive = [c + 10_000 for c in r0_call]
    lead = [round((lead_ms[0] + (lead_ms[1] - lead_ms[0]) * k / (steps - 1)) * 1e6)
            for k in range(steps)]
    r1_arrive = [a - 300_000 for a in r0_arrive]
    r1_call = [a - lead[k] for k, a in enumerate(r1_arrive)]
    r1_start = [c - round((0.3 + late_ms) * 1e6) for c in r1_call]
    ranks = [compact(0, [0.01] * steps, gpu=[0.4] * steps, starts=r0_start, world_size=2),
             compact(1, [0.31] * steps, gpu=[0.7] * steps, starts=r1_start, world_size=2)]
    for c, calls, arrives in ((ranks[0], r0_call, r0_arrive), (ranks[1], r1_call, r1_arrive)):
        c["clock"] = {"profile_ns": [0, 4_000_000_000], "exchange_ns": [0, 4_000_000_000]}
        for k, s in enumerate(c["steps"]):
            s.update(call_ns=calls[k], arrive_ns=arrives[k])
    for s in ranks[0]["steps"]:
        s["host_ms"] = others_step_ms
    return ranks


def test_a_host_lateness_a_gpu_queue_hid_is_not_measured():
    """Rank 0 reaches every collective last (0.3 ms: the arrival order says
    balanced), but rank 1's host called it 2.5 ms later into its steps
    while its GPU ran 900 -> 800 ms behind: the straggler is not measured,
    and the backlog says why, with the host figure."""
    skew = _ranks.merge(backlog_job(), {1: exchange(0)}, {}, "nccl")
    assert [r["last_arrival_rank"] for r in skew["steps"]] == [0] * 5
    assert skew["straggler"] is None and skew["balance"] is None
    b = skew["backlog"]
    assert (b["rank"], b["host_late_ms"], b["steps_compared"]) == (1, 2.5, 5)
    assert b["gpu_behind_ms"] == [900.0, 800.0] and b["min_gpu_behind_ms"] == 800.0
    assert b["used_per_step_ms"] == (900.0 - 800.0) / 4
    assert (b["step_ms"], b["share_of_step_pct"]) == (9.0, round(100 * 2.5 / 9.0, 2))
    assert (b["arrival"]["rank"], b["arrival"]["late_ms"]) == (0, pytest.approx(0.3))
    assert skew["not_measured"] == [
        "straggler: rank 1's GPU ran 800.0 ms or more behind its host (work queued before the "
        "first step shown): the arrival order cannot show its host's 2.500 ms lateness"]
    assert _ranks.backlog_text(b) == (
        "straggler not measured: rank 1's host called the collective 2.500 ms later into its "
        "steps than the others' (median over 5 steps), but its GPU ran 900.0 ms behind its host "
        "at the first step's collective and 800.0 ms at the last (launch call -> kernel start): "
        "work queued before the first step shown, used up 25.000 ms a step.  So that lateness "
        "never reached the collectives here, and the order the ranks reached them (rank 0 last "
        "most often, 0.300 ms after the first) shows the queue, not the steps; once it is used "
        "up, rank 1 would arrive about 2.500 ms late.  Profile steps that every rank begins "
        "together (a device sync and a barrier before the first recorded step)")
    assert all(p["waits_for"] is None for p in skew["per_rank"])


@pytest.mark.parametrize("late_ms, hidden", [(1.0, False), (1.1, True)])
def test_a_hidden_host_lateness_only_beyond_the_no_straggler_spread(late_ms, hidden):
    skew = _ranks.merge(backlog_job(late_ms=late_ms), {1: exchange(0)}, {}, "nccl")
    assert (skew["backlog"] is not None) == hidden
    assert (skew["balance"] is None) == hidden
    if not hidden:
        assert skew["balance"]["rank"] == 0 and skew["not_measured"] == []


@pytest.mark.parametrize("others_step_ms, hidden", [(15.0, True), (16.0, False)])
def test_a_hidden_host_lateness_only_when_a_tenth_of_the_step(others_step_ms, hidden):
    """1.5 ms: 10% of a 15 ms step counts, 9.4% of 16 ms does not."""
    skew = _ranks.merge(backlog_job(late_ms=1.5, others_step_ms=others_step_ms),
                        {1: exchange(0)}, {}, "nccl")
    assert (1.5 / others_step_ms >= 0.10) == hidden
    assert (skew["backlog"] is not None) == hidden


@pytest.mark.parametrize("lead_ms, hidden", [
    ((10.0, 2.6), True),      # its GPU behind its host by more than 2.5 ms at every step
    ((10.0, 2.5), False),     # ... by 2.5 at the last: its host's lateness could reach it
    ((900.0, 897.4), True),   # the lead shrank by 2.6 ms, more than the 2.5 ms lateness
    ((900.0, 897.5), False),  # by 2.5: a host steadily ahead of a busy GPU, balanced
    ((900.0, 910.0), False),  # growing
])
def test_a_hidden_host_lateness_needs_a_shrinking_queue_longer_than_it(lead_ms, hidden):
    skew = _ranks.merge(backlog_job(late_ms=2.5, lead_ms=lead_ms), {1: exchange(0)}, {}, "nccl")
    assert (skew["backlog"] is not None) == hidden
    assert (skew["balance"] is None) == hidden


def test_a_named_straggler_leaves_no_backlog():
    """The arrival order names the host straggler: nothing hidden to say."""
    ranks, _ = host_straggler_job()
    skew = _ranks.merge(ranks, {r: exchange(0) for r in range(1, 4)}, {}, "nccl")
    assert skew["straggler"]["rank"] == 3 and skew["backlog"] is None


@pytest.mark.parametrize("seed", range(3))
def test_the_latest_host_is_the_largest_median_excess_over_the_others(seed):
    """The backlog's candidate: per step, a rank's call into the step minus
    the median of the other ranks' (worked out here with the others listed),
    then the median over the steps; the largest of those (ties: values drawn
    from few numbers)."""
    rnd = random.Random(seed)
    world, steps = 6 + seed, [0, 1, 2, 3]
    ranks = [{"rank": r, "steps": [{"index": k, "start_ns": 1000 * k,
                                    "call_ns": 1000 * k + rnd.choice([100, 250, 400, 900])}
                                   for k in steps]} for r in range(world)]
    into = [[s["call_ns"] - s["start_ns"] for s in c["steps"]] for c in ranks]
    excess = [statistics.median(into[r][k] - statistics.median(
        into[o][k] for o in range(world) if o != r) for k in steps) for r in range(world)]
    assert excess[_ranks._latest_host(ranks, steps)] == max(excess)
    assert _ranks._latest_host(ranks[:1], steps) is None


def test_step_names_in_the_rank_table_are_never_cut_silently(rank0_summary):
    """Issue 39: the per-step table cut names to 14 characters, so
    "ProfilerStep#10" printed as "ProfilerStep#1" (another step's name).
    The column now widens to the longest name; a name past 40 characters
    is clipped with "..."."""
    _, summary = rank0_summary
    summary = copy.deepcopy(summary)
    rows = summary["skew"]["steps"]
    long_name = "Denoise_Step_" + "x" * 60
    rows[0]["name"], rows[1]["name"] = "ProfilerStep#10", long_name
    text = loopscope.distributed._ranks_view.table_lines(summary)
    head = next(i for i, line in enumerate(text) if "start skew us" in line)
    assert text[head + 1].split()[:2] == [str(rows[0]["index"]), "ProfilerStep#10"]
    assert text[head + 2].split()[1] == long_name[:37] + "..."
