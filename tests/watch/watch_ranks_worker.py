"""Two gloo ranks on CPU running loopscope.watch(all_ranks=True), for
tests/watch/test_watch_ranks.py:

    python watch_ranks_worker.py SPEC.json

SPEC: {"world": 2, "port_file": path, "out": path with "{rank}", "dumps":
folder, "deadline_s": s, plus the figures below}.  The ranks are forked by
tests/dist_worker.py's launcher (one import of torch) and join through its
TCPStore.  Each rank runs two watches and writes, per watch, w.summary(),
its rows and how long the watch took, as JSON to out:

straggler  both ranks step `steps` times in lockstep (a gloo barrier in
           each step); host times are scripted (watch_loop's clock): rank
           1's step `slow_step` lasts `slow_ms`, over the budget; in every
           step an injected gemm kernel, then an NCCL all-reduce kernel of
           comm_us[rank] after idle_us[rank] of device idle (rank 1 late).
apart      rank 0 steps `apart_steps[0]` times, rank 1 `apart_steps[1]`
           (no barrier: the counts differ); rank 1's step `apart_slow`
           breaches; rank 0 waits in its step `apart_wait` until rank 1 has
           left its watch, so the order of events is fixed."""
from __future__ import annotations

import datetime
import json
import os
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import torch.distributed as dist  # noqa: E402

import dist_worker  # noqa: E402
import loopscope  # noqa: E402
import watch_loop  # noqa: E402
from loopscope import _core, _testhooks  # noqa: E402
from loopscope.watching import _watch  # noqa: E402


def kernels(spec: dict, rank: int, device: list[int], corr: list[int]) -> None:
    """One step's gemm and NCCL all-reduce kernels (dist_worker's way)."""
    device[0] += spec["idle_us"][rank] * 1000
    for name, us in (("gemm", spec["gemm_us"]),
                     ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", spec["comm_us"][rank])):
        now = _core.now_ns()
        _testhooks._inject("api", [(now, now + 1, corr[0])])
        _testhooks._inject("kernel", [(device[0], device[0] + us * 1000, rank, 7, corr[0], name)])
        device[0] += us * 1000 + 1_000
        corr[0] += 1


def watched(spec: dict, rank: int, name: str):
    return loopscope.watch(step_budget_ms=spec["budget_ms"], p99_factor=None, warmup_steps=0,
                           block_steps=spec["block_steps"], profile_steps=spec["profile_steps"],
                           min_dump_interval_s=0.0, metrics=False, all_ranks=True,
                           rank_check_steps=spec["check_steps"],
                           rank_timeout_s=spec["timeout_s"],
                           dump_dir=os.path.join(spec["dumps"], f"{name}-rank{rank}"))


def result(w, began: float) -> dict:
    return {"summary": w.summary(), "rows": w.steps(), "seconds": time.monotonic() - began}


def straggler(spec: dict, rank: int) -> dict:
    clock = watch_loop.StepClock()
    _watch._clock = clock
    device, corr = [1_000], [1]
    began = time.monotonic()
    with watched(spec, rank, "straggler") as w:
        for i in range(spec["steps"]):
            slow = rank == 1 and i == spec["slow_step"]
            clock.durations.append(spec["slow_ms"] if slow else 1.0)
            with w.step():
                kernels(spec, rank, device, corr)
                dist.barrier()
    return result(w, began)


def apart(spec: dict, rank: int, store) -> dict:
    clock = watch_loop.StepClock()
    _watch._clock = clock
    began = time.monotonic()
    with watched(spec, rank, "apart") as w:
        for i in range(spec["apart_steps"][rank]):
            if rank == 0 and i == spec["apart_wait"]:
                store.wait(["test/rank1_left"], datetime.timedelta(seconds=30))
            slow = rank == 1 and i == spec["apart_slow"]
            clock.durations.append(spec["slow_ms"] if slow else 1.0)
            with w.step():
                pass
    if rank == 1:
        store.set("test/rank1_left", b"1")
    return result(w, began)


def rank_main(spec: dict, rank: int) -> None:
    warnings.simplefilter("ignore", loopscope.LoopscopeWarning)
    store = dist_worker.connect(rank, spec["world"], spec["port_file"])
    results = {"straggler": straggler(spec, rank), "apart": apart(spec, rank, store)}
    with open(spec["out"].format(rank=rank), "w") as f:
        json.dump(results, f, default=str)
    store.set(f"done/{rank}", b"1")
    if rank == 0:  # the store lives in this process: outlive the other's use of it
        store.wait([f"done/{r}" for r in range(spec["world"])], datetime.timedelta(seconds=30))
    dist.destroy_process_group()


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        SPEC = json.load(f)
    sys.exit(dist_worker.run_group(SPEC, time.monotonic() + SPEC["deadline_s"], rank_main))
