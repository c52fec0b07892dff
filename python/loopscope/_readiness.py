"""CUDA-graph readiness per step: what would stop `torch.cuda.graph` (or
torch.compile's CUDA graphs) from capturing the step as it is, each with
the Python line that causes it where one is known.  It shapes the model's
per-step readiness figures (csrc/ls_readiness.h) and the summary's sync
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

from collections import Counter
from typing import Any

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


def _dynamic(cols: dict[str, Any]) -> tuple[set[int], dict[int, int]]:
    """(indices of steps whose GPU work differs from the most common one,
    their ops count) over the steps with GPU work."""
    working = [(i, ops, sig) for i, ops, sig in zip(cols["index"], cols["ops"], cols["signature"])
               if ops]
    if len(working) < 2:
        return set(), {}
    counts = Counter(sig for _, _, sig in working)
    common, seen = counts.most_common(1)[0]
    if seen == 1:  # no step repeats another: every one is its own shape
        return {i for i, _, _ in working}, {}
    usual_ops = Counter(ops for _, ops, sig in working if sig == common)
    ops = usual_ops.most_common(1)[0][0]
    return ({i for i, _, sig in working if sig != common}, {i: ops for i, _, _ in working})


# The model's step columns step_readiness reads (Model.step_table).
COLUMNS = ("index", "graph_launches", "replay_host_ns", "replay_pairs", "memory_calls",
           "first_memory_call", "pageable_copies", "first_pageable_call", "ops")


def step_readiness(cols: dict[str, Any], calls: list[dict[str, Any]] | None,
                   resolver: Resolver | None = None) -> dict[int, dict[str, Any]]:
    """{step index: {"status", "blockers", "graph_replays", "replay_host_us",
    "gpu_ops"}} from the model's step columns (COLUMNS and "signature";
    first_* indices -1 when none), sync blockers left to add_sync_blockers.
    resolver: how call stacks become sites (a trace file's need their own,
    as for the sync sites)."""
    calls = calls or []
    if resolver is None and calls:
        resolver = Resolver()
    dynamic, usual_ops = _dynamic(cols)
    out = {}
    for (index, graph_launches, replay_host_ns, pairs, memory_calls, first_memory_call,
         pageable_copies, first_pageable_call, ops) in zip(*(cols[c] for c in COLUMNS)):
        blockers = []
        if memory_calls:
            where, code, api = _site_of_call(resolver, calls, first_memory_call)
            blockers.append(_blocker("memory", memory_calls, where, code, api))
        if pageable_copies:
            where, code, _ = _site_of_call(resolver, calls, first_pageable_call)
            blockers.append(_blocker("pageable_copy", pageable_copies, where, code,
                                     "pageable host-to-device copy"))
        if index in dynamic:
            usual = usual_ops.get(index)
            detail = (f"{ops} GPU ops, most steps {usual}" if usual and usual != ops
                      else f"{ops} GPU ops, other kernels, grids or sizes than most steps"
                      if usual else f"{ops} GPU ops, no other step alike")
            blockers.append(_blocker("dynamic_shapes", 1, None, None, detail))
        entry = {
            "status": "",
            "blockers": blockers,
            "graph_replays": graph_launches,
            "replay_host_us": round(replay_host_ns / pairs / 1e3, 3) if pairs else None,
            "gpu_ops": ops,
        }
        entry["status"] = _status(entry)
        out[index] = entry
    return out


def _status(entry: dict[str, Any]) -> str:
    if entry["graph_replays"]:
        return "replays_graph"
    if not entry["gpu_ops"] and not entry["blockers"]:
        return "no_gpu_work"
    return "blocked" if entry["blockers"] else "capturable"


def add_sync_blockers(steps: list[dict[str, Any]], syncs: dict[str, Any] | None) -> None:
    """Puts the sync sites of each step first among its blockers (again, when
    the syncs changed: a replayed recording brings its sites back), and
    updates its status."""
    sites_by_step: dict[int, list[dict[str, Any]]] = {}
    for site in (syncs or {}).get("sites", []):
        for step in site.get("steps") or []:
            sites_by_step.setdefault(step, []).append(site)
    for step in steps:
        entry = step.get("graph_readiness")
        if entry is None:
            continue
        step_sites = sites_by_step.get(step["index"], [])
        if not step_sites and not entry["blockers"]:
            continue  # nothing to add or take out: its status stands (most of a million steps)
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


def first_line(step_name: str, readiness: dict[str, Any]) -> str | None:
    """"Step_3 cannot be captured as is: x.item() at denoise.py:42" (None
    when nothing blocks it)."""
    blockers = readiness["blockers"]
    if readiness["status"] != "blocked" or not blockers:
        return None
    texts = [b["text"] for b in blockers[:2]]
    more = f" (+{len(blockers) - 2} more)" if len(blockers) > 2 else ""
    return f"{step_name} cannot be captured as is: {'; '.join(texts)}{more}"


def overview(steps: list[dict[str, Any]]) -> dict[str, Any] | None:
    """summary["graph_readiness"]: counts over the steps, and the first
    blocked step's line; None without steps."""
    judged = [s for s in steps if s.get("graph_readiness") is not None]
    if not judged:
        return None
    status = Counter(s["graph_readiness"]["status"] for s in judged)
    by_kind = dict.fromkeys(KINDS, 0)
    for s in judged:  # one pass: a million steps are common
        blockers = s["graph_readiness"]["blockers"]
        if not blockers:
            continue
        for kind in {b["kind"] for b in blockers}:
            if kind in by_kind:
                by_kind[kind] += 1
    blocked = [s for s in judged if s["graph_readiness"]["status"] == "blocked"]
    return {
        "steps": len(judged),
        "capturable": status.get("capturable", 0),
        "blocked": status.get("blocked", 0),
        "replaying_graphs": status.get("replays_graph", 0),
        "no_gpu_work": status.get("no_gpu_work", 0),
        "steps_blocked_by": by_kind,
        "first_blocked": first_line(blocked[0]["name"], blocked[0]["graph_readiness"])
        if blocked else None,
        "first_blocked_step": blocked[0]["index"] if blocked else None,
    }
