"""summary["checks"]: what a summary verified about itself, each
{name, ok, detail}.  A failed check's detail says what is wrong, the likely
cause and what to do; the report and the HTML show it as a WARNING line at
the top, and every budget or regression gate whose figure it vouches for
(GUARDS) refuses to pass.

The checks read the analysed model's figures and the capture's counts; they
re-derive nothing (no gap, step or busy time is computed here).

- timeline   (live only) the GPU time line, first op start to last op end,
             lies inside the profile's host window [start, stop], give or
             take TIMELINE_SLACK_NS + TIMELINE_SLACK_FRACTION of the window
             before the start, and that plus the time the worker waited
             for the GPU to drain after the stop (work queued before the
             stop runs on after it; info["drained_ns"], the CUPTI time the
             wait returned, when the session provides it) past the stop.
- clock_rate (live only, when the session measured it) CUPTI's clock
             advanced at the host clock's rate over the profile: the ratio
             (CUPTI ns per host ns, info["clock_rate"]) within
             CLOCK_RATE_TOLERANCE of 1; not judged over a host span under
             CLOCK_RATE_MIN_SPAN_NS.
- durations  no GPU op record was left out for its times (no start, or an
             end before its start), and (live) no kernel lasted longer than
             the window allows (as timeline).
- drops      no activity record and no buffer was dropped.
- sample_drops (only where counters were sampled) no PM sample was lost
             to an overflow or a full counter data image.
- coverage   (only where counters were sampled) the samples cover at least
             MIN_COVERAGE_PCT of the profile; short of it, a live profile
             whose GPU work ran past its exit by more than the share
             coverage may miss is told to wait for the GPU inside the block.
- steps      the source declared steps (live: prof.step() or steps=module;
             a trace: ProfilerStep#N ranges, or the --steps pattern given)
             and some were found.

Left out (not applicable): timeline and clock_rate for traces read offline
and for injected test records (their device times keep their own time line;
LIVE_SOURCES), clock_rate while the session does not measure the ratio,
coverage and sample_drops where no counters were sampled.  (Python frames
a trace holds past the reader's limit are not a drop of these figures:
summary["syncs"]["sites_unknown"] says so.)"""
from __future__ import annotations

import math
import re
from typing import Any, Sequence

from ..files import _formats

# Tolerances of the timeline check: the clocks are read on either side of
# a few calls (CUPTI enable, the last callbacks), so a few us apart; 1 ms and
# 2% of the window leave room for those, and a stretched time base (issue
# 24: 2x) is far outside them.
TIMELINE_SLACK_NS = 1_000_000
TIMELINE_SLACK_FRACTION = 0.02
# |ratio - 1| above this: CUPTI's clock does not run at the host's rate.
# Real clocks drift by parts per million; 1% is far above any drift and
# far below the 2.05x of a timestamp callback left behind by torch.profiler.
CLOCK_RATE_TOLERANCE = 0.01
# The host reference span below which the clock rate is not judged: the
# two clocks are read a few us apart at each end, a 1% error over 1 ms.
CLOCK_RATE_MIN_SPAN_NS = 1_000_000
MIN_COVERAGE_PCT = 90.0  # sample coverage below this: counter figures miss part of the loop
LIVE_SOURCES = frozenset({"cupti"})  # sources whose ops share the host window's clock
PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")

# Figures each check vouches for: the budgets (_budgets.BUDGETS) and
# regression figures (_compare.REGRESSION_FIGURES) that refuse to pass when
# it failed.  "*": every figure; STEPS: only figures read from steps.
_TIMING = frozenset({"max_sync_blocked_ms", "max_severe_gaps", "max_gap_us", "max_idle_pct",
                     "min_busy_pct", "max_rank_skew_us", "min_sm_active_pct",
                     "loop_ms", "idle_ms", "severe_gaps", "sync_blocked_ms"})
STEPS = "steps"
CROSS_RANK = frozenset({"max_rank_skew_us"})  # read from every rank's figures
GUARDS: dict[str, frozenset[str]] = {
    "timeline": _TIMING,
    "clock_rate": _TIMING,
    "durations": _TIMING,
    "drops": frozenset({"*"}),
    "sample_drops": frozenset({"min_sm_active_pct"}),
    "coverage": frozenset({"min_sm_active_pct"}),
    "steps": frozenset({STEPS, "loop_ms"}),
}


def _check(name: str, ok: bool, detail: str) -> dict[str, Any]:
    return {"name": name, "ok": bool(ok), "detail": detail}


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


def timeline_check(first_ns: int, last_ns: int, start_ns: int, stop_ns: int,
                   drain_ns: int = 0) -> dict[str, Any]:
    """The GPU time line [first_ns, last_ns] against the host window
    [start_ns, stop_ns]; drain_ns: how long the GPU was still busy after the
    stop as the worker saw it (allowed past the stop)."""
    window = max(stop_ns - start_ns, 0)
    slack = TIMELINE_SLACK_NS + TIMELINE_SLACK_FRACTION * window
    early = start_ns - first_ns
    late = last_ns - stop_ns - drain_ns
    if early <= slack and late <= slack:
        return _check("timeline", True,
                      f"the GPU time line ({_ms(last_ns - first_ns)}) lies inside the profile's "
                      f"host window ({_ms(window)})")
    where = (f"begins {_ms(early)} before the profile started" if early > slack
             else f"ends {_ms(late + drain_ns)} after the profile stopped")
    return _check("timeline", False,
                  f"the GPU time line ({_ms(last_ns - first_ns)}) {where}, outside its host "
                  f"window ({_ms(window)}): GPU times are on another time base (likely another "
                  "CUPTI client, e.g. torch.profiler run earlier in this process, changed "
                  "CUPTI's timestamps); GPU times, gaps and busy figures are not trustworthy: "
                  "profile in a fresh process, away from torch.profiler")


def clock_rate_check(ratio: float | None) -> dict[str, Any] | None:
    """CUPTI ns per host ns over the profile (None: not measured: no check)."""
    if ratio is None:
        return None
    if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and \
            math.isfinite(ratio) and abs(ratio - 1.0) <= CLOCK_RATE_TOLERANCE:
        return _check("clock_rate", True,
                      f"CUPTI's clock ran at {ratio:.4f}x the host clock's rate")
    return _check("clock_rate", False,
                  f"CUPTI's clock ran at {ratio!r}x the host clock's rate (allowed "
                  f"1 +- {CLOCK_RATE_TOLERANCE:g}): every GPU time is stretched by that "
                  "factor; likely another CUPTI client (torch.profiler run earlier in this "
                  "process) left a timestamp callback behind: profile in a fresh process")


def durations_check(skipped_ops: int, why: str | None, longest_ns: int | None = None,
                    allowed_ns: float | None = None) -> dict[str, Any]:
    """GPU op records left out for their times (skipped_ops, the first
    reason `why`), and the longest kernel against what the window allows."""
    if skipped_ops:
        return _check("durations", False,
                      f"{skipped_ops:,} GPU op record(s) were left out as invalid "
                      f"({why or 'no start, an end before the start, or unreadable'}): the "
                      "clock or the trace's writer is broken; figures miss those ops")
    if longest_ns is not None and allowed_ns is not None and longest_ns > allowed_ns:
        return _check("durations", False,
                      f"a kernel lasted {_ms(longest_ns)}, longer than the profile's window "
                      f"allows ({_ms(allowed_ns)}): GPU times are on another time base "
                      "(see the timeline check); profile in a fresh process")
    return _check("durations", True, "every GPU op has a start and an end after it"
                  + (", none longer than the window" if longest_ns is not None
                     and allowed_ns is not None else ""))


def drops_check(dropped_records: int, buffers_refused: int = 0) -> dict[str, Any]:
    """Activity records and buffers lost (each a count)."""
    lost = [f"{n:,} {what}" for n, what in (
        (dropped_records, "activity record(s) dropped"),
        (buffers_refused, "activity buffer(s) refused (the buffer pool was full)")) if n]
    if not lost:
        return _check("drops", True, "no activity record or buffer was dropped")
    return _check("drops", False,
                  "; ".join(lost) + ": counts and times miss what was lost; raise buffer_mb "
                  "or profile fewer steps")


def sample_drops_check(losses: int) -> dict[str, Any]:
    """PM samples lost to hardware buffer overflows.  A full counter data
    image loses nothing (ls_pmsampling resets it and decodes on in the same
    call), so it is no loss here."""
    if not losses:
        return _check("sample_drops", True, "no PM sample was lost")
    return _check("sample_drops", False,
                  f"{losses:,} PM sample loss(es) (hardware buffer overflows): SM and "
                  "DRAM figures miss part of the loop; raise metrics_buffer_mb or "
                  "metrics_interval_us")


def ran_past_exit(after_exit_ns: int, gpu_span_ns: int) -> bool:
    """The profile's GPU work that ran after its exit (its kernels run long
    after their launches, and nothing inside waited for them) is alone more
    than coverage may miss of the GPU's time line: samples are the profile's
    up to its exit only, so that is why they fall short (an H200 probe read
    3-7% so, 2026-11-29)."""
    return after_exit_ns * 100 > (100 - MIN_COVERAGE_PCT) * gpu_span_ns


def decoder_behind(decode_us: float | None, interval_us: float | None) -> bool:
    """Decoding a sample took longer than the interval between samples: the
    decoder cannot keep pace there, and a narrower interval loses more (an
    H200 at 20 us: 48-54 us a sample, coverage 39-79%, 2026-11-29)."""
    return bool(decode_us is not None and interval_us and decode_us > interval_us)


def coverage_check(coverage_pct: float | None, reason: str | None,
                   of: str = "the profile", span_pct: float | None = None,
                   after_exit_ns: int = 0, gpu_span_ns: int = 0,
                   decode_us: float | None = None, interval_us: float | None = None) -> dict[str, Any]:
    """The share of `of` (the GPU's busy time, or the profile) the PM
    samples cover (None: no sample); span_pct, the share of the whole
    window, is said beside it when lower: the rest had no GPU work.  Short
    of the cut-off, the advice names the GPU's work after the exit when
    that explains it (ran_past_exit), else a decoder slower than the
    samples (decoder_behind: decode_us of host time a sample at
    interval_us)."""
    rest = ""
    if span_pct is not None and coverage_pct is not None and span_pct < coverage_pct:
        rest = (f" ({span_pct:g}% of the whole profile: the time not covered had no GPU "
                "work, e.g. set-up before the first kernel)")
    if coverage_pct is not None and coverage_pct >= MIN_COVERAGE_PCT:
        return _check("coverage", True, f"PM samples cover {coverage_pct:g}% of {of}{rest}")
    shown = "no sample" if coverage_pct is None else f"{coverage_pct:g}%"
    advice = "profile more steps or lower metrics_interval_us"
    if decoder_behind(decode_us, interval_us):
        advice = (f"decoding took {decode_us:g} us of host time a sample, samples came every "
                  f"{interval_us:g} us: a wider metrics_interval_us (or the automatic one) keeps "
                  "pace, a narrower one loses more")
    if ran_past_exit(after_exit_ns, gpu_span_ns):
        advice = (f"the GPU ran {after_exit_ns / 1e6:.3f} ms of the profile's work after its "
                  "exit, where samples are no longer the profile's: wait for the GPU inside "
                  "the with block (torch.cuda.synchronize() at its end)")
    return _check("coverage", False,
                  f"PM samples cover {shown} of {of}{rest} (at least {MIN_COVERAGE_PCT:g}% "
                  f"wanted){': ' + reason if reason else ''}: SM and DRAM figures describe "
                  f"part of the loop only; {advice}")


def steps_check(declared: bool, found: int, what: str) -> dict[str, Any]:
    """Whether the source declares steps (`what` says how: "the trace has 6
    ProfilerStep#N ranges") against the number found."""
    if declared and not found:
        return _check("steps", False,
                      f"{what}, but no step was found: per-step figures and step budgets have "
                      "nothing to read; check the steps= pattern or the trace's step markers")
    if not declared:
        return _check("steps", True, "no step declared; figures cover the whole profile")
    return _check("steps", True, f"{found:,} step(s) found ({what})")


def measured_clock_rate(info: dict[str, Any], source: str | None,
                        state: dict[str, Any] | None) -> float | None:
    """CUPTI ns per host ns over the profile: the session's measure
    (info["clock_rate"], on a live CUPTI profile whose host reference span
    is at least CLOCK_RATE_MIN_SPAN_NS), or a value the caller put in
    state["cupti_clock_ratio"] (tests, tools); None: not measured."""
    given = (state or {}).get("cupti_clock_ratio")
    if given is not None:
        return given
    if source != "cupti" or (info.get("reference_span_ns") or 0) < CLOCK_RATE_MIN_SPAN_NS:
        return None
    return info.get("clock_rate")


def live_checks(summary: dict[str, Any], info: dict[str, Any], model,
                state: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The checks of a summary built from a capture (live, injected or read
    from a trace: each source gets those that apply; see the module doc)."""
    out: list[dict[str, Any]] = []
    window = None
    after_exit_ns = gpu_span_ns = 0  # the GPU's time line past the profile's exit (live)
    if summary.get("source") in LIVE_SOURCES and model is not None and summary.get("gpu"):
        total = model.total()
        start, stop = info.get("start_ns", 0), info.get("stop_ns", 0)
        gpu_span_ns = max(total["last_ns"] - total["first_ns"], 0)
        after_exit_ns = max(total["last_ns"] - max(stop, total["first_ns"]), 0)
        # How long after the stop the GPU may still run work queued before it:
        # the finish's wait for the context to drain, or (when the session
        # reads it) the CUPTI time at which that wait returned.
        drain = (info.get("finish_phases_ns") or {}).get("sync", 0)
        if info.get("drained_ns"):
            drain = max(drain, info["drained_ns"] - stop)
        if (total.get("kernels", 0) + total.get("memcpys", 0) + total.get("memsets", 0)
                + total.get("graphs", 0)):
            out.append(timeline_check(total["first_ns"], total["last_ns"], start, stop, drain))
        width = max(stop - start, 0)
        window = width + drain + TIMELINE_SLACK_NS + TIMELINE_SLACK_FRACTION * width
        rate = clock_rate_check(measured_clock_rate(info, summary.get("source"), state))
        if rate is not None:
            out.append(rate)
    if _formats.get(summary.get("source")) is not None:
        return out  # a trace's durations and the rest: trace_checks, from what its reader skipped
    if model is not None and summary.get("gpu"):
        longest = max((k["max_ns"] for k in model.kernels()), default=None)
        out.append(durations_check(info.get("invalid_records", 0), None,
                                   longest if window is not None else None, window))
    out.append(drops_check(info.get("dropped_records", 0), info.get("buffers_refused", 0)))
    if info.get("sampled") or info.get("samples_injected"):
        # PM samples lost to an overflow of the hardware buffer (a full
        # counter data image is decoded in more rounds, nothing lost; the
        # partial samples the settle drops are routine: coverage sees what
        # any loss costs the loop)
        pm = info.get("pm") or {}
        out.append(sample_drops_check(pm.get("overflows", 0)))
        sm = summary.get("sm")
        out.append(coverage_check(sm.get("coverage_pct") if sm else None,
                                  summary.get("metrics_error"),
                                  sm.get("coverage_of") or "the profile" if sm else "the profile",
                                  sm.get("span_coverage_pct") if sm else None,
                                  after_exit_ns, gpu_span_ns,
                                  (summary.get("overhead") or {}).get("decode_us_per_sample"),
                                  sm.get("interval_us") if sm else None))
    declared = (state or {}).get("steps_declared")  # what the profile was told, if anything
    if declared is not None:
        out.append(steps_check(True, len(summary.get("steps") or ()), declared))
    return out


# The reader's classes of GPU op records (ls_tbuild.c's class names).
_OP_CLASSES = ("kernel", "gpu_memcpy", "gpu_memset", "cuda_graph")


def step_markers(ranges: Sequence[tuple]) -> int:
    """How many of a trace's ranges (name first) are ProfilerStep#N markers."""
    return sum(1 for r in ranges if PROFILER_STEP.match(r[0] or ""))


def trace_checks(summary: dict[str, Any], stats: dict[str, Any], ranges: Sequence[tuple],
                 pattern: re.Pattern | None, markers: int | None = None) -> list[dict[str, Any]]:
    """The checks of a trace read offline (Kineto JSON, Nsight Systems):
    durations and drops from what the reader skipped, steps from the trace's
    step markers (ProfilerStep#N; `markers`: their count when the ranges
    were counted already and given back) or the steps= pattern given."""
    # Records skipped for their times, counted by the reader under the one
    # list of reasons every reader uses (_core.TIME_SKIP_REASONS): never by
    # matching its wording.  The first reason per class is given beside.
    for_times = stats.get("skipped_times") or {}
    why = stats.get("why") or {}
    timed = [c for c in _OP_CLASSES if for_times.get(c)]
    out = [durations_check(sum(for_times[c] for c in timed),
                           "; ".join(f"{c}: {why.get(c) or 'its times'}" for c in timed) or None),
           drops_check(summary.get("dropped_records") or 0)]
    if pattern is None:
        if markers is None:
            markers = step_markers(ranges)
        declared, what = markers > 0, f"the trace has {markers:,} ProfilerStep#N range(s)"
    else:
        declared, what = True, f"steps={pattern.pattern!r} was given"
    out.append(steps_check(declared, len(summary.get("steps") or ()), what))
    return out


def failed(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The failed checks of a summary (none for a summary made before checks)."""
    return [c for c in summary.get("checks") or () if isinstance(c, dict) and not c.get("ok")]


def refusal(summary: dict[str, Any], figure: str, stepwise: bool = False) -> str | None:
    """Why `figure` (a budget or regression figure name) cannot be trusted
    in this summary: the failed checks that vouch for it, or None."""
    reasons = []
    for c in failed(summary):
        guards = GUARDS.get(str(c.get("name")), frozenset({"*"}))
        if "*" in guards or figure in guards or (stepwise and STEPS in guards):
            reasons.append(f"check {c.get('name')!s} failed: {c.get('detail')}")
    if figure in CROSS_RANK:  # rank 0: every rank's figures go into it
        for r in summary.get("ranks") or ():
            for c in (r.get("failed_checks") or ()) if isinstance(r, dict) else ():
                if r.get("rank") != summary.get("rank"):
                    reasons.append(f"rank {r.get('rank')}: check {c.get('name')!s} failed: "
                                   f"{c.get('detail')}")
    return "; ".join(reasons) or None


def warning_lines(summary: dict[str, Any]) -> list[str]:
    """One WARNING line per failed check, for the top of the report and HTML."""
    return [f"WARNING ({c.get('name')}): {c.get('detail')}" for c in failed(summary)]
