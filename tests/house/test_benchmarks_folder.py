"""benchmarks/ as a newcomer finds it (issue 29), without a GPU: every script
answers --help; benchmarks/gpu.sh names only scripts that exist, gives each
suite one usage line and one branch, and refuses a suite it does not know
before it builds anything; the scripts sit in subfolders by what they
measure, none of them (nor the top) holding more than 15; benchmarks/README.md's
tables list every file of every subfolder with commands whose options the
scripts know; RESULTS.md puts the
current figures first, each with its date and command.  (Its links and
anchors are checked with the guide's, tests/house/test_docs.py.)"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import loopscope

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
GPU_SH = BENCH / "gpu.sh"
# The loopscope this suite imports (in CI an installed one, not the source tree).
PYTHON_DIR = str(Path(loopscope.__file__).resolve().parents[1])
SOURCED = {"gpu_prologue.sh"}  # sourced by gpu.sh, never run on its own
NOT_SCRIPTS = {"data", "history"}  # benchmark inputs and the dated log of runs
MOST_FILES = 15  # issue 29: no folder a newcomer must read with more source files than this

# Runs each script given as `SCRIPT --help` in this one process, as `python
# SCRIPT` would (its folder first on sys.path, run as __main__), so torch is
# imported once for all of them; prints {script: [exit code, stdout]}.
HELP_DRIVER = r"""
import contextlib, io, json, os, runpy, sys
results = {}
for path in sys.argv[1:]:
    out = io.StringIO()
    sys.argv = [path, "--help"]
    sys.path.insert(0, os.path.dirname(path))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            runpy.run_path(path, run_name="__main__")
        code = "returned without exiting"
    except SystemExit as stop:
        code = stop.code or 0
    except BaseException as error:
        code = f"raised {error!r}"
    finally:
        sys.path.remove(os.path.dirname(path))
    results[path] = [code, out.getvalue()]
sys.stdout.write(json.dumps(results))
"""


def script_folders() -> list[Path]:
    """benchmarks/ itself and each subfolder of scripts (cost/, probes/, ...)."""
    return [BENCH] + sorted(p for p in BENCH.iterdir() if p.is_dir() and
                            p.name not in NOT_SCRIPTS and not p.name.startswith(("_", ".")))


def source_files(folder: Path) -> list[Path]:
    """A folder's scripts and helpers: its files less the markdown."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix != ".md"
                  and p.suffix != ".pyc")


def python_scripts() -> list[Path]:
    return sorted(p for folder in script_folders() for p in folder.glob("*.py")
                  if not p.name.startswith("_"))


def shell_scripts() -> list[Path]:
    return sorted(p for folder in script_folders() for p in folder.glob("*.sh")
                  if p.name not in SOURCED)


def test_the_scripts_sit_in_subfolders_of_at_most_so_many_files():
    folders = script_folders()
    assert {f.name for f in folders} >= {"benchmarks", "cost", "counters", "probes", "scale"}
    sizes = {str(f.relative_to(ROOT)): len(source_files(f)) for f in folders}
    assert {f: n for f, n in sizes.items() if n > MOST_FILES} == {}, sizes
    # the top keeps the runner and what it sources; every benchmark is in a subfolder
    assert [p.name for p in source_files(BENCH)] == ["gpu.sh", "gpu_prologue.sh"]


@pytest.mark.parametrize("count, too_many", [(15, False), (16, True)])
def test_the_folder_size_check_draws_its_line_at_fifteen(count, too_many, tmp_path):
    """The check above against a made-up folder of 15 and of 16 scripts."""
    for i in range(count):
        (tmp_path / f"s{i}.py").write_text("", encoding="utf-8")
    (tmp_path / "README.md").write_text("", encoding="utf-8")  # not a source file
    assert (len(source_files(tmp_path)) > MOST_FILES) is too_many


@pytest.fixture(scope="module")
def helps() -> dict[str, tuple[object, str]]:
    """Each script's --help, keyed by its path under benchmarks/."""
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    result = subprocess.run([sys.executable, "-c", HELP_DRIVER, *map(str, python_scripts())],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    out = {str(Path(k).relative_to(BENCH)): tuple(v) for k, v in json.loads(result.stdout).items()}
    for script in shell_scripts():
        done = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True,
                              timeout=30, cwd=ROOT)
        out[str(script.relative_to(BENCH))] = (done.returncode, done.stdout + done.stderr)
    return out


def test_every_script_answers_help(helps):
    assert len(helps) == len(python_scripts()) + len(shell_scripts())
    bad = {name: (code, text[-300:]) for name, (code, text) in helps.items()
           if code != 0 or not text.strip()}
    assert bad == {}
    for name, (_, text) in helps.items():
        if name.endswith(".py"):
            assert text.lstrip().startswith("usage:"), (name, text[:200])


def knows(help_text: str, flag: str) -> bool:
    """The option itself in a --help text, not a longer one it begins."""
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text) is not None


def gpu_sh_lines() -> list[str]:
    return GPU_SH.read_text(encoding="utf-8").splitlines()


def usage_lines() -> list[str]:
    """The header's lines between `# Usage` and `# Multi-GPU`: one a suite."""
    lines = gpu_sh_lines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# Usage"))
    end = next(i for i, line in enumerate(lines) if line.startswith("# Multi-GPU"))
    return lines[start + 1:end]


def test_each_suite_has_one_usage_line_and_one_branch():
    usage = [re.match(r"#   (\w+)\s+\S", line) for line in usage_lines()]
    assert all(usage), [line for line, m in zip(usage_lines(), usage) if not m]  # no continuation
    described = [m.group(1) for m in usage]
    text = GPU_SH.read_text(encoding="utf-8")
    branches = re.findall(r"^    (\w+)\)", text, flags=re.M)
    listed = re.search(r'^SUITES="([^"]*)"', text, flags=re.M).group(1).split()
    assert len(set(described)) == len(described) and len(set(branches)) == len(branches)
    assert sorted(described) == sorted(branches) == sorted(listed)


def test_gpu_sh_names_only_scripts_that_exist_and_answer_help(helps):
    text = GPU_SH.read_text(encoding="utf-8")
    paths = {p.rstrip(".,;:)") for p in re.findall(r"(?:benchmarks|tests)/[\w./-]+", text)}
    assert len(paths) > 20  # the suites' scripts and test files, not an empty parse
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert missing == []
    run = {p.removeprefix("benchmarks/") for p in re.findall(
        r"(?:python3|bash) (benchmarks/[\w./-]+\.(?:py|sh))", text)}
    assert run and run <= set(helps), sorted(run - set(helps))
    # the bare script names of the usage lines (bench_counters.py, ...)
    named = {n for line in usage_lines() for n in re.findall(r"\b\w+\.(?:py|sh)\b", line)}
    places = (*script_folders(), ROOT / "tests" / "gpu")
    assert sorted(n for n in named if not any((d / n).exists() for d in places)) == []


def test_gpu_sh_passes_only_options_the_scripts_know(helps):
    """A misspelt option would cost a GPU call to find: each `python3
    benchmarks/X.py ...` of a suite (continuation lines joined) against X's --help."""
    text = GPU_SH.read_text(encoding="utf-8").replace("\\\n", " ")
    calls = re.findall(r"python3 benchmarks/([\w/]+\.py)([^>;|&\n]*)", text)
    assert len(calls) >= 20
    for script, args in calls:
        flags = set(re.findall(r"(?<!\S)--[\w-]+", args))
        unknown = sorted(f for f in flags if not knows(helps[script][1], f))
        assert unknown == [], (script, unknown)


def run_gpu_sh(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OUT=str(tmp_path))
    return subprocess.run(["bash", str(GPU_SH), *args], capture_output=True, text=True,
                          timeout=30, cwd=ROOT, env=env)


def test_gpu_sh_refuses_a_bad_or_missing_suite_before_it_builds(tmp_path):
    bad = run_gpu_sh(tmp_path, "tests", "nosuch")
    assert bad.returncode == 2 and "unknown suite nosuch" in bad.stdout, bad.stdout + bad.stderr
    none = run_gpu_sh(tmp_path)
    assert none.returncode == 2 and none.stdout.startswith("usage:"), none.stdout + none.stderr
    assert list(tmp_path.iterdir()) == []  # no machine.txt, no build.log: nothing ran
    shown = run_gpu_sh(tmp_path, "--help")
    assert shown.returncode == 0
    for line in usage_lines():
        assert line[1:].strip() in shown.stdout


def table_rows(text: str) -> list[list[str]]:
    """The cells of every table row of a markdown text (header and rule left out)."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not re.fullmatch(r"\|[-|: ]+\|", line):
            rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return [row for i, row in enumerate(rows) if i and row[0] not in ("benchmark", "probe", "claim")]


def readme_rows() -> list[list[str]]:
    return table_rows((BENCH / "README.md").read_text(encoding="utf-8"))


def test_the_readme_tables_list_every_file_of_every_subfolder():
    listed = [name for row in readme_rows() for name in re.findall(r"`([^`]+)`", row[0])]
    assert len(listed) == len(set(listed))
    present = {str(p.relative_to(BENCH)) for folder in script_folders()
               for p in source_files(folder)}
    assert len(present) > 40  # the subfolders walked, not the top alone
    assert sorted(set(listed) - present) == [] and sorted(present - set(listed)) == []


def test_the_readme_commands_use_options_the_scripts_know(helps):
    checked = 0
    for row in readme_rows():
        for command in re.findall(r"`([^`]+)`", row[2]):
            words = command.split()
            if len(words) < 2 or words[0] not in ("python", "bash") or \
                    not words[1].startswith("benchmarks/"):
                continue  # `python -m loopscope run ...`, "build line in the file"
            script = words[1].removeprefix("benchmarks/")
            assert script in helps, command
            flags = {w.strip("[]").split("=")[0] for w in words[2:] if w.strip("[]").startswith("--")}
            unknown = sorted(f for f in flags if not knows(helps[script][1], f))
            assert unknown == [], (command, unknown)
            checked += 1
    assert checked >= 30


def test_results_puts_one_table_of_current_figures_first():
    text = (BENCH / "RESULTS.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## (.+)$", text, flags=re.M)
    assert sections[0] == "Current figures"
    rows = table_rows(text.split("## Current figures", 1)[1])
    assert len(rows) >= 20
    for row in rows:
        assert len(row) == 6, row
        claim, figure, date, machine, command, run = row
        assert figure and machine, row
        assert re.match(r"20\d\d-\d\d-\d\d", date), row
        assert "`" in command, row  # a command to run again
        assert "history/" in run or "figures there only" in run, row
