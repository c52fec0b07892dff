"""Command line: `loopscope demo`, `loopscope run`, `loopscope diff` (_cli.py),
`loopscope analyze` (_analyze_cli.py), `loopscope merge` (_merge_cli.py), `loopscope doctor`
(_doctor.py); the same as `python -m loopscope ...`."""
from __future__ import annotations

import argparse
import os
import sys

from . import __version__, instrument, profile
from .live import _settings
from .surfaces._analyze_cli import add_analyze_parser, analyze_command
from .surfaces._doctor import add_doctor_parser, doctor_command
from .surfaces._merge_cli import add_merge_parser, merge_command
from .surfaces._cli import (EXIT_BUDGET, EXIT_CLOSED_PIPE, EXIT_USAGE, add_diff_parser,
                            add_run_parser, check_outputs, demo_recording, diff_command,
                            route_stdout, run_command, save_summary, silence_stdout,
                            unroute_stdout)
from .surfaces._watch_cli import add_watch_arguments, refuse_without_watch, watch_run
from .demo import build, eager_loop, gpu_available, graph_loop_factory

DEMO_STEPS = 10


def _demo(args: argparse.Namespace) -> int:
    ok, detail = gpu_available()
    if not ok:
        return demo_recording(detail, args.json, graph=args.graph, layers=args.layers,
                              steps=args.steps)  # None unless given: the recording's own
    import torch

    if args.steps is None:
        args.steps = DEMO_STEPS
    model, x = build()
    if args.layers:
        instrument(model)  # one range per block and per layer, under each step
    print(f"loopscope demo on {detail}: {args.steps} denoise steps, 18 MLP blocks, "
          f"{'CUDA graph replay' if args.graph else 'eager'}"
          f"{', per-layer ranges' if args.layers else ''}", file=sys.stderr)  # a notice
    loop = graph_loop_factory(model, x) if args.graph else None
    run = (lambda prof=None: loop(args.steps, prof)) if loop else (
        lambda prof=None: eager_loop(model, x, args.steps, prof))
    for _ in range(3):  # warm-up: cuBLAS handles, allocator, lazy modules
        run()
    torch.cuda.synchronize()
    with profile() as prof:
        run(prof)
    print(prof.report())
    if args.json and not save_summary(args.json, prof.summary()):
        return EXIT_BUDGET
    return 0


def _typed_prog() -> str:
    """The command as the user typed it: the console script's name
    (`loopscope`), or `python -m loopscope` with their Python's name."""
    if os.path.basename(sys.argv[0]) == "__main__.py":  # python -m loopscope
        python = os.path.basename(getattr(sys, "orig_argv", [""])[0]) or "python"
        return f"{python} -m loopscope"
    return os.path.basename(sys.argv[0]) or "loopscope"


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """The command line.  `prog`, the command's name in help and errors:
    by default as typed on the real command line (argv None), else
    `loopscope`.

    Output cut short by its reader (`loopscope demo | head -1`) ends the
    command quietly with EXIT_CLOSED_PIPE, the status a shell reports for a
    command that SIGPIPE ended (git, cat), not with a traceback."""
    try:
        status = _command(argv, prog)
        sys.stdout.flush()  # a pipe closed early fails here, not at exit
        return status
    except BrokenPipeError:
        silence_stdout()
        return EXIT_CLOSED_PIPE


def _command(argv: list[str] | None, prog: str | None) -> int:
    if prog is None:
        prog = _typed_prog() if argv is None else "loopscope"
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Profile PyTorch GPU loops: launch gaps, syncs, verdict.",
        epilog="examples:\n  %(prog)s demo\n  %(prog)s run train.py --epochs 1\n"
        "  %(prog)s analyze trace.json.gz\n  %(prog)s diff before.json after.json\n"
        "  %(prog)s doctor              # what this machine's stack gives loopscope\n\n"
        "'%(prog)s COMMAND --help' explains each command.\n\n"
        f"A reader that stops early (| head) ends a command with status {EXIT_CLOSED_PIPE}, "
        "as SIGPIPE would.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-V", "--version", action="version", version=f"loopscope {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="profile a built-in 10-step denoise loop and print the report",
        description="Profiles a built-in denoise loop (10 steps x 18 MLP blocks, bf16) and "
        "prints the report.  Without a GPU it analyses a bundled recording of the same loop "
        "made on a GPU, and says so (and which of --graph, --layers, --steps it cannot show).\n\n"
        "examples:\n  %(prog)s\n  %(prog)s --graph --json demo.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--steps", type=int, help=f"loop steps (default {DEMO_STEPS})")
    demo.add_argument("--graph", action="store_true", help="replay each step from a CUDA graph")
    demo.add_argument("--layers", action="store_true",
                      help="loopscope.instrument() the model: per-layer ranges and GPU times")
    demo.add_argument("--json", metavar="PATH", help="also write the summary dict as JSON (-: stdout, "
                      "JSON alone there)")
    add_run_parser(sub)
    add_watch_arguments(sub.choices["run"])
    add_analyze_parser(sub)
    add_diff_parser(sub)
    add_merge_parser(sub)
    add_doctor_parser(sub)
    args = parser.parse_args(argv)
    try:  # a benchmark switch left set wrongly: named before any work (not a traceback)
        _settings.internal()
    except ValueError as error:
        print(f"{sub.choices[args.command].prog}: error: {error} (an internal switch for "
              "loopscope's benchmarks: unset LOOPSCOPE_INTERNAL)", file=sys.stderr)
        return EXIT_USAGE
    if not route_stdout(sub.choices[args.command].prog, args):  # `--json -`: JSON alone there
        return EXIT_USAGE
    try:
        return _dispatch(parser, sub, args)
    finally:
        unroute_stdout()


def _dispatch(parser: argparse.ArgumentParser, sub, args: argparse.Namespace) -> int:
    if args.command == "demo":
        if not check_outputs(sub.choices["demo"].prog, {"--json": args.json}):
            return EXIT_USAGE
        return _demo(args)
    if args.command == "run" and args.watch is not None:
        return watch_run(args, sub.choices["run"])
    if args.command == "run":
        refuse_without_watch(args, sub.choices["run"])
        return run_command(args, sub.choices["run"])
    if args.command == "analyze":
        return analyze_command(args, sub.choices["analyze"])
    if args.command == "diff":
        return diff_command(args, sub.choices["diff"])
    if args.command == "merge":
        return merge_command(args, sub.choices["merge"])
    if args.command == "doctor":
        return doctor_command(args)
    parser.error(f"unknown command {args.command!r}")
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
