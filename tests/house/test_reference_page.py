"""Issue 41, item 8: one page defines every verdict, gap cause and figure
name the report uses (docs/reference.md), and the guide's code blocks wrap
the report's long lines instead of cutting them."""
from __future__ import annotations

import re
from pathlib import Path

import loopscope
from loopscope.figures import _diagnosis
from loopscope.views import _html

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")


def defined(name: str) -> bool:
    """A table row of the page that opens with the name (in code or plain)."""
    return re.search(rf"^\| (<a id=\"[^\"]+\"></a>)?`?{re.escape(name)}`? \|", PAGE,
                     re.MULTILINE) is not None


def test_every_verdict_is_defined():
    verdicts = set(_diagnosis.ACTIONS) | set(_html.VERDICT_COLOURS) | {"UNKNOWN"}
    missing = sorted(v for v in verdicts if not defined(v))
    assert not missing, f"docs/reference.md defines no {missing}"


def test_every_gap_cause_and_report_word_is_defined(run_trace):
    # the causes a summary has (its by_cause keys), from a summary of one gap
    s = run_trace(kernels=[(1_000, 2_000, 0, 7, 1, "a"), (90_000, 91_000, 0, 7, 2, "b")])
    for cause in s["gaps"]["by_cause"]:
        assert defined(cause), cause
    text = loopscope.views._report.format_report(s)
    for words in ("host launch late", "host sync"):
        assert words in PAGE
    assert "idle time by cause: host launch late" in text  # the words the page defines
    for figure in ("GR active", "fill", "SM active", "DRAM throughput", "warp occupancy",
                   "coverage"):
        assert defined(figure), figure
    for line in ("BUDGET FAILED", "NOT CHECKED", "REGRESSED", "STRAGGLER", "WARNING"):
        assert f"`{line}`" in PAGE, line


def test_the_page_is_in_the_guide_and_code_blocks_wrap():
    mkdocs = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "  - reference.md\n" in mkdocs
    css = mkdocs.split("extra_css:\n", 1)[1].splitlines()[0].strip().removeprefix("- ")
    sheet = (ROOT / "docs" / css).read_text(encoding="utf-8")
    assert re.search(r"pre > code \{[^}]*white-space: pre-wrap", sheet)
    # the lines it is for: the README's report example runs past any page width
    longest = max(len(line) for line in (ROOT / "README.md").read_text().splitlines())
    assert longest > 200
