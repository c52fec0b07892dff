"""`python -m loopscope merge A B ...`: one job from ranks files that
`loopscope analyze DIR --ranks-out FILE` wrote where the traces were (one
per node), reduced here: the ranks table, per-step skews and the straggler.

Exit status: 0 ok; 1 a budget failed (or --json could not be written); 2
usage error, or a file that is not a ranks file, or a rank in two files."""
from __future__ import annotations

import argparse
import sys

from ._cli import EXIT_BUDGET, EXIT_USAGE, check_outputs, save_summary

DESCRIPTION = """\
Merges ranks files (written by `loopscope analyze DIR --ranks-out FILE`, one
per node of a job) into one job: the ranks table, the per-step skews, each
rank's wait and the straggler, by the same rule as a live run's rank 0.

examples:
  loopscope analyze /scratch/node0/traces --ranks-out node0.ranks.json.gz   # on each node
  loopscope merge node*.ranks.json.gz --json job.json                       # on one machine

exit status: 0 ok; 1 a budget failed; 2 usage error, a file that is not a
ranks file, or a rank found in two files."""


def add_merge_parser(sub) -> None:
    p = sub.add_parser("merge", help="merge ranks files (analyze --ranks-out) into one job",
                       description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="RANKS_FILE", help="ranks files")
    p.add_argument("--json", metavar="OUT", help="write the job's summary as JSON to OUT (-: stdout, "
                   "JSON alone there)")
    p.add_argument("--max-rank-skew-us", metavar="US", type=float,
                   help="budget: fail (exit 1) when the ranks' step starts or ends are further "
                        "apart than US microseconds")


def merge_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ._analyze_cli import report_job
    from ..readers._job import merge_files
    from ..readers._sniff import TraceError

    if not check_outputs(parser.prog, {"--json": args.json}):
        return EXIT_USAGE
    try:
        summary = merge_files(args.paths)
    except TraceError as error:
        print(f"loopscope: {error}", file=sys.stderr)
        return EXIT_USAGE
    budgets = {} if args.max_rank_skew_us is None else {"max_rank_skew_us": args.max_rank_skew_us}
    status = report_job(summary, budgets, None)
    if args.json and not save_summary(args.json, summary):
        status = EXIT_BUDGET
    return status
