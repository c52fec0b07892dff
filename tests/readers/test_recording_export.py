"""The trace export of a loaded recording (`loopscope.load(...).export_trace`)
shows what the recording holds: its PM samples as counter tracks, its own
reasons for a missing section (never the replay's "turned off"), launches on
the thread that made them, and nothing from before the profile began (the
warm-up's own wait once stretched a 15 ms loop's axis to 377 ms)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import loopscope
from loopscope import _testhooks
from loopscope.files import _recording

SAMPLES = [(1_100_000, 1_150_000, {"sm_active_pct": 40.0, "dram_throughput_pct": 12.5}),
           (1_150_000, 1_200_000, {"sm_active_pct": 62.25, "dram_throughput_pct": 30.0})]


def sampled_profile(test_clock):
    t = test_clock.at
    with loopscope.profile() as prof:              # start: read 0 = 1_000_000 ns
        with prof.step():                          # reads 1..2
            pass
        _testhooks._inject("api", [(t(1) + 100, t(1) + 200, 1), (t(1) + 300, t(1) + 400, 2)])
        _testhooks._inject("kernel", [(1_100_000, 1_140_000, 0, 7, 1, "a"),
                                 (1_160_000, 1_190_000, 0, 7, 2, "b")])
        _testhooks._inject("sample", [(a, b, v, 0) for a, b, v in SAMPLES])
    return prof


def trace(prof, path):
    return json.loads(open(prof.export_trace(path)).read())


def test_a_loaded_recording_exports_its_samples_as_counter_tracks(test_clock, tmp_path):
    live = sampled_profile(test_clock)
    live_sm = live.summary()["sm"]["active_pct"]
    path = live.save_recording(tmp_path / "rec.json.gz")
    loaded = loopscope.load(path)
    data = trace(loaded, tmp_path / "t.json")
    counters = sorted((e["name"], e["ts"], e["args"]["%"]) for e in data["traceEvents"]
                      if e["ph"] == "C")
    # a series per figure, a value at each sample's start and the last one
    # again at its end, microseconds from the profile's start
    expected = []
    for name, key in (("SM active", "sm_active_pct"), ("DRAM throughput", "dram_throughput_pct")):
        expected += [(name, (a - 1_000_000) / 1e3, v[key]) for a, _, v in SAMPLES]
        expected.append((name, (SAMPLES[-1][1] - 1_000_000) / 1e3, SAMPLES[-1][2][key]))
    assert counters == sorted(expected)
    # the SM figure: busy-weighted over the samples (each sample's share of
    # its length), read back from the export as from the live profile
    back = loopscope.analyze(tmp_path / "t.json")
    assert back["sm"] is not None and back["metrics_error"] is None
    assert back["sm"]["active_pct"] == pytest.approx(live_sm, abs=0.01)
    assert loaded.summary()["recording"]["as_recorded"] == []  # the samples rebuilt it


def rewrite(path: Path, data: dict) -> None:
    """A recording edited here, written with a fresh checksum (a plain file
    without one is refused as possibly damaged)."""
    data.pop("checksum", None)
    path.write_bytes(_recording.with_checksum(json.dumps(data).encode()))


def test_an_older_recording_without_samples_still_loads(test_clock, tmp_path):
    path = Path(sampled_profile(test_clock).save_recording(tmp_path / "rec.json"))
    data = json.loads(path.read_text())
    del data["samples"]
    rewrite(path, data)
    summary = loopscope.load(path).summary()
    assert summary["sm"] is not None and summary["metrics_error"] is None  # as recorded
    assert "sm" in summary["recording"]["as_recorded"]


def test_damaged_samples_are_refused_by_name(test_clock, tmp_path):
    path = Path(sampled_profile(test_clock).save_recording(tmp_path / "rec.json"))
    data = json.loads(path.read_text())
    data["samples"]["figures"]["sm_active_pct"][0] = -5
    rewrite(path, data)
    with pytest.raises(loopscope.TraceError, match="samples are damaged.*sm_active_pct"):
        loopscope.load(path)


@pytest.fixture(scope="module")
def demo_export(tmp_path_factory):
    if not _recording.DEMO_RECORDING.is_file():
        pytest.skip("no bundled demo recording in this checkout")
    prof = loopscope.load(_recording.DEMO_RECORDING)
    path = tmp_path_factory.mktemp("demo") / "demo.json"
    return prof, json.loads(open(prof.export_trace(path)).read()), path


def test_the_demo_recording_keeps_its_own_reasons(demo_export):
    prof, data, path = demo_export
    summary = prof.summary()
    # it sampled and watched syncs: no reason for a missing section at all
    assert summary["sm"] is not None and summary["metrics_error"] is None
    assert summary["syncs"] is not None and summary["syncs_error"] is None
    other = data["otherData"]
    assert "metrics=False" not in json.dumps(other) and "syncs=False" not in json.dumps(other)
    back = loopscope.analyze(path)
    assert "metrics=False" not in (back["metrics_error"] or "")
    # its file keeps no samples (recorded before recordings did): said so
    assert "samples" in back["metrics_error"] and "recording" in back["metrics_error"]


def test_the_demo_recordings_launches_sit_on_the_loops_thread(demo_export):
    _, data, _ = demo_export
    events = data["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == 1}
    assert "unknown thread" not in names.values()
    step_tids = {e["tid"] for e in events if e.get("cat") == "user_annotation"}
    launch_tids = {e["tid"] for e in events if e.get("cat") == "cuda_runtime"}
    assert len(step_tids) == 1 and launch_tids == step_tids


def test_nothing_of_the_demo_recording_lies_before_its_start(demo_export):
    prof, data, _ = demo_export
    timed = [e for e in data["traceEvents"] if "ts" in e]
    assert min(e["ts"] for e in timed) >= 0
    # the axis spans the loop: the last event ends within 1 ms of the stop
    stop_us = prof.summary()["host_ms"] * 1e3
    assert max(e["ts"] + e.get("dur", 0) for e in timed) < stop_us + 1000
