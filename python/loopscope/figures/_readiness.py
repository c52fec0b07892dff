"""CUDA-graph readiness per step: what would stop `torch.cuda.graph` (or
torch.compile's CUDA graphs) from capturing the step as it is, each with
the Python line that causes it where one is known.  It shapes the model's
per-step readiness figures (csrc/analysis/ls_readiness.h) and the summary's sync
sites; nothing here re-derives steps or attribution.

The rules, per step:
- sync: a host-device sync inside the step (a capture cannot wait for the
  GPU): each site whose syncs fell in the step.
- memory: an allocation or free that is not stream ordered (cudaMalloc,
  cudaFree, cuMemAlloc, ...): a capture refuses it.  The first one's line.
- pageable_copy: a host-to-device copy from pageable memory (a capture
  copies only from pinned memory).  The first one's line, when recorded.
- dynamic_shapes: the step's GPU work (its kernels' names, grids and
  blocks, its copies' sizes) differs from the most common step's, so a
  graph captured once would replay the wrong work.  With no step repeated
  (every signature different), every step of two or more is flagged.
A step that already replays a CUDA graph reads "replays_graph"; a step
with no GPU work, "no_gpu_work"; otherwise "capturable" or "blocked".
A blocker's count is how often it happened in the step (None for a sync
site: the site's own count is over the whole run)."""
from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from itertools import compress
from operator import or_
from typing import Any, NamedTuple, Sequence

from . import _rows
from ._names import display_path
from ._syncs import Resolver

SITES_PER_STEP = 3  # sync sites named per step; the rest are counted
KINDS = ("sync", "memory", "pageable_copy", "dynamic_shapes")
WHY = {
    "sync": "a host-device sync (a capture cannot wait for the GPU)",
    "memory": "memory allocated or freed (a capture refuses it; allocate before the loop)",
    "pageable_copy": "a copy from pageable host memory (pin it: tensor.pin_memory())",
    "dynamic_shapes": "its kernels or their grids change from step to step (dynamic shapes)",
}


def _where(file: str | None, line: int | None) -> str | None:
    return f"{display_path(file)}:{line}" if file and line else None


def _site_of_call(resolver: Resolver | None, calls: list[dict[str, Any]], index: int | None
                  ) -> tuple[str | None, str | None, str | None]:
    """(where, code, api) of the call with this index, Nones when unknown."""
    if resolver is None or index is None or not 0 <= index < len(calls):
        return None, None, None
    call = calls[index]
    site = resolver.site(call)
    return _where(site.file, site.line), site.call or site.code, call.get("api")


def _blocker(kind: str, count: int | None, where: str | None, code: str | None,
             detail: str | None = None) -> dict[str, Any]:
    if code and where:
        text = f"{code} at {where}"
    else:
        text = where or code or detail or WHY[kind]
    if detail and (code or where):
        text = f"{detail} in {text}"
    return {"kind": kind, "count": count, "where": where, "code": code, "text": text,
            "why": WHY[kind]}


def _dynamic(cols: dict[str, Any]) -> tuple[set[int], int | None]:
    """(indices of steps whose GPU work differs from the most common one,
    the ops count of most steps with the common work: None when no step
    repeats another) over the steps with GPU work."""
    signatures = list(compress(cols["signature"], cols["ops"]))
    if len(signatures) < 2 or signatures.count(signatures[0]) == len(signatures):
        return set(), None  # (every step alike: the common case, counted in C)
    working = [(i, ops, sig) for i, ops, sig in zip(cols["index"], cols["ops"], cols["signature"])
               if ops]
    counts = Counter(signatures)
    common, seen = counts.most_common(1)[0]
    if seen == 1:  # no step repeats another: every one is its own shape
        return {i for i, _, _ in working}, None
    usual_ops = Counter(ops for _, ops, sig in working if sig == common)
    return {i for i, _, sig in working if sig != common}, usual_ops.most_common(1)[0][0]


# The model's step columns step_readiness reads (Model.step_table).
COLUMNS = ("index", "graph_launches", "replay_host_ns", "replay_pairs", "memory_calls",
           "first_memory_call", "pageable_copies", "first_pageable_call", "ops")


class Readiness(NamedTuple):
    """step_readiness's result: the fields that build each step's
    graph_readiness dict (_rows.build), and its status and blockers columns,
    which are the objects those dicts hold (add_sync_blockers keeps them in
    step), so counts over a million steps read lists, not dicts."""
    step_index: Sequence[int]  # the steps' indices, increasing
    status: list[str]
    blockers: list[list[dict[str, Any]]]
    fields: dict[str, _rows.Field]


def step_readiness(cols: dict[str, Any], calls: list[dict[str, Any]] | None,
                   resolver: Resolver | None = None) -> Readiness:
    """Each step's graph_readiness (see Readiness) over the model's step
    columns (COLUMNS and "signature"; first_* indices -1 when none):
    {"status", "blockers", "graph_replays", "replay_host_us", "gpu_ops"},
    sync blockers left to add_sync_blockers.  resolver: how call
    stacks become sites (a trace file's need their own, as for the sync
    sites).  Only the steps with a blocker cost a Python loop."""
    calls = calls or []
    if resolver is None and calls:
        resolver = Resolver()
    dynamic, usual = _dynamic(cols)
    index, ops_column = cols["index"], cols["ops"]
    n = len(index)
    memory_calls, pageable_copies = cols["memory_calls"], cols["pageable_copies"]
    blocked = set(compress(range(n), map(or_, memory_calls, pageable_copies)))
    if dynamic:
        blocked.update(k for k, i in enumerate(index) if i in dynamic)
    status = ["replays_graph" if replays else "capturable" if ops else "no_gpu_work"
              for replays, ops in zip(cols["graph_launches"], ops_column)]
    blockers: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    for k in sorted(blocked):
        found = blockers[k]
        if memory_calls[k]:
            where, code, api = _site_of_call(resolver, calls, cols["first_memory_call"][k])
            found.append(_blocker("memory", memory_calls[k], where, code, api))
        if pageable_copies[k]:
            where, code, _ = _site_of_call(resolver, calls, cols["first_pageable_call"][k])
            found.append(_blocker("pageable_copy", pageable_copies[k], where, code,
                                  "pageable host-to-device copy"))
        if index[k] in dynamic:
            ops = ops_column[k]
            detail = (f"{ops} GPU ops, most steps {usual}" if usual and usual != ops
                      else f"{ops} GPU ops, other kernels, grids or sizes than most steps"
                      if usual else f"{ops} GPU ops, no other step alike")
            found.append(_blocker("dynamic_shapes", 1, None, None, detail))
        if status[k] != "replays_graph":  # every step in `blocked` has a blocker now
            status[k] = "blocked"
    return Readiness(index, status, blockers, {
        "status": _rows.item(status),
        "blockers": _rows.item(blockers),
        "graph_replays": _rows.integer(cols["graph_launches"]),
        "replay_host_us": _rows.rounded_ratio(cols["replay_host_ns"], cols["replay_pairs"],
                                              post=1e3, digits=3, zero=None),
        "gpu_ops": _rows.integer(ops_column),
    })


def _status_of(graph_replays: int, gpu_ops: int, blockers: list[dict[str, Any]]) -> str:
    if graph_replays:
        return "replays_graph"
    if not gpu_ops and not blockers:
        return "no_gpu_work"
    return "blocked" if blockers else "capturable"


def _status(entry: dict[str, Any]) -> str:
    return _status_of(entry["graph_replays"], entry["gpu_ops"], entry["blockers"])


def add_sync_blockers(steps: list[dict[str, Any]], syncs: dict[str, Any] | None,
                      fresh: Readiness | None = None) -> None:
    """Puts the sync sites of each step first among its blockers (again, when
    the syncs changed: a replayed recording brings its sites back), and
    updates its status.  fresh: step_readiness's columns when the steps are
    new from them (no sync blocker yet): only the steps that sites name are
    visited (a million steps are common), and the columns follow."""
    sites_by_step: dict[int, list[dict[str, Any]]] = {}
    for site in (syncs or {}).get("sites", []):
        for step in site.get("steps") or []:
            sites_by_step.setdefault(step, []).append(site)
    changing: list[tuple[int | None, dict[str, Any]]]
    if fresh is not None:
        index = fresh.step_index
        changing = [(pos, steps[pos]) for step in sites_by_step
                    if (pos := bisect_left(index, step)) < len(index) and index[pos] == step]
    else:
        # Only the steps with a site, or with blockers (a sync site that is no
        # longer there leaves): the rest keep their status.
        changing = [(None, step) for step in steps
                    if (entry := step.get("graph_readiness")) is not None
                    and (entry["blockers"] or step["index"] in sites_by_step)]
    for at, step in changing:
        entry = step["graph_readiness"]
        step_sites = sites_by_step.get(step["index"], [])
        blockers = [b for b in entry["blockers"] if b["kind"] != "sync"]
        found = [_blocker("sync", None, _where(site["file"], site["line"]),
                          site.get("call") or site.get("code"),
                          None if site.get("file") else f"{site['kind']} sync")
                 for site in step_sites[:SITES_PER_STEP]]
        if len(step_sites) > SITES_PER_STEP:
            rest = step_sites[SITES_PER_STEP:]
            found.append(_blocker("sync", None, None, None, f"{len(rest)} more sync sites"))
        entry["blockers"] = found + blockers
        entry["status"] = _status(entry)
        if fresh is not None and at is not None:
            fresh.blockers[at], fresh.status[at] = entry["blockers"], entry["status"]


def first_line(step_name: str, readiness: dict[str, Any]) -> str | None:
    """"Step_3 cannot be captured as is: x.item() at denoise.py:42" (None
    when nothing blocks it)."""
    blockers = readiness["blockers"]
    if readiness["status"] != "blocked" or not blockers:
        return None
    texts = [b["text"] for b in blockers[:2]]
    more = f" (+{len(blockers) - 2} more)" if len(blockers) > 2 else ""
    return f"{step_name} cannot be captured as is: {'; '.join(texts)}{more}"


def overview(steps: list[dict[str, Any]], fresh: Readiness | None = None
             ) -> dict[str, Any] | None:
    """summary["graph_readiness"]: counts over the steps, and the first
    blocked step's line; None without steps.  fresh: step_readiness's
    columns of these steps (counted without reading a dict per step)."""
    statuses: list[str]
    if fresh is not None:
        statuses, blockers_of = fresh.status, fresh.blockers
    else:
        entries = [entry for s in steps if (entry := s.get("graph_readiness")) is not None]
        statuses = [entry["status"] for entry in entries]
        blockers_of = [entry["blockers"] for entry in entries]
    if not statuses:
        return None
    status = Counter(statuses)
    by_kind = dict.fromkeys(KINDS, 0)
    for blockers in filter(None, blockers_of):  # a million steps are common
        for kind in {b["kind"] for b in blockers}:
            if kind in by_kind:
                by_kind[kind] += 1
    blocked = None
    if status.get("blocked"):
        blocked = (steps[statuses.index("blocked")] if fresh is not None else
                   next(s for s in steps if (s.get("graph_readiness") or {}).get("status")
                        == "blocked"))
    return {
        "steps": len(statuses),
        "capturable": status.get("capturable", 0),
        "blocked": status.get("blocked", 0),
        "replaying_graphs": status.get("replays_graph", 0),
        "no_gpu_work": status.get("no_gpu_work", 0),
        "steps_blocked_by": by_kind,
        "first_blocked": first_line(blocked["name"], blocked["graph_readiness"])
        if blocked else None,
        "first_blocked_step": blocked["index"] if blocked else None,
    }
