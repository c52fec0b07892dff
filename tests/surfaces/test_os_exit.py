"""`loopscope run` over a script that ends in os._exit (issue 24, item 4):
common in distributed jobs, it used to end the process with status 0, no
report and no --json file, so a CI gate passed on nothing.  The run now
reports, writes its files, judges the budgets, then ends with the real
os._exit."""
from __future__ import annotations

import json
import textwrap

from test_cli import OWN_PROFILE, cli, script

ENDS_IN_OS_EXIT = textwrap.dedent(OWN_PROFILE) + "import os\nos._exit({status})\n"


def test_os_exit_0_still_reports_writes_json_and_fails_a_budget(tmp_path):
    path = script(tmp_path, ENDS_IN_OS_EXIT.format(status=0))
    out_json = tmp_path / "s.json"
    # the synthetic loop has 2 severe gaps: a budget of 0 fails
    result = cli("run", "--max-severe-gaps", "0", "--json", str(out_json), path)
    assert result.returncode == 1, result.stderr
    assert "loopscope report - synthetic records - 3 steps" in result.stdout
    assert "FAILED max_severe_gaps: severe gaps 2 (> 50 us), budget <= 0" in result.stderr
    assert json.loads(out_json.read_text())["gaps"]["severe"] == 2
    assert "the script called os._exit(0); the run ends with status 1" in result.stderr


def test_os_exit_passes_a_met_budget_and_the_scripts_status(tmp_path):
    met = cli("run", "--max-severe-gaps", "2", script(tmp_path, ENDS_IN_OS_EXIT.format(status=0)))
    assert met.returncode == 0, met.stderr
    assert "loopscope report - synthetic records - 3 steps" in met.stdout
    own = cli("run", script(tmp_path, ENDS_IN_OS_EXIT.format(status=5), "five.py"))
    assert own.returncode == 5
    assert "loopscope report - synthetic records - 3 steps" in own.stdout


def test_os_exit_from_a_thread_says_the_report_is_lost_and_fails_a_gate(tmp_path):
    body = """
        import threading, os, time
        threading.Thread(target=lambda: os._exit(0)).start()
        time.sleep(30)
    """
    gated = cli("run", "--max-syncs", "0", script(tmp_path, body))
    assert gated.returncode == 1
    assert "called os._exit(0) from thread" in gated.stderr and "no report" in gated.stderr
    plain = cli("run", script(tmp_path, body, "plain.py"))
    assert plain.returncode == 0
