"""The verdict: which resource a loop waits on, the numbers that decided it,
and the next action.

1. The GPU idles most of the time (busy < 50% of its time line; busy from
   the traced ops, or, in counters-only mode, GR active %):
   - at least half of the idle time in gaps a host sync overlapped -> SYNC_BOUND
   - at least half of the idle time in gaps where the next launch came after
     the GPU had gone idle                                 -> CPU_LAUNCH_BOUND
   - otherwise                                             -> BALANCED
   In counters-only mode there are no gaps: the host time blocked in syncs
   stands for the sync share, and the rest of the idle time is taken as the
   host launching late (PRODUCT's "SM < 30%, DRAM < 50%: launch bound" is
   given as corroboration in the reasons).
2. The GPU is busy (>= 50%), and SM/DRAM counters exist.  They are read
   over the time the GPU was busy (so idle gaps do not dilute them):
   - DRAM throughput >= 70% of peak                        -> MEMORY_BOUND
   - SM active > 60% and DRAM throughput < 50% of peak     -> COMPUTE_BOUND
   - otherwise                                             -> BALANCED
   Why not PRODUCT's "SM < 30% and DRAM > 80%" for memory bound:
   sm__cycles_active counts cycles with any warp resident, which a streaming
   copy keeps at 100% (GPU_FACTS: copy phase SM active 100%, DRAM 84%), so a
   memory-bound loop never shows SM < 30%; and a pure copy reaches only
   ~84% of peak DRAM throughput on an H200, so 80% would call a copy loop at
   75% of peak balanced.  70% keeps every copy-like loop memory bound (the
   issue's test: DRAM >= 70%) and stays clear of compute-bound loops
   (DRAM < 10% for an FMA loop).
3. The GPU is busy and there are no counters                -> GPU_BOUND
4. Where rules 2-3 read BALANCED or GPU_BOUND, kernels too small to fill the
   GPU                                                     -> UNDER_FILLED
   when the kernels whose launch shape is known (at least FILL_KNOWN_MIN_PCT
   of the kernel time) could fill, weighted by their time, less than
   UNDER_FILLED_BELOW_PCT of the GPU's block slots (grid and block against
   the SM count and what one SM holds: csrc/analysis/ls_kernels.h); or, with no
   launch shapes, when the counters show it: SM active below
   UNDER_FILLED_SM_BELOW_PCT while the GPU was busy and warp occupancy
   below UNDER_FILLED_WARPS_BELOW_PCT.  A memory- or compute-bound loop
   keeps its verdict: it does fill what it uses.

0. Before rules 1-4, a profile that recorded a CUDA-graph capture
   (_projections.capturing: more than CAPTURE_SHARE of its launch calls ran
   no GPU op, as launches into a capturing stream do)      -> GRAPH_CAPTURE
   Its time line is the capture's few warm-up ops, not a loop's, so rules
   1-4 would judge set-up work (SGLang's decode-graph capture: 2 kernels of
   11 us in 34 ms read UNDER_FILLED).  Launch calls are counted for the
   whole profile only (csrc/analysis/ls_readiness.h), so the steps follow
   the profile (capture_verdicts): each step with GPU work reads
   GRAPH_CAPTURE, a step without reads NO_GPU_WORK as before.  A capture
   step among enough normal steps to keep the profile under CAPTURE_SHARE
   is not told apart: its steps keep rules 1-4.

The action of CPU_LAUNCH_BOUND turns graph-aware when the steps already
replay CUDA graphs (cudaGraphLaunch in the step): capturing again would not
help; the host time between replays is the cost (given in us), so cut the
host work between replays and replay more steps per graph.

BALANCED says which figures were checked and why none explains the time.
summary["diagnosis"]["projections"] (see _projections) says what removing
each cause would win.  Each verdict's name, action, colour and docs row are
declared once, in _verdicts.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ._finite import finite
from ._names import clip, kernel_name
from ._projections import CAPTURE_SHARE, capturing, project
from ._ranks import backlog_text, balance_text
from ._syncs import format_site
from ._verdicts import VERDICTS

BUSY_BELOW_PCT = 50.0
CAUSE_SHARE = 0.5
MEMORY_DRAM_FROM_PCT = 70.0
COMPUTE_SM_ABOVE_PCT = 60.0
COMPUTE_DRAM_BELOW_PCT = 50.0
LAUNCH_SM_BELOW_PCT = 30.0
LAUNCH_DRAM_BELOW_PCT = 50.0
# Rule 4.  Half the GPU's block slots: a loop whose kernels could occupy at
# most half of the GPU at once leaves half of it idle however long they run
# (the demo loop replayed from a graph: 50-token kernels on 132 SMs).
UNDER_FILLED_BELOW_PCT = 50.0
# Launch shapes must cover most of the kernel time for their fill to speak
# for the loop (a trace without them, or with a few unknown kernels).
FILL_KNOWN_MIN_PCT = 50.0
# Without launch shapes: SMs idle for 40% of the busy time while the active
# ones run few warps.  A big GEMM has low warp occupancy too (registers) but
# keeps every SM active; a memory-bound copy keeps SMs active at 100%
# (GPU_FACTS), so both stay clear of this.
UNDER_FILLED_SM_BELOW_PCT = 60.0
UNDER_FILLED_WARPS_BELOW_PCT = 25.0
FILL_KERNELS_NAMED = 3  # the kernels named in UNDER_FILLED's reasons
# CPU_LAUNCH_BOUND names a launch-free host range (data loading) instead of
# a CUDA graph when at least this share of the late-launch idle lies in it.
HOST_RANGE_SHARE = 0.5

def under_filled(fill_pct: float | None, fill_known_pct: float | None,
                 sm_busy: float | None = None, warps_busy: float | None = None) -> bool:
    """Rule 4: launch shapes, else counters, say the kernels leave the GPU
    mostly empty."""
    if fill_pct is not None and fill_known_pct is not None and \
            fill_known_pct >= FILL_KNOWN_MIN_PCT:
        return fill_pct < UNDER_FILLED_BELOW_PCT
    return (sm_busy is not None and warps_busy is not None
            and sm_busy < UNDER_FILLED_SM_BELOW_PCT and warps_busy < UNDER_FILLED_WARPS_BELOW_PCT)


def _counter_verdict(sm_busy: float | None, dram_busy: float | None) -> str | None:
    """Rule 2, on figures over GPU-busy time; None without counters."""
    if sm_busy is None or dram_busy is None:
        return None
    if dram_busy >= MEMORY_DRAM_FROM_PCT:
        return "MEMORY_BOUND"
    if sm_busy > COMPUTE_SM_ABOVE_PCT and dram_busy < COMPUTE_DRAM_BELOW_PCT:
        return "COMPUTE_BOUND"
    return "BALANCED"


def traced_verdicts(kernels: Sequence[int | None], memcpys: Sequence[int | None],
                    busy_pct: Sequence[float | None], idle_ms: Sequence[float],
                    sync_idle_ms: Sequence[float], host_idle_ms: Sequence[float],
                    sm_busy: Sequence[float | None], dram_busy: Sequence[float | None],
                    fill_pct: Sequence[float | None], fill_known_pct: Sequence[float | None],
                    warps_busy: Sequence[float | None]) -> list[str]:
    """Rules 1-4 of traced time lines, one verdict per item of the columns:
    the loop's (diagnose: columns of one), each step's (diagnose_step; the
    summary passes its step columns, so a million steps make one call).
    No op (kernels and memcpys both 0) or no busy share: NO_GPU_WORK."""
    out: list[str] = []
    append = out.append
    for (ops, copies, busy, idle_ms_, sync_idle, host_idle, sm, dram, fill, known,
         warps) in zip(kernels, memcpys, busy_pct, idle_ms, sync_idle_ms, host_idle_ms,
                       sm_busy, dram_busy, fill_pct, fill_known_pct, warps_busy):
        if (not ops and not copies) or busy is None:
            append("NO_GPU_WORK")
        elif busy < BUSY_BELOW_PCT and idle_ms_ > 0:
            if sync_idle >= CAUSE_SHARE * idle_ms_:
                append("SYNC_BOUND")
            elif host_idle >= CAUSE_SHARE * idle_ms_:
                append("CPU_LAUNCH_BOUND")
            else:
                append("BALANCED")
        else:
            verdict = _counter_verdict(sm, dram) or "GPU_BOUND"
            if verdict in ("BALANCED", "GPU_BOUND") and under_filled(fill, known, sm, warps):
                verdict = "UNDER_FILLED"
            append(verdict)
    return out


def capture_verdicts(loop: dict[str, Any] | None, verdicts: list[str]) -> list[str]:
    """Rule 0 over the steps' verdicts (rules 1-4, in order): in a profile
    that recorded a CUDA-graph capture, GRAPH_CAPTURE for each step with GPU
    work; the verdicts as they are otherwise (and with no loop)."""
    if not loop or capturing(loop) is None:
        return verdicts
    return ["NO_GPU_WORK" if v == "NO_GPU_WORK" else "GRAPH_CAPTURE" for v in verdicts]


def _counters_only_verdict(gr_pct: float | None, sm_busy: float | None,
                           dram_busy: float | None, sync_share: float | None) -> str:
    """Rules 1-2 without a trace: busy from GR active, sync share from the
    host's blocked time (None when syncs were not watched)."""
    if gr_pct is None:
        return "NO_GPU_WORK"
    if gr_pct < BUSY_BELOW_PCT:
        if sync_share is not None and sync_share >= CAUSE_SHARE:
            return "SYNC_BOUND"
        return "CPU_LAUNCH_BOUND"
    return _counter_verdict(sm_busy, dram_busy) or "GPU_BOUND"


def diagnose_step(step: dict[str, Any]) -> str:
    if step["gaps"] is None:  # counters-only mode
        if not step.get("samples"):
            return "NO_GPU_WORK"
        share = None if step["syncs"] is None else (1.0 if step["syncs"] else 0.0)
        return _counters_only_verdict(step["gr_active_pct"], step["sm_active_busy_pct"],
                                      step["dram_busy_pct"], share)
    gaps = step["gaps"]
    by_cause = gaps["idle_by_cause_ms"]
    other_ops = (step["memcpys"] or 0) + (step.get("graph_replays") or 0)
    return traced_verdicts([step["kernels"]], [other_ops], [gaps["busy_pct"]],
                           [gaps["idle_ms"]], [by_cause["sync"]], [by_cause["host"]],
                           [step.get("sm_active_busy_pct")], [step.get("dram_busy_pct")],
                           [step.get("fill_pct")], [step.get("fill_known_pct")],
                           [step.get("warp_occupancy_busy_pct")])[0]


def _counter_reasons(sm: dict[str, Any] | None, dram: dict[str, Any] | None) -> list[str]:
    if sm is None or dram is None:
        return []
    return [
        f"SM active {_f(sm['active_pct'])}% over the loop, {_f(sm['active_busy_pct'])}% while "
        f"the GPU was busy; DRAM throughput {_f(dram['throughput_pct'])}% of peak over the "
        f"loop, {_f(dram['throughput_busy_pct'])}% while busy (read {_f(dram['read_gbps'])} "
        f"GB/s, write {_f(dram['write_gbps'])} GB/s; {sm['samples']} samples)"
    ]


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _counter_evidence(sm: dict[str, Any] | None, dram: dict[str, Any] | None) -> dict[str, Any]:
    if sm is None or dram is None:
        return {"sm_active_pct": None, "sm_active_busy_pct": None, "dram_pct": None,
                "dram_busy_pct": None, "gr_active_pct": None}
    return {
        "sm_active_pct": sm["active_pct"],
        "sm_active_busy_pct": sm.get("active_busy_pct"),
        "dram_pct": dram["throughput_pct"],
        "dram_busy_pct": dram.get("throughput_busy_pct"),
        "gr_active_pct": sm.get("gr_active_pct"),
        "thresholds_pct": {
            "memory_dram_from": MEMORY_DRAM_FROM_PCT,
            "compute_sm_above": COMPUTE_SM_ABOVE_PCT,
            "compute_dram_below": COMPUTE_DRAM_BELOW_PCT,
            "busy_below": BUSY_BELOW_PCT,
        },
    }


def _sync_lines(syncs: dict[str, Any] | None, reasons: list[str], actions: list[str]) -> None:
    if not syncs or not syncs["count"]:
        return
    top = syncs["sites"][0]
    reasons.append(
        f"{syncs['count']} host-device syncs blocked the host for {syncs['blocked_ms']:.3f} ms "
        f"({syncs['in_steps']} inside steps); most costly: {format_site(top)}")
    removable = [s for s in syncs["sites"] if s["steps"]][:3]
    if removable:
        line = "remove these syncs from the loop: " + "; ".join(format_site(s) for s in removable)
        actions.append(line)


def _compute_action(sm: dict[str, Any] | None) -> str:
    """COMPUTE_BOUND's action: tensor cores at lower precision only where
    the counters say they idle; where tensor activity was not measured, it
    says so and why instead of advising a precision already in use."""
    tensor = (sm or {}).get("tensor_active_busy_pct")
    if tensor is None:
        return (f"the SMs are busy (SM active {_f((sm or {}).get('active_busy_pct'))}% while the "
                "GPU works), but tensor-core activity is unknown: no tensor-pipe counter "
                "(sm__pipe_tensor_cycles_active) was sampled in this profile, so whether the "
                "kernels already use tensor cores (fp16/bf16 GEMMs do) is not measured; profile "
                "the longest kernels with ncu before changing precision, avoid recomputation, "
                "or do fewer steps")
    return (f"tensor cores active {_f(tensor)}% while the GPU works: "
            + VERDICTS["COMPUTE_BOUND"].action)


def _action(verdict: str, dram: dict[str, Any] | None, sm: dict[str, Any] | None = None) -> str:
    """The verdict's action (graph replays and kernel fill refine it in diagnose)."""
    if verdict == "COMPUTE_BOUND":
        return _compute_action(sm)
    if verdict == "MEMORY_BOUND" and dram is not None:
        return (f"DRAM runs at {_f(dram['throughput_busy_pct'])}% of peak while the GPU works: "
                + VERDICTS[verdict].action)
    return VERDICTS[verdict].action


def _diagnose_counters_only(summary: dict[str, Any]) -> dict[str, Any]:
    sm, dram, syncs = summary["sm"], summary["dram"], summary.get("syncs")
    gr = sm.get("gr_active_pct")
    span_ms = summary["host_ms"]
    idle_ms = span_ms * (1 - gr / 100.0) if gr is not None else None
    share = None
    if syncs is not None:
        share = (syncs["blocked_ms"] / idle_ms) if idle_ms else 0.0
    verdict = _counters_only_verdict(gr, sm.get("active_busy_pct"), dram.get("throughput_busy_pct"), share)
    reasons = [
        f"counters only (no kernel trace): GPU busy {_f(gr)}% of the loop by GR active"
    ] + _counter_reasons(sm, dram)
    if verdict in ("CPU_LAUNCH_BOUND", "SYNC_BOUND"):
        launch_like = (sm["active_pct"] is not None and dram["throughput_pct"] is not None
                       and sm["active_pct"] < LAUNCH_SM_BELOW_PCT
                       and dram["throughput_pct"] < LAUNCH_DRAM_BELOW_PCT)
        if launch_like:
            reasons.append(f"SM active < {LAUNCH_SM_BELOW_PCT:g}% and DRAM < "
                           f"{LAUNCH_DRAM_BELOW_PCT:g}% over the loop: the GPU mostly waits")
        if share is not None:
            reasons.append(f"host blocked in syncs for {round(100 * share, 1)}% of the GPU's "
                           "idle time")
    steps = [s for s in summary["steps"] if s["verdict"] is not None]
    if steps:
        flagged = sum(1 for s in steps if s["verdict"] == verdict)
        reasons.append(f"{flagged} of {len(steps)} steps read {verdict}")
    actions = [_action(verdict, dram, sm)]
    _sync_lines(syncs, reasons, actions)
    evidence = {"busy_pct": gr, "busy_from": "gr_active", "idle_ms": _r(idle_ms),
                "sync_share_of_idle_pct": None if share is None else round(100 * share, 1),
                "syncs": syncs["count"] if syncs else None,
                "sync_blocked_ms": syncs["blocked_ms"] if syncs else None}
    evidence.update(_counter_evidence(sm, dram))
    return {"verdict": verdict, "reasons": reasons, "actions": actions, "evidence": evidence}


def _r(value: float | None) -> float | None:
    value = finite(value)
    return None if value is None else round(value, 3)


def diagnose(summary: dict[str, Any], step_verdicts: list[str] | None = None) -> dict[str, Any]:
    """summary["diagnosis"].  step_verdicts: the verdict of every step, in
    order, from whoever just made them with every step traced (a million
    steps are then not read again); None: read from the steps."""
    d = _diagnose(summary, step_verdicts)
    d["projections"] = project(summary, d["verdict"], step_verdicts)
    return d


def _diagnose(summary: dict[str, Any], step_verdicts: list[str] | None = None) -> dict[str, Any]:
    gaps, gpu = summary["gaps"], summary["gpu"]
    sm, dram = summary.get("sm"), summary.get("dram")
    if gpu is None and sm is not None:
        return _diagnose_counters_only(summary)
    if gpu is None:
        return {
            "verdict": "UNKNOWN",
            "reasons": [f"no GPU timeline: {summary['gpu_error']}"],
            "actions": [VERDICTS["UNKNOWN"].action],
            "evidence": {},
        }
    replays = gpu.get("graph_replays") or 0  # whole CUDA-graph replays: GPU work, no kernel
    ops = gpu["kernels"] + gpu["memcpys"] + gpu["memsets"] + replays
    if ops == 0:
        return {"verdict": "NO_GPU_WORK", "reasons": ["no GPU operation was recorded"],
                "actions": [VERDICTS["NO_GPU_WORK"].action], "evidence": {}}
    capture = capturing(summary.get("loop") or {})
    if capture is not None:
        return _diagnose_capture(summary, capture, ops, step_verdicts)
    busy = gaps["busy_pct"]
    sm_busy = sm.get("active_busy_pct") if sm else None
    dram_busy = dram.get("throughput_busy_pct") if dram else None
    warps_busy = sm.get("warp_occupancy_busy_pct") if sm else None
    by_cause = gaps["idle_by_cause_ms"]
    verdict = traced_verdicts([gpu["kernels"]], [gpu["memcpys"] + gpu["memsets"] + replays],
                              [busy], [gaps["idle_ms"]], [by_cause["sync"]], [by_cause["host"]],
                              [sm_busy], [dram_busy], [gpu.get("fill_pct")],
                              [gpu.get("fill_known_pct")], [warps_busy])[0]
    idle = gaps["idle_ms"]
    share = {k: (round(100 * v / idle, 1) if idle else 0.0) for k, v in gaps["idle_by_cause_ms"].items()}
    reasons = [
        f"GPU busy {_f(busy)}% of its time line ({gaps['busy_ms']:.3f} ms busy, "
        f"{idle:.3f} ms idle in {gaps['count']} gaps)",
        f"idle time by cause: host launch late {share['host']}%, host sync {share['sync']}%, "
        f"other {share['other']}%" + _idle_detail(summary, gaps),
        f"gaps: {gaps['severe']} severe (> {gaps['thresholds_us'][1]:g} us), {gaps['warning']} "
        f"warning, {gaps['normal']} normal" + (
            f"; mean {gaps['mean_us']:.2f} us, p99 {gaps['p99_us']:.2f} us, "
            f"max {gaps['max_us']:.2f} us" if gaps["count"] else ""),
    ]
    reasons += _counter_reasons(sm, dram)
    reasons += communication_reasons(summary)
    if sm is None and verdict == "GPU_BOUND" and summary.get("metrics_error"):
        reasons.append(f"no SM/DRAM counters to split GPU_BOUND: {summary['metrics_error']}")
    if verdict == "UNDER_FILLED":
        reasons += _fill_reasons(summary)
    if verdict == "BALANCED":
        reasons.append(_balanced_reason(busy, share, sm_busy, dram_busy, gpu))
    reasons += _step_reasons(summary, verdict, step_verdicts,
                             lambda: _why(verdict, busy, idle, by_cause))
    graph_advice = _graph_advice(summary) if verdict == "CPU_LAUNCH_BOUND" else None
    host_work = _host_range_advice(summary, verdict, by_cause)
    actions = [host_work or graph_advice or _action(verdict, dram, sm)]
    if graph_advice:
        reasons.append(_replay_reason(summary))
    if verdict == "UNDER_FILLED" and gpu.get("fill_pct") is not None:
        actions[0] = (f"the kernels could fill {gpu['fill_pct']:.0f}% of the GPU at most: "
                      + VERDICTS[verdict].action)
    syncs = summary.get("syncs")
    _sync_lines(syncs, reasons, actions)
    evidence = {
        "busy_pct": busy,
        "busy_from": "ops",
        "idle_ms": idle,
        "idle_share_pct": share,
        "severe_gaps": gaps["severe"],
        "mean_gap_us": gaps["mean_us"],
        "kernels": gpu["kernels"],
        "syncs": syncs["count"] if syncs else None,
        "sync_blocked_ms": syncs["blocked_ms"] if syncs else None,
        "fill_pct": gpu.get("fill_pct"),
        "fill_known_pct": gpu.get("fill_known_pct"),
        "warp_occupancy_busy_pct": warps_busy,
        "graph_replays": (summary.get("graphs") or {}).get("replays"),
    }
    evidence.update(_counter_evidence(sm, dram))
    return {"verdict": verdict, "reasons": reasons, "actions": actions, "evidence": evidence}


def _diagnose_capture(summary: dict[str, Any], capture: tuple[int, int], ops: int,
                      step_verdicts: list[str] | None) -> dict[str, Any]:
    """Rule 0's diagnosis: the launch calls that ran nothing and the `ops`
    the GPU did run (kernels, copies, sets, whole replays), in place of
    rules 1-4's figures; the syncs are reasons, not actions (a capture's
    syncs and frees are its set-up's)."""
    idle_launches, calls = capture
    gaps, gpu, loop = summary["gaps"], summary["gpu"], summary["loop"]
    said = (f"{idle_launches} of {calls} launch calls ran nothing on the GPU (more than "
            f"{100 * CAPTURE_SHARE:g}%): launches into a capturing stream record a CUDA graph "
            "and run nothing")
    reasons = [
        said,
        f"the GPU ran {ops} {'op' if ops == 1 else 'ops'} for {gaps['busy_ms']:.3f} ms in "
        f"{loop['ms']:.3f} ms of the {'steps' if loop.get('from') == 'steps' else 'profile'}: "
        "set-up work around the capture, not a loop's",
    ]
    reasons += _step_reasons(summary, "GRAPH_CAPTURE", step_verdicts,
                             lambda: f"{idle_launches} of {calls} launch calls ran nothing")
    syncs = summary.get("syncs")
    _sync_lines(syncs, reasons, [])
    evidence = {
        "busy_pct": gaps["busy_pct"],
        "busy_from": "ops",
        "busy_ms": gaps["busy_ms"],
        "gpu_ops": ops,
        "kernels": gpu["kernels"],
        "idle_launches": idle_launches,
        "launch_calls": calls,
        "capture_share_above_pct": 100 * CAPTURE_SHARE,
        "syncs": syncs["count"] if syncs else None,
        "sync_blocked_ms": syncs["blocked_ms"] if syncs else None,
    }
    action = f"the capture took {loop['ms']:.3f} ms once: " + VERDICTS["GRAPH_CAPTURE"].action
    return {"verdict": "GRAPH_CAPTURE", "reasons": reasons, "actions": [action],
            "evidence": evidence}


def _top_host_range(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The launch-free host range holding the most of the loop's idle time
    (summary["loop"]["host_ranges"]), or None."""
    named = [r for r in (summary.get("loop") or {}).get("host_ranges") or [] if r["idle_ms"] > 0]
    return named[0] if named else None


def _idle_detail(summary: dict[str, Any], gaps: dict[str, Any]) -> str:
    """What the idle split leaves unsaid: how much of the gaps a sync
    overlapped the host spent waiting in it (the rest, its own work, is
    counted as host time: what removing the sync would leave), and the
    launch-free host range the idle lay in."""
    idle = gaps["idle_ms"]
    if not idle:
        return ""
    out = ""
    overlapped = gaps.get("idle_sync_overlapped_ms")
    waited = gaps["idle_by_cause_ms"]["sync"]
    if overlapped is not None and overlapped - waited > 1e-6:
        out += (f"; gaps a sync overlapped hold {100 * overlapped / idle:.1f}% of the idle, the "
                f"host waited in the sync for {100 * waited / idle:.1f}% and spent the rest on "
                "its own work before its next launch")
    top = _top_host_range(summary)
    if top is not None:
        out += (f"; {100 * top['idle_ms'] / idle:.1f}% of the idle lies inside "
                f"{clip(top['name'], 60)}, host work that launches nothing "
                f"({top['host_ms']:.3f} ms of host time)")
    return out


def _host_range_advice(summary: dict[str, Any], verdict: str,
                       by_cause: dict[str, float]) -> str | None:
    """CPU_LAUNCH_BOUND's action when the host was late because it was busy
    in a named range that launches nothing (data loading, a checkpoint):
    at least HOST_RANGE_SHARE of the late-launch idle lies inside it, so a
    CUDA graph would not help; making that work faster or overlapping it
    would."""
    top = _top_host_range(summary)
    host = by_cause.get("host") or 0.0
    if verdict != "CPU_LAUNCH_BOUND" or top is None or not host or \
            top["idle_ms"] < HOST_RANGE_SHARE * host:
        return None
    return (f"the host is busy in {clip(top['name'], 60)} while the GPU waits "
            f"({top['idle_ms']:.3f} ms of the {host:.3f} ms the GPU waited for a late launch; "
            f"{top['host_ms']:.3f} ms of host time in all): make that work faster or run it "
            "alongside the GPU (DataLoader num_workers, prefetching, pinned memory, a "
            "background thread); a CUDA graph would not remove it")


def _why(verdict: str, busy: float | None, idle_ms: float, by_cause: dict[str, float]) -> str:
    """Which of rules 1-4 gave a traced verdict, in its own figures."""
    if verdict == "NO_GPU_WORK" or busy is None:
        return "no GPU work"
    if busy < BUSY_BELOW_PCT and idle_ms > 0:
        sync, host = (100 * by_cause[k] / idle_ms for k in ("sync", "host"))
        cause = {"SYNC_BOUND": f"{sync:.0f}% of its idle time in gaps a sync overlapped",
                 "CPU_LAUNCH_BOUND": f"{host:.0f}% of its idle time waiting for a late launch"
                 }.get(verdict, f"idle time split: sync {sync:.0f}%, late launches {host:.0f}%")
        return f"GPU busy {busy:.1f}% (< {BUSY_BELOW_PCT:g}%), {cause}"
    judged = {"UNDER_FILLED": "the fill of its kernels", "GPU_BOUND": "busy alone (no counters)"
              }.get(verdict, "its SM/DRAM counters")
    return f"GPU busy {busy:.1f}% (>= {BUSY_BELOW_PCT:g}%), so judged by {judged}"


def _step_reasons(summary: dict[str, Any], verdict: str, step_verdicts: list[str] | None,
                  loop_why: Callable[[], str]) -> list[str]:
    """How many steps read the loop's verdict, and why the others read
    theirs (_disagreements; loop_why: the loop's rule in its figures);
    nothing without traced steps.  step_verdicts: see diagnose()."""
    verdicts = (step_verdicts if step_verdicts is not None else
                [s["verdict"] for s in summary["steps"] if s["gaps"] is not None])
    counted: list[str] = []
    if verdicts:
        counted.append(f"{verdicts.count(verdict)} of {len(verdicts)} steps read {verdict}")
        counted += _disagreements(summary, verdict, verdicts, loop_why())
    return counted


def _disagreements(summary: dict[str, Any], verdict: str, verdicts: list[str],
                   loop_why: str) -> list[str]:
    """Why steps read another verdict than the loop: for each other
    verdict (the most common first, at most 2), how many steps read it and
    the rule that gave it in the first such step's figures, beside the
    loop's (a loop busy 57% whose steps are busy 49% reads otherwise than
    they do).  One step is read per verdict, whatever the number of steps."""
    others = sorted({v for v in verdicts if v != verdict},
                    key=lambda v: (-verdicts.count(v), v))[:2]
    lines = []
    steps = [s for s in summary["steps"] if s["gaps"] is not None] \
        if len(summary["steps"]) != len(verdicts) else summary["steps"]
    for other in others:
        step = steps[verdicts.index(other)]
        g = step["gaps"]
        if g is None:  # no time line of its own to explain it by
            continue
        why = _why(other, g.get("busy_pct"), g["idle_ms"], g["idle_by_cause_ms"])
        lines.append(f"{verdicts.count(other)} of {len(verdicts)} steps read {other} (the first, "
                     f"step {step['index']} {step['name']}: {why}); the loop reads {verdict}: "
                     f"over its whole time line {loop_why}")
    return lines


def _shape(k: dict[str, Any]) -> str:
    if k.get("grid") is None:
        return "launch shape unknown"
    grid = "x".join(map(str, k["grid"]))
    block = "x".join(map(str, k["block"]))
    fill = f": fills {k['fill_pct']:.0f}% of the GPU" if k.get("fill_pct") is not None else ""
    return f"grid {grid} x block {block}{fill}"


def _fill_reasons(summary: dict[str, Any]) -> list[str]:
    """UNDER_FILLED's evidence: the fill of the loop's kernels and the
    kernels that take the most time, with their launch shapes."""
    gpu, sm = summary["gpu"], summary.get("sm") or {}
    out = []
    if gpu.get("fill_pct") is not None:
        devices = [d for d in gpu.get("devices", []) if d.get("sm_count")]
        size = (f" ({devices[0]['sm_count']} SMs x {devices[0]['max_threads_per_sm']} threads)"
                if devices else "")
        out.append(f"the kernels' grids could fill {gpu['fill_pct']:.1f}% of the GPU{size} "
                   f"on average over their time (< {UNDER_FILLED_BELOW_PCT:g}%; launch shapes "
                   f"known for {_f(gpu.get('fill_known_pct'))}% of the kernel time)")
    if sm.get("active_busy_pct") is not None:
        out.append(f"SM active {_f(sm['active_busy_pct'])}% while the GPU was busy, warp "
                   f"occupancy {_f(sm.get('warp_occupancy_busy_pct'))}%: SMs stay idle while "
                   "kernels run")
    top = (summary.get("top_kernels") or [])[:FILL_KERNELS_NAMED]
    if top:
        out.append("kernels that take the most time: " + "; ".join(
            f"{clip(kernel_name(k['name']) or '?', 50)} {k['total_ms']:.3f} ms x{k['count']} "
            f"({_shape(k)})" for k in top))
    return out


def _balanced_reason(busy: float | None, share: dict[str, float], sm_busy: float | None,
                     dram_busy: float | None, gpu: dict[str, Any]) -> str:
    """Why BALANCED: every figure that could have explained the time, and
    why none did."""
    checks = []
    if busy is not None and busy < BUSY_BELOW_PCT:
        checks.append(f"the GPU idles {100 - busy:.1f}% of the time but no cause takes half of "
                      f"it (host launch late {share['host']}%, syncs {share['sync']}%)")
    else:
        checks.append(f"GPU busy {_f(busy)}%")
        if sm_busy is not None and dram_busy is not None:
            checks.append(f"SM active {_f(sm_busy)}% (compute bound above "
                          f"{COMPUTE_SM_ABOVE_PCT:g}%), DRAM {_f(dram_busy)}% (memory bound from "
                          f"{MEMORY_DRAM_FROM_PCT:g}%)")
    if gpu.get("fill_pct") is not None:
        checks.append(f"kernels fill {gpu['fill_pct']:.0f}% of the GPU (under-filled below "
                      f"{UNDER_FILLED_BELOW_PCT:g}%)")
    elif busy is None or busy >= BUSY_BELOW_PCT:
        checks.append("kernel launch shapes unknown")
    return "no single figure explains the time: " + "; ".join(checks)


def _graph_advice(summary: dict[str, Any]) -> str | None:
    """CPU_LAUNCH_BOUND's action when the loop already replays CUDA graphs
    (at least half of its steps, or any replay without steps)."""
    graphs = summary.get("graphs")
    if not graphs:
        return None
    steps = [s for s in summary["steps"] if s.get("graph_readiness") is not None]
    if steps and 2 * graphs["steps_replaying"] < len(steps):
        return None
    host = graphs["host_between_replays_us"]
    gpu = graphs["gpu_per_replay_us"]
    cost = (f"the host takes {host:.1f} us from one replay's launch to the next"
            if host is not None else "the host time between replays is the cost")
    if gpu is not None:
        cost += f" while a replay keeps the GPU busy {gpu:.1f} us"
    return (f"the steps already replay CUDA graphs ({cost}): capturing again will not help; cut "
            "the host work between replays (input copies, Python bookkeeping, logging; move it "
            "into the graph or out of the loop) and replay more steps per graph (capture "
            "several steps in one graph)")


def _replay_reason(summary: dict[str, Any]) -> str:
    g = summary["graphs"]
    per = f", {g['replays_per_step']:g} a step" if g.get("replays_per_step") else ""
    host = (f"; host time between replays {g['host_between_replays_us']:.1f} us on average"
            if g.get("host_between_replays_us") is not None else "")
    return (f"{g['replays']} CUDA-graph replays in {g['steps_replaying']} steps{per}{host}")


# -- torch.distributed: collectives and the ranks (issue 16) ------------------
COMM_NOTE_PCT = 20.0  # collective share of the GPU's busy time worth a reason


def communication_reasons(summary: dict[str, Any]) -> list[str]:
    """One reason when collectives take a large share of the busy time (the
    communication split of summary["gpu"]; nothing without it)."""
    gpu, gaps = summary.get("gpu") or {}, summary.get("gaps") or {}
    comm, busy = gpu.get("comm_ms"), gpu.get("busy_ms")
    if comm is None or not busy or 100.0 * comm / busy < COMM_NOTE_PCT:
        return []
    line = (f"GPU busy {_f(gaps.get('busy_pct', gpu.get('busy_pct')))}%, of which "
            f"{100.0 * comm / busy:.1f}% in collectives ({comm:.3f} ms; compute "
            f"{_f(gpu.get('compute_ms'))} ms)")
    if summary.get("skew") is None:
        line += (": time in a collective includes waiting for the slowest rank; rank 0 of a "
                 "gathered profile names it")
    return [line]


def _straggler_action(straggler: dict[str, Any]) -> str:
    rank, cause = straggler["rank"], straggler["cause"]
    excess = (straggler["excess_ms"] or {}).get(cause) if cause else None
    if cause == "host late":
        return (f"make rank {rank}'s host launch sooner: its GPU waits {excess:.3f} ms per step "
                "more than the others' for its launches (host work in the step: data loading, "
                "logging, Python overhead; a CUDA graph)")
    if cause == "sync":
        return (f"remove the host-device syncs on rank {rank}: its GPU idles {excess:.3f} ms per "
                "step more than the others' while its host waits (its report lists the sites)")
    if cause == "compute":
        return (f"balance the work: rank {rank} computes {excess:.3f} ms per step more than the "
                "others (uneven batches or sequence lengths, or a slower GPU)")
    return (f"rank {rank} arrives late with no cause in its profiled steps: look at what it "
            "does outside them (data loading, checkpoints) or at its GPU and links")


def diagnose_ranks(summary: dict[str, Any]) -> dict[str, Any]:
    """Rank 0's diagnosis once the ranks are gathered: COMMUNICATION_WAIT,
    naming the rank it waits for, when rank 0 spent at least
    _ranks.WAIT_SHARE_VERDICT of its steps' GPU busy time waiting in
    collectives for the straggler; otherwise its own verdict, with the
    straggler named first in the reasons.  (The straggler's full sentence
    is the report's STRAGGLER line, from summary["skew"]["straggler"].)"""
    d = summary["diagnosis"]
    skew = summary.get("skew")
    straggler = skew["straggler"] if skew else None
    if skew is not None and straggler is None and skew.get("balance"):
        return dict(d, reasons=[balance_text(skew["balance"])] + list(d["reasons"]))
    if skew is not None and straggler is None and skew.get("backlog"):
        return dict(d, reasons=[backlog_text(skew["backlog"])] + list(d["reasons"]))
    if skew is None or straggler is None:
        return d
    me = skew["per_rank"][0] or {}
    rank, cause = straggler["rank"], straggler["cause"] or "no cause in its profiled steps"
    reasons, actions = list(d["reasons"]), list(d["actions"])
    evidence = dict(d.get("evidence") or {})
    verdict = d["verdict"]
    waited = (f"rank 0 waited {_f3(me.get('wait_ms'))} ms in collectives "
              f"({_f(me.get('wait_pct_of_gpu_busy'))}% of its GPU busy time in steps)")
    if me.get("waits_for") is not None:
        verdict = "COMMUNICATION_WAIT"
        reasons.insert(0, f"{waited} for rank {rank}, the straggler ({cause}); before the ranks "
                          f"were compared it read {d['verdict']}")
        actions.insert(0, _straggler_action(straggler))
        evidence.update(own_verdict=d["verdict"], waits_for=rank, wait_ms=me["wait_ms"],
                        wait_pct_of_gpu_busy=me["wait_pct_of_gpu_busy"])
    elif rank == 0:
        reasons.insert(0, f"this rank is the straggler ({cause}): the others waited for it in "
                          f"{straggler['last_in_steps']} of {straggler['steps_compared']} steps, "
                          f"{straggler['late_ms']:.3f} ms on average")
        actions.insert(0, _straggler_action(straggler))
    else:
        reasons.insert(0, f"rank {rank} is the straggler ({cause}); {waited}, too little to "
                          "read COMMUNICATION_WAIT")
    return dict(d, verdict=verdict, reasons=reasons, actions=actions, evidence=evidence)


def _f3(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
