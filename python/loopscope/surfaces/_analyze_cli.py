"""`python -m loopscope analyze PATH...`: the report of trace files users
already have (torch.profiler / Kineto JSON, Nsight Systems SQLite, saved
loopscope profiles), with the budgets and exit codes of `run`.

A saved summary (`run --json`, `analyze --json` of one file) is reported
and judged as saved (_saved_summary): a gate on a CI artifact.

Exit status: 0 ok; 1 a budget failed or could not be checked; 2 usage error
or a file that cannot be read (each named on one line; the other files are
still reported)."""
from __future__ import annotations

import argparse
import os
import sys
import textwrap

from ..files import _formats
from ._compare import CompareError, check_checks, is_saved_summary, load_summary
from ._cli import (EXIT_BUDGET, EXIT_OK, EXIT_USAGE, _count, _say, check_outputs, report_budgets,
                   save_summary)

# The formats come from their registrations (files/_formats), one help line each.
FORMATS_PARAGRAPH = """\
Prints the loopscope report of trace files you already have: {formats}; or of a saved
summary (the JSON that `run --json` or `analyze --json` writes), whose report
and budgets are those of its figures as saved.  The format is told from the
content.  No GPU is needed."""
DESCRIPTION_WIDTH = 77

DESCRIPTION = """\
Steps are the outermost ranges whose names match --steps (default: torch's
ProfilerStep#N, loopscope's Step_N, names ending in _Step_N).

A folder, or several files with --ranks, is one job, one trace per rank
(torch.profiler traces of each rank): read in a pool of processes (--workers,
default the cores), the report of the lowest rank with every rank's figures,
the per-step skews and the straggler, as rank 0 prints them live.
--ranks-out FILE writes the ranks' compact summaries, for `loopscope merge`.

examples:
  python -m loopscope analyze trace.pt.trace.json.gz
  python -m loopscope analyze traces/ --max-rank-skew-us 500   # one trace per rank
  python -m loopscope analyze node3/ --ranks-out node3.ranks.json.gz   # then: merge
  python -m loopscope analyze report.sqlite --steps 'Denoise_Step_\\d+'
  python -m loopscope analyze run.json --max-syncs 0 --max-severe-gaps 0   # CI gate
      (run.json: what `loopscope run --json run.json script.py` wrote)

exit status: 0 ok; 1 a budget failed or could not be checked; 2 usage error
or an unreadable file.  A budget that the file cannot measure (no GPU
events, no API calls) is printed as NOT CHECKED and the gate fails (exit 1):
a budget is never met by a figure that was not measured."""


def _listed(words: list[str], last: str) -> str:
    """"a, b<last>c": words as a sentence lists them."""
    return ", ".join(words[:-1]) + last + words[-1] if len(words) > 1 else "".join(words)


def add_analyze_parser(sub) -> None:
    formats = _formats.registered()
    listed = _listed([f.help for f in formats], ", or ")
    description = textwrap.fill(FORMATS_PARAGRAPH.format(formats=listed),
                                DESCRIPTION_WIDTH) + "\n\n" + DESCRIPTION
    p = sub.add_parser("analyze", help="report on " + _listed([f.noun for f in formats], " or "),
                       description=description,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="trace files, or a folder of one trace per rank")
    p.add_argument("--ranks", action="store_true",
                   help="the files are one job, one trace per rank (implied when every PATH is a "
                        "folder)")
    p.add_argument("--ranks-out", metavar="FILE",
                   help="(a job) write the ranks' compact summaries to FILE (.gz: gzip) for "
                        "`loopscope merge`")
    p.add_argument("--workers", metavar="N", type=_count,
                   help="(a job) processes reading ranks at once (default: the cores)")
    p.add_argument("--max-rank-skew-us", metavar="US", type=float,
                   help="budget (a job): fail (exit 1) when the ranks' step starts or ends "
                        "are further apart than US microseconds")
    p.add_argument("--json", metavar="OUT", help="write the summary dict as JSON to OUT "
                   "(a list of them for several files; -: stdout, JSON alone there)")
    p.add_argument("--steps", metavar="REGEX", help="ranges whose names match REGEX are the steps")
    p.add_argument("--device", metavar="N", type=_count, help="analyse only GPU N")
    p.add_argument("--max-syncs", metavar="N", type=_count,
                   help="budget: fail (exit 1) with more than N host-device syncs")
    p.add_argument("--max-severe-gaps", metavar="N", type=_count,
                   help="budget: fail (exit 1) with more than N severe gaps")


def analyze_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import re

    from ..readers._analyze import load
    from ..figures._budgets import evaluate
    from ..views._report import format_report
    from ..readers._sniff import TraceError

    if args.steps is not None:
        try:
            re.compile(args.steps)
        except re.error as error:
            parser.error(f"--steps {args.steps!r} is not a valid regular expression: {error}")
    if not check_outputs(parser.prog, {"--json": args.json, "--ranks-out": args.ranks_out}):
        return EXIT_USAGE
    budgets = {k: float(v) for k, v in (("max_syncs", args.max_syncs),
                                        ("max_severe_gaps", args.max_severe_gaps),
                                        ("max_rank_skew_us", args.max_rank_skew_us))
               if v is not None}
    if args.ranks or all(os.path.isdir(p) for p in args.paths):  # folders: one job
        return _job_command(args, parser, budgets)
    if args.ranks_out or args.workers is not None:
        parser.error("--ranks-out and --workers apply to a job: a folder, or files with --ranks")
    summaries, failed, unreadable = [], False, False
    for i, path in enumerate(args.paths):
        if is_saved_summary(path, lists=False):  # a list: the reader says what to do
            try:
                summary, text = _saved_summary(path, args.steps, args.device)
            except TraceError as error:
                print(f"loopscope: {error}", file=sys.stderr)
                unreadable = True
                continue
        else:
            try:
                prof = load(path, steps=args.steps, device=args.device)
            except TraceError as error:
                print(f"loopscope: {error}", file=sys.stderr)
                unreadable = True
                continue
            summary = prof.summary()
            text = format_report(summary)
            if summary.get("recording"):
                from ..views._report import describe_recording
                described = describe_recording(summary)
                text = f"{described}\n{text}" if described else text
        summaries.append(summary)
        if len(args.paths) > 1:
            print(f"\n=== {path} ===")
        print(text)
        if args.steps is not None and not summary["steps"]:
            names = sorted({r["name"] for r in summary["ranges"]})
            _say(f"{path}: no range name matched --steps {args.steps!r} (range names: "
                 f"{', '.join(names[:10]) or 'none'})")
        if budgets:
            verdict = evaluate(summary, budgets,
                               args.steps if summary.get("steps_from") == "ranges" else None)
            label = f" ({path})" if len(args.paths) > 1 else ""
            failed = report_budgets(verdict, label) or failed
    if args.json and summaries:
        if not save_summary(args.json, summaries[0] if len(args.paths) == 1 else summaries):
            failed = True
    if unreadable:
        return EXIT_USAGE
    return EXIT_BUDGET if failed else EXIT_OK


def _saved_summary(path: str, steps: str | None, device: int | None) -> tuple[dict, str]:
    """(summary, report text) of a saved summary file, its figures as saved
    (no trace to re-cut: --device is refused; --steps selects among its
    steps for the budgets).  TraceError naming the file when it is no
    summary, or one too damaged to report."""
    from ..figures._budgets import evaluate
    from ..readers._sniff import TraceError
    from ..views._report import format_report

    if device is not None:
        raise TraceError(f"{path}: a saved summary (its figures as saved): --device picks a GPU "
                         "of a trace, give the trace instead")
    try:
        summary = load_summary(path)
        check_checks(summary, path)
    except CompareError as error:
        raise TraceError(str(error)) from None
    try:
        text = format_report(summary)
        evaluate(summary, {"max_syncs": 0.0, "max_severe_gaps": 0.0}, steps)  # reads every part
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as error:
        raise TraceError(f"{path}: a loopscope summary, but damaged (a part the report reads "
                         f"is missing or of the wrong kind: {type(error).__name__} "
                         f"{str(error)[:80]})") from None
    _say(f"{path}: a saved summary, its figures as saved")
    return summary, text


def _job_command(args: argparse.Namespace, parser: argparse.ArgumentParser,
                 budgets: dict[str, float]) -> int:
    """A folder (or --ranks files): one job, one report."""
    from ..readers._job import read_job, write_ranks
    from ..readers._sniff import TraceError

    try:
        summary = read_job(args.paths, steps=args.steps, device=args.device,
                           workers=args.workers)
    except TraceError as error:
        print(f"loopscope: {error}", file=sys.stderr)
        return EXIT_USAGE
    status = report_job(summary, budgets, args.steps)
    if args.ranks_out:
        try:
            write_ranks(args.ranks_out, summary)
            read = [str(c["rank"]) for c in summary["ranks"] if "missing" not in c]
            _say(f"rank{'s' if len(read) > 1 else ''} {', '.join(read)} written to "
                 f"{args.ranks_out}")
        except OSError as error:
            print(f"loopscope: --ranks-out {args.ranks_out}: {error}", file=sys.stderr)
            status = EXIT_BUDGET
    if args.json and not save_summary(args.json, summary):
        status = EXIT_BUDGET
    return status


def report_job(summary, budgets: dict[str, float], steps: str | None) -> int:
    """Prints a job's report (the full one when a rank's own summary is
    there, else the ranks alone, as after a merge) and checks the budgets."""
    from ..figures._budgets import evaluate
    from ..distributed._ranks_view import head_lines, table_lines
    from ..views._report import format_report

    if not (summary.get("job") or {}).get("merged"):  # a rank's own summary is there
        print(format_report(summary))
    else:
        print("\n".join(["loopscope: the ranks of a job"] + head_lines(summary)
                        + table_lines(summary)))
    if not budgets:
        return EXIT_OK
    verdict = evaluate(summary, budgets, steps if summary.get("steps_from") == "ranges" else None)
    return EXIT_BUDGET if report_budgets(verdict) else EXIT_OK
