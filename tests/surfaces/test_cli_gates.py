"""Issue 41, items 1 and 2: what `--help` says about the CI gate is what
the gate does.  A budget that cannot be measured fails the gate (exit 1)
in `run` and `analyze`, and their help says so; `analyze --help`'s own CI
example runs on the file `run --json` writes (a saved summary is reported
and judged as saved).  Figures: the synthetic loop's gaps, worked out from
its times in tests/synthetic_loop.py (5, 80, 5, 80, 5 us: 2 over 50 us)."""
from __future__ import annotations

import json
import re

import pytest

from test_cli import OWN_PROFILE, cli, cpu_only, script

# the synthetic loop's gaps (synthetic_loop.py's defaults), and the severe cut-off of the docs
GAPS_US = [5, 80, 5, 80, 5]
SEVERE_US = 50


def help_text(command: str) -> str:
    done = cli(command, "--help")
    assert done.returncode == 0
    return " ".join(done.stdout.split())  # argparse's line breaks taken out


@pytest.mark.parametrize("command", ["run", "analyze"])
def test_help_says_an_unmeasured_budget_fails_the_gate(command):
    text = help_text(command)
    assert "does not fail" not in text
    assert "is printed as NOT CHECKED and the gate fails (exit 1)" in text
    assert re.search(r"exit status: 0 ok; 1 a budget failed or could not be checked", text)


@cpu_only
def test_the_gate_does_what_the_help_says(tmp_path):
    path = script(tmp_path, "print('no profile of its own')\n")
    done = cli("run", "--max-syncs", "0", path)  # no GPU here: syncs cannot be watched
    assert done.returncode == 1
    assert "NOT CHECKED: max_syncs: not measured" in done.stderr
    assert "the gate fails" in help_text("run") and "the gate fails" in done.stderr


@cpu_only
def test_analyze_helps_own_ci_example_runs_on_run_json(tmp_path):
    example = next(line for line in cli("analyze", "--help").stdout.splitlines()
                   if "# CI gate" in line)
    words = example.split("#")[0].split()
    assert words[:4] == ["python", "-m", "loopscope", "analyze"] and words[4] == "run.json"
    loop = script(tmp_path, OWN_PROFILE)
    made = cli("run", "--json", "run.json", loop, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    severe = sum(1 for g in GAPS_US if g > SEVERE_US)
    # the example as printed: the synthetic loop has severe gaps and no syncs measured
    # (no GPU: the sync watcher is off), so the gate fails, saying why -- not exit 2
    ran = cli(*words[3:], cwd=tmp_path)
    assert ran.returncode == 1, ran.stderr
    assert "a saved summary, its figures as saved" in ran.stderr
    assert f"FAILED max_severe_gaps: severe gaps {severe} (> 50 us), budget <= 0" in ran.stderr
    assert "not a trace" not in ran.stderr
    # a budget on each side of the figure, as saved
    met = cli("analyze", "run.json", "--max-severe-gaps", str(severe), cwd=tmp_path)
    assert met.returncode == 0, met.stderr
    assert f"budgets met: max_severe_gaps: severe gaps {severe}" in met.stderr
    over = cli("analyze", "run.json", "--max-severe-gaps", str(severe - 1), cwd=tmp_path)
    assert over.returncode == 1
    # the report is the saved summary's own
    saved = json.loads((tmp_path / "run.json").read_text())
    assert f"{len(saved['steps'])} steps" in met.stdout.splitlines()[0]


def test_a_damaged_saved_summary_is_named_not_a_traceback(tmp_path):
    bad = tmp_path / "run.json"
    bad.write_text(json.dumps({"schema": 1, "diagnosis": {"verdict": "X"}, "steps": 3}))
    done = cli("analyze", str(bad), "--max-syncs", "0")
    assert done.returncode == 2
    assert f"{bad}: a loopscope summary, but damaged" in done.stderr
    assert "Traceback" not in done.stderr
    gpu = cli("analyze", str(bad), "--device", "0")
    assert gpu.returncode == 2 and "--device picks a GPU of a trace" in gpu.stderr
