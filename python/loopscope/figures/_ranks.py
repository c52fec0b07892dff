"""Cross-rank figures of a torch.distributed job, computed on rank 0 from
every rank's compact summary and the clock exchanges rank 0 ran with each
rank.  Plain Python over plain data (no torch, no store): _distributed.py
gathers the inputs, the report and the HTML only read the result.

Compact summary (one per rank, a few KB): the rank, its host and devices,
its verdict and own dominating cause, GPU busy / collective / compute
time, and per step: host start and end on the rank's profile clock,
host_ms, gpu_ms, comm_ms, compute_ms, syncs, GPU idle time the host caused
(launch late) or a host sync overlapped, verdict.  Plus the rank's two
local clock pairs (profile clock, exchange clock) read right after the
profile started and right before it stopped, and its failed self-checks
(failed_checks: rank 0's max_rank_skew_us budget refuses on them).

Clocks.  Each rank's step times are on its own profile clock (CUPTI's
timestamp while tracing, CLOCK_MONOTONIC otherwise).  They are brought to
rank 0's profile clock in three linear steps: the rank's own pairs map its
profile clock to its exchange clock (CLOCK_MONOTONIC); the exchanges with
rank 0 give the offset between the two exchange clocks; rank 0's pairs map
back to rank 0's profile clock.  An exchange round is timed by rank 0: it
reads a, tells the rank to read its clock (c), and reads b when the answer
is back; the rank's reading happened between a and b on rank 0's clock, so
offset = c - (a + b) / 2 within +-(b - a) / 2.  Of several rounds the one
with the shortest round trip counts.  With an exchange at the start and one
at the end the offset is interpolated between them (drift); with one of
them only, it is taken as constant.  A skew between two ranks is known to
within the sum of their residual errors: `skew["clock"]["error_us"]` is the
largest such sum, and skews at or below it are shown as such, not as
numbers.

Traces read offline (one per rank, _job.py) have no exchanges: their own
times are compared, then checked against the ends of each step's first
collective kernel, which meet on every rank (done_ns; _end_alignment).

Each step row also holds every rank's host start and end on rank 0's
profile clock (aligned_ns), which the trace export draws as one track per
rank.

Straggler.  When every rank runs the same collectives in a step, the
ranks that arrive early spin inside the collective kernels until the last
one arrives: their collective (comm) time in the step is longer by what
they waited.  Each rank's wait is its comm time beyond the step's smallest
one.  Who arrived last, and how late: from the arrival times when every
rank's step has one (the GPU start of the step's first collective kernel,
on rank 0's clock: the rank whose collective started last arrived last,
its lateness is its start minus the first rank's), else from the comm
times (the smallest arrived last, lateness = the largest wait).  The two
differ by the collective's own work where it is not the same on every
rank; the arrival times also say when each rank's host called the
collective (call_ns), so the report can tell host lateness from launch
lag.  A step counts when its lateness is at least STEP_WAIT_MIN_US and
STEP_WAIT_MIN_PCT of the ranks' median GPU time in the step (jitter grows
with the step); the candidate is the rank that arrived last in the most
counted steps (no other as often), when that is at least half of the steps
compared.

Ranks always arrive in some order, so the candidate is named the
straggler only when it matters: its lateness (mean over the steps it was
last) is beyond ARRIVAL_SPREAD_MS, the spread of arrival order seen with
no straggler (0.33-0.50 ms on H100s, 2 and 4 ranks, issue 26), beyond the
clocks' error when it comes from arrival times, AND the
wait it causes is at least STRAGGLER_MIN_STEP_SHARE of the other ranks'
step time (the median over them of the longer of host and GPU time per
step: a wait of a tenth of the step is worth acting on).  Otherwise skew["balance"]
says the ranks are balanced, with the largest lateness and its share.  Its own cause is
the largest of its excess over the other ranks' median, in the steps it
arrived last: GPU idle waiting for its host's launches ("host late"), GPU
idle while its host was blocked in a sync ("sync"), or non-collective GPU
time ("compute").
Backlog.  Arrival order shows a rank's host lateness only when its GPU
waits for its host.  A rank whose GPU still runs work queued before the
first step shown (torch.profiler's start held another rank ~1 s, 4 x H100,
issue 26: the others' GPUs ran 0.8-1.0 s behind their hosts) reaches each
collective when that queue lets it, whatever its host did in the step.
When the arrival order names nobody but a rank's host called the
collective later into its steps than the others' median by more than
ARRIVAL_SPREAD_MS and STRAGGLER_MIN_STEP_SHARE of their step, while its
GPU ran behind its host by more than that lateness at every compared
step's collective (launch call -> kernel start), and that lead shrank over
the steps by more than the lateness (a queue being used up, not a host
running steadily ahead of a busy GPU, where "balanced" is right): the
straggler is not measured, skew["backlog"] says why with the host figure,
and skew["balance"] is None.
Limits: it needs the collective kernels' times (GPU tracing with NCCL-like
kernels) and their launch calls (a kernel belongs to the step its launch was
called in: a rank whose collectives fall in no step is said not measured);
a step with different collectives on different ranks, or with
communication overlapped with compute on another stream, blurs the rule;
ranks sharing one GPU interleave their kernels, so their comm and compute
times mix; host step times say when each rank's host began and ended a
step, not when its GPU reached the collective (the host may run ahead)."""
from __future__ import annotations

import bisect
import re
import statistics
from typing import Any, Callable, Mapping

COMPACT_VERSION = 1
STEP_WAIT_MIN_US = 100.0      # a step's largest wait below this is noise, not a straggler
STEP_WAIT_MIN_PCT = 2.0       # ... and below this share of the step's median GPU time
STRAGGLER_MIN_SHARE = 0.5     # of the compared steps, to be named
# Arrival order with no straggler spreads up to 0.50 ms (H100s, 2 and 4 ranks, issue 26):
# twice that, still under the smallest delay worth planting (1.5 ms).
ARRIVAL_SPREAD_MS = 1.0
STRAGGLER_MIN_STEP_SHARE = 0.10  # of the other ranks' step time: a wait worth acting on
WAIT_SHARE_VERDICT = 0.10     # of a rank's GPU busy time in its steps: COMMUNICATION_WAIT
CAUSE_MIN_SHARE = 0.25        # of how late the straggler was: smaller excesses explain nothing
CAUSES = ("host late", "sync", "compute")


# -- one rank's compact summary --------------------------------------------
def _ms(ns: float) -> float:
    return round(ns / 1e6, 6)


def _idle(step: dict[str, Any], cause: str) -> float | None:
    gaps = step.get("gaps")
    return None if not gaps else gaps["idle_by_cause_ms"][cause]


def own_cause(summary: dict[str, Any]) -> str | None:
    """The rank's own dominating cause: the largest of GPU idle time the
    host caused (launch late), GPU idle time a host sync overlapped, and
    GPU compute time (non-collective busy time; all busy time when
    collectives are not classified).  None without a GPU time line."""
    gaps, gpu = summary.get("gaps"), summary.get("gpu")
    if not gaps or not gpu:
        return None
    compute = gpu.get("compute_ms")
    if compute is None:
        compute = gpu.get("busy_ms") or 0.0
    idle = gaps["idle_by_cause_ms"]
    figures = {"host late": idle["host"], "sync": idle["sync"], "compute": compute}
    best = max(CAUSES, key=lambda c: figures[c])
    return best if figures[best] > 0 else None


def compact(summary: dict[str, Any], *, rank: int, world_size: int, host: str,
            step_times: dict[int, tuple[int, int]], clock: dict[str, Any] | None,
            raised: str | None = None,
            gpu_ids: Callable[[int], str] | None = None,
            arrivals: Mapping[int, tuple[int, int | None]] | None = None,
            ends: Mapping[int, int] | None = None) -> dict[str, Any]:
    """One rank's compact summary (see the module doc).  step_times: step
    index -> (start_ns, end_ns) on the profile clock; clock: the rank's
    pairs {"profile_ns": [p1, p2], "exchange_ns": [e1, e2]} or None;
    gpu_ids: device ordinal -> an identity of the GPU that is the same in
    every process that uses it (a UUID), to tell ranks sharing a GPU;
    arrivals: step index -> (GPU start of its first collective kernel, the
    host time of that kernel's launch call or None), profile clock
    (collective_arrivals); ends: step index -> that kernel's GPU end
    (collective_ends; offline reads only: done_ns)."""
    arrivals, ends = arrivals or {}, ends or {}
    gpu = summary.get("gpu") or {}
    gaps = summary.get("gaps") or {}
    syncs = summary.get("syncs")
    steps = []
    for s in summary.get("steps") or []:
        start, end = step_times.get(s["index"], (None, None))
        arrive, call = arrivals.get(s["index"], (None, None))
        steps.append({
            "index": s["index"], "name": s["name"], "start_ns": start, "end_ns": end,
            "arrive_ns": arrive, "call_ns": call, "done_ns": ends.get(s["index"]),
            "host_ms": s["host_ms"], "gpu_ms": s.get("gpu_ms"),
            "comm_ms": s.get("comm_ms"), "compute_ms": s.get("compute_ms"),
            "syncs": s.get("syncs"), "idle_host_ms": _idle(s, "host"),
            "idle_sync_ms": _idle(s, "sync"), "verdict": s.get("verdict"),
        })
    return {
        "compact": COMPACT_VERSION,
        "rank": rank, "world_size": world_size, "host": host,
        "devices": [d.get("id") for d in gpu.get("devices") or []] or None,
        "gpus": [(gpu_ids or (lambda d: f"{host}/{d}"))(d.get("id"))
                 for d in gpu.get("devices") or []] or None,
        "device": gpu.get("device"),
        "source": summary.get("source"), "gpu_error": summary.get("gpu_error"),
        "host_ms": summary.get("host_ms"),
        "busy_pct": gaps.get("busy_pct"), "gpu_busy_ms": gpu.get("busy_ms"),
        "comm_ms": gpu.get("comm_ms"), "compute_ms": gpu.get("compute_ms"),
        "comm_pct": gpu.get("comm_pct"),
        "syncs": None if syncs is None else syncs["count"],
        "sync_blocked_ms": None if syncs is None else syncs["blocked_ms"],
        "verdict": (summary.get("diagnosis") or {}).get("verdict"),
        "cause": own_cause(summary),
        "steps": steps,
        "clock": clock,
        "raised": raised,
        # the rank's failed self-checks (summary["checks"]): rank 0's cross-rank
        # budget refuses to pass on figures a rank could not vouch for
        "failed_checks": [{"name": c.get("name"), "detail": c.get("detail")}
                          for c in summary.get("checks") or () if not c.get("ok")],
    }


NO_LAUNCH = 2**64 - 1  # op_column("launch_ns") of an op with no launch call


def _first_collectives(model: Any) -> dict[int, int]:
    """Step index -> the op index of the step's first collective kernel
    (the earliest start; the first of equals), read from the C model's op
    columns (the step and the collective class of each op are its)."""
    comm = model.op_column("comm").tobytes()  # one byte per op: 1 for a collective
    hits = [m.start() for m in re.finditer(b"\x01", comm)]  # found in C: collectives are few
    if not hits:
        return {}
    step, start = model.op_column("step"), model.op_column("start_ns")
    first: dict[int, int] = {}
    for i in hits:
        k = step[i]
        if k < 0 or (k in first and start[first[k]] <= start[i]):
            continue
        first[k] = i
    return first


def collective_arrivals(model: Any) -> dict[int, tuple[int, int | None]]:
    """Step index -> (GPU start of the step's first collective kernel, the
    host time its launch call began or None), on the model's clock: when the
    rank reached the collective."""
    if model is None:
        return {}
    start, launch = model.op_column("start_ns"), model.op_column("launch_ns")
    return {k: (start[i], None if launch[i] == NO_LAUNCH else launch[i])
            for k, i in _first_collectives(model).items()}


def collective_ends(model: Any) -> dict[int, int]:
    """Step index -> the GPU end of the step's first collective kernel (the
    one collective_arrivals takes), on the model's clock: a collective
    completes on every rank at practically one instant (the last rank's
    data reaches all: within 0.7 us on 2 x H100, issue 26), so the ends put
    the ranks' clocks side by side (offline reads, _end_alignment)."""
    if model is None:
        return {}
    end = model.op_column("end_ns")
    return {k: end[i] for k, i in _first_collectives(model).items()}


# -- clocks ----------------------------------------------------------------
def best_round(rounds: list[tuple[int, int, int]] | None) -> dict[str, float] | None:
    """The round with the shortest round trip b - a (the first of equals):
    {offset_ns: c - (a+b)/2 (the rank's exchange clock minus rank 0's),
    error_ns: (b-a)/2, at_ns: (a+b)/2 on rank 0's exchange clock}."""
    if not rounds:
        return None
    a, b, c = min(rounds, key=lambda r: r[1] - r[0])
    return {"offset_ns": c - (a + b) / 2, "error_ns": (b - a) / 2, "at_ns": (a + b) / 2}


# Two clock pairs read closer than this give no slope: each pair's two reads
# are microseconds apart, and over a short profile that jitter would tilt the
# slope and throw off every time outside the profile (a collective's start).
MIN_SLOPE_SPAN_NS = 1_000_000


def _local_map(clock: dict[str, Any] | None):
    """(profile -> exchange, exchange -> profile) of one rank from its two
    clock pairs; the slope is 1 when the pairs cannot give one (less than
    MIN_SLOPE_SPAN_NS apart)."""
    if not clock or not clock.get("profile_ns") or not clock.get("exchange_ns"):
        return None
    (p1, p2), (e1, e2) = clock["profile_ns"], clock["exchange_ns"]
    slope = (e2 - e1) / (p2 - p1) if p2 - p1 >= MIN_SLOPE_SPAN_NS and e2 > e1 else 1.0
    return (lambda p: e1 + (p - p1) * slope), (lambda e: p1 + (e - e1) / slope)


class _Link:
    """Rank r's exchange clock relative to rank 0's, from the start and end
    exchanges (either may be missing)."""

    def __init__(self, start: dict[str, float] | None, end: dict[str, float] | None) -> None:
        self.start, self.end = start, end
        both = [x for x in (start, end) if x is not None]
        self.first = both[0] if both else {"offset_ns": 0.0, "error_ns": 0.0, "at_ns": 0.0}
        self.last = both[-1] if both else self.first
        self.error_ns = max(x["error_ns"] for x in both) if both else None
        self.drift: float | None = None
        if len(both) == 2 and self.last["at_ns"] > self.first["at_ns"]:
            self.drift = ((self.last["offset_ns"] - self.first["offset_ns"])
                          / (self.last["at_ns"] - self.first["at_ns"]))

    def offset_at(self, t0: float) -> float:
        """Offset at time t0 of rank 0's exchange clock."""
        if self.drift is None:
            return self.first["offset_ns"]
        return self.first["offset_ns"] + self.drift * (t0 - self.first["at_ns"])

    def to_rank0(self, e: float) -> float:
        """The rank's exchange time e on rank 0's exchange clock."""
        return e - self.offset_at(e - self.first["offset_ns"])


def _aligners(compacts: list[dict[str, Any] | None], links: dict[int, _Link]
              ) -> dict[int, Callable[[float], float]]:
    """rank -> function taking that rank's profile time to rank 0's profile
    clock, for rank 0 and every rank whose clocks could be linked."""
    out: dict[int, Callable[[float], float]] = {0: lambda p: p}
    maps = {r: _local_map(c.get("clock")) for r, c in enumerate(compacts) if c is not None}
    if maps.get(0) is None:
        return out
    back = maps[0][1]
    for r, link in links.items():
        if maps.get(r) is None or link.error_ns is None:
            continue
        forward = maps[r][0]
        out[r] = (lambda f, lk: lambda p: back(lk.to_rank0(f(p))))(forward, link)
    return out


# -- merge -----------------------------------------------------------------
def _us(ns: float | None) -> float | None:
    return None if ns is None else round(ns / 1e3, 3)


def _argmax(values: Mapping[int, float]) -> int:
    return max(sorted(values), key=lambda r: values[r])


def _inside(t: int | None, clock: dict[str, Any] | None) -> bool:
    """True when a profile time can be aligned: there, and inside the span
    the rank's clock pairs cover (when it has pairs): outside it the
    alignment would be extrapolated."""
    if t is None:
        return False
    pairs = (clock or {}).get("profile_ns")
    return not pairs or pairs[0] <= t <= pairs[1]


def comm_outside_steps(c: dict[str, Any]) -> bool:
    """True when a rank has collective kernel time but none of it in its
    steps (zero comm time in every step, no arrival): its collectives ran
    outside the steps, or their launch calls are not in its trace (a kernel
    is put in the step its launch call was made in; a torch.profiler that
    records no driver-API launches, which NCCL uses, leaves every collective
    out).  Its steps' zero comm times would read as "arrived with the
    others"."""
    steps = c.get("steps") or []
    return bool(c.get("comm_ms")) and any(s.get("comm_ms") is not None for s in steps) \
        and not any(s.get("comm_ms") or s.get("arrive_ns") is not None for s in steps)


def _step_rows(compacts, aligners) -> list[dict[str, Any]]:
    unplaced = {c["rank"] for c in compacts if c is not None and comm_outside_steps(c)}
    by_index: dict[int, dict[int, dict[str, Any]]] = {}
    names: dict[int, str] = {}
    for c in compacts:
        if c is None:
            continue
        for s in c["steps"]:
            by_index.setdefault(s["index"], {})[c["rank"]] = s
            names.setdefault(s["index"], s["name"])
    rows = []
    for index in sorted(by_index):
        present = by_index[index]
        row: dict[str, Any] = {"index": index, "name": names[index], "ranks": sorted(present),
                               "start_skew_us": None, "end_skew_us": None,
                               "last_start_rank": None, "last_end_rank": None,
                               "host_ms": [None] * len(compacts), "comm_ms": [None] * len(compacts),
                               "wait_ms": None, "max_wait_ms": None, "last_arrival_rank": None,
                               "late_ms": None, "late_from": None,
                               "arrive_ns": [None] * len(compacts),
                               "call_ns": [None] * len(compacts),
                               "aligned_ns": [None] * len(compacts)}
        for r, s in present.items():
            row["host_ms"][r] = s["host_ms"]
            row["comm_ms"][r] = s["comm_ms"]
        starts = {r: aligners[r](s["start_ns"]) for r, s in present.items()
                  if r in aligners and s["start_ns"] is not None}
        ends = {r: aligners[r](s["end_ns"]) for r, s in present.items()
                if r in aligners and s["end_ns"] is not None}
        for r in starts.keys() & ends.keys():
            row["aligned_ns"][r] = [round(starts[r]), round(ends[r])]
        if len(starts) > 1:
            row["start_skew_us"] = _us(max(starts.values()) - min(starts.values()))
            row["last_start_rank"] = _argmax(starts)
        if len(ends) > 1:
            row["end_skew_us"] = _us(max(ends.values()) - min(ends.values()))
            row["last_end_rank"] = _argmax(ends)
        for r, s in present.items():
            if r in aligners and _inside(s.get("arrive_ns"), compacts[r].get("clock")):
                row["arrive_ns"][r] = round(aligners[r](s["arrive_ns"]))
                if s.get("call_ns") is not None:
                    row["call_ns"][r] = round(aligners[r](s["call_ns"]))
        comm_or_none = {r: None if r in unplaced else s["comm_ms"] for r, s in present.items()}
        if len(comm_or_none) > 1 and all(v is not None for v in comm_or_none.values()):
            comm: dict[int, float] = {r: v for r, v in comm_or_none.items() if v is not None}
            least = min(comm.values())
            row["wait_ms"] = [None if row["comm_ms"][r] is None else round(row["comm_ms"][r] - least, 6)
                              for r in range(len(compacts))]
            row["max_wait_ms"] = round(max(comm.values()) - least, 6)
            arrive = {r: row["arrive_ns"][r] for r in present}
            if all(v is not None for v in arrive.values()):  # when each rank reached it
                last = _argmax(arrive)
                row["late_ms"] = round((arrive[last] - min(arrive.values())) / 1e6, 6)
                row["late_from"] = "arrival"
            else:  # the rank that waited least arrived last
                last = min(sorted(comm), key=lambda r: comm[r])
                row["late_ms"], row["late_from"] = row["max_wait_ms"], "comm"
            gpu = [s["gpu_ms"] for s in present.values() if s["gpu_ms"] is not None]
            floor_ms = max(STEP_WAIT_MIN_US / 1e3,
                           STEP_WAIT_MIN_PCT / 100 * statistics.median(gpu) if gpu else 0.0)
            if row["late_ms"] >= floor_ms:
                row["last_arrival_rank"] = last
        rows.append(row)
    return rows


def _cause_excess(straggler: dict[str, Any], others: list[dict[str, Any]],
                  steps: list[int]) -> dict[str, float | None]:
    """Mean excess (ms per step) of the straggler over the other ranks'
    median, over `steps`, for each cause (None where not measured)."""
    fields = {"host late": "idle_host_ms", "sync": "idle_sync_ms", "compute": "compute_ms"}
    own = {s["index"]: s for s in straggler["steps"]}
    theirs = [{s["index"]: s for s in c["steps"]} for c in others]
    out: dict[str, float | None] = {}
    for cause, key in fields.items():
        excess: list[float] = []
        for i in steps:
            mine = _value(own.get(i), key)
            rest = [v for v in (_value(t.get(i), key) for t in theirs) if v is not None]
            if mine is None or not rest:  # not measured in a step: not measured
                excess = []
                break
            excess.append(mine - statistics.median(rest))
        out[cause] = round(sum(excess) / len(excess), 6) if excess else None
    return out


def _value(step: dict[str, Any] | None, key: str) -> float | None:
    if step is None:
        return None
    if key == "compute_ms" and step.get("compute_ms") is None and step.get("comm_ms") is not None \
            and step.get("gpu_ms") is not None:
        return step["gpu_ms"] - step["comm_ms"]
    return step.get(key)


def _step_time_ms(compacts, rank: int, steps: list[int]) -> float | None:
    """The other ranks' step time over `steps`: the median over them of
    their mean step time, the longer of a step's host and GPU times (a host
    that runs ahead of its GPU has short host steps, a GPU waiting for its
    host little busy time: the longer one is the step's period)."""
    means = []
    for c in compacts:
        if c is None or c["rank"] == rank:
            continue
        mine = [s for s in c["steps"] if s["index"] in steps]
        times = [max(t for t in (s["gpu_ms"], s["host_ms"]) if t is not None) for s in mine
                 if s["gpu_ms"] is not None or s["host_ms"] is not None]
        if times:
            means.append(sum(times) / len(times))
    return statistics.median(means) if means else None


def _judge(rows, compacts, error_ns: float | None = None
           ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(straggler or None, balance or None): the candidate who arrived last
    in most steps, named only past ARRIVAL_SPREAD_MS and
    STRAGGLER_MIN_STEP_SHARE (module doc), and, when its lateness comes
    from arrival times, past the clocks' error (error_ns: a lateness the
    clocks cannot resolve is no straggler); balance says why not, with the
    largest lateness and its share.  (None, None) when nothing was compared."""
    compared = [r for r in rows if r["late_ms"] is not None]
    if not compared:
        return None, None
    counts: dict[int, int] = {}
    for r in compared:
        if r["last_arrival_rank"] is not None:
            counts[r["last_arrival_rank"]] = counts.get(r["last_arrival_rank"], 0) + 1
    rank = _argmax(counts) if counts else None
    tied = rank is not None and sum(n == counts[rank] for n in counts.values()) > 1
    if rank is None or tied or counts[rank] < STRAGGLER_MIN_SHARE * len(compared):
        worst = max(compared, key=lambda r: r["late_ms"])
        step_ms = _step_time_ms(compacts, -1, [worst["index"]])
        return None, _balance(None, worst["late_ms"], step_ms, len(compared),
                              "no rank arrived last in more steps than every other rank"
                              if tied else "no rank arrived last in half the steps compared")
    mine = [r for r in compared if r["last_arrival_rank"] == rank]
    late = sum(r["late_ms"] for r in mine) / len(mine)
    step_ms = _step_time_ms(compacts, rank, [r["index"] for r in mine])
    share = None if not step_ms else late / step_ms
    if late <= ARRIVAL_SPREAD_MS:
        return None, _balance(rank, late, step_ms, len(compared),
                              f"its lateness is within the {ARRIVAL_SPREAD_MS:g} ms spread of "
                              "arrival order seen with no straggler")
    if error_ns is not None and any(r["late_from"] == "arrival" for r in mine) \
            and late * 1e6 <= error_ns:
        return None, _balance(rank, late, step_ms, len(compared),
                              f"its lateness is within the clocks' error (+-{error_ns / 1e3:g} "
                              "us): the ranks' arrival times cannot tell it")
    if share is not None and share < STRAGGLER_MIN_STEP_SHARE:
        return None, _balance(rank, late, step_ms, len(compared),
                              f"the wait it causes is under {STRAGGLER_MIN_STEP_SHARE:.0%} of "
                              "the other ranks' step time")
    others = [c for c in compacts if c is not None and c["rank"] != rank]
    excess = _cause_excess(compacts[rank], others, [r["index"] for r in mine])
    known = {c: v for c, v in excess.items() if v is not None}
    cause = max(known, key=lambda c: known[c]) if known else None
    if cause is not None and known[cause] < CAUSE_MIN_SHARE * late:
        cause = None
    comm_late = [r["max_wait_ms"] for r in mine]
    host_late = _host_late(compacts, rank, [r["index"] for r in mine])
    return {"rank": rank, "last_in_steps": counts[rank], "steps_compared": len(compared),
            "late_ms": round(late, 6), "late_from": _late_from(mine),
            "comm_late_ms": round(sum(comm_late) / len(comm_late), 6),
            "host_late_ms": host_late,
            "share_of_step_pct": None if share is None else round(100 * share, 2),
            "cause": cause, "excess_ms": excess,
            "own_verdict": compacts[rank]["verdict"], "own_cause": compacts[rank]["cause"]}, None


def _host_late(compacts, rank: int, steps: list[int]) -> float | None:
    """How much later into its steps the straggler's host called the
    collective than the other ranks' hosts: per step, its call_ns -
    start_ns minus the others' median of theirs (each rank on its own
    clock: no alignment needed), then the median over `steps`; None when
    a step lacks the times.  This is the extra host time the straggler
    spent before reaching the collective: a host held back D ms reads D
    plus whatever else its host did slower before the call (on 2 x H100,
    issue 26: the same launches took the late rank 0.2-0.3 ms longer even
    with no delay planted), while its GPU arrival is later still by the
    launch lag after the delay.  The median, not the mean: the per-step
    figure has outliers on either side (a first step that allocates, a
    garbage-collector pause, a rank's watchdog thread taking the GIL) and
    one 10 ms pause in 30 steps would move a mean by 0.33 ms; the median
    moves by less than the steps' own spread."""
    def into(c, i):
        s = next((x for x in c["steps"] if x["index"] == i), None)
        if s is None or s.get("call_ns") is None or s.get("start_ns") is None:
            return None
        return s["call_ns"] - s["start_ns"]

    excess = []
    for i in steps:
        mine = into(compacts[rank], i)
        theirs = [v for c in compacts if c is not None and c["rank"] != rank
                  for v in [into(c, i)] if v is not None]
        if mine is None or not theirs:
            return None
        excess.append(mine - statistics.median(theirs))
    return round(statistics.median(excess) / 1e6, 6) if excess else None


def _backlog(rows, compacts, balance) -> dict[str, Any] | None:
    """The host lateness the arrival order could not show (module doc,
    Backlog), or None: the rank whose host called the collective latest
    into its steps (_host_late, over the steps compared by arrival), when
    that lateness would name it (ARRIVAL_SPREAD_MS, STRAGGLER_MIN_STEP_SHARE)
    and its GPU ran behind its host (its collective's launch call -> kernel
    start, its own clock) by more than it in every one of those steps, that
    lead shrinking from the first to the last by more than it.  balance:
    what the arrival order said (kept under "arrival")."""
    steps = [r["index"] for r in rows if r["late_ms"] is not None and r["late_from"] == "arrival"]
    if len(steps) < 2 or balance is None:
        return None
    rank = _latest_host(compacts, steps)
    if rank is None:
        return None
    late = _host_late(compacts, rank, steps)
    if late is None:
        return None
    step_ms = _step_time_ms(compacts, rank, steps)
    if late <= ARRIVAL_SPREAD_MS or (step_ms and late / step_ms < STRAGGLER_MIN_STEP_SHARE):
        return None
    own = {s["index"]: s for s in compacts[rank]["steps"]}
    lead = [(own[i]["arrive_ns"] - own[i]["call_ns"]) / 1e6 for i in steps]
    used = lead[0] - lead[-1]
    if min(lead) <= late or used <= late:  # its GPU met its host, or a steady lead
        return None
    return {"rank": rank, "host_late_ms": late, "steps_compared": len(steps),
            "gpu_behind_ms": [round(lead[0], 3), round(lead[-1], 3)],
            "min_gpu_behind_ms": round(min(lead), 3),
            "used_per_step_ms": round(used / (steps[-1] - steps[0]), 3),
            "step_ms": None if step_ms is None else round(step_ms, 6),
            "share_of_step_pct": round(100 * late / step_ms, 2) if step_ms else None,
            "arrival": balance}


def _latest_host(compacts, steps: list[int]) -> int | None:
    """The rank with the largest _host_late over `steps` (the lowest of
    equals), among the ranks with a call in every one of them; None when
    fewer than two have.  Each step's values are sorted once, so a rank's
    "median of the others" is a lookup: thousands of ranks stay cheap."""
    into: dict[int, list[int]] = {}
    for c in compacts:
        own = {s["index"]: s for s in c["steps"]} if c is not None else {}
        vals = [own[i]["call_ns"] - own[i]["start_ns"] for i in steps if i in own
                and own[i].get("call_ns") is not None and own[i].get("start_ns") is not None]
        if c is not None and len(vals) == len(steps):
            into[c["rank"]] = vals
    if len(into) < 2:
        return None
    ordered = [sorted(v[k] for v in into.values()) for k in range(len(steps))]

    def others_median(k: int, mine: int) -> float:  # the step's values less one of `mine`
        s, i = ordered[k], bisect.bisect_left(ordered[k], mine)
        m = len(s) - 1

        def at(j: int) -> int:
            return s[j] if j < i else s[j + 1]
        return at(m // 2) if m % 2 else (at(m // 2 - 1) + at(m // 2)) / 2

    excess = {r: statistics.median(v[k] - others_median(k, v[k]) for k in range(len(steps)))
              for r, v in into.items()}
    return _argmax(excess)


def backlog_text(backlog: dict[str, Any]) -> str:
    """The backlog in one paragraph (report head, HTML, diagnosis)."""
    b, a = backlog, backlog["arrival"]
    first, last = b["gpu_behind_ms"]
    who = (f"rank {a['rank']} last most often, {a['late_ms']:.3f} ms after the first"
           if a["rank"] is not None else "no rank last most often")
    return (f"straggler not measured: rank {b['rank']}'s host called the collective "
            f"{b['host_late_ms']:.3f} ms later into its steps than the others' (median over "
            f"{b['steps_compared']} steps), but its GPU ran {first:.1f} ms behind its host at the "
            f"first step's collective and {last:.1f} ms at the last (launch call -> kernel "
            f"start): work queued before the first step shown, used up "
            f"{b['used_per_step_ms']:.3f} ms a step.  So that lateness never reached the "
            f"collectives here, and the order the ranks reached them ({who}) shows the queue, "
            f"not the steps; once it is used up, rank {b['rank']} would arrive about "
            f"{b['host_late_ms']:.3f} ms late.  Profile steps that every rank begins together "
            "(a device sync and a barrier before the first recorded step)")


def _late_from(rows) -> str:
    kinds = {r["late_from"] for r in rows}
    return kinds.pop() if len(kinds) == 1 else "mixed"


def _balance(rank, late_ms, step_ms, compared, why) -> dict[str, Any]:
    return {"balanced": True, "rank": rank, "late_ms": round(late_ms, 6),
            "step_ms": None if step_ms is None else round(step_ms, 6),
            "share_of_step_pct": round(100 * late_ms / step_ms, 2) if step_ms else None,
            "steps_compared": compared, "why": why,
            "spread_ms": ARRIVAL_SPREAD_MS, "min_share_pct": 100 * STRAGGLER_MIN_STEP_SHARE}


def _per_rank(rows, compacts, straggler) -> list[dict[str, Any] | None]:
    out: list[dict[str, Any] | None] = []
    for r, c in enumerate(compacts):
        if c is None:
            out.append(None)
            continue
        waits = [row["wait_ms"][r] for row in rows if row["wait_ms"] is not None
                 and row["wait_ms"][r] is not None]
        wait = round(sum(waits), 6) if waits else None
        busy = sum(s["gpu_ms"] for s in c["steps"] if s["gpu_ms"] is not None)
        share = round(100.0 * wait / busy, 2) if wait is not None and busy > 0 else None
        waits_for = None
        verdict = c["verdict"]
        if straggler is not None and straggler["rank"] != r and share is not None \
                and share >= 100 * WAIT_SHARE_VERDICT:
            waits_for, verdict = straggler["rank"], "COMMUNICATION_WAIT"
        out.append({"rank": r, "wait_ms": wait, "wait_pct_of_gpu_busy": share,
                    "waits_for": waits_for, "verdict": verdict, "own_verdict": c["verdict"],
                    "last_arrivals": sum(1 for row in rows if row["last_arrival_rank"] == r)})
    return out


def _not_measured(compacts, rows, world_size, backend, aligners, shared_clock=False
                  ) -> list[str]:
    notes = []
    present = [c for c in compacts if c is not None]
    if world_size == 1:
        notes.append("a single rank: no cross-rank skew, wait or straggler to measure")
        return notes
    if backend and "nccl" not in backend.lower():
        notes.append(f"backend {backend}: its collectives run on the CPU, so no collective "
                     "kernel times: wait per rank and the straggler are not measured")
    no_comm = [c["rank"] for c in present if not any(s["comm_ms"] is not None for s in c["steps"])]
    if no_comm:
        why = sorted({c["gpu_error"] for c in present if c["rank"] in no_comm and c["gpu_error"]})
        notes.append(f"rank{'s' if len(no_comm) > 1 else ''} {_list(no_comm)}: no collective time "
                     "per step (needs GPU tracing with collective kernels classified"
                     + (f"; {why[0]}" if why else "") + "): wait and straggler not measured")
    unplaced = [c["rank"] for c in present if comm_outside_steps(c)]
    if unplaced:
        notes.append(f"rank{'s' if len(unplaced) > 1 else ''} {_list(unplaced)}: collective "
                     "kernels ran, but none in a step (their launch calls are not in the trace "
                     "-- a torch.profiler that records no driver-API launches, which NCCL uses "
                     "-- or the collectives ran outside the steps): wait and straggler not "
                     "measured")
    unlinked = [c["rank"] for c in present if c["rank"] not in aligners]
    if unlinked:
        notes.append(f"rank{'s' if len(unlinked) > 1 else ''} {_list(unlinked)}: "
                     + ("no time base shared with the other traces (only Kineto traces "
                        "have one)" if shared_clock else "clocks not exchanged with rank 0")
                     + ": left out of the skews")
    shared: dict[str, list[int]] = {}
    for c in present:
        for g in c.get("gpus") or []:
            shared.setdefault(g, []).append(c["rank"])
    for gpu, ranks in sorted(shared.items(), key=lambda kv: kv[1]):
        if len(ranks) > 1:
            notes.append(f"ranks {_list(ranks)} share one GPU ({gpu}): their kernels "
                         "interleave, so their comm, wait and compute times mix")
    if not rows:
        notes.append("no prof.step() steps: no per-step skew")
    return notes


def _list(ranks: list[int]) -> str:
    return ", ".join(str(r) for r in ranks)


# Traces read offline (trace folders): a Kineto trace's times are the host's
# clock (epoch-based); ranks on one host share it, to the trace's resolution.
SHARED_CLOCK_ERROR_NS = 1_000
SHARED_CLOCK_METHOD = (
    "the traces' own clock: a Kineto trace's times (with its baseTimeNanoseconds) are its "
    "host's clock, shared by every rank of one host, so they are compared as written "
    "(+-1 us, the times' resolution); ranks on different hosts differ by as much as the hosts' "
    "clocks do (NTP: up to milliseconds; PTP: microseconds), which the files cannot tell")


def _shared_aligners(compacts) -> dict[int, Callable[[float], float]]:
    """rank -> its trace time -> the lowest such rank's trace time (as live,
    every rank on the first rank's clock), for ranks whose compact has a
    time base (offline reads: the file's time plus shift_ns)."""
    based = [c for c in compacts if c is not None and c.get("time_base") is not None]
    if not based:
        return {}
    ref = based[0]["time_base"]["shift_ns"]
    return {c["rank"]: (lambda shift: lambda p: p - shift + ref)(c["time_base"]["shift_ns"])
            for c in based}


# Collective ends (offline reads).  A trace's GPU times are the CUPTI
# timestamps its profiler converted to its own time base, one conversion per
# process (Kineto: a TSC-to-epoch fit made when the profile starts), so two
# ranks' traces of one host can disagree by what those fits do.  A collective
# ends at practically one instant on every rank (0.0-0.7 us apart on 2 x H100
# in loopscope's and Kineto's traces alike, issue 26), so the median, over
# the steps, of a rank's first-collective end minus the lowest rank's is its
# clock's offset.  Up to END_ALIGN_MIN_NS it is the collective's own spread
# and the traces' clock is kept; beyond it the rank is moved by it.  Limit:
# across hosts a ring's ranks can finish a chunk's transfer apart (tens of us
# on a slow network), which then reads as clock.
END_ALIGN_MIN_NS = 10_000


def _min_launch_lag_us(c: dict[str, Any]) -> float | None:
    """The smallest time from a collective's launch call to its kernel's
    start over the rank's steps, on its own trace's clock: a kernel cannot
    start before its launch, so a negative one says the trace's GPU and
    host times disagree with each other (one time base per process: a
    whole-rank offset leaves it as it is)."""
    lags = [s["arrive_ns"] - s["call_ns"] for s in c["steps"]
            if s.get("arrive_ns") is not None and s.get("call_ns") is not None]
    return _us(min(lags)) if lags else None


def _end_alignment(compacts, aligners) -> tuple[dict[int, Callable[[float], float]],
                                                dict[str, Any] | None, str]:
    """(aligners, report, method text) of traces read offline: the
    aligners moved by the collective ends' offsets when one is beyond
    END_ALIGN_MIN_NS; the report (skew["clock"]["collective_ends"]) says
    each rank's offset, whether they were applied, and the ends' spread
    after it; None with fewer than two ranks on a time base."""
    ranks = sorted(aligners)
    if len(ranks) < 2:
        return aligners, None, SHARED_CLOCK_METHOD
    ref = ranks[0]
    done = {r: {s["index"]: aligners[r](s["done_ns"]) for s in compacts[r]["steps"]
                if s.get("done_ns") is not None} for r in ranks}
    offsets: dict[int, int] = {ref: 0}
    counts: dict[int, int] = {ref: len(done[ref])}
    for r in ranks[1:]:
        common = sorted(done[r].keys() & done[ref].keys())
        if common:
            # whole ns: a float near an epoch time (1.8e18 ns) keeps only 256 ns
            offsets[r] = round(statistics.median(done[r][k] - done[ref][k] for k in common))
            counts[r] = len(common)
    unchecked = [r for r in ranks if r not in offsets or not done[r]]
    if unchecked:
        why = (f"rank{'s' if len(unchecked) > 1 else ''} {_list(unchecked)}: no collective "
               f"kernel end in a step shared with rank {ref}")
        return aligners, {"aligned": False, "reference_rank": ref, "per_rank": None,
                          "residual_us": None, "why": why}, \
            SHARED_CLOCK_METHOD + f"; not checked against the collectives' ends ({why})"
    largest = max(abs(v) for v in offsets.values())
    def spreads(moved: bool) -> list[float]:  # per step with every rank's end
        out = []
        for k in sorted(set.intersection(*(set(done[r]) for r in ranks))):
            ends = [done[r][k] - (offsets[r] if moved else 0) for r in ranks]
            out.append(max(ends) - min(ends))
        return out

    best = spreads(True)
    # the ends are a clock only when, moved by the offsets, they meet as one collective's do
    # (a step whose first collective differs between ranks leaves them apart)
    meet = bool(best) and statistics.median(best) <= END_ALIGN_MIN_NS
    aligned = meet and largest > END_ALIGN_MIN_NS
    shown = best if aligned else spreads(False)  # the ends as the ranks are compared
    residual = None if not shown else {"median": _us(statistics.median(shown)),
                                       "max": _us(max(shown)), "steps": len(shown)}
    if not meet:
        why = ("the collectives' ends do not meet step by step even moved by their median "
               "offset (" + ("no step with every rank's" if not best else
                             f"{statistics.median(best) / 1e3:.3f} us apart, median") +
               "): not one collective on every rank; the traces' own clock is kept")
    elif aligned:
        why = (f"the traces' clocks disagree by up to {largest / 1e3:.3f} us, more than "
               f"the {END_ALIGN_MIN_NS / 1e3:g} us a collective's ends spread")
    else:
        why = (f"the traces' clocks agree within {largest / 1e3:.3f} us (at most "
               f"{END_ALIGN_MIN_NS / 1e3:g} us: the collective's own spread)")
    report = {"aligned": aligned, "reference_rank": ref,
              "per_rank": [{"rank": r, "offset_us": _us(offsets[r]), "steps": counts[r],
                            "min_launch_lag_us": _min_launch_lag_us(compacts[r])}
                           for r in ranks],
              "residual_us": residual if meet else None, "why": why}
    spread = ("" if residual is None or not meet else
              f"; {'moved, ' if aligned else ''}the ends spread {residual['median']:g} us "
              f"(median over {residual['steps']} steps), {residual['max']:g} us at most")
    if not aligned:
        return aligners, report, (SHARED_CLOCK_METHOD + "; checked against the collectives' "
                                  f"ends: {report['why']}{spread}")
    method = (f"the collectives' ends: each rank moved by the median offset that makes the ends "
              f"of its steps' first collective kernels meet rank {ref}'s ({report['why']}: "
              + ", ".join(f"rank {r} {offsets[r] / 1e3:+.3f} us" for r in ranks[1:])
              + f"){spread}")
    return ({r: (lambda f, o: lambda p: f(p) - o)(aligners[r], offsets[r]) for r in ranks},
            report, method)


def merge(compacts: list[dict[str, Any] | None], exchanges: dict[int, dict[str, Any]],
          missing: dict[int, str], backend: str | None = None,
          shared_clock: bool = False) -> dict[str, Any]:
    """The cross-rank figures (summary["skew"] on rank 0).

    compacts: one entry per rank (index = rank), None for a missing rank;
    exchanges: rank -> {"start": [(a, b, c), ...] or None, "end": [...]}
    as rank 0 timed them; missing: rank -> why it is missing.
    shared_clock: the ranks' times are on one clock already (traces read
    offline, each compact's "time_base" says how): no exchanges."""
    world_size = len(compacts)
    links = {r: _Link(best_round(x.get("start")), best_round(x.get("end")))
             for r, x in exchanges.items() if r != 0}
    error_ns: float | None
    end_check: dict[str, Any] | None = None
    method = ("round trips over the job's c10d store, timed by rank 0 (the best of each "
              "exchange; interpolated between the start and end exchanges)")
    if shared_clock:
        aligners, end_check, method = _end_alignment(compacts, _shared_aligners(compacts))
        error_ns = SHARED_CLOCK_ERROR_NS if len(aligners) > 1 else None
        if end_check is not None and end_check["aligned"] and end_check["residual_us"]:
            # moved onto the ends: a skew is known to within their spread
            error_ns = max(SHARED_CLOCK_ERROR_NS, end_check["residual_us"]["median"] * 1e3)
    else:
        aligners = _aligners(compacts, links)
        errors = sorted((e for r in aligners if r != 0 for e in [links[r].error_ns]
                         if e is not None), reverse=True)
        error_ns = sum(errors[:2]) if errors else None
    rows = _step_rows(compacts, aligners)
    straggler, balance = _judge(rows, compacts, error_ns)
    backlog = None if straggler is not None else _backlog(rows, compacts, balance)
    if backlog is not None:
        balance = None  # the arrival order shows the queue, not the ranks' steps
    starts = [r["start_skew_us"] for r in rows if r["start_skew_us"] is not None]
    ends = [r["end_skew_us"] for r in rows if r["end_skew_us"] is not None]
    error_us = _us(error_ns)
    return {
        "world_size": world_size,
        "ranks_present": [c["rank"] for c in compacts if c is not None],
        "missing": [{"rank": r, "reason": missing[r]} for r in sorted(missing)],
        "clock": {
            "error_us": error_us,
            "method": method,
            "collective_ends": end_check,
            "per_rank": [
                {"rank": r, "offset_us": _us(link.last["offset_ns"])
                 if link.error_ns is not None else None,
                 "error_us": _us(link.error_ns),
                 "drift_ppm": None if link.drift is None else round(link.drift * 1e6, 3),
                 "exchanges": sum(x is not None for x in (link.start, link.end))}
                for r, link in sorted(links.items())
            ],
        },
        "steps": rows,
        "max_start_skew_us": max(starts) if starts else None,
        "max_end_skew_us": max(ends) if ends else None,
        "per_rank": _per_rank(rows, compacts, straggler),
        "straggler": straggler,
        "balance": balance,
        "backlog": backlog,
        "not_measured": _not_measured(compacts, rows, world_size, backend, aligners,
                                      shared_clock) + ([] if backlog is None else [
            f"straggler: rank {backlog['rank']}'s GPU ran {backlog['min_gpu_behind_ms']:.1f} ms "
            "or more behind its host (work queued before the first step shown): the arrival "
            f"order cannot show its host's {backlog['host_late_ms']:.3f} ms lateness"]),
    }


_CAUSE_WORDS = {
    "host late": "GPU idle waiting for its host's launches",
    "sync": "GPU idle while its host waited in syncs",
    "compute": "GPU compute time",
}


def straggler_text(straggler: dict[str, Any]) -> str:
    """The straggler in one sentence (report, HTML, diagnosis)."""
    s = straggler
    text = (f"rank {s['rank']} is the straggler: it arrived last at the collectives in "
            f"{s['last_in_steps']} of {s['steps_compared']} steps, {s['late_ms']:.3f} ms after "
            "the first rank on average")
    if s.get("host_late_ms") is not None and s["host_late_ms"] >= CAUSE_MIN_SHARE * s["late_ms"]:
        text += (f" (its host called the collective {s['host_late_ms']:.3f} ms later into the "
                 "step than the others')")
    if s["cause"] is None:
        return text + "; no cause shows in its profiled steps"
    excess = s["excess_ms"][s["cause"]]
    return (text + f"; its cause: {s['cause']} (+{excess:.3f} ms per step of "
            f"{_CAUSE_WORDS[s['cause']]}, over the other ranks' median)")


def balance_text(balance: dict[str, Any]) -> str:
    """Balanced ranks in one sentence: the largest lateness and its share."""
    b = balance
    who = "no rank" if b["rank"] is None else f"rank {b['rank']}"
    share = ("" if b["share_of_step_pct"] is None
             else f", {b['share_of_step_pct']:.1f}% of the other ranks' step time")
    lead = ("arrived last most often, " if b["rank"] is not None else "stood out; the largest "
            "lateness in a step: ")
    return (f"the ranks are balanced: {who} {lead}{b['late_ms']:.3f} ms after the first rank"
            f"{share} ({b['why']})")


def above_error(value_us: float | None, skew: dict[str, Any]) -> bool:
    """True when a skew is larger than the clocks' residual error."""
    error = skew["clock"]["error_us"]
    return value_us is not None and error is not None and value_us > error


def rank_skew_budget(summary: dict[str, Any]) -> tuple[float | None, str | None, str]:
    """(measured, reason when not measured, detail) of the budget
    max_rank_skew_us: the largest start or end skew of any step after
    aligning the clocks; a skew within the clocks' residual error counts
    as 0 (it is not resolved)."""
    skew = summary.get("skew")
    if skew is None:
        if summary.get("rank") is None:
            return None, "not under torch.distributed", ""
        if summary.get("rank") != 0:
            return None, f"rank {summary['rank']}: only rank 0 gathers the ranks' figures", ""
        return None, "the ranks were not gathered (gather=False, or no store)", ""
    error = skew["clock"]["error_us"]
    values = [v for row in skew["steps"] for v in (row["start_skew_us"], row["end_skew_us"])
              if v is not None]
    if error is None or not values:
        return None, "; ".join(skew["not_measured"]) or "no step seen by two ranks", ""
    worst = max((v for v in values if v > error), default=0.0)
    return worst, None, f"clocks aligned to +-{error:g} us"
