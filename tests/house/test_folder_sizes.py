"""The tree stays readable (issue 29): no folder of csrc/, python/loopscope/,
tests/ or benchmarks/ holds more than 15 source files (.c, .cpp, .py, .sh,
.cu; headers, docs and data are not counted, tests/data is test data).  A
folder that grows past that is split into subfolders by what its files do.
"""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MAX_SOURCE_FILES = 15
SOURCE_SUFFIXES = (".c", ".cpp", ".py", ".sh", ".cu")
CHECKED = ("csrc", "python/loopscope", "tests", "benchmarks")
EXCLUDED = ("tests/data",)
# Folders already over the limit when this test came, each held at the count
# it had then: it may shrink (then the entry goes), never grow.
KNOWN_OVER: dict[str, int] = {}


def crowded_folders(root: Path, tops=CHECKED, excluded=EXCLUDED,
                    limit: int = MAX_SOURCE_FILES) -> dict[str, int]:
    """{folder relative to root: its count of source files} for every folder
    under `tops` (at any depth) that holds more than `limit` of them itself."""
    crowded: dict[str, int] = {}
    for top in tops:
        for folder, subfolders, files in os.walk(root / top):
            relative = Path(folder).relative_to(root).as_posix()
            # caches, build outputs and hidden folders are no one's reading
            subfolders[:] = sorted(d for d in subfolders if not d.startswith((".", "__pycache__"))
                                   and not d.endswith(".egg-info")
                                   and f"{relative}/{d}" not in excluded)
            count = sum(name.endswith(SOURCE_SUFFIXES) for name in files)
            if count > limit:
                crowded[relative] = count
    return crowded


def problems_of(crowded: dict[str, int], known_over: dict[str, int]) -> list[str]:
    """What is wrong with the tree: a folder over the limit that is not a known
    one, a known one that grew, a known one no longer over (its entry is stale)."""
    problems = []
    for folder, count in sorted(crowded.items()):
        if folder not in known_over:
            problems.append(f"{folder}/ holds {count} source files (at most {MAX_SOURCE_FILES}): "
                            f"split it into subfolders by what its files do")
        elif count > known_over[folder]:
            problems.append(f"{folder}/ grew to {count} source files (held at {known_over[folder]}, "
                            f"at most {MAX_SOURCE_FILES} for a new folder): split it")
    for folder in sorted(set(known_over) - set(crowded)):
        problems.append(f"{folder}/ is no longer over {MAX_SOURCE_FILES} source files: "
                        f"take it out of KNOWN_OVER")
    return problems


def test_no_folder_holds_more_than_fifteen_source_files():
    problems = problems_of(crowded_folders(ROOT), KNOWN_OVER)
    assert not problems, "\n".join(problems)


def test_every_checked_folder_is_there():
    """A renamed top folder must not make the check pass on nothing."""
    for top in CHECKED + EXCLUDED:
        assert (ROOT / top).is_dir(), top


def _touch(root: Path, folder: str, names: list[str]) -> None:
    (root / folder).mkdir(parents=True, exist_ok=True)
    for name in names:
        (root / folder / name).write_text("")


def test_a_made_up_tree(tmp_path):
    """Fifteen source files pass, sixteen fail, at any depth and for each
    suffix; headers, other files, caches and tests/data are not counted."""
    _touch(tmp_path, "csrc/at_limit", [f"m{i}.c" for i in range(15)] + [f"m{i}.h" for i in range(15)])
    _touch(tmp_path, "csrc/mixed", [f"m{i}{s}" for i in range(4) for s in (".c", ".cpp", ".sh", ".cu")])
    _touch(tmp_path, "tests/over", [f"test_{i}.py" for i in range(16)])
    _touch(tmp_path, "tests/over/__pycache__", [f"test_{i}.py" for i in range(20)])
    _touch(tmp_path, "tests/data/traces", [f"make_{i}.py" for i in range(30)])
    _touch(tmp_path, "python/loopscope/a/b", [f"_m{i}.py" for i in range(16)] + ["notes.md", "x.pyi"])
    _touch(tmp_path, "python/loopscope", [f"_m{i}.py" for i in range(15)] + [f"d{i}.json" for i in range(9)])
    _touch(tmp_path, "benchmarks", [f"b{i}.py" for i in range(40)])
    _touch(tmp_path, "other", [f"o{i}.py" for i in range(40)])  # not a checked top
    assert crowded_folders(tmp_path) == {"csrc/mixed": 16, "tests/over": 16,
                                         "python/loopscope/a/b": 16, "benchmarks": 40}
    assert crowded_folders(tmp_path, tops=("other",)) == {"other": 40}


def test_known_folders_over_the_limit_may_shrink_never_grow():
    assert problems_of({"a": 17}, {"a": 17}) == []
    assert problems_of({"a": 16}, {"a": 17}) == []
    grew = problems_of({"a": 18}, {"a": 17})
    assert len(grew) == 1 and grew[0].startswith("a/ grew to 18 source files")
    stale = problems_of({}, {"a": 17})
    assert len(stale) == 1 and "take it out of KNOWN_OVER" in stale[0]
    new = problems_of({"b": 16}, {})
    assert len(new) == 1 and new[0].startswith("b/ holds 16 source files (at most 15)")


TOP_MODULES = 12  # issue 42: the package's top folder stays a short read


def test_the_package_top_holds_at_most_twelve_modules():
    top = sorted(p.name for p in (ROOT / "python" / "loopscope").glob("*.py"))
    assert len(top) <= TOP_MODULES, (len(top), top)
