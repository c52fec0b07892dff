"""The mutation lists (tests/mutation, tests/MUTATION.md) follow the code:
every hand-written mutant still finds its text, once, and changes it; the
CI smoke sample names mutants that exist, and each names test files that
exist.  A list that went stale would make the sweep report "stale" instead
of testing the rule, so a code move must carry its mutants along (the
generated list is refreshed with `run_mutants.py --generate` and checked by
the sweep itself)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "mutation"))
run_mutants = pytest.importorskip("run_mutants")
if run_mutants.tomllib is None:
    pytest.skip("the mutation lists need Python 3.11+ (tomllib)", allow_module_level=True)

HAND = run_mutants.load_list(run_mutants.HAND_LIST)


@pytest.mark.parametrize("mutant", HAND, ids=[m.id for m in HAND])
def test_a_hand_mutant_finds_its_text_and_changes_it(mutant):
    text = (ROOT / mutant.file).read_text(encoding="utf-8")
    where = run_mutants.locate(text, mutant)
    assert not isinstance(where, str), f"{mutant.id} is stale: {where}"
    changed = run_mutants.mutated_text(text, mutant)
    assert changed is not None and changed != text
    assert mutant.tests, f"{mutant.id} names no test file"
    missing = [t for t in mutant.tests if not (ROOT / t).is_file()]
    assert missing == [], f"{mutant.id} names test files that do not exist"


def test_the_smoke_sample_names_listed_mutants():
    ids = {m.id for m in HAND} | {m.id for m in run_mutants.load_list(run_mutants.PY_LIST)}
    assert len(run_mutants.SMOKE) >= 10
    assert [i for i in run_mutants.SMOKE if i not in ids] == []
