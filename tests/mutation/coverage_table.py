"""One table of line coverage per module: Python (coverage.py, subprocesses
included) and the C analysis files (gcov, from a LOOPSCOPE_COVERAGE=1
build).  .ci/run prints it; --update-md copies it into tests/MUTATION.md.

    python tests/mutation/coverage_table.py --tree DIR --data DIR/.coverage \
        --gcov-objects DIR/build/coverage/csrc [--update-md]

DIR is the tree the tests ran in (its python/loopscope and csrc)."""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKDOWN = ROOT / "tests" / "MUTATION.md"
START, END = "<!-- coverage-table:start -->", "<!-- coverage-table:end -->"
# the analysis floor's sources (the C that computes), the samples' windows and the finish
C_FILES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "csrc" / "analysis").glob("*.c")
                 ) + ["csrc/common/ls_samples.c", "csrc/session/ls_finish.c"]


def python_rows(tree: Path, data_file: Path) -> list[tuple[str, int, int]]:
    import coverage  # noqa: PLC0415  (a test dependency, not the package's)

    cov = coverage.Coverage(data_file=str(data_file), config_file=False)
    cov.load()
    rows = []
    package = tree / "python" / "loopscope"
    for path in sorted(package.rglob("*.py")):  # the subpackages too (each floor a folder)
        _, statements, _, missing, _ = cov.analysis2(str(path))
        rows.append((f"loopscope/{path.relative_to(package).as_posix()}", len(statements),
                     len(statements) - len(missing)))
    return rows


def c_rows(tree: Path, objects: Path) -> list[tuple[str, int, int]]:
    rows = []
    for source in C_FILES:
        if not (tree / source).is_file():  # the code moved: C_FILES must follow it
            rows.append((source + " (no such file)", 0, 0))
            continue
        # objects: the build's folder for csrc/, which keeps the floors' folders
        floor_objects = objects / Path(source).parent.relative_to("csrc")
        out = subprocess.run(["gcov", "-n", "-o", str(floor_objects), source], cwd=tree,
                             capture_output=True, text=True).stdout
        found = re.search(rf"File '{re.escape(source)}'\nLines executed:([\d.]+)% of (\d+)", out)
        if found is None:
            rows.append((source + " (gcov: no data)", 0, 0))
            continue
        total = int(found.group(2))
        rows.append((source, total, round(float(found.group(1)) * total / 100)))
    return rows


def table(py: list, c: list) -> str:
    def line(name, total, covered):
        pct = f"{100 * covered / total:.1f}" if total else "-"
        return f"| {name} | {total} | {covered} | {pct} |"

    lines = ["| module | lines | covered | % |", "|---|---|---|---|"]
    lines += [line(*r) for r in py]
    total, covered = sum(r[1] for r in py), sum(r[2] for r in py)
    lines.append(line("**Python total**", total, covered))
    lines += [line(*r) for r in c]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tree", type=Path, default=ROOT)
    p.add_argument("--data", type=Path, required=True, help="coverage.py data file")
    p.add_argument("--gcov-objects", type=Path, required=True, help="folder of the .gcno/.gcda")
    p.add_argument("--update-md", action="store_true")
    args = p.parse_args()
    text = table(python_rows(args.tree, args.data), c_rows(args.tree, args.gcov_objects))
    print(text)
    if args.update_md:
        md = MARKDOWN.read_text(encoding="utf-8")
        head, rest = md.split(START, 1)
        _, tail = rest.split(END, 1)
        MARKDOWN.write_text(f"{head}{START}\n{text}\n{END}{tail}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
