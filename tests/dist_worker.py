"""A gloo process group on CPU, for tests/distributed/test_distributed.py:

    python dist_worker.py SPEC.json

imports torch once, then forks one process per rank (so the ranks do not
each pay torch's import, seconds on a loaded 2-core machine), waits for
them until SPEC's "deadline_s" and kills those still running; exit status
0 only when every rank exited 0.  SPEC may hold several groups, run one
after the other: {"groups": [SPEC, ...], "deadline_s": s}.

SPEC: {"world": W, "port_file": path, "out": path with "{rank}",
"scenarios": [...]}.  Rank 0 serves the job's TCPStore (on a free port it
writes to port_file); every rank joins the gloo group through it, runs the
scenarios in order and writes its summaries (one per scenario, None where
it skipped) as JSON to out.  A scenario:
  steps        number of prof.step() steps
  timeout_s    gather_timeout_s
  gather       the profile's gather option (default true)
  skip         ranks that do not enter this profile at all
  raise_rank   a rank whose with-block raises ValueError("planted") after its steps
  clock        per rank: start of the scripted profile clock (_testhooks._set_test_clock)
  tick         its tick
  extra        per rank, per step: clock reads made just before the step (its lateness)
  exchange     per rank: the scripted exchange clock, the values in the order read
  kernels      {"gemm_us": G, "comm_us": [[per rank, per step]], "idle_us": [[...]]}: per
               step, after idle_us of device time, a gemm kernel of G us then an NCCL
               all-reduce kernel of comm_us, on device <rank>, each launched inside the step
Profiles never trace for real (trace, syncs, metrics off): records are injected.
Each rank also reports how many scripted exchange values were left unread.

With "cli": {"argv": [...], "log": path with "{rank}"} in SPEC instead of
scenarios, each rank runs `python -m loopscope ARGV` in its process, under
a torchrun-like environment (RANK, WORLD_SIZE, LOCAL_RANK), its output in
its log; the script itself joins the group."""
from __future__ import annotations

import datetime
import json
import os
import sys
import time
import warnings

import torch.distributed as dist

import loopscope
from loopscope import _core, _testhooks
from loopscope.distributed import _distributed


class Script:
    """A scripted clock: returns the given values in order."""

    def __init__(self, values: list[int]) -> None:
        self.values = list(values)
        self.read = 0

    def __call__(self) -> int:
        value = self.values[self.read]
        self.read += 1
        return value


def connect(rank: int, world: int, port_file: str):
    timeout = datetime.timedelta(seconds=30)
    if rank == 0:
        store = dist.TCPStore("127.0.0.1", 0, world, True, timeout, wait_for_workers=False)
        with open(port_file + ".tmp", "w") as f:
            f.write(str(store.port))
        os.rename(port_file + ".tmp", port_file)
    else:
        deadline = time.monotonic() + 30
        while not os.path.exists(port_file):
            if time.monotonic() > deadline:
                raise SystemExit("rank 0 did not publish its store's port")
            time.sleep(0.01)
        with open(port_file) as f:
            store = dist.TCPStore("127.0.0.1", int(f.read()), world, False, timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    return store


def run(scenario: dict, rank: int) -> dict | None:
    if rank in scenario.get("skip", []):
        return None
    script = None
    if scenario.get("exchange"):
        script = Script(scenario["exchange"][rank])
        _distributed._exchange_clock = script
    if scenario.get("clock"):
        _testhooks._set_test_clock(scenario["clock"][rank], scenario["tick"])
    extra = scenario["extra"][rank] if scenario.get("extra") else [0] * scenario["steps"]
    prof = loopscope.profile(gather=scenario.get("gather", True), trace=False, syncs=False,
                             metrics=False, gather_timeout_s=scenario["timeout_s"])
    kernels = scenario.get("kernels")
    device_ns, corr = 1_000, 1
    try:
        with prof:
            for k in range(scenario["steps"]):
                for _ in range(extra[k]):
                    _core.now_ns()
                with prof.step():
                    if kernels:
                        device_ns += kernels["idle_us"][rank][k] * 1000
                        for name, us in (("gemm", kernels["gemm_us"]),
                                         ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
                                          kernels["comm_us"][rank][k])):
                            now = _core.now_ns()
                            _testhooks._inject("api", [(now, now + 1, corr)])
                            _testhooks._inject("kernel", [(device_ns, device_ns + us * 1000, rank, 7,
                                                      corr, name)])
                            device_ns += us * 1000 + 1_000
                            corr += 1
            if scenario.get("raise_rank") == rank:
                raise ValueError("planted")
    except ValueError:
        pass
    finally:
        _testhooks._set_test_clock(0, 0)
        _distributed._exchange_clock = time.monotonic_ns
    summary = dict(prof.summary())
    summary["_unread_exchange_values"] = None if script is None else len(script.values) - script.read
    return summary


def rank_main(spec: dict, rank: int) -> None:
    world = spec["world"]
    warnings.simplefilter("ignore", loopscope.LoopscopeWarning)
    store = connect(rank, world, spec["port_file"])
    results = [run(scenario, rank) for scenario in spec["scenarios"]]
    with open(spec["out"].format(rank=rank), "w") as f:
        json.dump(results, f)
    store.set(f"done/{rank}", b"1")
    if rank == 0:  # the store lives in this process: outlive the others' use of it
        store.wait([f"done/{r}" for r in range(world)], datetime.timedelta(seconds=30))
    dist.destroy_process_group()


def cli_main(spec: dict, rank: int) -> None:
    cli = spec["cli"]
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(spec["world"]))
    log = os.open(cli["log"].format(rank=rank), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(log, 1)
    os.dup2(log, 2)
    from loopscope.__main__ import main as loopscope_main

    status = loopscope_main(cli["argv"])
    if status:
        raise SystemExit(f"loopscope run exited {status}")


def run_group(spec: dict, deadline: float, main=None) -> int:
    """Forks one process per rank of one group, each running main(spec,
    rank) (default: the scenarios, or the CLI); 0 when every rank exited 0
    before the deadline (the others are killed)."""
    children = {}
    for rank in range(spec["world"]):
        pid = os.fork()
        if pid == 0:  # the rank: never returns into the parent's code
            status = 1
            try:
                (main or (cli_main if "cli" in spec else rank_main))(spec, rank)
                status = 0
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(status)
        children[pid] = rank
    failed = 0
    while children and time.monotonic() < deadline:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            time.sleep(0.02)
            continue
        rank = children.pop(pid)
        if status != 0:
            print(f"rank {rank} exited with status {status}", flush=True)
            failed = 1
    for pid, rank in children.items():  # past the deadline: a hang, not a pass
        print(f"rank {rank} still running at the deadline: killed", flush=True)
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        failed = 1
    return failed


def main() -> int:
    """SPEC.json holds one group, or {"groups": [...], "deadline_s": s} run
    one after the other (one import of torch for all)."""
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    deadline = time.monotonic() + spec["deadline_s"]
    failed = 0
    for group in spec.get("groups", [spec]):
        failed |= run_group(group, deadline)
    return failed


if __name__ == "__main__":
    sys.exit(main())
