"""One sha256 per input of the summary loopscope.analyze() gives, to show that
a change with no behaviour change (issue 29's moves and splits) leaves every
summary byte for byte the same.

The inputs: synthetic Kineto traces of a few sizes and shapes (written by
benchmarks/scale/make_kineto_trace.py into a scratch folder), the recordings in
benchmarks/data/, every trace under tests/data/ (analyze() is tried on each file; one it refuses gets a line with
its error instead of a hash), and the bundled demo recording.  A line is
`name  sha256` of json.dumps(summary, sort_keys=True), with the fields that
time this run itself removed (they differ from run to run).

    python benchmarks/scale/summary_fingerprint.py > before.txt
    python benchmarks/scale/summary_fingerprint.py --check before.txt   # exit 1 on a difference
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAKE_TRACE = Path(__file__).resolve().parent / "make_kineto_trace.py"
DEMO = ROOT / "python" / "loopscope" / "data" / "demo_recording.json.gz"
TEST_DATA = ROOT / "tests" / "data"
BENCH_DATA = ROOT / "benchmarks" / "data"  # recordings of real loops (benchmarks/data/README.md)

# (name, make_kineto_trace.py options): sizes and the shapes its options give
SYNTHETIC = [
    ("synthetic_1k", ["--kernels", "1000"]),
    ("synthetic_20k", ["--kernels", "20000"]),
    ("synthetic_100k_gz", ["--kernels", "100000", "--gzip"]),
    ("synthetic_20k_no_flows", ["--kernels", "20000", "--no-flows"]),
    ("synthetic_20k_short_names_seed7", ["--kernels", "20000", "--short-names", "--seed", "7"]),
    ("synthetic_5k_one_step", ["--kernels", "5000", "--steps", "1"]),
    ("synthetic_300k_no_flows_gz", ["--kernels", "300000", "--no-flows", "--gzip"]),
]

# (analyze() keyword arguments, name suffix): the options that change the analysis
VARIANTS = [({}, ""), ({"steps": "ProfilerStep"}, " steps=ProfilerStep"),
            ({"gap_thresholds_us": (5.0, 100.0)}, " gaps=5,100")]

# Fields that time this run (not the profiled program): they change every run.
# A recording is replayed through a real session, so its start/stop/finish
# costs are this run's too.
RUN_TIMINGS = [("trace", "read_s")] + [("overhead", key) for key in (
    "summary_ms", "start_ms", "stop_ms", "finish_ms", "finish_wait_ms", "enter_ms",
    "start_phases_ms", "stop_phases_ms", "finish_phases_ms", "decode_ms", "tail_decode_ms",
    "metrics_setup_ms", "metrics_setup_wait_ms", "metrics_start_delay_ms", "drain_ms")]


def without_run_timings(summary: dict, name: str) -> dict:
    """The summary less its own timings; trace.path (where the input lay this
    run: a scratch folder for the synthetic ones) becomes the input's name."""
    for section, key in RUN_TIMINGS:
        if isinstance(summary.get(section), dict):
            summary[section].pop(key, None)
    if isinstance(summary.get("trace"), dict) and "path" in summary["trace"]:
        summary["trace"]["path"] = name
    return summary


def fingerprint(path: Path, name: str, options: dict) -> str:
    import loopscope

    try:
        summary = loopscope.analyze(path, progress=False, **options)
    except Exception as exc:  # a refusal is behaviour too: its type and message
        return "error " + hashlib.sha256(f"{type(exc).__name__}: {exc}".replace(
            str(path), name).encode()).hexdigest()
    text = json.dumps(without_run_timings(summary, name), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def inputs(scratch: Path) -> list[tuple[str, Path]]:
    found = [("demo_recording", DEMO)]
    for name, options in SYNTHETIC:
        out = scratch / (name + (".json.gz" if "--gzip" in options else ".json"))
        subprocess.run([sys.executable, str(MAKE_TRACE), str(out), *options], check=True,
                       stderr=subprocess.DEVNULL)
        found.append((name, out))
    for path in sorted(BENCH_DATA.glob("*.json.gz")) + sorted(TEST_DATA.rglob("*")):
        if path.is_file() and path.suffix != ".md":
            found.append((path.relative_to(ROOT).as_posix(), path))
    return found


def lines() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="loopscope-fingerprint-") as scratch:
        out = []
        # From the scratch folder: a summary names a trace's source files relative
        # to the working folder when they lie under it (a rank trace's
        # benchmarks/distributed_straggler.py), so the lines would depend on where
        # the command ran.
        here = os.getcwd()
        os.chdir(scratch)
        try:
            for name, path in inputs(Path(scratch)):
                for options, suffix in VARIANTS:
                    out.append(f"{name}{suffix}  {fingerprint(path, name, options)}")
        finally:
            os.chdir(here)
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", metavar="FILE",
                        help="compare with FILE (an earlier output): exit 1 on any difference")
    args = parser.parse_args(argv)
    expected = None
    if args.check:
        try:
            expected = Path(args.check).read_text().splitlines()
        except OSError as exc:
            print(f"summary_fingerprint: --check {args.check}: {exc.strerror}", file=sys.stderr)
            return 2
    now = lines()
    if expected is None:
        print("\n".join(now))
        return 0
    if not all("  " in line for line in expected):
        print(f"summary_fingerprint: --check {args.check}: not a fingerprint file "
              "(each line is `name  sha256`)", file=sys.stderr)
        return 2
    before, after = dict(l.split("  ", 1) for l in expected), dict(l.split("  ", 1) for l in now)
    differ = [n for n in sorted(before.keys() | after.keys()) if before.get(n) != after.get(n)]
    for name in differ:
        print(f"differs: {name}: {before.get(name, 'absent')} -> {after.get(name, 'absent')}")
    print(f"{len(now)} summaries, {len(differ)} differ from {args.check}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
