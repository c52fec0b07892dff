"""The mutation lists (tests/mutation, tests/MUTATION.md) follow the code:
every hand-written mutant still finds its text, once, and changes it; the
CI smoke sample names mutants that exist, and each names test files that
exist; every generated mutant still finds its text too.  A list that went
stale would make the sweep report "stale" instead of testing the rule, so a
code move must carry its mutants along (the generated list is refreshed
with `run_mutants.py --generate`)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "mutation"))
run_mutants = pytest.importorskip("run_mutants")
if run_mutants.tomllib is None:
    pytest.skip("the mutation lists need Python 3.11+ (tomllib)", allow_module_level=True)

HAND = run_mutants.load_list(run_mutants.HAND_LIST)
GENERATED = run_mutants.load_list(run_mutants.PY_LIST)


def stale(mutants) -> list[str]:
    """'id: why' of each mutant whose text is gone or no longer unique."""
    texts: dict[str, str] = {}
    out = []
    for m in mutants:
        text = texts.get(m.file)
        if text is None:
            text = texts[m.file] = (ROOT / m.file).read_text(encoding="utf-8")
        where = run_mutants.locate(text, m)
        if isinstance(where, str):
            out.append(f"{m.id}: {where}")
    return out


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


def test_no_generated_mutant_is_stale():
    """One check for the ~1,200 generated mutants (a test each would swamp
    the suite's count); the message names each stale one."""
    found = stale(GENERATED)
    assert found == [], (f"{len(found)} generated mutants are stale: run `python "
                         "tests/mutation/run_mutants.py --generate`\n" + "\n".join(found[:20]))
    missing = sorted({t for m in GENERATED for t in m.tests if not (ROOT / t).is_file()})
    assert missing == [], f"generated mutants name test files that do not exist: {missing}"


def test_the_stale_check_sees_a_gone_and_a_doubled_text():
    """The check above fails on a stale entry: text that is gone, text
    found twice, an anchor that is gone; a live entry passes."""
    here = "tests/mutation/run_mutants.py"  # not a list's entry: this test stays independent
    live = run_mutants.Mutant(id="x.live", file=here, find="def locate(text: str, m: Mutant)",
                              replace="def located(text: str, m: Mutant)", tests=[])
    gone = run_mutants.Mutant(id="x.gone", file=live.file, find="no such text in any file \x00",
                              replace="", tests=[])
    doubled = run_mutants.Mutant(id="x.doubled", file=live.file, find="\n\n", replace="\n",
                                 tests=[])
    no_anchor = run_mutants.Mutant(id="x.anchor", file=live.file, find=live.find,
                                   replace=live.replace, tests=[], after="no such anchor \x00")
    assert stale([live]) == []
    assert [s.split(":")[0] for s in stale([gone, live, doubled, no_anchor])] == [
        "x.gone", "x.doubled", "x.anchor"]
