"""Records the demo loop on a GPU into the package, so `python -m loopscope
demo` on a machine without a GPU shows a real loop (and says it is a
recording).  Run on the GPU machine, repo root:

    python3 benchmarks/tour/record_demo.py            # eager, 10 steps
    python3 benchmarks/tour/record_demo.py --out /tmp/x.json.gz --graph

Writes python/loopscope/data/demo_recording.json.gz (kept under 200 KB)
and prints the report of the live run and of its replay, which must agree."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import loopscope
from loopscope.files import _recording
from loopscope.readers import _replay
from loopscope.demo import build, eager_loop, gpu_available, graph_loop_factory

LIMIT_BYTES = 200_000
FIGURES = ("count", "normal", "warning", "severe", "mean_us", "p50_us", "p99_us", "max_us",
           "idle_ms", "busy_pct")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(_recording.DEMO_RECORDING),
                        help="where to write (default: the package's bundled recording)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--graph", action="store_true", help="record the CUDA-graph version")
    args = parser.parse_args()
    ok, device = gpu_available()
    if not ok:
        print(f"record_demo: needs a GPU ({device})", file=sys.stderr)
        return 2
    import torch

    model, x = build()
    loop = graph_loop_factory(model, x) if args.graph else None
    run = (lambda prof=None: loop(args.steps, prof)) if loop else (
        lambda prof=None: eager_loop(model, x, args.steps, prof))
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    with loopscope.profile() as prof:
        run(prof)
    live = prof.summary()
    if live["source"] != "cupti":
        print(f"record_demo: the GPU was not traced: {live['gpu_error']}", file=sys.stderr)
        return 1
    command = "python -m loopscope demo" + (" --graph" if args.graph else "") + \
        (f" --steps {args.steps}" if args.steps != 10 else "")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    _recording.save(prof, out, command=command,
                    note=f"torch {torch.__version__}, driver via CUPTI; recorded by "
                         "benchmarks/tour/record_demo.py")
    size = out.stat().st_size
    print(prof.report())
    print(f"\nrecording written: {out} ({size:,} bytes)")
    replayed = _replay.replay(_recording.load(out)).summary()
    same = {k: (live["gaps"][k], replayed["gaps"][k]) for k in FIGURES}
    differ = {k: v for k, v in same.items() if v[0] != v[1]}
    steps_same = [(s["kernels"], s["gaps"]["severe"]) for s in live["steps"]] == \
                 [(s["kernels"], s["gaps"]["severe"]) for s in replayed["steps"]]
    print("replay agrees with the live run:" if not differ and steps_same else "REPLAY DIFFERS:",
          json.dumps(differ or {k: v[0] for k, v in same.items()}))
    if size > LIMIT_BYTES:
        print(f"record_demo: {size:,} bytes is over the {LIMIT_BYTES:,}-byte limit", file=sys.stderr)
        return 1
    return 0 if not differ and steps_same else 1


if __name__ == "__main__":
    sys.exit(main())
