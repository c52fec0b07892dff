"""loopscope.watch()'s breach rules, each on both sides of its threshold:
step_budget_ms, the plugin budgets a light profile measures per step
(max_syncs, max_sync_blocked_ms, min_sm_active_pct, min_busy_pct), the p99
rule (its factor, its 1 ms floor, the 100 steps it waits for) and the
warm-up.  Host times come from a scripted clock and syncs and samples from
the test hooks (watch_loop), so every expected figure is computed here."""
from __future__ import annotations

import json
import os

import pytest

import loopscope
import watch_loop


def breached(w) -> list[int]:
    return [r["step"] for r in w.steps() if r["breach"]]


def watched(tmp_path, **options):
    options = {"dump_dir": tmp_path / "dumps", "warmup_steps": 0, "block_steps": 3,
               "min_dump_interval_s": 0.0, "p99_factor": None, **options}
    return loopscope.watch(**options)


def test_step_budget_both_sides(tmp_path, monkeypatch):
    clock = watch_loop.install(monkeypatch)
    host = [9.999, 10.0, 10.001, 5.0]
    with watched(tmp_path, step_budget_ms=10, profile_steps=1) as w:
        watch_loop.run(w, clock, host)
    assert [r["host_ms"] for r in w.steps()] == host
    assert breached(w) == [i for i, ms in enumerate(host) if ms > 10]
    assert w.breach_count == 1 and len(w.dumps) == 1


def test_warmup_steps_breach_nothing(tmp_path, monkeypatch):
    clock = watch_loop.install(monkeypatch)
    with watched(tmp_path, step_budget_ms=10, warmup_steps=2) as w:
        watch_loop.run(w, clock, [50.0, 50.0, 50.0, 50.0])
    assert breached(w)[:1] == [2]


def test_max_syncs_both_sides(tmp_path, monkeypatch):
    clock = watch_loop.install(monkeypatch)
    syncs = [1, 2, 1, 0, 2, 1]
    with watched(tmp_path, max_syncs=1, profile_steps=1, max_dumps=0) as w:
        watch_loop.run(w, clock, [1.0] * len(syncs), syncs=syncs)
    assert [r["syncs"] for r in w.steps()] == syncs
    assert breached(w) == [i for i, n in enumerate(syncs) if n > 1]


def test_max_sync_blocked_ms_both_sides(tmp_path, monkeypatch):
    """Each step's own blocked time (the summary's per-step figure), not its
    syncs x the block's mean a sync: in the first block of 3 steps that
    mean (2.17 us) would breach step 0 (4.33 us) and pass step 2 (2.17 us)."""
    clock = watch_loop.install(monkeypatch)
    syncs = [2, 3, 1, 2, 1, 0]
    sync_ns = [1_000, 2_000, 5_000, 2_000, 3_999, 0]
    limit = 0.004
    with watched(tmp_path, max_sync_blocked_ms=limit, max_dumps=0) as w:
        watch_loop.run(w, clock, [1.0] * len(syncs), syncs=syncs, sync_ns=sync_ns)
    expected = [n * ns / 1e6 for n, ns in zip(syncs, sync_ns)]  # 2, 6, 5, 4, 3.999, 0 us
    assert [r["syncs"] for r in w.steps()] == syncs
    assert [r["sync_blocked_ms"] for r in w.steps()] == expected
    assert breached(w) == [1, 2]  # 4 us (step 3) is at the limit: no breach


@pytest.mark.parametrize("sm, breaches", [(39.99, True), (40.0, False), (40.01, False)])
def test_min_sm_active_pct_both_sides(tmp_path, monkeypatch, sm, breaches):
    clock = watch_loop.install(monkeypatch)
    with watched(tmp_path, min_sm_active_pct=40, max_dumps=0) as w:
        watch_loop.run(w, clock, [1.0] * 4, sm=sm, gr=80.0)
    assert [r["sm_active_pct"] for r in w.steps()] == [sm] * 4
    assert breached(w) == ([0, 1, 2, 3] if breaches else [])


@pytest.mark.parametrize("gr, breaches", [(49.0, True), (51.0, False)])
def test_min_busy_pct_from_gr_active_both_sides(tmp_path, monkeypatch, gr, breaches):
    clock = watch_loop.install(monkeypatch)
    host = [2.0, 4.0, 8.0]
    with watched(tmp_path, min_busy_pct=50, max_dumps=0) as w:
        watch_loop.run(w, clock, host, sm=30.0, gr=gr)
    rows = w.steps()
    assert [r["gpu_busy_ms"] for r in rows] == pytest.approx([gr / 100 * ms for ms in host])
    assert {r["gpu_busy_from"] for r in rows} == {"gr_active"}
    assert breached(w) == ([0, 1, 2] if breaches else [])


def test_figures_a_self_check_refuses_breach_nothing(tmp_path, monkeypatch):
    """Samples over part of the loop only: the coverage check fails, so SM
    below the budget is not a breach (a figure not vouched for)."""
    from loopscope import _core, _testhooks

    clock = watch_loop.install(monkeypatch)
    with watched(tmp_path, min_sm_active_pct=40, max_dumps=0) as w:
        for i in range(3):
            clock.durations.append(1.0)
            with w.step():
                if i == 1:
                    t = _core.now_ns()
                    _testhooks._inject("sample", [(t, t + 1, {"sm_active_pct": 5.0}, 0)])
    assert breached(w) == []


def run_p99(tmp_path, monkeypatch, base: list[float], probe: list[float], **options):
    clock = watch_loop.install(monkeypatch)
    with watched(tmp_path, p99_factor=2.0, block_steps=10, max_dumps=0, **options) as w:
        watch_loop.run(w, clock, base + probe)
    return [s - len(base) for s in breached(w)]


def p99(values: list[float]) -> float:
    """numpy's default percentile, written out: linear between closest ranks."""
    s = sorted(values)
    rank = (len(s) - 1) * 0.99
    low = int(rank)
    return s[low] + (s[min(low + 1, len(s) - 1)] - s[low]) * (rank - low)


def test_p99_factor_both_sides(tmp_path, monkeypatch):
    # 110 steps: the rows of the first 100 are read by step 110 (a block is read
    # one block later), so the rule holds from then on
    base = [10.0 + (i % 7) * 0.1 for i in range(110)]
    limit = 2.0 * p99(base[:100])
    probe = [limit - 0.01, limit + 0.01, 10.0]
    assert run_p99(tmp_path, monkeypatch, base, probe) == [1]


def test_p99_rule_needs_1ms_over_p99(tmp_path, monkeypatch):
    base = [0.1] * 110                     # p99 0.1 ms: 2x is 0.2 ms, 1 ms over is 1.1 ms
    assert run_p99(tmp_path, monkeypatch, base, [1.05, 1.15]) == [1]


def test_p99_rule_waits_for_100_steps(tmp_path, monkeypatch):
    base = [10.0] * 100                    # only 90 rows read by step 100
    assert run_p99(tmp_path, monkeypatch, base, [100.0]) == []


# -- options: a clear error at watch() time ---------------------------------------------
@pytest.mark.parametrize("options, error, text", [
    ({"step_budget_ms": -1}, ValueError, "step_budget_ms must be above 0"),
    ({"step_budget_ms": 0}, ValueError, "step_budget_ms must be above 0"),
    ({"step_budget_ms": "10"}, TypeError, "step_budget_ms must be a number"),
    ({"p99_factor": 1.0}, ValueError, "p99_factor must be above 1"),
    ({"max_syncs": -1}, ValueError, "max_syncs must be a finite number >= 0"),
    ({"max_severe_gaps": 0}, TypeError, "unknown option 'max_severe_gaps'"),
    ({"keep_steps": 0}, ValueError, "keep_steps must be between 1"),
    ({"keep_steps": 1.5}, TypeError, "keep_steps must be a whole number"),
    ({"profile_steps": 0}, ValueError, "profile_steps must be between 1"),
    ({"max_dump_mb": 0}, ValueError, "max_dump_mb must be above 0"),
    ({"signal": 1}, TypeError, "signal must be True or False"),
    ({"steps": 3}, TypeError, "steps must be a torch.nn.Module"),
    ({"all_ranks": 1}, TypeError, "all_ranks must be True or False"),
    ({"rank_check_steps": 0}, ValueError, "rank_check_steps must be between 1"),
    ({"rank_check_steps": 2.0}, TypeError, "rank_check_steps must be a whole number"),
    ({"rank_timeout_s": 0}, ValueError, "rank_timeout_s must be above 0"),
    ({"rank_timeout_s": 3601}, ValueError, "rank_timeout_s must be above 0 and at most 3600 s"),
    ({"step_budget": 10}, TypeError, "did you mean 'step_budget_ms'"),
    ({"metrics_interval_us": 0.999}, ValueError, "metrics_interval_us must be at least 1 and at "
                                                 "most 1e.06 us"),
    ({"metrics_interval_us": 1e6 + 1}, ValueError, "metrics_interval_us must be at least 1"),
    ({"metrics_interval_us": True}, TypeError, "metrics_interval_us must be a number"),
    ({"metrics_interval": 500}, TypeError, "did you mean 'metrics_interval_us'"),
])
def test_bad_options_are_refused_naming_the_option(tmp_path, options, error, text):
    with pytest.raises(error, match=text):
        loopscope.watch(dump_dir=tmp_path, **options)


def test_a_dump_dir_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="dump_dir .* exists and is not a folder"):
        loopscope.watch(dump_dir=tmp_path / "f")
    with pytest.raises(ValueError, match="is not a folder"):
        loopscope.watch(dump_dir=tmp_path / "f" / "below")


@pytest.mark.parametrize("interval", [None, 1, 2000, 1e6])
def test_the_metrics_interval_reaches_every_block(tmp_path, monkeypatch, interval):
    """Each light block's profile samples at the watch's interval (its
    edges, 1 and 1e6 us, are taken), or at the profile's default."""
    from loopscope.watching import _watch

    seen = []

    class Recording(_watch.Profile):
        def __init__(self, *args, **kwargs):
            seen.append(kwargs.get("metrics_interval_us", "not passed"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(_watch, "Profile", Recording)
    with loopscope.watch(dump_dir=tmp_path, metrics_interval_us=interval, block_steps=2) as w:
        for _ in range(5):
            with w.step():
                pass
    assert len(seen) >= 3
    assert set(seen) == {None if interval is None else float(interval)}


def test_light_blocks_read_their_steps_without_naming_sync_sites(tmp_path, monkeypatch):
    """A light block's rows come from its steps alone: naming each sync's
    site (its stack) was most of a block's cost, and only a dump shows
    sites.  The rows still carry each step's own syncs and blocked time;
    the breach's dump names the site from the block's full summary."""
    from loopscope import _summary
    named = []
    real = _summary.build_syncs

    def counting(calls, *args, **kwargs):
        named.append(len(calls))
        return real(calls, *args, **kwargs)

    monkeypatch.setattr(_summary, "build_syncs", counting)
    clock = watch_loop.install(monkeypatch)
    syncs = [1, 0, 2, 1, 3, 0, 1, 2, 0]
    sync_ns = [3_000, 0, 1_500, 7_000, 2_000, 0, 4_000, 1_000, 0]
    with watched(tmp_path, max_dumps=0) as w:
        watch_loop.run(w, clock, [1.0] * len(syncs), syncs=syncs, sync_ns=sync_ns)
    rows = w.steps()
    assert [r["syncs"] for r in rows] == syncs
    assert [r["sync_blocked_ms"] for r in rows] == [n * ns / 1e6 for n, ns in zip(syncs, sync_ns)]
    assert w.summary()["blocks"]["rotations"] == len(syncs) // 3 and named == []
    more = syncs + [0] * 6  # the breach of step 4 is read two blocks later (docs/watch.md)
    with watched(tmp_path, max_syncs=2, profile_steps=1) as w:
        watch_loop.run(w, clock, [1.0] * len(more), syncs=more, sync_ns=sync_ns + [0] * 6)
    assert breached(w) == [4] and len(w.dumps) == 1 and named  # the dump's block summary
    assert json.loads(open(os.path.join(w.dumps[0], "breach.json")).read())["sync_sites"]


def test_step_figures_are_the_summarys_own_for_a_light_block(monkeypatch):
    """FinishedProfile.step_figures (what a light block's rows read) holds
    the summary's steps, errors and checks, as the summary builds them; a
    capture with GPU records gets the summary itself."""
    from loopscope import _core, _testhooks
    with loopscope.profile(trace=False, metrics=False) as prof:
        for n in (2, 0, 1):
            with loopscope.step():
                for _ in range(n):
                    watch_loop.one_sync(5_000)
                t = _core.now_ns()
                _testhooks._inject("sample", [(t - 10**6, t + 10**6, {"sm_active_pct": 40.0}, 0)])
    figures = prof.finished.step_figures()
    assert "syncs" not in figures and "diagnosis" not in figures
    summary = prof.summary()
    assert [s["syncs"] for s in figures["steps"]] == [2, 0, 1]
    assert [s["sync_blocked_ms"] for s in figures["steps"]] == [0.01, 0.0, 0.005]
    assert [s["sm_active_pct"] for s in figures["steps"]] == [40.0] * 3
    for key in ("steps", "gpu_error", "syncs_error", "metrics_error", "sm", "checks"):
        assert figures[key] == summary[key], key
    assert prof.finished.step_figures() is summary  # made already: the summary itself
    with loopscope.profile(trace=False, metrics=False) as traced:
        with loopscope.step():
            t = _core.now_ns()
            _testhooks._inject("kernel", [(t, t + 1_000, 0, 7, 1, "k")])
    assert "syncs" in traced.finished.step_figures()  # GPU records: the whole summary


@pytest.mark.parametrize("spent_ns, mean_ns, steps", [
    # steps = ceil(spent / (0.2% x the mean step)), within [16, 4096]
    (400_000, 1_000_000, 200),      # 0.4 ms over 1 ms steps: 0.4 / 0.002
    (400_001, 1_000_000, 201),      # a hair over: the next whole step
    (31_999, 1_000_000, 16),        # 15.9995 -> 16, the least
    (30_000, 1_000_000, 16),        # 15 -> held at 16
    (34_000, 1_000_000, 17),        # 17 -> 17
    (8_192_000, 1_000_000, 4096),   # 4096, the most
    (8_194_000, 1_000_000, 4096),   # 4097 -> held at 4096
    (8_190_000, 1_000_000, 4095),   # 4095
    (1_000, 0.0, 4096),             # a mean of 0 ns (no step timed): the most
    (4, 0.5, 2000),                 # a mean under 1 ns counts as 1 ns: 4 / 0.002, not 4,000
])
def test_a_blocks_steps_follow_its_rotation_cost(spent_ns, mean_ns, steps):
    from loopscope.watching._watch import block_steps_for
    assert block_steps_for(spent_ns, mean_ns) == steps


def test_the_watch_sizes_its_next_block_from_the_rotation_it_just_paid(tmp_path, monkeypatch):
    """A rotation that cost 1 ms over steps of 2 ms (the scripted clocks):
    the next blocks hold 1 / (0.002 x 2) = 250 steps."""
    from loopscope.watching import _watch
    ticks = iter(range(0, 10**12, 1_000_000))  # each rotation read: begin, end 1 ms later
    monkeypatch.setattr(_watch, "_rotation_clock", lambda: next(ticks))
    clock = watch_loop.install(monkeypatch)
    with loopscope.watch(dump_dir=tmp_path / "d", p99_factor=None, warmup_steps=0) as w:
        watch_loop.run(w, clock, [2.0] * 600)
        first = w.summary()["blocks"]
    assert first["steps"] == 250 and first["fixed"] is False
    # 64 first steps, then blocks of 250: rotations after steps 63 and 313, and 563
    assert first["rotations"] == 3 and first["mean_cost_ms"] == 1.0
