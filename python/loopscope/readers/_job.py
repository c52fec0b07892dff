"""A job read afterwards from one trace per rank: `loopscope.analyze(DIR)`,
`loopscope.analyze([FILE, ...])`, `loopscope analyze DIR`.

Each trace is read by the same reader as one file (_analyze.load), in its
own process (up to the cores at a time, a fresh process per rank so its
memory goes back; a fresh interpreter that runs nothing of the caller's, so a
script needs no `if __name__ == "__main__":` guard: _WORKER_BOOT), and boiled down to the
rank's compact summary (_ranks.compact, as a live rank sends rank 0), with
each step's arrival at its collectives.  The compacts are merged by the
same rule as live (_ranks.merge), on the traces' own clock (a Kineto
trace's times are its host's clock: see _ranks.SHARED_CLOCK_METHOD),
checked against the ends of each step's first collective kernel and moved
by their offsets where the files disagree (_ranks._end_alignment).

The rank of a trace: its distributedInfo.rank (torch.profiler writes it
under torch.distributed), else a number after "rank" in its file name
(rank-3.json.gz, trace_rank3.json).  The world size: the largest
distributedInfo.world_size, else the highest rank + 1.  Two traces of one
rank are an error (two runs in one folder?); ranks of the world with no
trace are named in skew["missing"].

The summary is the lowest rank's own summary (rank 0's when it is there)
with "ranks" (every rank's compact, or {"rank", "missing"}), "skew",
"distributed" and "job" (the files, per rank, and how long reading took)
added, and the cross-rank verdict, as on rank 0 of a live job.

Ranks files (`--ranks-out`): the compacts of the ranks one `analyze` read,
as JSON ({"loopscope_ranks": 1, "world_size", "backend", "ranks": [...],
"paths": {...}}), so a job of thousands of ranks is read where its traces
are (one `analyze` per node) and merged on one machine (merge_files,
`loopscope merge A B ...`)."""
from __future__ import annotations

import concurrent.futures as futures
import gzip
import json
import os
import pickle
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from ..figures import _ranks
from . import _analyze
from ..figures._diagnosis import diagnose_ranks
from .._summary import SCHEMA_VERSION
from ..files import _formats, _schema as schema
from ..files._inputs import input_problem, parse_json, read_text
from ..live._options import check_thresholds
from ._sniff import TraceError

RANK_IN_NAME = re.compile(r"rank[-_.]?(\d+)", re.IGNORECASE)
RANKS_FILE_VERSION = 1
# The largest world a job read offline may have: a rank or world size above it (a
# damaged distributedInfo, a stray number in a file name) is refused, never a list
# of a billion missing ranks.  Twice the largest jobs run today (~100k GPUs).
MAX_WORLD_SIZE = 1 << 18
# Ranks of one job profile at the same time: traces whose profiled steps lie
# further apart than this on their own clocks are named as not one job's
# (two runs in one folder, or hosts whose clocks disagree by that much).
JOB_APART_NS = 60_000_000_000
UNKNOWN_HOST = "not in the trace"  # Kineto traces name no host


def analyze(path: str | os.PathLike[str] | list[str | os.PathLike[str]]
            | tuple[str | os.PathLike[str], ...], *,
            steps: str | None = None,
            device: int | None = None, gap_thresholds_us: tuple[float, float] = (20.0, 50.0),
            progress: bool = True, workers: int | None = None) -> dict[str, Any]:
    """The summary dict of a trace file, the same as a live profile's
    (summary["source"] says "kineto", "nsys" or "recording";
    summary["trace"] says what was read and skipped; see _analyze.load).

    A folder, or a list of files: one trace per rank of a job, read as one
    job (module doc): the lowest rank's summary with every rank's compact
    summary in summary["ranks"] and the cross-rank figures in
    summary["skew"], as rank 0 of a live job has them; each rank read in its
    own process (`workers` at a time, default the cores)."""
    if not isinstance(path, (list, tuple)) and not Path(path).is_dir():
        return _analyze.analyze(path, steps=steps, device=device,
                                gap_thresholds_us=gap_thresholds_us, progress=progress)
    thresholds = check_thresholds(gap_thresholds_us)
    _analyze._pattern(steps)  # a bad expression is told here, not in each worker
    return read_job(list(path) if isinstance(path, (list, tuple)) else [path], steps=steps,
                    device=_analyze._check_device(device), thresholds=thresholds,
                    workers=workers, progress=progress)


# -- which files ------------------------------------------------------------------
def trace_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The trace files of a job: each path a file, or a folder whose files
    ending in .json, .json.gz or .sqlite are taken (not its subfolders).
    TraceError naming the path when there is none, or naming an entry of
    a folder named like a trace that is no readable file (a dangling
    symlink, a FIFO, a device): skipping it would read a smaller job."""
    out: list[Path] = []
    for given in paths:
        p = Path(given)
        if p.is_dir():
            suffixes = _formats.suffixes()
            named = sorted(f for f in p.iterdir() if f.name.endswith(suffixes) and not f.is_dir())
            for f in named:
                problem = ("is a symlink to nothing (its target does not exist)"
                           if f.is_symlink() and not f.exists() else input_problem(f))
                if problem is not None:
                    raise TraceError(f"{f}: {problem}; named like a trace in the job's folder "
                                     "{p}, so the job cannot be read without it (move it out, "
                                     "or give the trace files one by one with --ranks)"
                                     .replace("{p}", str(p)))
            found = named
            if not found:
                raise TraceError(f"{p}: a folder with no trace file in it (looked for names "
                                 f"ending in {', '.join(suffixes)})")
            out += found
        elif os.path.lexists(p):  # a FIFO or a symlink loop: analyze refuses it by name
            out.append(p)
        else:
            raise TraceError(f"{p}: no such file or folder")
    return out


def rank_in_name(path: Path) -> int | None:
    found = RANK_IN_NAME.findall(path.name)
    return int(found[-1]) if found else None


# -- one rank (in a worker process) ------------------------------------------------
def read_rank(path: str, steps: str | None, device: int | None,
              thresholds: tuple[float, float], keep_summary: bool) -> dict[str, Any]:
    """One trace read into its rank's compact summary: {path, rank,
    world_size, backend, rank_from, compact, summary (when keep_summary),
    read_s}.  Raises TraceError naming the file."""
    t0 = time.perf_counter()
    p = Path(path)
    prof = _analyze.load(p, steps=steps, device=device, gap_thresholds_us=thresholds, progress=False)
    summary = dict(prof.summary())
    dist = (summary.get("trace") or {}).get("distributed")
    rank, world, rank_from = summary.get("rank"), summary.get("world_size"), "distributedInfo"
    if isinstance(rank, bool) or (isinstance(rank, int) and rank < 0):
        raise TraceError(f"{p}: distributedInfo.rank is {rank!r}: a rank is a whole number >= 0")
    if not isinstance(rank, int):
        rank, world, rank_from = rank_in_name(p), None, "file name"
    if rank is None:
        raise TraceError(f"{p}: which rank it is cannot be told: no distributedInfo.rank in "
                         "it and no 'rank<N>' in its name")
    _check_world(max(rank + 1, world if isinstance(world, int) else 0), lambda: str(p))
    step_times: dict[int, tuple[int, int]] = {}
    for _name, _parent, step, start, end in prof.capture.range_records():
        if step is not None:
            step_times.setdefault(step, (start, end))
    compact = _ranks.compact(summary, rank=rank, world_size=world or 0, host=UNKNOWN_HOST,
                             step_times=step_times, clock=None,
                             # a trace names no GPU identity: taken as the rank's own
                             gpu_ids=lambda d: f"{p.name} GPU {d}",
                             arrivals=_ranks.collective_arrivals(prof.model),
                             ends=_ranks.collective_ends(prof.model))
    compact["time_base"] = _time_base(summary)
    compact["path"] = str(p)
    backend = dist.get("backend") if isinstance(dist, dict) else None
    return {"path": str(p), "rank": rank, "world_size": world, "backend": backend,
            "rank_from": rank_from, "compact": compact,
            "summary": summary if keep_summary else None,
            "read_s": round(time.perf_counter() - t0, 3)}


def _time_base(summary: dict[str, Any]) -> dict[str, Any] | None:
    """How this trace's model times map to its host clock: the reader added
    base + shift to every file time; minus the shift gives the file's own
    (epoch-based) time.  None for formats without a shared clock."""
    trace = summary.get("trace") or {}
    fmt = _formats.get(trace.get("format"))
    if fmt is None or fmt.host_clock is None or trace.get("time_offset_ns") is None:
        return None
    shift = trace["time_offset_ns"] - (trace.get("base_time_ns") or 0)
    return {"kind": fmt.host_clock, "shift_ns": shift}


# -- the job ------------------------------------------------------------------------
class _Progress:
    """"read 3 of 16 ranks" on stderr: a bar redrawn on a terminal, a line
    per rank otherwise; nothing when off."""

    def __init__(self, total: int, on: bool) -> None:
        self.total, self.on, self.done = total, on, 0
        self.tty = on and sys.stderr.isatty()

    def tick(self, what: str) -> None:
        self.done += 1
        if not self.on:
            return
        if self.tty:
            filled = int(30 * self.done / self.total)
            sys.stderr.write(f"\rloopscope: [{'#' * filled}{'.' * (30 - filled)}] "
                             f"{self.done}/{self.total} ranks read")
            if self.done == self.total:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(f"loopscope: read {self.done} of {self.total}: {what}\n")
        sys.stderr.flush()


def _pool_size(workers: int | None, files: int) -> int:
    if workers is None:
        workers = os.cpu_count() or 1
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a whole number >= 1, got {workers!r}")
    return max(1, min(workers, files))


# How a worker starts: a fresh interpreter (`python -c`) that reads its task
# from stdin and imports only loopscope.  multiprocessing's spawn and
# forkserver re-run the caller's __main__ in every worker (a script with no
# `if __name__ == "__main__":` guard starts the pool again and the pool
# breaks; a script read from stdin has no file to re-run), and fork copies a
# process whose threads may hold locks; this runs nothing of the caller's.
_WORKER_BOOT = ("import sys, pickle; task = pickle.load(sys.stdin.buffer); "
                "sys.path[:] = task['sys_path']; "
                "from loopscope.readers._job import _worker_main; _worker_main(task)")
_WORKER_LAST_WORDS = 2000  # characters of a dead worker's stderr quoted in the error


def _worker_main(task: dict[str, Any]) -> None:
    """A worker process: reads one rank (read_rank) and writes its result,
    pickled, to stdout: ("ok", result) or ("error", exception); anything
    the reader prints goes to stderr, so stdout holds the result alone."""
    out = sys.stdout.buffer
    sys.stdout = sys.stderr
    try:
        reply: tuple[str, Any] = ("ok", read_rank(*task["args"]))
    except Exception as e:  # noqa: BLE001 - sent back, raised in the caller
        try:
            pickle.dumps(e)
            reply = ("error", e)
        except Exception:  # noqa: BLE001 - an exception that does not pickle
            reply = ("error", RuntimeError(f"{type(e).__name__}: {e}"))
    pickle.dump(reply, out)
    out.flush()


def _died(path: Path, returncode: int, stderr: bytes) -> str:
    """Why a worker gave no result, naming the file and its rank (from the
    name, where it has one) and the cause: the signal, or the exit status
    with the end of what it wrote on stderr."""
    rank = rank_in_name(path)
    who = f"{path} (rank {rank})" if rank is not None else str(path)
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        cause = f"was killed by {name}"
        if -returncode == getattr(signal, "SIGKILL", None):
            cause += " (the kernel's out-of-memory killer sends it when memory runs out)"
    else:
        cause = f"exited with status {returncode}"
    words = stderr.decode(errors="replace").strip()[-_WORKER_LAST_WORDS:]
    return (f"{who}: the process reading it {cause} before giving a result"
            + (f"; its last words: {words}" if words else ""))


class _Workers:
    """Worker processes (_WORKER_BOOT), one per rank, `size` at a time:
    each waited for on a thread, which is idle in a pipe read.  stop()
    kills those still running (an error or Ctrl-C in the caller)."""

    def __init__(self) -> None:
        self.running: set[subprocess.Popen[bytes]] = set()
        self.lock = threading.Lock()  # guards running
        self.stopped = False

    def read(self, path: Path, args: tuple[Any, ...]) -> dict[str, Any]:
        task = pickle.dumps({"sys_path": list(sys.path), "args": args})
        with self.lock:
            if self.stopped:
                raise futures.CancelledError()
            try:
                proc = subprocess.Popen([sys.executable, "-c", _WORKER_BOOT],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
            except OSError as error:  # no process to be had (limits, memory)
                raise TraceError(f"{path}: no process could be started to read it "
                                 f"({error.strerror or error}); --workers 1 reads the ranks "
                                 "one by one in this process") from None
            self.running.add(proc)
        try:
            out, err = proc.communicate(task)
        finally:
            with self.lock:
                self.running.discard(proc)
        if self.stopped:
            raise futures.CancelledError()
        try:
            kind, value = pickle.loads(out)
        except Exception:  # noqa: BLE001 - no result: the process died
            raise TraceError(_died(path, proc.returncode, err)) from None
        if kind == "error":
            raise value
        result: dict[str, Any] = value
        return result

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            for proc in self.running:
                proc.kill()


def read_ranks(paths: list[Path], *, steps: str | None, device: int | None,
               thresholds: tuple[float, float], workers: int | None = None,
               progress: bool = True) -> list[dict[str, Any]]:
    """Every file read by read_rank, in `workers` processes at a time, a
    fresh one per rank so its memory goes back (1: here, in this process);
    the full summary is kept for the lowest rank only (memory: one rank's
    summary at a time).  A worker that dies raises TraceError naming the
    file, its rank and the cause (_died)."""
    bar = _Progress(len(paths), progress)
    size = _pool_size(workers, len(paths))
    results: list[dict[str, Any]] = []
    lowest: list[int] = []

    def keep(result: dict[str, Any]) -> None:
        rank = result["rank"]
        if lowest and rank >= lowest[0]:
            result["summary"] = None
        else:
            for other in results:
                other["summary"] = None
            lowest[:] = [rank]
        results.append(result)
        bar.tick(f"rank {rank}: {result['path']}")

    if size == 1 or not sys.executable:  # no interpreter to start (embedded): here
        for p in paths:
            keep(read_rank(str(p), steps, device, thresholds, True))
        return results
    procs = _Workers()
    with futures.ThreadPoolExecutor(max_workers=size) as pool:
        jobs = [pool.submit(procs.read, p, (str(p), steps, device, thresholds, True))
                for p in paths]
        try:
            for job in futures.as_completed(jobs):
                keep(job.result())
        except BaseException:
            for job in jobs:
                job.cancel()
            procs.stop()
            raise
    return results


def _ranked(results: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """rank -> its read; TraceError naming both files when two traces claim
    one rank."""
    by_rank: dict[int, dict[str, Any]] = {}
    for r in sorted(results, key=lambda x: (x["rank"], x["path"])):
        if r["rank"] in by_rank:
            raise TraceError(f"rank {r['rank']} has two traces: {by_rank[r['rank']]['path']} and "
                             f"{r['path']} (one trace per rank: two runs in one folder?)")
        by_rank[r["rank"]] = r
    return by_rank


def _check_world(world: int, where: Callable[[], str]) -> None:
    """TraceError when a job's world (highest rank + 1, or a world size
    read) is above MAX_WORLD_SIZE; where() names the file that said so."""
    if world > MAX_WORLD_SIZE:
        raise TraceError(f"{where()}: a job of {world:,} ranks, more than the {MAX_WORLD_SIZE:,} "
                         "loopscope reads (a damaged rank number or world size?)")


def _span_text(ns: float) -> str:
    s = ns / 1e9
    for unit, size in (("days", 86_400), ("hours", 3_600), ("minutes", 60)):
        if s >= 2 * size:
            return f"{s / size:.1f} {unit}"
    return f"{s:.1f} s"


def apart(compacts: dict[int, dict[str, Any]]) -> str | None:
    """A sentence when the ranks' profiled steps, on their files' own clocks
    (time_base), fall into windows more than JOB_APART_NS apart: those
    traces cannot be of one job.  None otherwise, or where no clock is shared."""
    windows = []
    for r, c in compacts.items():
        base = c.get("time_base")
        times = [(s["start_ns"], s["end_ns"]) for s in c.get("steps") or ()
                 if s.get("start_ns") is not None and s.get("end_ns") is not None]
        if base and times:
            shift = base["shift_ns"]
            windows.append((min(a for a, _ in times) - shift, max(b for _, b in times) - shift, r))
    reach: tuple[float, int] | None = None  # the latest end so far, and whose
    for start, end, r in sorted(windows):
        if reach is not None and start - reach[0] > JOB_APART_NS:
            return (f"rank {r}'s steps begin {_span_text(start - reach[0])} after rank "
                    f"{reach[1]}'s end, by their traces' clocks: they cannot be of one job (two "
                    "runs in one folder, or hosts whose clocks disagree by that much); the "
                    "cross-rank figures compare different runs")
        if reach is None or end > reach[0]:
            reach = (end, r)
    return None


def job_summary(compacts: dict[int, dict[str, Any]], *, world_size: int | None,
                backend: str | None, base: dict[str, Any] | None,
                paths: dict[int, str], read: dict[str, Any]) -> dict[str, Any]:
    """The job's summary: `base` (the lowest rank's own summary, or None
    when only compacts are known, as in a merge) with ranks, skew,
    distributed and job; rank 0's cross-rank verdict.  TraceError when the
    world is larger than MAX_WORLD_SIZE."""
    world = max([world_size or 0, max(compacts) + 1])
    _check_world(world, lambda: "the job")  # each file was checked as it was read
    ranks_list: list[dict[str, Any] | None] = [compacts.get(r) for r in range(world)]
    missing = {r: "no trace of it was read" for r in range(world) if r not in compacts}
    skew = _ranks.merge(ranks_list, {}, missing, backend, shared_clock=True)
    summary: dict[str, Any] = dict(base) if base is not None else {}
    summary["rank"] = min(compacts)
    summary["world_size"] = world
    summary["ranks"] = [c if c is not None else {"rank": r, "missing": missing[r]}
                        for r, c in enumerate(ranks_list)]
    summary["skew"] = skew
    summary["distributed"] = {
        "backend": backend, "profile_index": None,
        "gather": f"read from {len(compacts)} trace file{'s' if len(compacts) != 1 else ''}"
                  + (f", {len(missing)} rank{'s' if len(missing) != 1 else ''} missing"
                     if missing else ""),
        "timeout_s": None,
        "missing": [{"rank": r, "reason": why} for r, why in sorted(missing.items())],
        "notes": [], "exchange_ms": {},
    }
    summary["job"] = dict(read, paths={str(r): paths[r] for r in sorted(paths)},
                          clock=skew["clock"]["method"], apart=apart(compacts))
    if "diagnosis" in summary:
        summary["diagnosis"] = diagnose_ranks(summary)
    return summary


def read_job(paths: Iterable[str | os.PathLike[str]], *, steps: str | None = None,
             device: int | None = None, thresholds: tuple[float, float] = (20.0, 50.0),
             workers: int | None = None,
             progress: bool = True) -> dict[str, Any]:
    """The summary of a job from its per-rank traces (see the module doc)."""
    files = trace_files(paths)
    t0 = time.perf_counter()
    results = read_ranks(files, steps=steps, device=device, thresholds=thresholds,
                         workers=workers, progress=progress)
    by_rank = _ranked(results)
    worlds = [r["world_size"] for r in results if r["world_size"]]
    backends = sorted({r["backend"] for r in results if r["backend"]})
    compacts = {rank: r["compact"] for rank, r in by_rank.items()}
    for c in compacts.values():
        c["world_size"] = max(worlds) if worlds else max(compacts) + 1
    base = by_rank[min(by_rank)]["summary"]
    read = {"files": len(files), "workers": _pool_size(workers, len(files)),
            "read_s": round(time.perf_counter() - t0, 3),
            "rank_from": sorted({r["rank_from"] for r in results})}
    return job_summary(compacts, world_size=max(worlds) if worlds else None,
                       backend=backends[0] if len(backends) == 1 else None, base=base,
                       paths={rank: r["path"] for rank, r in by_rank.items()}, read=read)


# -- ranks files: map where the traces are, reduce on one machine -------------------
def ranks_document(summary: dict[str, Any]) -> dict[str, Any]:
    """What --ranks-out writes: the compacts of the ranks read."""
    compacts = [c for c in summary["ranks"] if "missing" not in c]
    return {"loopscope_ranks": RANKS_FILE_VERSION, "world_size": summary["world_size"],
            "backend": (summary.get("distributed") or {}).get("backend"),
            "host": socket.gethostname(), "ranks": compacts,
            "paths": (summary.get("job") or {}).get("paths", {})}


def write_ranks(path: str, summary: dict[str, Any]) -> None:
    text = json.dumps(ranks_document(summary)).encode()
    if path.endswith(".gz"):
        text = gzip.compress(text)
    Path(path).write_bytes(text)


# What a ranks file's compacts hold (_ranks.compact, with read_rank's time_base and
# path), checked before the merge reads them: a damaged file is named, never a
# KeyError or TypeError from deep in the merge.
_N = schema.Optional(schema.NUM)
_STEP_SHAPE = {"index": schema.COUNT, "name": str, "start_ns": _N, "end_ns": _N,
               "arrive_ns": _N, "call_ns": _N, "done_ns": _N, "host_ms": _N, "gpu_ms": _N,
               "comm_ms": _N, "compute_ms": _N, "syncs": schema.Optional(schema.COUNT),
               "idle_host_ms": _N, "idle_sync_ms": _N, "verdict": schema.Optional(str)}
_COMPACT_SHAPE = {
    "rank": schema.COUNT, "world_size": schema.Optional(schema.COUNT),
    "host": schema.Optional(str), "devices": schema.Optional([schema.NUM]),
    "gpus": schema.Optional([str]), "device": schema.Optional(str),
    "source": schema.Optional(str), "gpu_error": schema.Optional(str), "host_ms": _N,
    "busy_pct": _N, "gpu_busy_ms": _N, "comm_ms": _N, "compute_ms": _N, "comm_pct": _N,
    "syncs": schema.Optional(schema.COUNT), "sync_blocked_ms": _N,
    "verdict": schema.Optional(str), "cause": schema.Optional(str),
    "steps": [_STEP_SHAPE],
    "clock": schema.Optional({"profile_ns": [schema.NUM], "exchange_ns": [schema.NUM]}),
    "raised": schema.Optional(str),
    "failed_checks": schema.Optional([{"name": schema.Optional(str),
                                       "detail": schema.Optional(str)}]),
    "time_base": schema.Optional({"kind": str, "shift_ns": schema.NUM}),
    "path": schema.Optional(str)}


def _filled(value: dict[str, Any], shape: dict[str, Any]) -> dict[str, Any]:
    """A checked dict with every key of its shape (an absent optional one None)."""
    return {**{k: None for k in shape}, **value}


def _read_ranks_file(path: Path) -> dict[str, Any]:
    # bounded (_inputs): a cap on the inflated text, no unbounded nesting; TraceError names path
    doc = parse_json(path, read_text(path), "not a loopscope ranks file (not JSON)")
    if not isinstance(doc, dict) or doc.get("loopscope_ranks") != RANKS_FILE_VERSION \
            or not isinstance(doc.get("ranks"), list):
        raise TraceError(f"{path}: not a loopscope ranks file (write one with `loopscope "
                         "analyze DIR --ranks-out FILE`)")
    try:
        schema.check(doc.get("world_size"), schema.Optional(schema.COUNT), "world_size")
        schema.check(doc.get("backend"), schema.Optional(str), "backend")
        schema.check(doc.get("paths"), schema.Optional(schema.MapOf(str)), "paths")
        schema.check(doc["ranks"], [_COMPACT_SHAPE], "ranks")
    except schema.SchemaError as error:
        raise TraceError(f"{path}: a damaged ranks file: {error}") from None
    doc["ranks"] = [dict(_filled(c, _COMPACT_SHAPE),
                         steps=[_filled(s, _STEP_SHAPE) for s in c["steps"]])
                    for c in doc["ranks"]]
    doc["paths"] = doc.get("paths") or {}
    for c in doc["ranks"]:
        _check_world(max(c["rank"] + 1, c["world_size"] or 0, doc.get("world_size") or 0),
                     lambda: str(path))
    return doc


def merge_files(paths: Iterable[str | os.PathLike[str]],
                on_file: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The job summary (no rank's own summary: ranks, skew, distributed,
    job) of ranks files written by --ranks-out.  TraceError naming the file
    that cannot be read, or the rank found in two files."""
    compacts: dict[int, dict[str, Any]] = {}
    where: dict[int, str] = {}
    paths_of: dict[int, str] = {}
    worlds, backends = [], set()
    files = [Path(p) for p in paths]
    for f in files:
        doc = _read_ranks_file(f)
        for c in doc["ranks"]:
            r = c["rank"]
            if r in compacts:
                raise TraceError(f"rank {r} is in two ranks files: {where[r]} and {f}")
            compacts[r], where[r] = c, str(f)
            paths_of[r] = doc.get("paths", {}).get(str(r), str(f))
        if isinstance(doc.get("world_size"), int):
            worlds.append(doc["world_size"])
        if doc.get("backend"):
            backends.add(doc["backend"])
        if on_file is not None:
            on_file(str(f))
    if not compacts:
        raise TraceError("the ranks files hold no rank")
    # no rank's own summary: a summary of the ranks alone (its steps are the
    # ranks' table's), with the lowest rank's own verdict as the cross-rank
    # diagnosis starts from, so `loopscope diff` reads a merge as any summary
    low = compacts[min(compacts)]
    base = {"schema": SCHEMA_VERSION, "source": "ranks files", "steps": [],
            "diagnosis": {"verdict": low.get("verdict") or "UNKNOWN",
                          "reasons": [f"rank {low['rank']}'s own verdict, from its ranks file"],
                          "actions": []}}
    return job_summary(compacts, world_size=max(worlds) if worlds else None,
                       backend=backends.pop() if len(backends) == 1 else None, base=base,
                       paths=paths_of, read={"files": len(files), "merged": True})
