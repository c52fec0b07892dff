"""Synthetic per-rank Kineto traces of one job (tests/distributed/test_trace_folders.py):
every rank runs the same steps, a 5 ms gemm then an NCCL all-reduce; a
planted straggler's host launches its step late_us later, so its gemm ends
and its all-reduce starts that much later, and the others' all-reduce
kernels spin until it arrives.  The expected figures are worked out here
from the times written, by plain arithmetic."""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

PERIOD_NS = 20_000_000     # a step every 20 ms
GEMM_NS = 5_000_000
WORK_NS = 200_000          # the all-reduce's own work once every rank is there
LAUNCH_LAG_NS = 10_000     # from a launch call to its kernel's start
BASE_NS = 1_700_000_000_000_000_000
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def us(ns: int) -> float:
    return round(ns / 1000, 3)


def plan(world: int, steps: int, late: dict[int, int]) -> dict[str, Any]:
    """Per rank and step: the gemm launch (host) and its start, the arrival
    at the all-reduce (gemm end), the all-reduce's end (the last arrival +
    WORK_NS).  late: rank -> its host's delay per step (ns)."""
    out: dict[str, Any] = {"launch": {}, "arrive": {}, "end": {}, "call": {}}
    for k in range(steps):
        t = 1_000_000 + k * PERIOD_NS
        arrive = {}
        for r in range(world):
            launch = t + 100_000 + late.get(r, 0)
            out["launch"][r, k] = launch
            out["call"][r, k] = launch + 20_000
            arrive[r] = launch + LAUNCH_LAG_NS + GEMM_NS
        last = max(arrive.values())
        for r in range(world):
            out["arrive"][r, k] = arrive[r]
            out["end"][r, k] = last + WORK_NS
    return out


def rank_doc(rank: int, world: int, steps: int, p: dict[str, Any], base_shift_ns: int = 0,
             distributed: bool = True, step_late_ns: int = 0, clock_offset_ns: int = 0,
             comm_jitter_ns: dict[int, int] | None = None) -> dict[str, Any]:
    """One rank's trace; its baseTimeNanoseconds moved by base_shift_ns and
    its times the other way (the same host clock); its step ranges begin
    step_late_ns late.  clock_offset_ns: every time written that much later
    (its profiler's time base off by that much: the file's clock disagrees
    with the other ranks'); comm_jitter_ns: step -> its all-reduce kernel
    written that much later in that step alone (ends that do not meet)."""
    ev: list[dict[str, Any]] = []
    corr = 1
    shift = -base_shift_ns + clock_offset_ns
    for k in range(steps):
        t = 1_000_000 + k * PERIOD_NS
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": 1,
                   "tid": 1, "ts": us(t + shift + step_late_ns),
                   "dur": us(PERIOD_NS - 1_000_000 - step_late_ns)})
        gemm_launch, call = p["launch"][rank, k], p["call"][rank, k]
        arrive, end = p["arrive"][rank, k], p["end"][rank, k]
        kernels = [("sm90_gemm", gemm_launch, gemm_launch + LAUNCH_LAG_NS, GEMM_NS),
                   (NCCL, call, arrive, end - arrive)]
        jitter = (comm_jitter_ns or {}).get(k, 0)
        kernels[1] = (NCCL, call, arrive + jitter, end - arrive)
        for name, at, start, dur in kernels:
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                       "tid": 1, "ts": us(at + shift), "dur": us(5_000),
                       "args": {"correlation": corr, "cbid": 211}})
            ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7,
                       "ts": us(start + shift), "dur": us(dur),
                       "args": {"correlation": corr, "device": 0, "stream": 7}})
            corr += 1
    doc: dict[str, Any] = {"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS + base_shift_ns,
                           "deviceProperties": [{"id": 0, "name": "Test GPU", "numSms": 132}]}
    if distributed:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    doc["traceEvents"] = ev
    return doc


def write_job(folder: Path, world: int, steps: int, late: dict[int, int],
              names: str = "rank{rank}.json.gz", distributed: bool = True,
              skip: tuple[int, ...] = (), step_late: dict[int, int] | None = None,
              clock: dict[int, int] | None = None,
              comm_jitter: dict[int, dict[int, int]] | None = None) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    p = plan(world, steps, late)
    for r in range(world):
        if r in skip:
            continue
        doc = rank_doc(r, world, steps, p, base_shift_ns=r * 3_000, distributed=distributed,
                       step_late_ns=(step_late or {}).get(r, 0),
                       clock_offset_ns=(clock or {}).get(r, 0),
                       comm_jitter_ns=(comm_jitter or {}).get(r))
        with gzip.open(folder / names.format(rank=r), "wt") as f:
            json.dump(doc, f)
    return p
