"""A finished profile is a value (issue 42): FinishedProfile.load(), .save()
and .compare() are loopscope.load(), the recording and loopscope.compare();
the with-block offers save() and compare() through its finished value.

load and compare live on floors above _profile.py, which hand them over at
import (_profile.provide): the last tests show what a call gets before that."""
from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import pytest

import loopscope
from loopscope import _profile
from loopscope._profile import FinishedProfile

from synthetic_loop import run_loop

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "python" / "loopscope" / "data" / "demo_recording.json.gz"
FINGERPRINT = ROOT / "benchmarks" / "scale" / "summary_fingerprint.py"


def _without_run_timings(summary: dict) -> dict:
    """The summary less the fields that time this run (the fingerprint
    script's own rule), through JSON so the two sides are plain copies."""
    spec = importlib.util.spec_from_file_location("summary_fingerprint_for_value", FINGERPRINT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.without_run_timings(json.loads(json.dumps(summary)), "input")


def test_load_save_load_gives_the_same_summary(tmp_path):
    first = FinishedProfile.load(DEMO)
    assert isinstance(first, FinishedProfile)
    path = first.save(tmp_path / "again.loopscope.json.gz")
    assert path == str(tmp_path / "again.loopscope.json.gz")
    second = FinishedProfile.load(path)
    assert second is not first
    # the same figures (records_after_stop too: the model's ignored records,
    # kept in the file, are counted once); `recording` says which file this
    # is, and the second is a new one, saved now from a recording
    again, once = (_without_run_timings(p.summary()) for p in (second, first))
    assert again.pop("recording")["recorded_source"] == "recording"
    assert once.pop("recording")["recorded_source"] == "cupti"
    assert again == once
    assert again["overhead"]["records_after_stop"] == 1
    # and the classmethod is loopscope.load, options included
    via_package = loopscope.load(path, gap_thresholds_us=(5.0, 100.0))
    via_value = FinishedProfile.load(path, gap_thresholds_us=(5.0, 100.0))
    assert via_value.summary()["gaps"]["thresholds_us"] == [5.0, 100.0]
    assert _without_run_timings(via_value.summary()) == \
        _without_run_timings(via_package.summary())


def test_save_writes_what_save_recording_writes(tmp_path):
    value = loopscope.load(DEMO)
    plain = value.save(tmp_path / "a.json", command="python loop.py")
    recorded = value.save_recording(tmp_path / "b.json", command="python loop.py")
    assert Path(plain).read_bytes() == Path(recorded).read_bytes()


def test_compare_is_loopscope_compare(test_clock, tmp_path):
    with loopscope.profile() as slow:
        run_loop(slow, step_gap_ns=80_000)
    with loopscope.profile() as fast:
        run_loop(fast, step_gap_ns=1_000)
    before, after = slow.finished, fast.finished
    result = before.compare(after)
    assert result == loopscope.compare(before, after)
    assert result["figures"]["severe_gaps"]["before"] == 2
    assert result["figures"]["severe_gaps"]["after"] == 0
    # the other side may be anything loopscope.compare takes: a dict, a path
    assert before.compare(after.summary()) == loopscope.compare(before, after.summary())
    saved = after.save(tmp_path / "after.json")
    by_file = before.compare(saved)
    assert by_file == loopscope.compare(before, saved)
    assert by_file["after"]["label"] == saved


def test_the_with_block_saves_and_compares_after_its_exit(test_clock, tmp_path):
    with loopscope.profile() as prof:
        run_loop(prof)
    path = prof.save(tmp_path / "loop.json.gz")
    assert gzip.decompress(Path(path).read_bytes()) == gzip.decompress(
        Path(prof.finished.save(tmp_path / "loop2.json.gz")).read_bytes())
    replayed = FinishedProfile.load(path)
    assert replayed.summary()["gaps"]["severe"] == prof.summary()["gaps"]["severe"] == 2
    result = prof.compare(replayed)
    assert result == loopscope.compare(prof, replayed)
    assert result["figures"]["severe_gaps"]["delta"] == 0


def test_the_with_block_refuses_save_and_compare_while_running(test_clock, tmp_path):
    prof = loopscope.profile()
    for call in (lambda: prof.summary(), lambda: prof.save(tmp_path / "x.json"),
                 lambda: prof.compare({})):
        with pytest.raises(RuntimeError, match="has not run yet"):
            call()
    with prof:
        run_loop(prof)
        errors = []
        for call in (prof.summary, lambda: prof.save(tmp_path / "x.json"),
                     lambda: prof.compare({})):
            with pytest.raises(RuntimeError) as caught:
                call()
            errors.append(str(caught.value))
        assert errors[0] == errors[1] == errors[2]
        assert "still running" in errors[0]
    assert not (tmp_path / "x.json").exists()


def test_before_its_provider_is_imported_a_method_says_what_to_import(monkeypatch, tmp_path):
    """Only reachable by importing loopscope._profile while the package is
    half imported; loopscope/__init__ imports both providers."""
    assert set(_profile._PROVIDED) == {"load", "compare"}  # `import loopscope` gave both
    monkeypatch.setattr(_profile, "_PROVIDED", {})
    value = loopscope.load(DEMO)  # the package's own load() needs no provider
    with pytest.raises(RuntimeError, match=r"FinishedProfile\.load\(\) is provided by "
                                           r"loopscope\.readers\._analyze.*import loopscope"):
        FinishedProfile.load(DEMO)
    with pytest.raises(RuntimeError, match=r"FinishedProfile\.compare\(\) is provided by "
                                           r"loopscope\.surfaces\._compare"):
        value.compare(value)
    assert Path(value.save(tmp_path / "r.json")).exists()  # save is on the value's own floor


def test_provide_refuses_a_name_it_does_not_know():
    with pytest.raises(ValueError, match="'combine'"):
        _profile.provide("combine", lambda *a: None)
