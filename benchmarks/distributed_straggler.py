"""Issue 16 on GPUs: does rank 0 name a planted straggler?

Each step runs 8 Linear(dim) layers (bf16) then an all_reduce of the
output.  In a "planted" run one rank (--late-rank, default 1) is held
--late-ms (default 2 ms) on the host at the start of every step (a spin on
perf_counter: time.sleep overshoots by 50-100 us); a "control" run is the
same loop without it.  Runs alternate planted / control.  Each run: warm-up
steps, a barrier, then --steps steps inside loopscope.profile() with
prof.step().  Rank 0 prints one line per run:

  run  kind     straggler  late ms  vs planted  last in  rank 0 verdict            clock +-us
    0  planted  rank 1       2.046      +2.3%    50/50  COMMUNICATION_WAIT -> 1       12.0
    1  control  none             -          -     0/50  GPU_BOUND                     11.8

late ms: how much later than the first rank the straggler reached the
all_reduce, on average over the steps it was last (from the collectives'
kernel times: issue 16's rule); "as issue 16 asks" at the end says whether
every planted run named the late rank within 10% of the planted delay with
rank 0 waiting for it, and no control run named anyone.  Nothing is
asserted.  Naming needs the collective kernels classified (comm_ms per
step, issue 12); without it the table says "not measured".

Usage:
  python benchmarks/distributed_straggler.py --nproc 2         # starts torchrun itself
  torchrun --nproc-per-node 2 benchmarks/distributed_straggler.py
  ... [--runs 5] [--steps 50] [--late-ms 2] [--late-rank 1] [--dim 2048] [--batch 64]
      [--json OUT]  (rank 0's summaries, for benchmarks/RESULTS.md)
Every process it starts, and every rank, runs with NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 (set here
before torch or NCCL start).  Without a GPU it runs on CPU with gloo (use a
small --dim) and says what it could not measure."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}
WITHIN = 0.10  # issue 16: the skew within 10% of the planted delay


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nproc", type=int, default=2,
                   help="ranks to start with torchrun when not already under it (default 2)")
    p.add_argument("--runs", type=int, default=5, help="planted runs, and as many controls")
    p.add_argument("--steps", type=int, default=50, help="profiled steps per run")
    p.add_argument("--warmup", type=int, default=20, help="unprofiled steps before each run")
    p.add_argument("--late-ms", type=float, default=2.0, help="planted host delay per step")
    p.add_argument("--late-rank", type=int, default=1, help="the rank held back")
    p.add_argument("--dim", type=int, default=2048, help="Linear width (default 2048)")
    p.add_argument("--batch", type=int, default=64, help="rows per step (default 64)")
    p.add_argument("--json", help="write rank 0's summaries of every run to this file")
    args = p.parse_args(argv)
    if args.nproc < 2 or args.runs < 1 or args.steps < 1 or args.late_ms <= 0:
        p.error("need --nproc >= 2, --runs >= 1, --steps >= 1, --late-ms > 0")
    return args


def launch(args: argparse.Namespace) -> int:
    """Not under torchrun: start it, every rank with the no-multicast settings."""
    env = dict(os.environ, **NO_MULTICAST)
    forwarded = [f"--runs={args.runs}", f"--steps={args.steps}", f"--warmup={args.warmup}",
                 f"--late-ms={args.late_ms}", f"--late-rank={args.late_rank}", f"--dim={args.dim}",
                 f"--batch={args.batch}"] + ([f"--json={args.json}"] if args.json else [])
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={args.nproc}", os.path.abspath(__file__)] + forwarded
    print("starting:", " ".join(f"{k}={v}" for k, v in NO_MULTICAST.items()), " ".join(cmd),
          flush=True)
    return subprocess.call(cmd, env=env)


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def rank_main(args: argparse.Namespace) -> None:
    os.environ.update(NO_MULTICAST)  # before torch, NCCL or NVSHMEM read them
    import torch
    import torch.distributed as dist

    import loopscope

    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    gpu = torch.cuda.is_available()
    if gpu:
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
        dtype = torch.bfloat16
    else:
        device, dtype = torch.device("cpu"), torch.float32
        dist.init_process_group("gloo")
    world = dist.get_world_size()
    if not 0 <= args.late_rank < world:
        raise SystemExit(f"--late-rank {args.late_rank} is not a rank of a world of {world}")
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(args.dim, args.dim) for _ in range(8)])
    model = model.to(device=device, dtype=dtype)
    x = torch.randn(args.batch, args.dim, device=device, dtype=dtype)
    late_s = args.late_ms / 1e3

    def step(planted: bool) -> None:
        if planted and rank == args.late_rank:
            spin(late_s)
        with torch.no_grad():
            y = model(x)
        dist.all_reduce(y)

    rows, summaries = [], []
    for run in range(2 * args.runs):
        planted = run % 2 == 0
        for _ in range(args.warmup):
            step(planted)
        if gpu:
            torch.cuda.synchronize()
        dist.barrier()
        with loopscope.profile() as prof:
            for _ in range(args.steps):
                with prof.step():
                    step(planted)
        if rank == 0:
            summary = prof.summary()
            summaries.append({"run": run, "planted": planted, "summary": summary})
            rows.append(row(run, planted, summary, args))
            if run == 0:
                print(prof.report(), flush=True)
    if rank == 0:
        table(rows, args, gpu, summaries[0]["summary"])
        if args.json:
            with open(args.json, "w") as f:
                json.dump(summaries, f, indent=1)
            print(f"rank 0's summaries written to {args.json}")
    dist.destroy_process_group()


def row(run: int, planted: bool, summary: dict, args: argparse.Namespace) -> dict:
    skew = summary.get("skew") or {}
    s = skew.get("straggler")
    d = summary["diagnosis"]
    waits_for = (skew.get("per_rank") or [{}])[0] or {}
    late = s["late_ms"] if s else None
    out = {
        "run": run, "kind": "planted" if planted else "control",
        "straggler": None if s is None else s["rank"], "late_ms": late,
        "vs_planted_pct": None if late is None or not planted
        else 100.0 * (late - args.late_ms) / args.late_ms,
        "last_in": f"{s['last_in_steps'] if s else 0}/"
                   f"{s['steps_compared'] if s else len(skew.get('steps') or [])}",
        "verdict": d["verdict"], "waits_for": waits_for.get("waits_for"),
        "clock_error_us": (skew.get("clock") or {}).get("error_us"),
        "cause": None if s is None else s["cause"],
        "not_measured": skew.get("not_measured") or [],
    }
    measured = any(r["wait_ms"] is not None for r in skew.get("steps") or [])
    if not measured:
        out["as_asked"] = None  # no collective times: nothing to judge
    elif planted:
        out["as_asked"] = (out["straggler"] == args.late_rank and late is not None
                           and abs(late - args.late_ms) <= WITHIN * args.late_ms
                           and out["verdict"] == "COMMUNICATION_WAIT"
                           and out["waits_for"] == args.late_rank)
    else:
        out["as_asked"] = out["straggler"] is None
    return out


def table(rows: list[dict], args: argparse.Namespace, gpu: bool, first: dict) -> None:
    print()
    print(f"{'run':>4}  {'kind':<8} {'straggler':<10} {'late ms':>8} {'vs planted':>10} "
          f"{'last in':>8}  {'rank 0 verdict':<25} {'clock +-us':>10}  cause")
    for r in rows:
        verdict = r["verdict"] + (f" -> {r['waits_for']}" if r["waits_for"] is not None else "")
        late = "-" if r["late_ms"] is None else f"{r['late_ms']:.3f}"
        vs = "-" if r["vs_planted_pct"] is None else f"{r['vs_planted_pct']:+.1f}%"
        clock = "-" if r["clock_error_us"] is None else f"{r['clock_error_us']:.1f}"
        who = "none" if r["straggler"] is None else f"rank {r['straggler']}"
        print(f"{r['run']:>4}  {r['kind']:<8} {who:<10} {late:>8} {vs:>10} {r['last_in']:>8}  "
              f"{verdict:<25} {clock:>10}  {r['cause'] or '-'}")
    for note in rows[0]["not_measured"]:
        print(f"not measured: {note}")
    judged = [r["as_asked"] for r in rows if r["as_asked"] is not None]
    verdict = ("not measured (no collective kernel times)" if not judged else
               f"{'yes' if all(judged) and len(judged) == len(rows) else 'no'} "
               f"({sum(judged)} of {len(rows)} runs)")
    print(f"as issue 16 asks ({args.late_ms:g} ms planted on rank {args.late_rank}, named within "
          f"{WITHIN:.0%} with rank 0 waiting for it; no straggler without it): {verdict}"
          + ("" if gpu else "; no GPU here: gloo on CPU"))
    device = (first.get("gpu") or {}).get("device")
    print(f"device: {device or 'CPU'}; world size {first.get('world_size')}; "
          f"{args.steps} steps per run, dim {args.dim}, batch {args.batch}")


def main() -> int:
    args = parse()
    if "RANK" not in os.environ:
        return launch(args)
    rank_main(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
