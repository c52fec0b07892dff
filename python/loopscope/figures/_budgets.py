"""Budgets: limits on a summary's figures ("no sync in the loop", "no bubble
over 50 us"), checked by pure functions over the summary dict.  The pytest
plugin and `python -m loopscope run --max-...` both use them.

A budget is either met, failed, or unavailable (its metric was not measured:
no GPU, no sync detection, no counters); an unavailable budget is never
counted as met.  With a step selection (a glob over step names) the
step-based figures are summed over the selected steps only."""
from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass, field
from typing import Any

from ._checks import refusal
from ._names import clip, kernel_name

from ._ranks import rank_skew_budget
from ._syncs import format_site  # noqa: F401  (one format for sync sites everywhere)

# name -> (what it limits, "max" or "min", unit shown after the value)
BUDGETS: dict[str, tuple[str, str, str]] = {
    "max_syncs": ("host-device syncs", "max", ""),
    "max_sync_blocked_ms": ("host time blocked in syncs", "max", " ms"),
    "max_severe_gaps": ("severe gaps", "max", ""),
    "max_gap_us": ("longest gap", "max", " us"),
    "max_idle_pct": ("GPU idle time", "max", "%"),
    "min_busy_pct": ("GPU busy time", "min", "%"),
    "min_sm_active_pct": ("SM active", "min", "%"),
    "max_rank_skew_us": ("largest cross-rank step skew", "max", " us"),
}
SITES_SHOWN = 5
GAPS_SHOWN = 5


class BudgetError(ValueError):
    """A budget given wrongly (unknown name, not a number); the message names
    the valid ones."""


def check_budgets(budgets: dict[str, Any]) -> dict[str, float]:
    """Validates budget names and limits; returns them as floats."""
    unknown = sorted(set(budgets) - set(BUDGETS))
    if unknown:
        raise BudgetError(
            f"unknown loopscope budget{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))}; valid budgets: {', '.join(BUDGETS)}"
        )
    out = {}
    for name, limit in budgets.items():
        if isinstance(limit, bool) or not isinstance(limit, (int, float)):
            raise BudgetError(f"loopscope budget {name} must be a number, got {limit!r}")
        # comparisons, not float(): NaN, infinities and ints beyond a float fail here
        if not 0 <= limit <= sys.float_info.max:
            raise BudgetError(f"loopscope budget {name} must be a finite number >= 0, "
                              f"got {_shown(limit)}")
        out[name] = float(limit)
    return out


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:45] + "..." + text[-10:]


@dataclass
class Outcome:
    """One budget's result: measured is None when unavailable (reason says why)."""

    name: str
    limit: float
    measured: float | None
    reason: str | None = None
    detail: str = ""

    @property
    def ok(self) -> bool | None:
        if self.measured is None:
            return None
        kind = BUDGETS[self.name][1]
        return self.measured <= self.limit if kind == "max" else self.measured >= self.limit

    def line(self) -> str:
        what, kind, unit = BUDGETS[self.name]
        bound = f"{'<=' if kind == 'max' else '>='} {_num(self.limit)}{unit}"
        if self.measured is None:
            return f"{self.name}: not measured ({self.reason})"
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.name}: {what} {_num(self.measured)}{unit}{detail}, budget {bound}"

    def as_dict(self) -> dict[str, Any]:
        return {"limit": self.limit, "measured": self.measured, "ok": self.ok,
                "reason": self.reason}


@dataclass
class Verdict:
    """The results of all budgets on one summary."""

    outcomes: list[Outcome]
    selection: str
    evidence: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.ok is False]

    @property
    def unavailable(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.ok is None]

    @property
    def met(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.ok]

    def message(self) -> str:
        """The failure text, read like an assertion diff: what failed, by how
        much, and the evidence (sync sites, worst gaps)."""
        failed = self.failed
        lines = [f"loopscope: {len(failed)} of {len(self.outcomes)} budget"
                 f"{'s' if len(self.outcomes) != 1 else ''} failed, {self.selection}"]
        lines += ["  FAILED " + o.line() for o in failed]
        lines += ["  met    " + o.line() for o in self.met]
        lines += ["  not checked: " + o.line() for o in self.unavailable]
        return "\n".join(lines + self.evidence)

    def skip_reason(self) -> str:
        return "; ".join(o.line() for o in self.unavailable)

    def as_dict(self) -> dict[str, Any]:
        return {"selection": self.selection, "budgets": {o.name: o.as_dict() for o in self.outcomes}}


def _num(value: float) -> str:
    return f"{value:g}" if float(value).is_integer() else f"{value:.3f}".rstrip("0")


def step_list(indices: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2, 5, 7-8"."""
    parts: list[str] = []
    run: list[int] = []
    for i in sorted(set(indices)):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [i]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(parts)


def format_gap(gap: dict[str, Any]) -> str:
    where = f"step {gap['step_name']}" if gap.get("step_name") else "outside steps"
    before = f", before {clip(kernel_name(gap['before']) or '', 60)}" if gap.get("before") else ""
    return f"{gap['duration_us']:>10.1f} us  [{gap['cause']}] {where}, stream {gap['stream']}{before}"


def select_steps(summary: dict[str, Any], pattern: str | None) -> tuple[list[dict[str, Any]] | None, str]:
    """(steps, description): the steps whose names match the glob `pattern`,
    or (None, "whole profile") without a pattern."""
    if pattern is None:
        return None, "whole profile"
    if summary.get("steps_from") == "ranges":  # the pattern already chose them
        steps = summary["steps"]
        return steps, f"ranges matching '{pattern}' as steps ({len(steps)} steps)"
    steps = [s for s in summary["steps"] if fnmatch.fnmatchcase(s["name"], pattern)]
    return steps, f"steps matching '{pattern}' ({len(steps)} of {len(summary['steps'])} steps)"


def _sum(values: list[Any]) -> float | None:
    return None if any(v is None for v in values) else float(sum(values))


def _measure(name: str, summary: dict[str, Any], steps: list[dict[str, Any]] | None) -> Outcome:
    """The measured value of one budget (limit filled in by the caller)."""
    # .get: a job merged from ranks files has no rank's own gaps or syncs
    gaps, syncs = summary.get("gaps"), summary.get("syncs")
    no_gpu = f"no GPU timeline: {summary.get('gpu_error') or 'not traced'}"
    no_syncs = f"sync detection unavailable: {summary.get('syncs_error') or 'not collected'}"
    out = Outcome(name, 0.0, None)
    if name == "max_rank_skew_us":  # torch.distributed, rank 0: the whole profile's steps
        out.measured, out.reason, out.detail = rank_skew_budget(summary)
        return out
    if name in ("max_syncs", "max_sync_blocked_ms"):
        if syncs is None:
            out.reason = no_syncs
        elif steps is None:
            out.measured = float(syncs["count"] if name == "max_syncs" else syncs["blocked_ms"])
            if name == "max_syncs":
                out.detail = f"host blocked {syncs['blocked_ms']:.3f} ms"
        elif name == "max_syncs":
            out.measured = _sum([s.get("syncs") for s in steps])
            out.reason = None if out.measured is not None else no_syncs + " (per step)"
        else:
            wanted = {s["index"] for s in steps}
            out.measured = round(sum(
                site["blocked_ms"] * len(wanted & set(site["steps"])) / len(site["steps"])
                for site in syncs["sites"] if site.get("steps")), 6)
            out.detail = "estimated: each site's time spread evenly over its steps"
        return out
    if name == "min_sm_active_pct":
        sm = summary["sm"]
        if steps is None:
            out.measured = None if sm is None else sm.get("active_pct")
        else:
            values = [s.get("sm_active_pct") for s in steps]
            known = [float(v) for v in values if v is not None]
            out.measured = (round(sum(known) / len(known), 2)
                            if known and len(known) == len(values) else None)
        if out.measured is None:
            out.reason = summary.get("metrics_error") or "SM counters were not sampled"
        return out
    if gaps is None:
        out.reason = no_gpu
        return out
    if steps is None:
        parts = [gaps]
    else:
        parts = [s["gaps"] for s in steps]
        if any(p is None for p in parts):
            out.reason = no_gpu
            return out
    if name == "max_severe_gaps":
        out.measured = float(sum(p["severe"] for p in parts))
        out.detail = f"> {gaps['thresholds_us'][1]:g} us"
    elif name == "max_gap_us":
        # a time line with no gap (max_us None) has none longer than the budget
        out.measured = max((p["max_us"] for p in parts if p["max_us"] is not None), default=0.0)
    else:
        busy = sum(p["busy_ms"] for p in parts)
        idle = sum(p["idle_ms"] for p in parts)
        if busy + idle <= 0:
            out.reason = "no GPU operation ran in the " + ("profile" if steps is None else "selected steps")
            return out
        busy_pct = round(100.0 * busy / (busy + idle), 2)
        out.measured = busy_pct if name == "min_busy_pct" else round(100.0 - busy_pct, 2)
        out.detail = f"{idle:.3f} ms idle, {busy:.3f} ms busy"
    return out


def _evidence(summary: dict[str, Any], steps: list[dict[str, Any]] | None,
              failed: list[Outcome]) -> list[str]:
    names = {o.name for o in failed}
    lines: list[str] = []
    wanted = None if steps is None else {s["index"] for s in steps}
    if names & {"max_syncs", "max_sync_blocked_ms"} and summary["syncs"]:
        sites = [s for s in summary["syncs"]["sites"]
                 if wanted is None or wanted & set(s.get("steps") or [])]
        if sites:
            lines.append("Top sync sites:")
            lines += ["  " + format_site(s) for s in sites[:SITES_SHOWN]]
            if len(sites) > SITES_SHOWN:
                lines.append(f"  ... {len(sites) - SITES_SHOWN} more sites")
    gap_budgets = {"max_severe_gaps", "max_gap_us", "max_idle_pct", "min_busy_pct"}
    if names & gap_budgets and summary["gaps"]:
        worst = [g for g in summary["gaps"]["worst"] if wanted is None or g["step"] in wanted]
        if worst:
            lines.append("Worst gaps:")
            lines += ["  " + format_gap(g) for g in worst[:GAPS_SHOWN]]
        shown = steps if steps is not None else summary["steps"]
        flagged = [s for s in shown if s["gaps"] and s["gaps"]["severe"]]
        if "max_severe_gaps" in names and flagged:
            lines.append("Severe gaps per step: " + ", ".join(
                f"{s['name']} {s['gaps']['severe']}" for s in flagged[:12])
                + (f", ... ({len(flagged) - 12} more steps)" if len(flagged) > 12 else ""))
    d = summary.get("diagnosis")
    if d and d.get("verdict") not in (None, "UNKNOWN"):
        lines.append(f"Verdict: {d['verdict']}: {d['actions'][0] if d.get('actions') else ''}")
    return lines


def evaluate(summary: dict[str, Any], budgets: dict[str, float], steps: str | None = None) -> Verdict:
    """Checks each budget against the summary.  `steps` is a glob over step
    names; a glob that matches no step fails every budget that needs steps
    (a typo must not pass).  A budget whose figure a failed self-check
    (summary["checks"], see _checks.GUARDS) cannot vouch for fails with the
    check's reason."""
    selected, selection = select_steps(summary, steps)
    outcomes = []
    for name, limit in budgets.items():
        if selected is not None and not selected:
            names = ", ".join(s["name"] for s in summary["steps"][:8]) or "none"
            outcomes.append(_no_step_matched(name, limit, steps, names))
            continue
        refused = refusal(summary, name, stepwise=selected is not None)
        if refused is not None:  # a figure the summary could not vouch for never passes
            outcomes.append(_Refused(name, limit, None, reason=refused))
            continue
        out = _measure(name, summary, selected)
        out.limit = limit
        outcomes.append(out)
    verdict = Verdict(outcomes, selection)
    verdict.evidence = _evidence(summary, selected, verdict.failed)
    return verdict


class _NoMatch(Outcome):
    """A step glob that matched nothing: reported as failed, not skipped."""

    @property
    def ok(self) -> bool | None:
        return False

    def line(self) -> str:
        return f"{self.name}: {self.reason}"


class _Refused(Outcome):
    """A budget whose figure a failed self-check (summary["checks"]) cannot
    vouch for: reported as failed with the check's reason, never met."""

    @property
    def ok(self) -> bool | None:
        return False

    def line(self) -> str:
        return f"{self.name}: refused, {self.reason}"


def _no_step_matched(name: str, limit: float, pattern: str | None, names: str) -> Outcome:
    return _NoMatch(name, limit, None,
                    reason=f"steps={pattern!r} matched no step (step names: {names})")

