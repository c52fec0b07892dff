"""`python -m loopscope run`: a script under the profiler; `diff`: two
profiles compared (_compare); and the demo's no-GPU path (the bundled
recording).

How `run` profiles a script:
- The whole script runs inside one profile (runpy, as __main__, with
  sys.argv set to the script and its arguments).
- A script that makes its own `loopscope.profile()` takes over: the run's
  profile ends as the script's begins, and the script's profiles are the
  ones reported (so a script marked with prof.step() runs unchanged,
  alone or under `run`).
- Steps: the script's prof.step() calls; else, with --steps REGEX, the
  ranges whose names match REGEX (re.search): loopscope.range blocks, and,
  mirrored while the script runs, torch.cuda.nvtx.range_push/pop and
  torch.profiler.record_function blocks.
- Budgets (--max-syncs, --max-severe-gaps): a failed budget exits 1 with the
  evidence; a budget whose metric was not measured is reported as NOT
  CHECKED and fails the gate too (exit 1: a gate never passes on a figure
  that was not measured); one whose figure a failed self-check
  (summary["checks"]) cannot vouch for fails.
- A script that ends in os._exit(N) (distributed jobs do) still gets its
  report, files and budgets: os._exit raises on the main thread while the
  script runs, and the run ends with the real os._exit afterwards
  (_OsExitHook).

Output files (--json, --trace): their folder must exist and be writable
before the script runs (else exit 2 at once, one line naming the option and
the path); if writing still fails at the end, the report has been printed
already and one line says which file could not be written (exit 1).

Exit status: 0 ok; 1 a budget failed, the script raised, or an output file
could not be written; 2 usage error; a script's own non-zero sys.exit status
is passed on."""
from __future__ import annotations

import argparse
import io
import json
import os
import re
import runpy
import shutil
import sys
import tempfile
import threading
import traceback
import warnings
from typing import Any, Callable

from ..files._inputs import input_problem, output_problem

EXIT_OK, EXIT_BUDGET, EXIT_USAGE = 0, 1, 2
EXIT_CLOSED_PIPE = 128 + 13  # 128 + SIGPIPE: what a shell shows for `cat big | head -1`


def silence_stdout() -> None:
    """After the reader closed stdout (`| head`): later writes, the
    interpreter's last flush included, go nowhere, unseen."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # a stdout with no file (captured in a test)
        pass
PROGRESS_RECORDS = 500_000  # above this, say what the analysis is doing (it takes seconds)

RUN_DESCRIPTION = """\
Runs a Python script under the profiler and prints the report.

The script runs as __main__ with its own arguments.  If it makes its own
`with loopscope.profile() as prof:` block, that profile is the one reported
(its prof.step() calls are the steps); otherwise the whole script is
profiled.  Without prof.step() steps, --steps REGEX takes the ranges whose
names match REGEX as steps: loopscope.range() blocks, torch NVTX ranges
(torch.cuda.nvtx.range_push/range) and torch.profiler.record_function blocks.

examples:
  %(prog)s train.py --epochs 1
  %(prog)s --steps 'denoise_step' --json out.json sample.py
  %(prog)s --max-syncs 0 --max-severe-gaps 0 infer.py   # CI gate

under torchrun (torch.distributed): every rank profiles itself; --json and
--trace write OUT.rank<N>.json per rank (out.json -> out.rank1.json), and
rank 0 also writes OUT, whose summary holds every rank's (summary["ranks"],
summary["skew"]: skews, waits, the straggler).  Rank 0 prints the report
with the ranks; the other ranks print one line.

exit status: 0 ok; 1 a budget failed or could not be checked, or the script
raised (or --json/--trace could not be written: the report is printed
first); 2 usage error (also an output folder that does not exist or is not
writable, found before the script runs); a script's own non-zero exit status
is passed on.  A budget that could not be measured here (no GPU, sync
detection unavailable) is printed as NOT CHECKED and the gate fails (exit 1):
a budget is never met by a figure that was not measured."""


def add_run_parser(sub) -> None:
    run = sub.add_parser(
        "run", help="run a script under the profiler and print the report",
        description=RUN_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--steps", metavar="REGEX",
                     help="ranges whose names match REGEX are the steps (when the script "
                          "has no prof.step() of its own)")
    run.add_argument("--json", metavar="OUT", help="write the summary dict as JSON to OUT "
                     "(a list of them when the script ran several profiles; -: stdout, JSON "
                     "alone there: the report and the script's prints go to stderr)")
    run.add_argument("--trace", metavar="OUT",
                     help="write a Chrome/Perfetto trace (ranges, GPU ops, syncs, gaps) to OUT "
                          "(-: stdout, the trace alone there)")
    run.add_argument("--max-syncs", metavar="N", type=_count,
                     help="budget: fail (exit 1) with more than N host-device syncs")
    run.add_argument("--max-severe-gaps", metavar="N", type=_count,
                     help="budget: fail (exit 1) with more than N severe gaps")
    run.add_argument("--graph-replays", action="store_true",
                     help="graph-level mode: trace each CUDA-graph replay as one span "
                          "(loopscope.prepare() before the script starts CUDA; ~2%% of a "
                          "graph loop against 11-14%% for a record per kernel)")
    run.add_argument("script", help="the Python script to run")
    run.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")


def number_arg(kind: Callable[[str], Any], what: str, above_zero: bool = False
               ) -> Callable[[str], Any]:
    """An argparse type: a finite kind(text) (int or float) >= 0, or > 0
    with above_zero; anything else is refused as "must be <what>"."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        # comparisons refuse NaN and infinities too
        if value is None or not (0 < value if above_zero else 0 <= value) or \
                not value < float("inf"):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value
    return parse


_count = number_arg(int, "a whole number >= 0")
_percent = number_arg(float, "a number >= 0")


def _say(message: str) -> None:
    print(f"loopscope: {message}", file=sys.stderr, flush=True)


# -- output files ------------------------------------------------------------
def check_outputs(prog: str, outputs: dict[str, str | None]) -> bool:
    """Says, in one line each, which output option cannot be written;
    True when all can."""
    ok = True
    for option, path in outputs.items():
        problem = None if path in (None, STDOUT) else output_problem(path)
        if problem is not None:
            print(f"{prog}: error: {option} {path}: {problem}", file=sys.stderr, flush=True)
            ok = False
    return ok


# -- stdout: JSON alone, or the report ------------------------------------------
STDOUT = "-"  # an output option's value that means stdout
STDOUT_OPTIONS = ("--json", "--trace")  # the outputs that may go to stdout (one at a time)
_stdout_for_output: list[Any] = []  # the real stdout while an output goes there (route_stdout)


def names_stdout(path: str | None) -> bool:
    """Whether an output path is this process's stdout: `-`, or a name of
    the same file (/dev/stdout, /proc/self/fd/1)."""
    if path == STDOUT:
        return True
    if not path:
        return False
    try:
        st, out = os.stat(path), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False  # no such file, or a stdout with no file (captured in a test)
    return (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino)


def route_stdout(prog: str, args: argparse.Namespace) -> bool:
    """Before a command runs: when one output option names stdout (`-`,
    /dev/stdout), it becomes `-`, and everything else the command prints
    (report, notices, a script's own prints) goes to stderr, so stdout holds
    that output alone.  False (said in one line) when two outputs or an
    option that writes only files name stdout."""
    named = [o for o in ("--json", "--trace", "--ranks-out")
             if names_stdout(getattr(args, o[2:].replace("-", "_"), None))]
    if not named:
        return True
    if len(named) > 1 or named[0] not in STDOUT_OPTIONS:
        print(f"{prog}: error: {' and '.join(named)} name stdout: "
              + ("only one output can go there" if len(named) > 1 else
                 f"{named[0]} writes a file; give it a file name"), file=sys.stderr)
        return False
    setattr(args, named[0][2:].replace("-", "_"), STDOUT)
    _stdout_for_output[:] = [sys.stdout]
    sys.stdout = sys.stderr
    return True


def unroute_stdout() -> None:
    """After the command: stdout back as it was."""
    if _stdout_for_output:
        sys.stdout = _stdout_for_output.pop()


def write_output(option: str, path: str, write: Callable[[str], Any]) -> bool:
    """write(tmp) writes the file at a temporary path beside `path`, which
    then replaces `path` (no half-written file is ever left); for `-`
    (route_stdout), the temporary file is copied to the real stdout.  A
    failure is said in one line (the report is out already); False then."""
    if path == STDOUT:
        return _write_stdout(option, write)
    # through symlinks: the file they name is replaced, never the link itself (a
    # replaced /dev/stdout or /dev/stderr link, written as root, breaks the machine)
    path = os.path.realpath(path)
    folder = os.path.dirname(path)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
        return True
    except (OSError, ValueError, TypeError) as error:
        detail = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        _say(f"could not write {option} {path}: {detail}")
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


def _write_stdout(option: str, write: Callable[[str], Any]) -> bool:
    out = _stdout_for_output[0] if _stdout_for_output else sys.stdout
    fd, tmp = tempfile.mkstemp(prefix="loopscope-", suffix=".out")
    os.close(fd)
    try:
        write(tmp)
        out.flush()
        with open(tmp, "rb") as f:
            shutil.copyfileobj(f, getattr(out, "buffer", None) or out)
        out.flush()
        return True
    except (OSError, ValueError, TypeError) as error:
        if isinstance(error, BrokenPipeError):
            raise  # the reader stopped early: main() ends quietly
        detail = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        _say(f"could not write {option} to stdout: {detail}")
        return False
    finally:
        os.unlink(tmp)


def write_json(option: str, path: str, data: Any) -> bool:
    def write(tmp: str) -> None:
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, allow_nan=False)

    return write_output(option, path, write)


def save_summary(path: str, data: Any) -> bool:
    """--json: writes the summary (or list of them) and says so (on stderr);
    False when it could not (write_output has said why)."""
    if not write_json("--json", path, data):
        return False
    _say(f"summary written to {path if path != STDOUT else 'stdout'}")
    return True


def report_budgets(verdict: Any, label: str = "") -> bool:
    """Prints a budgets verdict (run, analyze).  True when the gate fails: a
    budget failed, or its figure was not measured here, since a gate never
    passes on a figure that was not measured (pytest skips such a budget; a
    CI command fails it)."""
    if verdict.failed:
        print(f"\nBUDGET FAILED{label}\n" + verdict.message(), file=sys.stderr)
        return True
    for o in verdict.unavailable:
        print(f"NOT CHECKED{label}: {o.line()}: the gate fails (a budget is never met by a "
              "figure that was not measured)", file=sys.stderr)
    if verdict.met:
        _say(f"budgets met{label}: " + "; ".join(o.line() for o in verdict.met))
    return bool(verdict.unavailable)


# -- mirroring torch's ranges into loopscope ranges -----------------------
class _TorchRanges:
    """While installed, torch NVTX pushes/pops and record_function blocks also
    open and close loopscope ranges of the same name."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []
        self._local = threading.local()

    def _stack(self) -> list:
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack

    def install(self) -> bool:
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            return False
        import torch.autograd.profiler as autograd_profiler
        import torch.cuda.nvtx as nvtx

        from .. import _core

        stack = self._stack

        def patch(owner, name, make):
            old = getattr(owner, name)
            setattr(owner, name, make(old))
            self._undo.append(lambda: setattr(owner, name, old))

        def push_wrap(old):
            def range_push(msg, *args, **kwargs):
                result = old(msg, *args, **kwargs)
                r = _core.range(str(msg).replace("\0", "?") or "?")  # NUL is refused in names
                r.__enter__()
                stack().append(r)
                return result
            return range_push

        def pop_wrap(old):
            def range_pop(*args, **kwargs):
                open_ranges = stack()
                if open_ranges:
                    open_ranges.pop().__exit__(None, None, None)
                return old(*args, **kwargs)
            return range_pop

        def enter_wrap(old):
            def __enter__(rf):
                result = old(rf)
                r = _core.range(str(rf.name).replace("\0", "?") or "?")
                r.__enter__()
                rf._loopscope_range = r
                return result
            return __enter__

        def exit_wrap(old):
            def __exit__(rf, *exc):
                r = rf.__dict__.pop("_loopscope_range", None)
                if r is not None:
                    r.__exit__(None, None, None)
                return old(rf, *exc)
            return __exit__

        patch(nvtx, "range_push", push_wrap)
        patch(nvtx, "range_pop", pop_wrap)
        record_function = autograd_profiler.record_function
        patch(record_function, "__enter__", enter_wrap)
        patch(record_function, "__exit__", exit_wrap)
        return True

    def remove(self) -> None:
        while self._undo:
            self._undo.pop()()


# -- hand-over between the run's profile and the script's own ---------------
class _HandOver:
    """While installed, the first loopscope profile the script enters ends the
    run's own profile; every profile the script enters is collected."""

    def __init__(self, outer) -> None:
        from .._profile import Profile

        self.outer = outer
        self.script_profiles: list = []
        self._cls = Profile
        self._enter = Profile.__enter__

    def install(self) -> None:
        hand_over = self

        def __enter__(prof):
            if prof is not hand_over.outer:
                hand_over.end_outer()
                hand_over.script_profiles.append(prof)
            return hand_over._enter(prof)

        setattr(self._cls, "__enter__", __enter__)

    def remove(self) -> None:
        setattr(self._cls, "__enter__", self._enter)

    def end_outer(self) -> None:
        outer = self.outer
        if outer.is_running:
            outer.__exit__(None, None, None)


class _OsExit(BaseException):
    """os._exit(status) called by the script on the main thread, turned into
    an unwinding exit so the run still reports (see _hook_os_exit)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class _OsExitHook:
    """os._exit replaced while the script runs.  On the main thread it
    raises _OsExit, so the profile stops, the report and the --json file are
    written and the budgets judged; run_command then ends the process with
    the real os._exit (the script wanted no atexit handler or thread join).
    The script's own finally blocks do run on the way out (os._exit would
    skip them).  On another thread nothing can unwind the main one: the
    process ends there, with a line saying the report is lost, and with
    status 1 where the script asked for 0 and budgets were given (a gate
    must not pass on nothing)."""

    def __init__(self, gated: bool) -> None:
        self.real = os._exit
        self.gated = gated
        self.status: int | None = None

    def __call__(self, status: int = 0) -> None:
        self.status = status
        if threading.current_thread() is threading.main_thread():
            raise _OsExit(status)
        _say(f"the script called os._exit({status}) from thread "
             f"{threading.current_thread().name!r}: the process ends now, with no report and "
             "no output file")
        sys.stderr.flush()
        self.real(EXIT_BUDGET if self.gated and status == 0 else status)

    def install(self) -> None:
        os._exit = self  # type: ignore[assignment]

    def remove(self) -> None:
        os._exit = self.real


def _run_script(path: str, args: list[str]) -> tuple[int, str | None]:
    """Runs the script as __main__; (exit status, error text or None)."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [path] + args
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        runpy.run_path(path, run_name="__main__")
        return EXIT_OK, None
    except _OsExit as exit_:
        status = exit_.status if isinstance(exit_.status, int) else EXIT_BUDGET
        return status, (f"the script called os._exit({exit_.status})" if status else None)
    except SystemExit as exit_:
        code = exit_.code
        if code is None or code == 0:
            return EXIT_OK, None
        if isinstance(code, int):
            return code, f"the script exited with status {code}"
        print(code, file=sys.stderr)
        return EXIT_BUDGET, f"the script exited: {code}"
    except BrokenPipeError:
        # The script's reader closed its output (`loopscope run s.py | head`):
        # quiet, as the script alone would end (SIGPIPE); the profile still
        # goes on to its --json and --trace.
        silence_stdout()
        return EXIT_CLOSED_PIPE, None
    except BaseException as error:  # the script's own failure: report what ran
        traceback.print_exc()
        return EXIT_BUDGET, f"the script raised {type(error).__name__}: {error}"
    finally:
        sys.argv, sys.path = saved_argv, saved_path


def _with_steps(prof, pattern: re.Pattern | None) -> tuple[dict[str, Any], str | None]:
    summary = prof.summary()
    if pattern is None or summary["steps"]:
        note = ("the script marks its own steps with prof.step(); --steps is not used"
                if pattern is not None and summary["steps"] else None)
        return summary, note
    from .._range_steps import summary_with_range_steps

    records = summary["overhead"]["records"]
    if records > PROGRESS_RECORDS:
        _say(f"taking ranges matching {pattern.pattern!r} as steps ({records:,} records)...")
    new = summary_with_range_steps(prof, lambda name: pattern.search(name) is not None)
    if new is None:
        from ..figures._checks import steps_check

        # the steps asked for are not there: a failed self-check, shown atop the report
        summary["checks"] = [c for c in summary.get("checks") or [] if c["name"] != "steps"]
        summary["checks"].append(steps_check(True, 0, f"--steps {pattern.pattern!r} was given"))
        names = sorted({r["name"] for r in summary["ranges"]})
        return summary, (f"no range name matched --steps {pattern.pattern!r}; the report has "
                         f"no steps (range names: {', '.join(names[:10]) or 'none'})")
    return new, None


def run_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..distributed import _distributed
    from ..figures._budgets import evaluate
    from .._profile import LoopscopeWarning, profile

    pattern = None
    if args.steps is not None:
        try:
            pattern = re.compile(args.steps)
        except re.error as bad:
            parser.error(f"--steps {args.steps!r} is not a valid regular expression: {bad}")
    problem = input_problem(args.script)  # a folder, FIFO or symlink loop said as such
    if problem is not None:
        parser.error(f"cannot run {args.script!r}: {problem}")
    if not check_outputs(parser.prog, {"--json": args.json, "--trace": args.trace}):
        return EXIT_USAGE
    budgets = {k: float(v) for k, v in (("max_syncs", args.max_syncs),
                                        ("max_severe_gaps", args.max_severe_gaps)) if v is not None}
    import importlib
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        importlib.import_module("torch")  # first, so the profile reuses the CUPTI torch loads
    if args.graph_replays:
        from ..live._prepare import prepare

        try:
            prepare()
        except RuntimeError as refused:  # said, and the run goes on per kernel
            _say(f"{refused}; the graphs' kernels are traced one by one")
    mirror = _TorchRanges()
    if pattern is not None:
        mirror.install()
    outer = profile()
    hand_over = _HandOver(outer)
    _say(f"profiling {args.script}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LoopscopeWarning)
        outer.__enter__()
    for w in caught:  # said once, plainly, not as a warning pointing into loopscope
        _say(str(w.message).removeprefix("loopscope: "))
    hand_over.install()
    # torch.distributed: a script that destroys its process group ends the
    # run's profile first, so its ranks are gathered while the store works
    undo_destroy = _distributed.end_before_destroy(hand_over.end_outer)
    os_exit = _OsExitHook(gated=bool(budgets))
    os_exit.install()
    try:
        status, error = _run_script(args.script, list(args.args))
    finally:
        os_exit.remove()
        undo_destroy()
        hand_over.remove()
        hand_over.end_outer()  # unless the script's own profile ended it already
        mirror.remove()
    profiles = hand_over.script_profiles or [outer]
    profiles = [p for p in profiles if p.is_running or p.is_finished]
    for p in profiles:  # a script profile left running by an exception
        if p.is_running:
            p.__exit__(None, None, None)
    profiles = [p.finished for p in profiles]  # the values the blocks handed over
    records = sum(p.summary()["overhead"]["records"] for p in profiles)
    if records > PROGRESS_RECORDS:
        _say(f"analysing {records:,} records...")
    summaries, notes = [], []
    for p in profiles:
        summary, note = _with_steps(p, pattern)
        summaries.append(summary)
        if note:
            notes.append(note)
    from ..views._report import format_report

    for i, summary in enumerate(summaries):
        if len(summaries) > 1:
            print(f"\n=== profile {i + 1} of {len(summaries)} ===")
        print(_distributed.sent_line(summary) or format_report(summary))
    for note in notes:
        _say(note)
    written = True
    where = _distributed.output_rank(summaries)  # under torchrun: OUT.rank<N>.json per rank
    if args.json:
        for path in _distributed.output_paths(args.json, where):
            if not save_summary(path, summaries[0] if len(summaries) == 1 else summaries):
                written = False
    if args.trace:
        from ..views._trace_export import export_trace

        for path in _distributed.output_paths(args.trace, where):
            if write_output("--trace", path, lambda tmp: export_trace(profiles, tmp, summaries)):
                _say(f"trace written to {path} (open it at https://ui.perfetto.dev)")
            else:
                written = False
    if error:
        _say(error)
    failed = False
    for i, summary in enumerate(summaries):
        if not budgets:
            break
        # ranges taken as steps: the budgets look at them only (not the warm-up around)
        verdict = evaluate(summary, budgets,
                           args.steps if summary.get("steps_from") == "ranges" else None)
        label = f" (profile {i + 1})" if len(summaries) > 1 else ""
        failed = report_budgets(verdict, label) or failed
    result = status if status != EXIT_OK else (EXIT_BUDGET if failed or not written else EXIT_OK)
    if os_exit.status is not None:  # the script asked to skip atexit handlers and thread joins
        _say(f"the script called os._exit({os_exit.status}); the run ends with status {result}")
        sys.stdout.flush()
        sys.stderr.flush()
        os_exit.real(result)
    return result


# -- diff ------------------------------------------------------------------
DIFF_DESCRIPTION = """\
Compares two profiles: each a saved summary (run --json, a pytest baseline),
a loopscope recording, or a trace file loopscope can analyse.  Prints the
verdicts, the headline figures before and after, the sync sites added and
removed, the kernels whose time changed most, and the steps that changed.

examples:
  %(prog)s before.json after.json
  %(prog)s --max-regression-pct 10 baseline.json new.json   # CI gate

exit status: 0 ok; 1 a figure regressed beyond --max-regression-pct (or
--json could not be written); 2 usage error or an unreadable input."""


def add_diff_parser(sub) -> None:
    diff = sub.add_parser(
        "diff", help="compare two profiles (summaries, recordings or trace files)",
        description=DIFF_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    diff.add_argument("before", help="the profile before the change")
    diff.add_argument("after", help="the profile after it")
    diff.add_argument("--json", metavar="OUT", help="write the comparison as JSON to OUT (-: stdout, "
                      "JSON alone there)")
    diff.add_argument("--max-regression-pct", metavar="PCT", type=_percent,
                      help="fail (exit 1) when the loop time, idle time, severe gaps or syncs "
                           "got worse by more than PCT percent")


def diff_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ._compare import CompareError, compare, format_compare, regressions

    for side in (args.before, args.after):
        problem = input_problem(side)  # a folder, FIFO, device or symlink loop said as such
        if problem is not None:
            parser.error(f"cannot read {side!r}: {problem}")
    if not check_outputs(parser.prog, {"--json": args.json}):
        return EXIT_USAGE
    try:
        result = compare(args.before, args.after)
    except (CompareError, OSError, ValueError) as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    print(format_compare(result))
    status = EXIT_OK
    if args.max_regression_pct is not None:
        check = regressions(result, args.max_regression_pct)
        result["regressions"] = check.as_dict()
        print()
        if check.failed:
            print(check.message(args.before), file=sys.stderr)
            status = EXIT_BUDGET
        else:
            print(f"no figure regressed by more than {args.max_regression_pct:g}%"
                  + (f" (not measured: {', '.join(check.unavailable)})"
                     if check.unavailable else ""))
    if args.json and not write_json("--json", args.json, result):
        status = EXIT_BUDGET
    return status


# -- the demo without a GPU -----------------------------------------------
def _not_shown(command: str | None, steps: int, graph: bool, layers: bool,
               asked_steps: int | None) -> str | None:
    """One line naming the demo options the recording (of `command`, with
    `steps` steps) cannot show, and what it shows instead; None when it
    shows what was asked."""
    words = (command or "").split()
    recorded_graph, recorded_layers = "--graph" in words, "--layers" in words
    unmet = [option for option, wanted, recorded in (("--graph", graph, recorded_graph),
                                                     ("--layers", layers, recorded_layers))
             if wanted and not recorded]
    if asked_steps is not None and asked_steps != steps:
        unmet.append(f"--steps {asked_steps}")
    if not unmet:
        return None
    loop = "CUDA-graph" if recorded_graph else "eager"
    ranges = "per-layer ranges" if recorded_layers else "no per-layer ranges"
    return (f"loopscope demo: {' and '.join(unmet)} need{'s' if len(unmet) == 1 else ''} a GPU; "
            f"showing the bundled recording of the {loop} demo loop ({steps} steps, {ranges}) "
            "instead.")


def demo_recording(reason: str, json_path: str | None = None, *, graph: bool = False,
                   layers: bool = False, steps: int | None = None) -> int:
    """The demo's no-GPU path: the bundled recording of the demo loop,
    analysed here, or the plain message when the package has none.  The
    options the user gave (graph, layers, steps) that the recording cannot
    show are named in one line."""
    from ..files._recording import RecordingError, bundled_demo
    from ..readers._replay import replay
    from ..views._report import describe_recording

    try:
        data = bundled_demo()
    except RecordingError as error:
        print(f"loopscope demo: no GPU here ({reason}), and the bundled recording is "
              f"unreadable: {error}", file=sys.stderr)
        return EXIT_OK
    if data is None:
        print(f"loopscope demo: no GPU here ({reason}).", file=sys.stderr)
        print("The demo profiles a 10-step denoise loop on an NVIDIA GPU; nothing to run.",
              file=sys.stderr)
        return EXIT_OK
    try:
        prof = replay(data)
    except RecordingError as error:
        print(f"loopscope demo: no GPU here ({reason}), and the bundled recording cannot be "
              f"replayed: {error}", file=sys.stderr)
        return EXIT_OK
    summary = prof.summary()
    # notices on stderr: stdout holds the report alone (`loopscope demo | head -1`)
    print(f"loopscope demo: no GPU here ({reason}).", file=sys.stderr)
    instead = _not_shown(data["meta"].get("command"), len(summary["steps"]), graph, layers, steps)
    if instead:
        print(instead, file=sys.stderr)
    print(describe_recording(summary), file=sys.stderr)
    print(prof.report())
    if json_path and not save_summary(json_path, summary):
        return EXIT_BUDGET
    return EXIT_OK
