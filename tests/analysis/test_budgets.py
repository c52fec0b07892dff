"""Budget checks as pure functions over summary dicts: the measured values,
step selection, unavailable metrics, the failure text, and the sync-site
format.  Summaries come from the synthetic loop (exact gap figures); the
sync section, which the sync detector will fill, is written by hand in its
schema."""
from __future__ import annotations

import copy

import pytest

import loopscope
from loopscope.figures._budgets import (BUDGETS, BudgetError, check_budgets, evaluate, format_site,
                                step_list)

from synthetic_loop import run_loop


@pytest.fixture
def loop_summary(test_clock):
    """3 steps: gaps 5 | 80, 5 | 80, 5 us; 2 severe; busy 60 of 235 us."""
    with loopscope.profile() as prof:
        run_loop(prof)
    return prof.summary()


SITES = [
    {"file": "/abs/elsewhere/denoise.py", "line": 42, "function": "step", "code": "x.item()",
     "call": "x.item()", "kind": "item", "count": 10, "blocked_ms": 1.3,
     "steps": list(range(10)), "thread_id": 1, "apis": {"cudaStreamSynchronize": 10}},
    {"file": "/abs/elsewhere/denoise.py", "line": 57, "function": "log", "code": "print(loss)",
     "call": "print(loss)", "kind": "print", "count": 14, "blocked_ms": 0.4, "steps": [2],
     "thread_id": 1, "apis": {"cudaStreamSynchronize": 14}},
    {"file": None, "line": None, "function": None, "code": None, "call": None,
     "kind": "synchronize", "count": 1, "blocked_ms": 0.1, "steps": [], "thread_id": 1,
     "apis": {"cudaDeviceSynchronize": 1}},
]


def with_syncs(summary, sites=SITES, per_step=(3, 0, 2)):
    """The summary with a hand-made sync section in the issue-3 schema."""
    s = copy.deepcopy(summary)
    s["syncs"] = {
        "count": sum(site["count"] for site in sites),
        "blocked_ms": round(sum(site["blocked_ms"] for site in sites), 6),
        "by_kind": {site["kind"]: site["count"] for site in sites},
        "sites": sites, "in_steps": 24, "outside_steps": 1,
    }
    for step, n in zip(s["steps"], per_step):
        step["syncs"] = n
    return s


def test_check_budgets_names_the_valid_ones():
    assert check_budgets({"max_syncs": 0, "max_gap_us": 50.5}) == {"max_syncs": 0.0, "max_gap_us": 50.5}
    with pytest.raises(BudgetError) as e:
        check_budgets({"max_sinks": 0, "max_syncs": 1})
    assert str(e.value) == ("unknown loopscope budget 'max_sinks'; valid budgets: "
                            + ", ".join(BUDGETS))
    with pytest.raises(BudgetError, match="max_syncs must be a number, got '0'"):
        check_budgets({"max_syncs": "0"})
    with pytest.raises(BudgetError, match="max_syncs must be a number, got True"):
        check_budgets({"max_syncs": True})
    with pytest.raises(BudgetError, match="max_gap_us must be a finite number >= 0, got -1"):
        check_budgets({"max_gap_us": -1})


def test_gap_budgets_on_the_whole_profile(loop_summary):
    v = evaluate(loop_summary, check_budgets(
        {"max_severe_gaps": 2, "max_gap_us": 79.9, "max_idle_pct": 70, "min_busy_pct": 25}))
    measured = {o.name: (o.measured, o.ok) for o in v.outcomes}
    assert measured == {
        "max_severe_gaps": (2.0, True),
        "max_gap_us": (80.0, False),
        "max_idle_pct": (74.47, False),   # 175 us idle of 235 us
        "min_busy_pct": (25.53, True),
    }
    assert v.selection == "whole profile"
    assert [o.name for o in v.failed] == ["max_gap_us", "max_idle_pct"]
    assert v.unavailable == []


def test_step_selection_sums_the_selected_steps(loop_summary):
    """steps='Step_[12]': steps 1 and 2 hold both severe gaps, 170 us idle,
    40 us busy; Step_0 alone has none."""
    v = evaluate(loop_summary, {"max_severe_gaps": 0.0, "max_idle_pct": 100.0}, steps="Step_[12]")
    assert v.selection == "steps matching 'Step_[12]' (2 of 3 steps)"
    assert [(o.name, o.measured) for o in v.outcomes] == [
        ("max_severe_gaps", 2.0), ("max_idle_pct", 80.95)]  # 170 / 210
    v0 = evaluate(loop_summary, {"max_severe_gaps": 0.0, "max_gap_us": 5.0}, steps="Step_0")
    assert [(o.measured, o.ok) for o in v0.outcomes] == [(0.0, True), (5.0, True)]


def test_a_step_glob_matching_nothing_fails(loop_summary):
    v = evaluate(loop_summary, {"max_severe_gaps": 0.0}, steps="Denoise_*")
    assert [o.name for o in v.failed] == ["max_severe_gaps"]
    assert v.failed[0].line() == ("max_severe_gaps: steps='Denoise_*' matched no step "
                                  "(step names: Step_0, Step_1, Step_2)")


def test_failure_message_reads_like_an_assertion_diff(loop_summary):
    v = evaluate(loop_summary, {"max_severe_gaps": 0.0, "min_busy_pct": 20.0, "max_syncs": 0.0})
    assert v.message() == "\n".join([
        "loopscope: 1 of 3 budgets failed, whole profile",
        "  FAILED max_severe_gaps: severe gaps 2 (> 50 us), budget <= 0",
        "  met    min_busy_pct: GPU busy time 25.53% (0.175 ms idle, 0.060 ms busy), budget >= 20%",
        "  not checked: max_syncs: not measured (sync detection unavailable: sync detection "
        "was turned off (syncs=False))",
        "Worst gaps:",
        "        80.0 us  [host] step Step_1, stream 7, before gemm_0",
        "        80.0 us  [host] step Step_2, stream 7, before gemm_0",
        "         5.0 us  [host] step Step_0, stream 7, before gemm_1",
        "         5.0 us  [host] step Step_1, stream 7, before gemm_1",
        "         5.0 us  [host] step Step_2, stream 7, before gemm_1",
        "Severe gaps per step: Step_1 1, Step_2 1",
        "Verdict: CPU_LAUNCH_BOUND: capture the step in a CUDA graph (torch.cuda.CUDAGraph, or "
        "torch.compile(mode='reduce-overhead')) or fuse small kernels, so the GPU stops waiting "
        "for Python",
    ])


def test_unavailable_metrics_are_not_met(loop_summary):
    """syncs None (no detector) and sm None (no counters): the budgets are
    'not measured' with the summary's own reasons."""
    s = dict(loop_summary, syncs_error="CUPTI callbacks are taken by another tool")
    v = evaluate(s, {"max_syncs": 0.0, "max_sync_blocked_ms": 1.0, "min_sm_active_pct": 50.0})
    assert v.failed == [] and v.met == []
    assert v.skip_reason() == (
        "max_syncs: not measured (sync detection unavailable: CUPTI callbacks are taken by "
        "another tool); max_sync_blocked_ms: not measured (sync detection unavailable: CUPTI "
        "callbacks are taken by another tool); min_sm_active_pct: not measured ("
        + loop_summary["metrics_error"] + ")")


def test_no_gpu_makes_gap_budgets_unavailable():
    with loopscope.profile() as prof:
        with prof.step():
            pass
    s = prof.summary()
    v = evaluate(s, {"max_severe_gaps": 0.0, "min_busy_pct": 50.0})
    assert [o.reason for o in v.unavailable] == [f"no GPU timeline: {s['gpu_error']}"] * 2


def test_sync_budgets_and_sites(loop_summary):
    s = with_syncs(loop_summary)
    v = evaluate(s, {"max_syncs": 0.0, "max_sync_blocked_ms": 2.0})
    assert [(o.name, o.measured, o.ok) for o in v.outcomes] == [
        ("max_syncs", 25.0, False), ("max_sync_blocked_ms", 1.8, True)]
    text = v.message()
    assert "  FAILED max_syncs: host-device syncs 25 (host blocked 1.800 ms), budget <= 0" in text
    sites = text[text.index("Top sync sites:"):].splitlines()[1:4]
    assert sites == [
        "  /abs/elsewhere/denoise.py:42 in step(): x.item()  [item] x10, blocked 1.300 ms, steps 0-9",
        "  /abs/elsewhere/denoise.py:57 in log(): print(loss)  [print] x14, blocked 0.400 ms, steps 2",
        "  thread 1 (no Python frame)  [synchronize] x1, blocked 0.100 ms",
    ]


def test_sync_budgets_per_selected_step(loop_summary):
    """Per-step counts are summed; the evidence keeps only sites in those steps."""
    s = with_syncs(loop_summary)
    v = evaluate(s, {"max_syncs": 2.0}, steps="Step_[02]")
    assert (v.outcomes[0].measured, v.outcomes[0].ok) == (5.0, False)
    text = v.message()
    assert "x.item()" in text and "print(loss)" in text and "[synchronize]" not in text
    v1 = evaluate(s, {"max_syncs": 0.0}, steps="Step_1")
    assert (v1.outcomes[0].measured, v1.outcomes[0].ok) == (0.0, True)


def test_sm_budget_reads_the_sampled_values(loop_summary):
    s = copy.deepcopy(loop_summary)
    s["sm"] = {"active_pct": 41.5, "samples": 100}
    for step, pct in zip(s["steps"], (10.0, 60.0, 80.0)):
        step["sm_active_pct"] = pct
    assert evaluate(s, {"min_sm_active_pct": 50.0}).outcomes[0].measured == 41.5
    per_step = evaluate(s, {"min_sm_active_pct": 50.0}, steps="Step_[12]").outcomes[0]
    assert (per_step.measured, per_step.ok) == (70.0, True)


def test_site_format_is_relative_inside_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    site = dict(SITES[0], file=str(tmp_path / "pkg" / "denoise.py"), code=None, steps=[0, 1, 2, 5, 7, 8])
    assert format_site(site) == ("pkg/denoise.py:42 in step(): x.item()  [item] x10, "
                                 "blocked 1.300 ms, steps 0-2, 5, 7-8")


def test_step_list():
    assert step_list([]) == ""
    assert step_list([3]) == "3"
    assert step_list([4, 0, 1, 2, 2, 9]) == "0-2, 4, 9"
