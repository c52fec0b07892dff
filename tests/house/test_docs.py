"""The user guide (docs/, mkdocs.yml) and README.md hold together: every
relative link and #anchor resolves, and mkdocs builds the site strictly.

Two independent checks, each shown to fail on a broken link in a temp copy:

(a) plain Python, no mkdocs: the links of README.md, docs/*.md and
    benchmarks/*.md are parsed here (inline links and images, reference definitions, autolinks; fenced
    and indented code and code spans skipped) and each relative target must
    exist inside the repository, each #anchor must be a heading of the target
    page under GitHub's heading ids (computed here, not by mkdocs), so the
    links work on GitHub as they do in the site;
(b) `mkdocs build --strict` into a temp folder, where mkdocs and the theme
    are importable (`pip install ".[docs]"`; CI installs them), else a skip
    that says so. mkdocs.yml turns missing pages, missing anchors and pages
    left out of nav into warnings, which --strict makes errors.

External http(s) links are not fetched: CI has no general internet. They
are listed and only their syntax is checked (scheme, host, no spaces).
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^()\s<>]+)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s]+)>")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
GITHUB_LINE_ANCHOR = re.compile(r"L\d+(?:-L\d+)?")


def guide_pages(root: Path) -> list[Path]:
    # benchmarks/README.md and RESULTS.md link into benchmarks/history/ by #anchor
    return [root / "README.md", *sorted((root / "docs").glob("*.md")),
            *sorted((root / "benchmarks").glob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the text outside fenced and indented code
    blocks, with code spans blanked out."""
    out: list[tuple[int, str]] = []
    fence = ""
    prev_blank, in_list, in_indented = True, False, False
    for number, line in enumerate(text.split("\n"), 1):
        if fence:
            if line.strip().startswith(fence):
                fence = ""
            continue
        opened = FENCE.match(line)
        if opened:
            fence = opened.group(1)
            continue
        blank = not line.strip()
        indented = line.startswith("    ") or line.startswith("\t")
        # An indented block after a blank line is code, unless it continues a list.
        if indented and (in_indented or (prev_blank and not in_list)):
            in_indented = True
            prev_blank = blank
            continue
        if not blank:
            in_indented = False
            if LIST_ITEM.match(line):
                in_list = True
            elif not line.startswith(" ") and prev_blank:
                in_list = False
        prev_blank = blank
        out.append((number, CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)))
    return out


def link_targets(text: str) -> list[tuple[int, str]]:
    targets: list[tuple[int, str]] = []
    for number, line in prose_lines(text):
        ref = REFERENCE_DEF.match(line)
        if ref:
            targets.append((number, ref.group(1)))
            continue
        targets += [(number, m.group(1)) for m in INLINE_LINK.finditer(line)]
        targets += [(number, m.group(1)) for m in AUTOLINK.finditer(line)]
    return targets


def github_slug(heading: str) -> str:
    """GitHub's id for a heading: its text as rendered (link text kept,
    code and emphasis marks dropped), lower case, every character that is
    not a letter, mark, number, connector, space or hyphen removed, then
    each space a hyphen (runs are not merged)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[`*]", "", text).lower()
    kept = "".join(c for c in text
                   if c in " -" or unicodedata.category(c)[0] in "LMN"
                   or unicodedata.category(c) == "Pc")
    return kept.replace(" ", "-")


def heading_ids(text: str) -> set[str]:
    ids: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(text):
        match = HEADING.match(line)
        if not match:
            continue
        slug = github_slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        ids.add(slug if count == 0 else f"{slug}-{count}")
    return ids


def is_external(target: str) -> bool:
    return bool(re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target))


def external_link_problem(target: str) -> str | None:
    """Syntax only (nothing is fetched): None for a well-formed http(s) or
    mailto link, else what is wrong."""
    parts = urlsplit(target)
    if parts.scheme == "mailto":
        return None if re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", parts.path) else "bad address"
    if parts.scheme not in ("http", "https"):
        return f"scheme {parts.scheme!r} is not http(s)"
    if not re.fullmatch(r"[A-Za-z0-9.-]+\.[A-Za-z]{2,}(:\d+)?", parts.netloc):
        return f"no valid host in {target!r}"
    if re.search(r"\s", target):
        return "contains a space"
    return None


def broken_links(root: Path) -> list[str]:
    """'file:line: target: why' for each link of README.md and docs/*.md
    that does not resolve; external links are checked for syntax only."""
    problems: list[str] = []
    for page in guide_pages(root):
        text = page.read_text(encoding="utf-8")
        for number, target in link_targets(text):
            where = f"{page.relative_to(root)}:{number}: {target}"
            if is_external(target):
                problem = external_link_problem(target)
                if problem:
                    problems.append(f"{where}: {problem}")
                continue
            path_part, _, anchor = target.partition("#")
            if path_part.startswith("/"):
                problems.append(f"{where}: absolute path (GitHub and the site differ)")
                continue
            file = (page.parent / path_part).resolve() if path_part else page
            if root.resolve() not in (file, *file.parents):
                problems.append(f"{where}: outside the repository")
                continue
            if not file.exists():
                problems.append(f"{where}: no such file")
                continue
            if not anchor:
                continue
            if file.suffix == ".md":
                if anchor not in heading_ids(file.read_text(encoding="utf-8")):
                    problems.append(f"{where}: no heading #{anchor} in {file.name}")
            elif not GITHUB_LINE_ANCHOR.fullmatch(anchor):
                problems.append(f"{where}: #{anchor} in a file that is not markdown")
    return problems


def external_links(root: Path) -> list[str]:
    return [t for page in guide_pages(root)
            for _, t in link_targets(page.read_text(encoding="utf-8")) if is_external(t)]


def guide_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copytree(ROOT / "docs", copy / "docs")
    for name in ("README.md", "mkdocs.yml"):
        shutil.copy(ROOT / name, copy / name)
    return copy


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "\n" + text + "\n", encoding="utf-8")


# --- (a) the links, in plain Python -----------------------------------------

def test_every_relative_link_and_anchor_resolves():
    assert broken_links(ROOT) == []


def test_the_external_links_are_well_formed():
    listed = external_links(ROOT)
    assert [t for t in listed if external_link_problem(t)] == []


def test_readme_links_every_page_of_the_guide():
    linked = {t.partition("#")[0] for _, t in link_targets((ROOT / "README.md").read_text())}
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert len(pages) >= 10 and pages <= linked, sorted(pages - linked)


@pytest.mark.parametrize("page, link, why", [
    ("docs/syncs.md", "[gone](no-such-page.md)", "no such file"),
    ("docs/syncs.md", "[gone](tour.md#no-such-heading)", "no heading #no-such-heading"),
    ("docs/syncs.md", "[gone](#no-such-heading)", "no heading #no-such-heading"),
    ("README.md", "[gone](docs/no-such-page.md)", "no such file"),
    ("README.md", "[gone](docs/tour.md#2-pytest-budget)", "no heading #2-pytest-budget"),
    ("README.md", "![gone](docs/no-such-picture.png)", "no such file"),
    ("README.md", "[gone]: docs/no-such-page.md", "no such file"),
    ("README.md", "[gone](../outside.md)", "outside the repository"),
    ("README.md", "[gone](https:/example.org/x)", "no valid host"),
    ("README.md", "<http://nohost>", "no valid host"),
])
def test_a_broken_link_in_a_copy_is_found(tmp_path, page, link, why):
    copy = guide_copy(tmp_path)
    assert broken_links(copy) == []
    append(copy / page, link)
    problems = broken_links(copy)
    assert len(problems) == 1 and problems[0].startswith(page + ":") and why in problems[0], problems


def test_links_inside_code_are_not_links(tmp_path):
    copy = guide_copy(tmp_path)
    append(copy / "docs" / "syncs.md",
           "```\n[x](nope.md)\n```\n\n    [x](nope.md)\n\nThe text `[x](nope.md)` here.")
    assert broken_links(copy) == []
    # ...but a list item's indented continuation is prose, not code
    append(copy / "docs" / "syncs.md", "- an item\n\n    [x](nope.md)")
    assert len(broken_links(copy)) == 1


@pytest.mark.parametrize("heading, slug", [
    ("What to change, what it would win; before and after",
     "what-to-change-what-it-would-win-before-and-after"),
    ("Several GPUs: torch.distributed", "several-gpus-torchdistributed"),
    ("2. pytest budgets", "2-pytest-budgets"),
    ("The `loopscope run` command", "the-loopscope-run-command"),
    ("a - b", "a---b"),
    ("Über [links](x.md) *here*", "über-links-here"),
])
def test_github_heading_ids(heading, slug):
    assert github_slug(heading) == slug


def test_repeated_headings_get_numbered_ids():
    assert heading_ids("# Notes\n\n## Notes\n\n## Notes\n") == {"notes", "notes-1", "notes-2"}


# --- (b) the site, built by mkdocs --------------------------------------------

def mkdocs_build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("mkdocs or mkdocs-material is not installed (pip install \".[docs]\"); "
                    "the links were still checked in plain Python above")
    # Never -q: it hides the warnings that --strict counts, and the build passes.
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))


def test_mkdocs_builds_the_site_strictly_with_github_heading_ids(tmp_path):
    result = mkdocs_build(ROOT, tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    for page in sorted((ROOT / "docs").glob("*.md")):
        html = (tmp_path / "site" / ("" if page.stem == "index" else page.stem) / "index.html")
        ids = set(re.findall(r'\bid="([^"]+)"', html.read_text(encoding="utf-8")))
        expected = heading_ids(page.read_text(encoding="utf-8"))
        assert expected and expected <= ids, (page.name, sorted(expected - ids))
    # index.md takes the quick start and the set-up from README.md
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert 'id="quick-start"' in index and 'id="set-up"' in index and "--8&lt;--" not in index


@pytest.mark.parametrize("link, said", [
    ("[gone](no-such-page.md)", "no-such-page.md"),
    ("[gone](tour.md#no-such-heading)", "#no-such-heading"),
])
def test_mkdocs_strict_fails_on_a_broken_link_in_a_copy(tmp_path, link, said):
    copy = guide_copy(tmp_path)
    append(copy / "docs" / "syncs.md", f"See {link} here.")
    result = mkdocs_build(copy, tmp_path / "site")
    out = result.stdout + result.stderr
    assert result.returncode != 0 and "syncs.md" in out and said in out, out


def test_mkdocs_strict_fails_on_a_page_left_out_of_nav(tmp_path):
    copy = guide_copy(tmp_path)
    (copy / "docs" / "orphan.md").write_text("# Orphan\n", encoding="utf-8")
    result = mkdocs_build(copy, tmp_path / "site")
    out = result.stdout + result.stderr
    assert result.returncode != 0 and "orphan.md" in out, out


# --- where the docs tools come from --------------------------------------------

def test_the_docs_extra_asks_for_lower_bounds_only_and_ci_builds_strictly():
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11+")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {re.split(r"[<>=!~;\[\s]", r, maxsplit=1)[0].lower(): r for r in extras["docs"]}
    assert set(names) == {"mkdocs", "mkdocs-material"}, extras["docs"]
    assert all(re.fullmatch(r"[\w-]+>=[\d.]+", r) for r in names.values()), extras["docs"]
    assert not set(names) & {re.split(r"[<>=!~;\[\s]", r, maxsplit=1)[0].lower()
                             for r in extras["test"]}  # the docs test skips without them
    ci = (ROOT / ".ci" / "run").read_text()
    build = [line for line in ci.splitlines() if "mkdocs build" in line]
    assert len(build) == 1 and "--strict" in build[0] and " -q" not in build[0], build
    # before the tests, so this file's build runs in CI rather than skipping
    assert ci.index('["optional-dependencies"]["docs"]') < ci.index(build[0]) \
        < ci.index('pip install ".[test]" && python -m pytest tests')
