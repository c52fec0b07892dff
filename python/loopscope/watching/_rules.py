"""The rules of `loopscope.watch()`: what a watched step's row holds, and
when a step breaches.

A row is one step's figures, from the light profile (trace=False) that
covered it, or from the full profile of a dump:

    step            the step's index since the watch began
    host_ms         the host's time in the step (the watch's own clock)
    gpu_busy_ms     light profile: GR active % of the step's samples x host_ms
                    (an estimate: the graphics engine was busy that share of the
                    step's window); full profile: the traced GPU busy time
    gpu_busy_from   "gr_active" or "trace", or None (not measured)
    syncs           host-device syncs in the step
    sync_blocked_ms host time blocked in them (the summary's per-step figure)
    sm_active_pct, dram_pct, gr_active_pct   the counters over the step
    profile         "light" or "full"
    breach          None, or the rules the step broke, as one text

The budgets are the pytest plugin's (figures/_budgets.py: the names, the
checks of their limits, the comparison and the line that says a failure);
watch() takes those a light profile measures per step.  The others read
the kernel time line, which light profiles do not trace.  A figure the
summary cannot vouch for (a failed self-check, _checks.refusal) breaches
nothing."""
from __future__ import annotations

import math
from typing import Any, Sequence

from ..figures._budgets import BUDGETS, BudgetError, Outcome, check_budgets
from ..figures._checks import refusal

ROW_FIELDS = ("step", "host_ms", "gpu_busy_ms", "gpu_busy_from", "syncs", "sync_blocked_ms",
              "sm_active_pct", "dram_pct", "gr_active_pct", "profile", "breach")
# the figures w.summary() gives percentiles of
FIGURES = ("host_ms", "gpu_busy_ms", "syncs", "sync_blocked_ms", "sm_active_pct", "dram_pct",
           "gr_active_pct")
PERCENTILES = (50, 90, 99)

# the plugin's budgets a light profile measures per step -> the row's figure
WATCHED_BUDGETS = {"max_syncs": "syncs", "max_sync_blocked_ms": "sync_blocked_ms",
                   "min_sm_active_pct": "sm_active_pct", "min_busy_pct": "busy_pct"}
# p99 rule: the window must hold this many steps before its p99 means anything
P99_MIN_STEPS = 100
# ... and a step must pass its p99 by this much too: a 2x blip of a 5 us step is noise
P99_MIN_EXCESS_MS = 1.0


def check_watch_budgets(budgets: dict[str, Any]) -> dict[str, float]:
    """The budgets given to watch() (None values left out), checked by the
    plugin's own check_budgets; a budget that needs the kernel time line is a
    ValueError saying so."""
    given = {k: v for k, v in budgets.items() if v is not None}
    traced = sorted(set(given) & (set(BUDGETS) - set(WATCHED_BUDGETS)))
    if traced:
        raise ValueError(f"loopscope.watch(): {', '.join(traced)} read{'s' if len(traced) == 1 else ''}"
                         " the kernel time line, which watch()'s light profiles do not trace; "
                         f"watch() takes {', '.join(WATCHED_BUDGETS)} and step_budget_ms "
                         "(gap budgets belong in @pytest.mark.loopscope or loopscope run --max-...)")
    try:
        return check_budgets(given)
    except BudgetError as error:
        raise ValueError(f"loopscope.watch(): {error}") from None


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """The pct-th percentile of sorted values, linear between closest ranks
    (numpy's default); the values must not be empty."""
    if len(sorted_values) == 1:
        return float(sorted_values[0])
    rank = (len(sorted_values) - 1) * pct / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    return float(sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (rank - low))


def figure_stats(values: list[float]) -> dict[str, Any]:
    """n, mean, p50, p90, p99, max of the measured values (None: not measured)."""
    known = sorted(v for v in values if v is not None)
    if not known:
        return {"n": 0, "mean": None, **{f"p{p}": None for p in PERCENTILES}, "max": None}
    return {"n": len(known), "mean": round(sum(known) / len(known), 6),
            **{f"p{p}": round(percentile(known, p), 6) for p in PERCENTILES},
            "max": round(known[-1], 6)}


def host_breach(host_ms: float, budget_ms: float | None, slow_ms: float | None,
                p99_ms: float | None, factor: float | None) -> list[str]:
    """The host-time rules a step of host_ms breaks: over step_budget_ms,
    or over `slow_ms` (= factor x the window's p99) and over that p99 by
    P99_MIN_EXCESS_MS."""
    broken = []
    if budget_ms is not None and host_ms > budget_ms:
        broken.append(f"step_budget_ms: host {host_ms:.3f} ms > budget {budget_ms:g} ms")
    if slow_ms is not None and p99_ms is not None and host_ms > slow_ms and \
            host_ms - p99_ms > P99_MIN_EXCESS_MS:
        broken.append(f"p99_factor: host {host_ms:.3f} ms > {factor:g} x the window's p99 "
                      f"{p99_ms:.3f} ms")
    return broken


def budget_breach(row: dict[str, Any], budgets: dict[str, float],
                  summary: dict[str, Any]) -> list[str]:
    """The plugin budgets a step's row breaks: each budget's Outcome (the
    plugin's comparison and line) on the step's figure.  A figure not
    measured, or one a failed self-check refuses, breaks nothing."""
    broken = []
    for name, limit in budgets.items():
        figure = WATCHED_BUDGETS[name]
        if figure == "busy_pct":
            busy, host = row["gpu_busy_ms"], row["host_ms"]
            measured = None if busy is None or host <= 0 else round(100.0 * busy / host, 2)
        else:
            measured = row[figure]
        if measured is None or refusal(summary, name, stepwise=True) is not None:
            continue
        outcome = Outcome(name, limit, float(measured))
        if outcome.ok is False:
            broken.append(outcome.line())
    return broken


def step_rows(summary: dict[str, Any], hosts: list[tuple[int, int, str | None]],
              kind: str) -> list[dict[str, Any]]:
    """The rows of the steps `hosts` ((index, host_ns, breach) each) of one
    finished profile, from its summary: the step's counters and syncs found
    by index (the watch numbers the profiles' steps itself)."""
    by_index = {s["index"]: s for s in summary.get("steps") or ()}
    rows = []
    for index, host_ns, breach in hosts:
        s = by_index.get(index) or {}
        host_ms = host_ns / 1e6
        gr = s.get("gr_active_pct")
        if kind == "full" and s.get("gpu_ms") is not None:
            busy, busy_from = float(s["gpu_ms"]), "trace"
        elif gr is not None:
            busy, busy_from = round(gr / 100.0 * host_ms, 6), "gr_active"
        else:
            busy, busy_from = None, None
        blocked = s.get("sync_blocked_ms")
        rows.append({"step": index, "host_ms": round(host_ms, 6), "gpu_busy_ms": busy,
                     "gpu_busy_from": busy_from, "syncs": s.get("syncs"),
                     "sync_blocked_ms": None if blocked is None else round(blocked, 6),
                     "sm_active_pct": s.get("sm_active_pct"), "dram_pct": s.get("dram_pct"),
                     "gr_active_pct": gr, "profile": kind, "breach": breach})
    return rows


def sites_in_step(summary: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """The sync sites (file, line, code, ...) that synced in step `index`."""
    return [site for site in ((summary.get("syncs") or {}).get("sites") or ())
            if index in (site.get("steps") or ())]
