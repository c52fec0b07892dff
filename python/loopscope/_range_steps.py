"""Steps after the fact: when a loop was not marked with `prof.step()`, the
ranges whose names match a pattern (loopscope.range, and under
`python -m loopscope run --steps` also torch's NVTX ranges and
record_function blocks) become the steps of the summary.

The C analysis already projects ops and gaps onto every range instance, so
a matched range gives the same per-step figures a real step would: host and
GPU time, kernels, gaps, verdict.  What it cannot give: the step of each
entry in summary["gaps"]["worst"] (the C core ties gaps to real steps only),
and per-step sync counts."""
from __future__ import annotations

import copy
from collections import Counter
from typing import Any, Callable


def _outermost(ranges: list[dict[str, Any]], chosen: set[int]) -> list[int]:
    """Chosen range indices that have no chosen ancestor (a pattern matching
    both "Step_3" and "Step_3/Attn" makes steps of the outer ones only)."""
    keep = []
    for i in sorted(chosen):
        parent = ranges[i]["parent"]
        while parent is not None and parent >= 0 and parent not in chosen:
            parent = ranges[parent]["parent"]
        if parent is None or parent < 0:
            keep.append(i)
    return keep


def launch_starts(apis: list[tuple]) -> dict[int, int]:
    """{correlation id: start_ns of its launch call}, choosing as the
    analysis does: a runtime call before a driver call, the earliest first."""
    launch: dict[int, int] = {}
    for a in sorted(apis, key=lambda a: (a[5], a[0])):
        launch.setdefault(a[2], a[0])
    return launch


def _attribute_worst_gaps(summary: dict[str, Any], capture, steps: list[dict[str, Any]]) -> None:
    """Sets the step of each worst gap as the C core does for real steps:
    the step whose host range holds the launch call of the op ending it."""
    launch = launch_starts(capture.apis())
    corr_at = {(o[3], o[1]): o[5] for o in capture.ops()}
    for gap in summary["gaps"]["worst"]:
        end = gap["start_ns"] + round(gap["duration_us"] * 1000)
        t = launch.get(corr_at.get((gap["device"], end), -1))
        gap["step"], gap["step_name"] = None, None
        for s in steps:
            if t is not None and s["start_ns"] <= t <= s["end_ns"]:
                gap["step"], gap["step_name"] = s["step"], s["name"]
                break


def summary_with_range_steps(prof, match: Callable[[str], bool]) -> dict[str, Any] | None:
    """A copy of prof.summary() whose steps are the outermost ranges matching
    `match`, numbered 0, 1, ... in the order they began, named after their
    range ("name#k" for the k-th of several ranges of one name); None when
    no range matches (or the profile kept no records)."""
    from . import _summary
    from ._diagnosis import diagnose

    summary = prof.summary()
    capture = prof._capture
    if capture is None:
        return None
    analysis = capture.analyze(*prof._thresholds)
    ranges = analysis["ranges"]
    chosen = {i for i, r in enumerate(ranges)
              if r["step"] is None and r["name"] is not None and match(r["name"])}
    if not chosen:
        return None
    picked = sorted(_outermost(ranges, chosen), key=lambda i: ranges[i]["start_ns"])
    repeats = Counter(ranges[i]["name"] for i in picked)
    seen: dict[str, int] = {}
    as_steps = []
    for n, i in enumerate(picked):
        name = ranges[i]["name"]
        if repeats[name] > 1:  # "denoise#0", "denoise#1", ...: each step tells apart
            seen[name] = seen.get(name, -1) + 1
            name = f"{name}#{seen[name]}"
        as_steps.append(dict(ranges[i], step=n, name=name))
    new = copy.deepcopy(summary)
    new["steps"] = _summary._steps(as_steps, summary["gaps"] is not None, prof._thresholds)
    if new["gaps"] is not None:
        _attribute_worst_gaps(new, capture, as_steps)
    new["steps_from"] = "ranges"
    new["diagnosis"] = diagnose(new)
    return new
