"""Command line: `python -m loopscope demo`, `python -m loopscope run` (_cli.py),
`python -m loopscope analyze` (_analyze_cli.py)."""
from __future__ import annotations

import argparse
import json
import sys

from . import instrument, profile
from ._analyze_cli import add_analyze_parser, analyze_command
from ._cli import EXIT_USAGE, add_run_parser, demo_recording, run_command
from .demo import build, eager_loop, gpu_available, graph_loop_factory


def _demo(args: argparse.Namespace) -> int:
    ok, detail = gpu_available()
    if not ok:
        return demo_recording(detail, args.json)
    import torch

    model, x = build()
    if args.layers:
        instrument(model)  # one range per block and per layer, under each step
    print(f"loopscope demo on {detail}: {args.steps} denoise steps, 18 MLP blocks, "
          f"{'CUDA graph replay' if args.graph else 'eager'}"
          f"{', per-layer ranges' if args.layers else ''}")
    loop = graph_loop_factory(model, x) if args.graph else None
    run = (lambda prof=None: loop(args.steps, prof)) if loop else (
        lambda prof=None: eager_loop(model, x, args.steps, prof))
    for _ in range(3):  # warm-up: cuBLAS handles, allocator, lazy modules
        run()
    torch.cuda.synchronize()
    with profile() as prof:
        run(prof)
    print(prof.report())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(prof.summary(), f, indent=1)
        print(f"summary written to {args.json}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loopscope",
        description="Profile PyTorch GPU loops: launch gaps, syncs, verdict.",
        epilog="examples:\n  python -m loopscope demo\n  python -m loopscope run train.py "
        "--epochs 1\n  python -m loopscope analyze trace.json.gz\n\n'python -m loopscope COMMAND --help' explains each command.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="profile a built-in 10-step denoise loop and print the report",
        description="Profiles a built-in denoise loop (10 steps x 18 MLP blocks, bf16) and "
        "prints the report.  Without a GPU it analyses a bundled recording of the same loop "
        "made on a GPU, and says so.\n\nexamples:\n  python -m loopscope demo\n"
        "  python -m loopscope demo --graph --json demo.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--steps", type=int, default=10, help="loop steps (default 10)")
    demo.add_argument("--graph", action="store_true", help="replay each step from a CUDA graph")
    demo.add_argument("--layers", action="store_true",
                      help="loopscope.instrument() the model: per-layer ranges and GPU times")
    demo.add_argument("--json", metavar="PATH", help="also write the summary dict as JSON")
    add_run_parser(sub)
    add_analyze_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "demo":
        return _demo(args)
    if args.command == "run":
        return run_command(args, sub.choices["run"])
    if args.command == "analyze":
        return analyze_command(args, sub.choices["analyze"])
    parser.error(f"unknown command {args.command!r}")
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
