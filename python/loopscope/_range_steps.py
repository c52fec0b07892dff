"""Steps after the fact: when a loop was not marked with `prof.step()`, the
ranges whose names match a pattern (loopscope.range, and under
`python -m loopscope run --steps` also torch's NVTX ranges and
record_function blocks) become the steps of the summary.

This module only chooses the ranges; the C analysis takes them as its steps
and computes every figure as for live steps (ops and gaps per step, syncs
per step, the step of each worst gap)."""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable

from ._summary import RangeSteps, Summary, build_summary


def choose_range_steps(records: list[tuple], match: Callable[[str], bool]) -> RangeSteps | None:
    """The outermost plain ranges whose names match, in the order they
    began, named after their range ("name#k" for the k-th of several ranges
    of one name); None when none matches.

    records: Capture.range_records(), [(name, parent, step, start_ns, end_ns)].
    A pattern matching both "Step_3" and "Step_3/Attn" makes steps of the
    outer ones only."""
    chosen = {i for i, (name, _parent, step, _start, _end) in enumerate(records)
              if step is None and name is not None and match(name)}
    outermost = []
    for i in sorted(chosen):
        parent = records[i][1]
        while 0 <= parent < i and parent not in chosen:
            parent = records[parent][1]
        if not 0 <= parent < i:
            outermost.append(i)
    if not outermost:
        return None
    picked = sorted(outermost, key=lambda i: (records[i][3], i))
    repeats = Counter(records[i][0] for i in picked)
    seen: dict[str, int] = {}
    names = []
    for i in picked:
        name = records[i][0]
        if repeats[name] > 1:  # "denoise#0", "denoise#1", ...: each step tells apart
            seen[name] = seen.get(name, -1) + 1
            name = f"{name}#{seen[name]}"
        names.append(name)
    return RangeSteps(picked, names)


def summary_with_range_steps(prof, match: Callable[[str], bool]) -> dict[str, Any] | None:
    """The summary of a finished profile (a FinishedProfile) whose steps are
    the outermost ranges matching `match` (see choose_range_steps); None when
    no range matches (or the profile kept no records)."""
    capture = prof.capture
    if capture is None:
        return None
    steps = choose_range_steps(capture.range_records(), match)
    if steps is None:
        return None
    summary = build_summary(capture, prof.state, prof.thresholds, prof.host_ns,
                            prof.stop_error, steps)
    summary["steps_from"] = "ranges"
    # torch.distributed: the rank and what was gathered stay those of the live
    # steps (ranges taken as steps are not compared across ranks)
    live = prof.summary()
    for key in ("rank", "world_size", "ranks", "skew", "distributed"):
        summary[key] = live.get(key)
    out = Summary(summary)
    out.range_steps = steps
    return out
