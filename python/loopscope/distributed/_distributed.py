"""torch.distributed: every rank profiles itself; at exit rank 0 gathers the
ranks' compact summaries and works out the cross-rank figures (_ranks.py).

Summary keys (every summary has the first two):
- summary["rank"]: the rank in the default process group; None when the
  process is not part of an initialised torch.distributed job.
- summary["world_size"]: the job's world size; 1 when not distributed.
- summary["ranks"]: on rank 0 of a gathered profile, one entry per rank
  (index = rank): that rank's compact summary, or {"rank": k, "missing":
  why} for a rank that did not send one in time; None elsewhere.
- summary["skew"]: on rank 0 of a gathered profile, the cross-rank figures
  (_ranks.merge: per-step skews, waits, straggler, clock error, what was
  not measured); None elsewhere.
- summary["distributed"]: None when not distributed; else {backend,
  profile_index, gather (what happened to the gathering, in words),
  timeout_s, missing (rank 0: [{rank, reason}]), notes (what went wrong in
  this rank's exchanges), exchange_ms ({start, end}: host time of each
  phase, waiting for the other ranks included; outside host_ms)}.

Detection needs torch to be imported already (it is never imported here):
torch.distributed available and initialised when the profile starts, or
when it stops.  Gathering goes through the job's c10d store
(torch.distributed.distributed_c10d._get_default_store(); torch 2.13 has
no public accessor), never through collectives: a collective blocks for
good when a rank never arrives, the store can be waited on with a
deadline.  Keys live under "loopscope/<n>/", n counting this process's
gathered profiles, so the ranks' n-th profiles are matched by order.  A
rank that profiles a different number of times than the others has its
later profiles matched with the wrong ones: profile the same region on
every rank, or pass gather=False where one rank profiles alone.

Protocol (each phase: "start" before the C core starts, "end" after it
stopped, so no waiting lands inside the profile):
- rank r > 0 sets here/<phase>/<r> ("ok", or at the end "raised: ..."
  when the with-block raised; at the end its compact summary goes first,
  to summary/<r>), then waits for go/<phase>/<r>/<k> (round k), reads its
  exchange clock and answers ans/<phase>/<r>/<k>; "abort: why" instead of
  "go" releases it.  It waits up to 2 * timeout for rank 0's first go
  (rank 0 may itself be up to one timeout late, then wait one for others).
- rank 0 polls for every here key until its deadline (gather_timeout_s
  after it arrived), aborts the ranks that did not come (named as missing,
  with the reason), and times ROUNDS round trips with each present rank.
  At the end it takes each present rank's compact summary and deletes the
  keys it used.
Nothing is waited for when every rank is there: rank 0 waits as long as
the last rank takes to arrive.  A missing rank costs rank 0 one timeout
per phase (and the others as long, waiting for rank 0's go); a missing
rank 0 costs each other rank up to two timeouts per phase.

Exchange clock reads, in order (tests script them): rank 0 reads a and b
in each of ROUNDS rounds with each present rank, in rank order, at the
start; then one read right after the C core started and one right before
it stops; then the end exchange like the start.  A rank > 0 reads c in
each round of the start, the two reads around the profile, then c in each
round of the end.

Clock pairs map the profile clock (CUPTI's timestamp while tracing) onto
the exchange clock (CLOCK_MONOTONIC), on which the exchanges run: the C
core reads the profile clock as the last thing it does when it starts and
the first when it stops (the capture's start_ns and stop_ns), and the
exchange clock is read right after start() returns and right before stop()
is called.  They cost two clock reads per profile, distributed or not."""
from __future__ import annotations

import datetime
import json
import os
import socket
import sys
import time
from typing import Any, Callable

from ..figures import _ranks
from ..figures._diagnosis import diagnose_ranks

DEFAULT_TIMEOUT_S = 5.0
MAX_TIMEOUT_S = 3600.0
ROUNDS = 3
ROUND_TIMEOUT_S = 2.0  # an answer from a rank known to be waiting for it
POLL_FIRST_S, POLL_MAX_S = 0.0002, 0.005
PREFIX = "loopscope"

_exchange_clock: Callable[[], int] = time.monotonic_ns  # tests script it
_profiles = 0  # gathered profiles of this process: their key namespace


def check_options(gather: Any, gather_timeout_s: Any) -> dict[str, Any]:
    """The profile's gathering options, checked (TypeError / ValueError
    naming the option)."""
    if not isinstance(gather, bool):
        raise TypeError(f"gather must be True or False, got {gather!r} ({type(gather).__name__})")
    if isinstance(gather_timeout_s, bool) or not isinstance(gather_timeout_s, (int, float)):
        raise TypeError(f"gather_timeout_s must be a number (seconds), got {gather_timeout_s!r} "
                        f"({type(gather_timeout_s).__name__})")
    if not 0 < gather_timeout_s <= MAX_TIMEOUT_S:
        raise ValueError(f"gather_timeout_s must be above 0 and at most {MAX_TIMEOUT_S:g} s, "
                         f"got {gather_timeout_s!r}")
    return {"gather": gather, "timeout_s": float(gather_timeout_s)}


def detect() -> tuple[Any, int, int, str | None] | None:
    """(torch.distributed, rank, world size, backend) of an initialised
    default process group, or None; never imports torch."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return None
        rank, world = int(dist.get_rank()), int(dist.get_world_size())
    except Exception:  # a torch in a state we cannot read: not distributed for us
        return None
    try:
        backend = str(dist.get_backend())
    except Exception:
        backend = None
    return dist, rank, world, backend


def job_store(dist: Any, prefix: str) -> Any:
    """The job's c10d store, its keys under `prefix` (torch 2.13 has no
    public accessor for the default store); raises what torch raises when
    there is none.  loopscope.watch(all_ranks=True) arms the ranks through
    it too."""
    return dist.PrefixStore(prefix, dist.distributed_c10d._get_default_store())


class Session:
    """One profile's part in the job's gathering (see the module doc)."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        self.timeout_s = options["timeout_s"]
        self.rank: int | None = None
        self.world_size = 1
        self.backend: str | None = None
        self.store: Any = None
        self.index: int | None = None
        self.gathering = False
        self.status = "not distributed"
        self.exchange_ns: list[int | None] = [None, None]  # right after start, before stop
        self.exchanges: dict[int, dict[str, Any]] = {}
        self.missing: dict[int, str] = {}
        self.served: set[int] = set()  # rank 0: ranks whose keys it deletes at the end
        self.compacts: list[dict[str, Any] | None] | None = None
        self.note: str | None = None  # a warning for the user, said once
        self.notes: list[str] = []  # what went wrong in this rank's exchanges
        self.phase_ms: dict[str, float] = {}  # host time of each phase (waits included)

    # -- joining -------------------------------------------------------------
    def join(self) -> bool:
        """Detects the process group; True when this profile is distributed."""
        found = detect()
        if found is None:
            return False
        dist, self.rank, self.world_size, self.backend = found
        if not self.options["gather"]:
            self.status = "off (gather=False)"
        elif self.world_size == 1:
            self.status = "a single rank: nothing to gather"
        else:
            try:
                global _profiles
                store = job_store(dist, f"{PREFIX}/{_profiles}")
                self.index = _profiles
                _profiles += 1
                self.store = store
                self.gathering = True
                self.status = "gathering"
            except Exception as error:
                self.status = f"not gathered: no c10d store ({type(error).__name__}: {error})"
        return True

    # -- store helpers ---------------------------------------------------------
    def _poll(self, keys: list[str], deadline: float) -> set[str]:
        """The keys that exist by the deadline (polled: a timed-out store
        wait prints a C++ warning per key)."""
        found: set[str] = set()
        delay = POLL_FIRST_S
        while True:
            pending = [k for k in keys if k not in found]
            if pending and self.store.check(pending):
                found.update(pending)
            else:
                found.update(k for k in pending if self.store.check([k]))
            if len(found) == len(keys) or time.monotonic() >= deadline:
                return found
            time.sleep(delay)
            delay = min(2 * delay, POLL_MAX_S)

    def _wait(self, key: str, seconds: float) -> bool:
        try:
            self.store.wait([key], datetime.timedelta(seconds=seconds))
            return True
        except Exception:  # DistStoreError on timeout, or a store that went away
            return False

    # -- rank > 0 -------------------------------------------------------------
    def _answer(self, phase: str) -> tuple[int, str | None]:
        """Answers rank 0's rounds: (rounds answered, None when all were, else
        why not)."""
        r = self.rank
        deadline = time.monotonic() + 2 * self.timeout_s
        for k in range(ROUNDS):
            key = f"go/{phase}/{r}/{k}"
            got = bool(self._poll([key], deadline)) if k == 0 else self._wait(key, ROUND_TIMEOUT_S)
            c = _exchange_clock() if got else 0  # read first: the round trip is timed
            if not got:
                waited = 2 * self.timeout_s if k == 0 else ROUND_TIMEOUT_S
                return k, (f"rank 0 did not answer within {waited:g} s (did it reach the "
                           f"profile's {phase}?)")
            word = self.store.get(key)
            if word != b"go":
                return k, word.decode(errors="replace")
            self.store.set(f"ans/{phase}/{r}/{k}", str(c).encode())
        return ROUNDS, None

    # -- rank 0 ----------------------------------------------------------------
    def _serve(self, phase: str) -> list[int]:
        """Waits for the other ranks (until the deadline), aborts the absent
        ones, times the rounds with the present ones; returns those present.
        What went wrong with a rank is noted in exchanges[r][phase + "_note"]."""
        deadline = time.monotonic() + self.timeout_s
        others = range(1, self.world_size)
        keys = {r: f"here/{phase}/{r}" for r in others}
        found = self._poll(list(keys.values()), deadline)
        present = []
        for r in others:
            notes = self.exchanges.setdefault(r, {})
            if keys[r] not in found:
                notes[f"{phase}_note"] = (f"did not reach the profile's {phase} within "
                                          f"{self.timeout_s:g} s")
                self.store.set(f"go/{phase}/{r}/0",
                               f"abort: rank 0 stopped waiting after {self.timeout_s:g} s".encode())
                continue
            present.append(r)
            self.served.add(r)
            word = self.store.get(keys[r])
            if word != b"ok":  # "raised: ..." (the rank's with-block raised): no rounds
                notes[f"{phase}_note"] = word.decode(errors="replace")
                continue
            rounds = []
            for k in range(ROUNDS):
                a = _exchange_clock()
                self.store.set(f"go/{phase}/{r}/{k}", b"go")
                answered = self._wait(f"ans/{phase}/{r}/{k}", ROUND_TIMEOUT_S)
                b = _exchange_clock()
                if not answered:
                    notes[f"{phase}_note"] = f"stopped answering after {k} round(s)"
                    break
                rounds.append((a, b, int(self.store.get(f"ans/{phase}/{r}/{k}"))))
            notes[phase] = rounds or None
        return present

    def _forget(self) -> None:
        """Deletes the keys of the ranks rank 0 served (abort keys of ranks
        that never came stay, for them to read when they do)."""
        for r in sorted(self.served):
            keys = [f"here/start/{r}", f"here/end/{r}", f"summary/{r}"]
            for phase in ("start", "end"):
                for k in range(ROUNDS):
                    keys += [f"go/{phase}/{r}/{k}", f"ans/{phase}/{r}/{k}"]
            for key in keys:
                self.store.delete_key(key)

    # -- the phases --------------------------------------------------------------
    def start_phase(self) -> None:
        if not self.gathering:
            return
        t0 = time.perf_counter_ns()
        try:
            if self.rank == 0:
                self._serve("start")
            else:
                self.store.set(f"here/start/{self.rank}", b"ok")
                _, why = self._answer("start")
                if why:
                    self.notes.append(f"start: {why}")
        except Exception as error:  # a store gone bad: the profile goes on, ungathered
            self._fail(error)
        self.phase_ms["start"] = round((time.perf_counter_ns() - t0) / 1e6, 3)

    def end_phase(self, local: dict[str, Any] | None, raised: str | None) -> None:
        """At the end: rank 0 gathers, the others send.  `local` is this
        rank's compact summary (None when it could not be built)."""
        if not self.gathering:
            return
        t0 = time.perf_counter_ns()
        try:
            if self.rank == 0:
                self._gather(local, raised)
            else:
                self._send(local, raised)
        except Exception as error:
            self._fail(error)
        self.phase_ms["end"] = round((time.perf_counter_ns() - t0) / 1e6, 3)

    def _send(self, local: dict[str, Any] | None, raised: str | None) -> None:
        r = self.rank
        if local is not None:
            self.store.set(f"summary/{r}", json.dumps(local).encode())
        self.store.set(f"here/end/{r}", f"raised: {raised}".encode() if raised else b"ok")
        if raised:
            self.status = "sent to rank 0 without a clock exchange (this rank raised)"
            return
        answered, why = self._answer("end")
        if why is None:
            self.status = "sent to rank 0"
        elif answered:
            self.status = "sent to rank 0"
            self.notes.append(f"end: {why}")
        else:
            self.status = f"not taken by rank 0: {why}"
            self.note = (f"loopscope: rank {r}: {why}; this rank's summary did not reach "
                         "rank 0. Profile the same region on every rank, or pass gather=False")

    def _gather(self, local: dict[str, Any] | None, raised: str | None) -> None:
        if raised:  # release the others at once: this profile is not gathered
            for r in range(1, self.world_size):
                self.store.set(f"go/end/{r}/0", f"abort: rank 0 raised ({raised})".encode())
            self.status = f"not gathered: this rank raised ({raised})"
            return
        present = self._serve("end")
        compacts: list[dict[str, Any] | None] = [local] + [None] * (self.world_size - 1)
        for r in range(1, self.world_size):
            key = f"summary/{r}"
            if r in present and self.store.check([key]):
                try:
                    compacts[r] = json.loads(self.store.get(key).decode())
                except ValueError as error:  # not ours, or cut short: that rank only
                    self.missing[r] = f"sent an unreadable summary ({error})"
            elif r in present:
                self.missing[r] = "reached the end but sent no summary (it could not be built)"
            else:
                self.missing[r] = self.exchanges[r]["end_note"]
        self._forget()
        self.compacts = compacts
        self.status = "gathered"
        if self.missing:
            ranks = ", ".join(str(r) for r in sorted(self.missing))
            self.note = (f"loopscope: rank{'s' if len(self.missing) > 1 else ''} {ranks} did "
                         f"not send a summary within {self.timeout_s:g} s (named in "
                         "summary['skew']['missing']); profile the same region on every rank, "
                         "or pass gather=False")

    def _fail(self, error: Exception) -> None:
        self.gathering = False
        self.status = f"not gathered: the store failed ({type(error).__name__}: {error})"
        self.note = f"loopscope: gathering the ranks failed: {type(error).__name__}: {error}"

    # -- the summary keys ----------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "profile_index": self.index,
            "gather": self.status,
            "timeout_s": self.timeout_s,
            "missing": [{"rank": r, "reason": why} for r, why in sorted(self.missing.items())]
            if self.rank == 0 else None,
            "notes": list(self.notes),
            "exchange_ms": dict(self.phase_ms),
        }


# -- what _profile.py calls: one line at each point --------------------------------
def begin(options: dict[str, Any]) -> Session:
    """Before the C core starts: joins the job when there is one, and runs
    the start exchange."""
    session = Session(options)
    if session.join():
        session.start_phase()
    return session


def started(session: Session | None) -> None:
    """Right after the C core started: the exchange clock of the first pair."""
    if session is not None:
        session.exchange_ns[0] = _exchange_clock()


def stopping(session: Session | None) -> None:
    """Right before the C core stops: the exchange clock of the second pair."""
    if session is not None:
        session.exchange_ns[1] = _exchange_clock()


def finish(session: Session | None, prof: Any, exc: BaseException | None,
           warn: Callable[[str], None]) -> None:
    """After the C core stopped: joins the job if it began during the
    profile, then the end exchange and the gathering.  Never raises."""
    if session is None:
        return
    if session.rank is None and not session.join():
        return
    raised = None if exc is None else f"{type(exc).__name__}: {exc}"
    local = None
    if session.gathering:
        try:
            local = compact_of(prof, session, raised)
        except Exception as error:  # the rank's own summary failed: say so, gather the rest
            local = None
            session.note = f"loopscope: this rank's summary failed: {type(error).__name__}: {error}"
    session.end_phase(local, raised)
    if session.note:
        warn(session.note)


def compact_of(prof: Any, session: Session, raised: str | None = None) -> dict[str, Any]:
    """This rank's compact summary, from the finished profile (a FinishedProfile)."""
    capture = prof.capture
    step_times: dict[int, tuple[int, int]] = {}
    if capture is not None:
        for _name, _parent, step, start, end in capture.range_records():
            if step is not None:
                step_times.setdefault(step, (start, end))
    clock = None
    if capture is not None and None not in session.exchange_ns:
        info = capture.info()
        clock = {"profile_ns": [info["start_ns"], info["stop_ns"]],
                 "exchange_ns": list(session.exchange_ns)}
    host = socket.gethostname()
    return _ranks.compact(prof.local_summary(), rank=session.rank or 0,
                          world_size=session.world_size, host=host,
                          step_times=step_times, clock=clock, raised=raised,
                          gpu_ids=lambda device: _gpu_identity(device, host),
                          arrivals=_ranks.collective_arrivals(prof.model))


def _gpu_identity(device: int, host: str) -> str:
    """The GPU's UUID when torch knows it (the same in every process, whatever
    CUDA_VISIBLE_DEVICES each rank has); else host, visible set and ordinal."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return f"GPU-{torch.cuda.get_device_properties(device).uuid}"
    except Exception:  # an old torch without uuid, or CUDA in a bad state
        pass
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return f"{host} GPU {device}" + (f" of CUDA_VISIBLE_DEVICES={visible}" if visible else "")


def attach(session: Session | None, summary: dict[str, Any]) -> dict[str, Any]:
    """Adds rank, world_size, ranks, skew and distributed to a summary; on
    rank 0 of a gathered profile also the cross-rank verdict."""
    summary["rank"] = None
    summary["world_size"] = 1
    summary["ranks"] = None
    summary["skew"] = None
    summary["distributed"] = None
    if session is None or session.rank is None:
        return summary
    summary["rank"] = session.rank
    summary["world_size"] = session.world_size
    summary["distributed"] = session.describe()
    if session.rank == 0 and session.compacts is not None:
        compacts = session.compacts
        summary["ranks"] = [c if c is not None else
                            {"rank": r, "missing": session.missing.get(r, "no summary")}
                            for r, c in enumerate(compacts)]
        summary["skew"] = _ranks.merge(compacts, session.exchanges, session.missing,
                                       session.backend)
        summary["diagnosis"] = diagnose_ranks(summary)
    return summary


# -- `loopscope run` under torchrun ---------------------------------------------
def launcher_rank() -> tuple[int, int] | None:
    """(rank, world size) from a launcher's environment (torchrun sets RANK
    and WORLD_SIZE), when the world has more than one rank."""
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except (KeyError, ValueError):
        return None
    return (rank, world) if world > 1 and 0 <= rank < world else None


def output_rank(summaries: list[dict[str, Any]]) -> tuple[int, int] | None:
    """(rank, world size) of this process for `loopscope run`'s output files:
    from its profiles when they saw torch.distributed, else from the
    launcher's environment; None when the job has one rank."""
    for s in summaries:
        if s.get("rank") is not None and s.get("world_size", 1) > 1:
            return s["rank"], s["world_size"]
    return launcher_rank()


def sent_line(summary: dict[str, Any]) -> str | None:
    """For a rank > 0 whose summary reached rank 0: one line instead of the
    whole report (rank 0 prints every rank's figures); else None."""
    d = summary.get("distributed") or {}
    if not summary.get("rank") or d.get("gather") != "sent to rank 0":
        return None
    return (f"loopscope: rank {summary['rank']} of {summary['world_size']}: "
            f"{summary['diagnosis']['verdict']}; its figures are in rank 0's report")


def output_paths(path: str, where: tuple[int, int] | None) -> list[str]:
    """Where `loopscope run` writes an output named `path`: there alone
    without a job of several ranks; else the rank's own file, and on rank 0
    also `path` itself (rank 0's summary holds every rank's).  Never two
    ranks into one file; stdout (`-`) gets rank 0's alone."""
    if where is None:
        return [path]
    rank = where[0]
    if path == "-":  # stdout (`--json -`): rank 0's job summary alone, no file named "-.rankN"
        return [path] if rank == 0 else []
    return [rank_path(path, rank)] + ([path] if rank == 0 else [])


def rank_path(path: str, rank: int) -> str:
    """OUT -> the rank's own file: "out.json" -> "out.rank1.json",
    "t.json.gz" -> "t.rank1.json.gz", "out" -> "out.rank1.json"."""
    for ext in (".json.gz", ".json"):
        if path.endswith(ext):
            return f"{path[: -len(ext)]}.rank{rank}{ext}"
    return f"{path}.rank{rank}.json"


def end_before_destroy(end: Callable[[], None]) -> Callable[[], None]:
    """While a script runs under `loopscope run`: ends the run's profile
    (and gathers) right before the script destroys its default process
    group, while the store still works.  Returns the undo."""
    dist = sys.modules.get("torch.distributed")
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    if dist is None or c10d is None or not hasattr(c10d, "destroy_process_group"):
        return lambda: None
    original = getattr(c10d, "destroy_process_group")

    def destroy_process_group(group=None, *args, **kwargs):
        if group is None:
            end()
        return original(group, *args, **kwargs)

    owners = [m for m in (dist, c10d) if getattr(m, "destroy_process_group", None) is original]
    for m in owners:
        setattr(m, "destroy_process_group", destroy_process_group)

    def undo() -> None:
        for m in owners:
            setattr(m, "destroy_process_group", original)

    return undo
