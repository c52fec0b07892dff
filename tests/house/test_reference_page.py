"""Issue 41, item 8: one page defines every verdict, gap cause and figure
name the report uses (docs/reference.md), and the guide's code blocks wrap
the report's long lines instead of cutting them.

Issue 42: every verdict is declared once (figures/_verdicts.py), the rules
return only declared ones, every view draws each one, and a verdict without
a colour cannot be declared or drawn grey."""
from __future__ import annotations

import ast
import copy
import dataclasses
import html
import os
import re
from pathlib import Path

import pytest

import loopscope
from loopscope.figures import _diagnosis, _verdicts
from loopscope.figures._verdicts import VERDICTS, VerdictKind
from loopscope.views import _html, _html_file, _report

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")


def defined(name: str) -> bool:
    """A table row of the page that opens with the name (in code or plain)."""
    return re.search(rf"^\| (<a id=\"[^\"]+\"></a>)?`?{re.escape(name)}`? \|", PAGE,
                     re.MULTILINE) is not None


def undocumented(kinds, page: str) -> list[str]:
    """The verdicts of `kinds` with no row of `page` that opens with their
    anchor and name."""
    return [k.name for k in kinds
            if re.search(rf'^\| <a id="{re.escape(k.anchor)}"></a>`{re.escape(k.name)}` \|',
                         page, re.MULTILINE) is None]


def test_every_verdict_is_defined():
    assert _verdicts.DOCS_PAGE == "reference.md"
    assert undocumented(VERDICTS.values(), PAGE) == []
    # the check refuses a verdict the page lacks, and one whose anchor is not its row's
    toy = dataclasses.replace(VERDICTS["SYNC_BOUND"], name="TOY_BOUND", anchor="toy_bound")
    moved = dataclasses.replace(VERDICTS["SYNC_BOUND"], anchor="memory_bound")
    assert undocumented([toy, moved], PAGE) == ["TOY_BOUND", "SYNC_BOUND"]
    # and the page's verdict table holds no verdict the code does not declare
    table = PAGE.split("## Verdicts", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"^\| <a id=\"[^\"]+\"></a>`(\w+)` \|", table, re.MULTILINE)) == \
        set(VERDICTS)


# -- issue 42: each verdict declared once, every view covers it ---------------

FIGURES = Path(loopscope.__file__).resolve().parent / "figures"


def test_each_verdict_is_declared_once():
    assert all(name == kind.name for name, kind in VERDICTS.items())
    with pytest.raises(ValueError, match="SYNC_BOUND is declared twice"):
        _verdicts._declare(VERDICTS["SYNC_BOUND"], VERDICTS["SYNC_BOUND"])
    # no second table of the verdicts anywhere in the package (the colours
    # and actions once were two); a two-key phrasing choice in a rule is not one
    names = set(VERDICTS)
    tables = []
    for path in sorted(FIGURES.parent.rglob("*.py")):
        if path.name == "_verdicts.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                if len(keys & names) >= 3:
                    tables.append(f"{path.name}:{node.lineno}")
    assert tables == [], f"verdicts listed outside figures/_verdicts.py: {tables}"


def test_the_rules_return_only_declared_verdicts():
    """Every verdict-like word in the figures floor (an all-capitals string:
    only verdicts are) is declared, and each declaration names a function
    of _diagnosis that gives it and projection kinds _projections makes."""
    said = set()
    for path in FIGURES.glob("*.py"):
        said |= {n.value for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(n, ast.Constant) and isinstance(n.value, str)
                 and re.fullmatch(r"[A-Z][A-Z_]+", n.value)}
    assert said - set(VERDICTS) == set()
    source = (FIGURES / "_projections.py").read_text(encoding="utf-8")
    kinds = {c.args[0].value for c in ast.walk(ast.parse(source))
             if isinstance(c, ast.Call) and getattr(c.func, "id", None) == "_entry"
             and c.args and isinstance(c.args[0], ast.Constant)}
    assert "launch_gaps" in kinds  # the scan sees the calls
    rules_source = (FIGURES / "_diagnosis.py").read_text(encoding="utf-8")
    rules = {n.name: ast.get_source_segment(rules_source, n)
             for n in ast.walk(ast.parse(rules_source)) if isinstance(n, ast.FunctionDef)}
    for kind in VERDICTS.values():
        assert f'"{kind.name}"' in rules[kind.rule], kind.name
        assert set(kind.projections) <= kinds, kind.name


@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="the HTML view draws with matplotlib, which dies under CI's preloaded ASan")
def test_every_view_draws_every_verdict(run_trace):
    """The report, the short text, the page title and the notebook view
    each show every declared verdict; the notebook view in its colour."""
    base = run_trace(kernels=[(1_000, 2_000, 0, 7, 1, "a"), (90_000, 91_000, 0, 7, 2, "b")])
    for kind in VERDICTS.values():
        s = copy.deepcopy(base)
        s["diagnosis"].update(verdict=kind.name, actions=[kind.action])
        words = kind.name.replace("_", " ")
        assert f"{words}: " in _report.format_report(s), kind.name
        assert kind.name in _report.short_text(s), kind.name
        page = _html.render(s)
        assert f"color:{kind.colour}" in page and f">{words}</div>" in page, kind.name
        assert html.escape(kind.action) in page, kind.name
        assert _html_file.title(s).startswith(f"loopscope - {kind.name}, "), kind.name


def test_a_verdict_without_a_colour_is_refused():
    """A declaration needs a colour (no default, and #rrggbb); the view
    refuses a verdict nobody declared instead of drawing it grey."""
    fields = {f.name: getattr(VERDICTS["SYNC_BOUND"], f.name)
              for f in dataclasses.fields(VerdictKind)}
    del fields["colour"]
    with pytest.raises(TypeError, match="colour"):
        VerdictKind(**dict(fields, name="TOY_BOUND"))
    for colour in (None, "", "grey", "#5c708"):
        with pytest.raises(ValueError, match="TOY_BOUND: colour"):
            VerdictKind(**dict(fields, name="TOY_BOUND", colour=colour))
    s = {"diagnosis": {"verdict": "TOY_BOUND", "reasons": [], "actions": []}}
    with pytest.raises(LookupError, match="TOY_BOUND.*not declared"):
        _html._verdict(s)


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
