"""`loopscope run --watch BUDGET_MS script.py`: the script runs inside a
`loopscope.watch(step_budget_ms=BUDGET_MS)` instead of one profile, with no
change to its code.  Its steps: the loops marked with `loopscope.step()`,
or, with --watch-module CLASS, each top-level call of the first module of
that class the script calls (found by a global forward pre-hook that
removes itself at the first match; then the watch's steps=module hooks).
A breach writes a dump (loopscope.watch's rules); at the end one line says
how many steps were watched, the breaches and the dumps, and --json writes
w.summary().  The exit status is the script's own (a flight recorder is no
gate)."""
from __future__ import annotations

import argparse
import importlib.util
import sys
from typing import Any

from ._cli import EXIT_USAGE, _run_script, _say, check_outputs, number_arg, write_json


DEFAULT_DIR = "loopscope-dumps"
_budget = number_arg(float, "a number of ms > 0", above_zero=True)


def add_watch_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument("--watch", metavar="BUDGET_MS", type=_budget,
                     help="watch every step instead of profiling once (loopscope.watch): a step "
                          "over BUDGET_MS host time writes a dump; steps are the script's "
                          "loopscope.step() blocks, or --watch-module's calls")
    run.add_argument("--watch-dir", metavar="DIR", default=None,
                     help=f"with --watch: where the dumps go (default {DEFAULT_DIR})")
    run.add_argument("--watch-module", metavar="CLASS",
                     help="with --watch: each top-level call of the first torch module of this "
                          "class name is a step (decode loops, no loopscope.step() needed)")


class _FirstModule:
    """A global forward pre-hook that hands the first module of class `name`
    to the watch (steps=module) and removes itself."""

    def __init__(self, watch: Any, name: str) -> None:
        import torch

        self.watch, self.name, self.found = watch, name, None
        self.handle: Any = torch.nn.modules.module.register_module_forward_pre_hook(self._seen)

    def _seen(self, module: Any, args: Any) -> None:
        if self.found is None and type(module).__name__ == self.name:
            self.found = module
            self.remove()
            self.watch._attach_module(module, args)  # this call is step 0
        return None

    def remove(self) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None


def refuse_without_watch(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """--watch-dir and --watch-module mean nothing without --watch: a usage
    error naming them (exits 2), not an option silently dropped."""
    alone = [o for o, v in (("--watch-dir", args.watch_dir), ("--watch-module", args.watch_module))
             if v is not None]
    if alone:
        parser.error(f"{' and '.join(alone)} go{'es' if len(alone) == 1 else ''} with "
                     "--watch BUDGET_MS (the step budget of the watch)")


def watch_run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..watching._watch import watch

    if args.watch_dir is None:
        args.watch_dir = DEFAULT_DIR
    if args.watch_module is not None and not args.watch_module.isidentifier():
        parser.error(f"--watch-module must be a class name (e.g. GPT2LMHeadModel), got "
                     f"{args.watch_module!r}")

    conflicts = [o for o, v in (("--trace", args.trace), ("--steps", args.steps),
                                ("--max-syncs", args.max_syncs),
                                ("--max-severe-gaps", args.max_severe_gaps)) if v is not None]
    if conflicts:
        parser.error(f"--watch writes dumps, not one profile: {', '.join(conflicts)} cannot go "
                     "with it (the dumps hold the report and the trace)")
    if args.watch_module and importlib.util.find_spec("torch") is None:
        parser.error("--watch-module needs torch, which is not installed")
    if not check_outputs(parser.prog, {"--json": args.json}):
        return EXIT_USAGE
    try:
        w = watch(step_budget_ms=args.watch, dump_dir=args.watch_dir)
    except (TypeError, ValueError) as refused:
        parser.error(f"--watch-dir {args.watch_dir!r}: {refused}")
    if importlib.util.find_spec("torch") is not None:
        importlib.import_module("torch")  # first, so the profiles reuse the CUPTI torch loads
    _say(f"watching {args.script} (step budget {args.watch:g} ms, dumps in {args.watch_dir})")
    finder = None
    with w:
        if args.watch_module:
            finder = _FirstModule(w, args.watch_module)
        try:
            status, error = _run_script(args.script, list(args.args))
        finally:
            if finder is not None:
                finder.remove()
    summary = w.summary()
    if error:
        _say(error)
    if finder is not None and finder.found is None:
        _say(f"no module of class {args.watch_module!r} was called: no step was watched")
    elif summary["steps_seen"] == 0:
        _say("no step was watched: mark the loop with `with loopscope.step():`, or give "
             "--watch-module CLASS")
    _say(f"watched {summary['steps_seen']} steps: {summary['breaches']} breach"
         f"{'es' if summary['breaches'] != 1 else ''}, {len(summary['dumps'])} dump"
         f"{'s' if len(summary['dumps']) != 1 else ''}"
         + "".join(f"\n  {p}" for p in summary["dumps"]))
    if args.json and not write_json("--json", args.json, summary):
        return status or 1
    return status
