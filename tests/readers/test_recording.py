"""Recordings: a profile's raw records saved to a compact file and replayed
through the C analysis give the same summary again, exactly; bad files are
refused with the reason; the demo without a GPU analyses the bundled
recording and says plainly that it is one."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import loopscope
from loopscope import _core, _testhooks
from loopscope.files import _recording
from loopscope.readers import _replay
from loopscope.__main__ import main

from synthetic_loop import run_loop

TIMING = ("summary_ms",)


def rich_profile(test_clock):
    """Steps, nested ranges, kernels, a memcpy and a memset on two streams,
    launch records (two with one correlation id, on another thread), host
    syncs, and ops without a launch record."""
    t = test_clock.at
    with loopscope.profile() as prof:
        for _ in range(3):
            with prof.step():                       # step i: reads 1+6i .. 6+6i
                with loopscope.range("Attn"):
                    with loopscope.range("Attn/qkv"):
                        pass
        with loopscope.range("tail"):
            pass
        _testhooks._inject("api", [(t(1 + 6 * i) + 10, t(1 + 6 * i) + 20, i + 1) for i in range(3)]
                      + [(t(2) + 5, t(2) + 6, 1, 3)])
        _testhooks._inject("kernel", [
            (2_000_000, 2_010_000, 0, 7, 1, "gemm"),
            (2_090_000, 2_100_000, 0, 7, 2, "gemm"),
            (2_103_000, 2_104_000, 0, 9, 3, "softmax"),
            (2_300_000, 2_301_000, 0, 7, 77, None),   # no launch record
        ])
        _testhooks._inject("memcpy", [(2_150_000, 2_160_000, 0, 7, 40, "HtoD", 4096)])
        _testhooks._inject("memset", [(2_200_000, 2_201_000, 0, 9, 41, None, 64)])
        # a host wait that began in the "tail" range, before the stop (a sync
        # record that began after it would be left out), and lasted until the
        # GPU had run into its third idle gap: that gap's cause is `sync` (the
        # next op, the memcpy, has no launch record; the first two gaps' next
        # ops were queued long before: `other`)
        _testhooks._inject("sync_record", [SYNC_RECORD])
    return prof


SYNC_RECORD = (1_019_500, 2_105_000, 7)  # tail range: clock reads 19-20 (1.019-1.020 ms)
DEVICE_OPS = [(2_000_000, 2_010_000), (2_090_000, 2_100_000), (2_103_000, 2_104_000),
              (2_300_000, 2_301_000), (2_150_000, 2_160_000), (2_200_000, 2_201_000)]


def device_gaps(ops):
    """Idle intervals between the union of the ops' busy intervals."""
    out, end = [], None
    for start, stop in sorted(ops):
        if end is not None and start > end:
            out.append((end, start))
        end = stop if end is None else max(end, stop)
    return out


def comparable(summary):
    s = json.loads(json.dumps(summary))
    s["overhead"] = {k: v for k, v in s["overhead"].items() if k not in TIMING}
    for key in ("source", "recording"):
        s.pop(key, None)
    return s


def test_replay_gives_the_same_summary(test_clock, tmp_path):
    prof = rich_profile(test_clock)
    original = prof.summary()
    path = Path(prof.save_recording(tmp_path / "rec.json.gz", command="python loop.py"))
    with open(path, "rb") as f:
        assert f.read(2) == b"\x1f\x8b"  # gzip
    test_clock.set(0, 0)
    again = _replay.replay(_recording.load(path)).summary()
    assert comparable(again) == comparable(original)
    # the figures that matter, spelled out
    gaps = device_gaps(DEVICE_OPS)
    assert again["gaps"]["count"] == original["gaps"]["count"] == len(gaps) == 5
    # every launch record began at about 1 ms, before every gap (queued: no
    # wait held those ops back): a gap is `sync` when the host wait overlaps
    # it and its next op has no launch record (the memcpy, the memset, corr
    # 77, starting at 2.15, 2.2 and 2.3 ms), else `other`
    unlaunched = {2_150_000, 2_200_000, 2_300_000}
    synced = [g for g in gaps if SYNC_RECORD[0] < g[1] and SYNC_RECORD[1] > g[0]
              and g[1] in unlaunched]
    assert again["gaps"]["by_cause"] == {"host": 0, "sync": len(synced),
                                         "other": len(gaps) - len(synced)} == {
        "host": 0, "sync": 1, "other": 4}
    assert again["overhead"]["records_after_stop"] == 0
    assert [(s["name"], s["kernels"], s["gaps"]["severe"]) for s in again["steps"]] == [
        ("Step_0", 1, 0), ("Step_1", 1, 1), ("Step_2", 1, 0)]
    assert [r["name"] for r in again["ranges"]] == ["Attn", "Attn/qkv", "tail"]
    assert again["gaps"]["by_cause"] == original["gaps"]["by_cause"]
    assert again["gpu"]["ops_without_launch_record"] == 3  # the memcpy, the memset, corr 77
    assert len(_recording.load(path)["apis"]["start"]) == 4
    assert again["source"] == "recording"
    assert again["recording"] == {
        "device": None, "date": again["recording"]["date"], "loopscope": loopscope.__version__,
        "command": "python loop.py", "note": None, "recorded_source": "injected",
        "as_recorded": [],
    }


def test_launch_records_keep_their_domain_and_thread(test_clock, tmp_path):
    """A launch seen as a runtime call and as the driver call under it (one
    correlation id): the op's launch is the runtime call's, even when the
    driver record comes first; a recording keeps every record with its
    domain and thread, so the replay picks the same one.
    _inject api records: (start, end, correlation, thread, domain)."""
    with loopscope.profile() as prof:
        _testhooks._inject("api", [(1_500, 1_600, 1, 5, 1),    # driver call, earlier
                              (1_700, 1_800, 1, 5, 0),    # runtime call: this one
                              (1_900, 1_950, 2, 6, 1)])   # a driver call alone
        _testhooks._inject("kernel", [(3_000, 4_000, 0, 7, 1, "a"), (5_000, 6_000, 0, 7, 2, "b")])
    assert list(prof.model.op_column("launch_ns")) == [1_700, 1_900]
    assert prof.capture.apis() == [(1_500, 1_600, 1, 5, 0, 1), (1_700, 1_800, 1, 5, 0, 0),
                                   (1_900, 1_950, 2, 6, 0, 1)]
    data = _recording.load(_recording.save(prof.finished, tmp_path / "r.json"))
    assert data["apis"]["domain"] == [1, 0, 1] and data["apis"]["thread"] == [5, 5, 6]
    test_clock.set(0, 0)
    again = _replay.replay(data)
    assert again.capture.apis() == prof.capture.apis()
    assert list(again.model.op_column("launch_ns")) == [1_700, 1_900]


def test_version_1_recordings_still_replay(test_clock, tmp_path):
    """Version 1 (the bundled demo's): no API domain (runtime calls), sync
    records under "syncs"."""
    prof = rich_profile(test_clock)
    data = _recording.record(prof.finished)
    data["version"] = 1
    del data["apis"]["domain"]
    data["syncs"] = data.pop("sync_records")
    path = tmp_path / "v1.json"
    path.write_bytes(_recording.with_checksum(json.dumps(data).encode()))
    test_clock.set(0, 0)
    again = _replay.replay(_recording.load(path))
    assert comparable(again.summary()) == comparable(prof.summary())
    assert again.capture.sync_records() == prof.capture.sync_records()


def test_plain_json_and_the_synthetic_loop(test_clock, tmp_path):
    """Uncompressed files work too; the synthetic loop round-trips exactly."""
    with loopscope.profile() as prof:
        run_loop(prof, steps=5)
    path = _recording.save(prof.finished, tmp_path / "loop.json")
    assert json.loads(path.read_text())["format"] == "loopscope-recording"
    test_clock.set(0, 0)
    again = _replay.replay(_recording.load(path))
    assert comparable(again.summary()) == comparable(prof.summary())
    assert again.summary()["diagnosis"]["verdict"] == "CPU_LAUNCH_BOUND"


def test_sections_without_raw_records_come_back_as_recorded(test_clock, tmp_path):
    """Sync sites and SM/DRAM values cannot be injected: the replay puts
    back what the summary had and says which ones."""
    with loopscope.profile() as prof:
        run_loop(prof)
    summary = prof.summary()
    sites = [{"file": "loop.py", "line": 3, "function": "f", "code": "x.item()", "call": "x.item()",
              "kind": "item", "count": 3, "blocked_ms": 0.3, "steps": [0, 1, 2], "thread_id": 1,
              "apis": {"cudaStreamSynchronize": 3}}]
    summary["syncs"] = {"count": 3, "blocked_ms": 0.3, "by_kind": {"item": 3}, "sites": sites,
                        "in_steps": 3, "outside_steps": 0}
    summary["sm"] = {"active_pct": 12.5, "samples": 40}
    for step in summary["steps"]:
        step["syncs"], step["sm_active_pct"] = 1, 12.5
    path = _recording.save(prof.finished, tmp_path / "rec.json.gz")
    test_clock.set(0, 0)
    again = _replay.replay(_recording.load(path)).summary()
    assert again["syncs"] == summary["syncs"]
    assert again["sm"] == summary["sm"]
    assert [s["syncs"] for s in again["steps"]] == [1, 1, 1]
    assert again["recording"]["as_recorded"] == ["syncs", "sm", "steps.syncs", "steps.sm_active_pct"]


def test_bad_files_are_refused_with_the_reason(tmp_path):
    cases = {
        "empty.json.gz": (b"\x1f\x8b", "cannot read the recording"),
        "text.json": (b"not json", "cannot read the recording"),
        "other.json": (b'{"traceEvents": []}', "is not a loopscope recording"),
        "future.json": (b'{"format": "loopscope-recording", "version": 99}',
                        "format version 99; this loopscope reads versions 1, 2"),
        "short.json": (b'{"format": "loopscope-recording", "version": 1, "meta": {}}',
                       "the recording lacks profile, ops, apis, syncs, ranges, names, sections"),
        "short2.json": (b'{"format": "loopscope-recording", "version": 2, "meta": {}}',
                        "the recording lacks profile, ops, apis, sync_records, ranges, names, "
                        "sections"),
    }
    for name, (content, message) in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(_recording.RecordingError, match=message):
            _recording.load(tmp_path / name)
    with pytest.raises(_recording.RecordingError, match="cannot read the recording .*missing"):
        _recording.load(tmp_path / "missing.json.gz")


def test_a_recording_is_small(test_clock, tmp_path):
    """1,100 kernels with their launch records (the demo loop's size): a few
    bytes a record, far below the 200 KB the package allows."""
    with loopscope.profile() as prof:
        run_loop(prof, steps=10, kernels=110)
    path = _recording.save(prof.finished, tmp_path / "big.json.gz")
    size = path.stat().st_size
    print("1,100 kernels + 1,100 launches:", size, "bytes")
    assert size < 20_000


@pytest.fixture
def no_gpu(monkeypatch):
    """The demo's view of a machine without a GPU, on any machine."""
    import loopscope.__main__ as cli

    monkeypatch.setattr(cli, "gpu_available", lambda: (False, "no GPU in this test"))


def test_demo_without_gpu_and_without_recording(no_gpu, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(_recording, "DEMO_RECORDING", tmp_path / "none.json.gz")
    assert main(["demo"]) == 0
    said = capsys.readouterr()
    assert said.out == ""  # notices go to stderr (issue 41)
    assert said.err == (
        "loopscope demo: no GPU here (no GPU in this test).\n"
        "The demo profiles a 10-step denoise loop on an NVIDIA GPU; nothing to run.\n")


def test_demo_without_gpu_replays_the_bundled_recording(no_gpu, monkeypatch, test_clock, tmp_path, capsys):
    with loopscope.profile() as prof:
        run_loop(prof)
    path = Path(prof.save_recording(tmp_path / "demo.json.gz",
                                    command="python benchmarks/tour/record_demo.py"))
    data = json.loads(gzip.decompress(path.read_bytes()))
    data["meta"]["device"] = "NVIDIA H200"
    data["meta"]["devices"] = {"0": "NVIDIA H200"}
    data["meta"]["date"] = "2026-11-21 10:00 UTC"
    path.write_bytes(gzip.compress(json.dumps(data).encode()))
    monkeypatch.setattr(_recording, "DEMO_RECORDING", path)
    test_clock.set(0, 0)
    assert main(["demo", "--json", str(tmp_path / "s.json")]) == 0
    said = capsys.readouterr()
    out = said.out.splitlines()  # the report alone; the notices on stderr (issue 41)
    assert said.err.splitlines()[:2] == [
        "loopscope demo: no GPU here (no GPU in this test).",
        "RECORDING: this report analyses the records of `python benchmarks/tour/record_demo.py`, made "
        f"on NVIDIA H200 on 2026-11-21 10:00 UTC with loopscope {loopscope.__version__}; nothing "
        "ran on a GPU now."]
    assert out[0] == "loopscope report - NVIDIA H200 - 3 steps, host " + out[0].split("host ")[1]
    assert out[1].startswith("CPU LAUNCH BOUND: GPU busy 25.5%, 2 severe gaps (> 50 us)")
    written = json.loads((tmp_path / "s.json").read_text())
    assert written["source"] == "recording" and written["gpu"]["device"] == "NVIDIA H200"


@pytest.mark.parametrize("args, line", [
    (["demo", "--graph"], "loopscope demo: --graph needs a GPU; showing the bundled recording of "
                          "the eager demo loop (10 steps, no per-layer ranges) instead."),
    (["demo", "--layers", "--graph"], "loopscope demo: --graph and --layers need a GPU; showing "
     "the bundled recording of the eager demo loop (10 steps, no per-layer ranges) instead."),
    (["demo", "--steps", "4"], "loopscope demo: --steps 4 needs a GPU; showing the bundled "
                               "recording of the eager demo loop (10 steps, no per-layer ranges) instead."),
    (["demo", "--steps", "10"], None),
])
def test_demo_options_a_recording_cannot_show_are_named(no_gpu, capsys, args, line):
    data = _recording.bundled_demo()
    if data is None:
        pytest.skip("no bundled demo recording in this checkout")
    assert data["meta"]["command"] == "python -m loopscope demo"  # eager, 10 steps, no layers
    assert main(args) == 0
    out = capsys.readouterr().err.splitlines()  # notices on stderr
    assert out[0] == "loopscope demo: no GPU here (no GPU in this test)."
    if line is None:
        assert out[1].startswith("RECORDING: ")
    else:
        assert out[1] == line and out[2].startswith("RECORDING: ")


def test_repr_of_a_replayed_profile_counts_its_steps(test_clock, tmp_path):
    with loopscope.profile() as prof:
        run_loop(prof)
    path = prof.save_recording(tmp_path / "r.json.gz")
    test_clock.set(0, 0)
    replayed = _replay.replay(_recording.load(path))
    assert not hasattr(replayed, "step")  # a finished value: its steps came back as records
    assert repr(replayed) == f"<loopscope.Profile steps=3 verdict={prof.summary()['diagnosis']['verdict']}>"
    assert repr(prof) == repr(replayed)


def test_bundled_recording_when_present():
    """The file shipped in the package (made on a GPU by
    benchmarks/tour/record_demo.py) reads and replays into a real loop."""
    data = _recording.bundled_demo()
    if data is None:
        pytest.skip("no bundled demo recording in this checkout (benchmarks/tour/record_demo.py makes it on a GPU)")
    assert _recording.DEMO_RECORDING.stat().st_size < 200_000
    prof = _replay.replay(data)
    s = prof.summary()
    assert repr(prof) == "<loopscope.Profile steps=10 verdict=CPU_LAUNCH_BOUND>"
    assert s["recording"]["device"] and s["recording"]["recorded_source"] == "cupti"
    assert s["diagnosis"]["verdict"] == "CPU_LAUNCH_BOUND"
    # the recording's own figures, from the file's columns in plain Python
    with gzip.open(_recording.DEMO_RECORDING, "rt", encoding="utf-8") as f:
        raw = json.load(f)

    def summed(deltas):  # the columns are stored as differences to the previous row
        out, acc = [], 0
        for d in deltas:
            acc += d
            out.append(acc)
        return out

    ops, apis, ranges = raw["ops"], raw["apis"], raw["ranges"]
    op_start, op_corr = summed(ops["start"]), summed(ops["correlation"])
    op_end = [a + d for a, d in zip(op_start, ops["duration"])]
    kinds = ops["kind"]  # 0 kernel, 1 memcpy, 2 memset
    launch = {}  # correlation -> the earliest launch call (version 1: runtime calls only)
    for start, corr in zip(summed(apis["start"]), summed(apis["correlation"])):
        launch[corr] = min(start, launch.get(corr, start))
    steps = sorted((step, start, start + d) for step, start, d in
                   zip(ranges["step"], summed(ranges["start"]), ranges["duration"]) if step >= 0)
    assert [st[0] for st in steps] == list(range(10))
    per_step = [sum(1 for k, corr in zip(kinds, op_corr)
                    if k == 0 and corr in launch and a <= launch[corr] <= b) for _, a, b in steps]
    gaps, end = 0, None  # one device: idle intervals between the union of the ops
    for start, stop in sorted(zip(op_start, op_end)):
        gaps += end is not None and start > end
        end = stop if end is None else max(end, stop)
    assert set(ops["device"]) == {0}
    assert (s["gpu"]["kernels"], s["gpu"]["memcpys"], s["gpu"]["memsets"]) == (
        kinds.count(0), kinds.count(1), kinds.count(2))
    assert [st["kernels"] for st in s["steps"]] == per_step
    assert s["gaps"]["count"] == gaps
    assert s["gpu"]["ops_without_launch_record"] == sum(c not in launch for c in op_corr)


def test_damaged_records_are_refused(test_clock, tmp_path):
    with loopscope.profile() as prof:
        run_loop(prof)
    data = _recording.record(prof.finished)
    test_clock.set(0, 0)
    short = json.loads(json.dumps(data))
    short["ops"]["duration"].pop()
    with pytest.raises(_recording.RecordingError, match="columns differ in length: \\[5, 6\\]"):
        _replay.replay(short)
    no_column = json.loads(json.dumps(data))
    del no_column["apis"]["thread"]
    with pytest.raises(_recording.RecordingError, match="damaged"):
        _replay.replay(no_column)
    assert not _core.active()


def test_an_overhead_figure_made_an_object_is_refused(test_clock):
    """Only the phase maps of summary["overhead"] are objects; a figure the
    report prints as a number (drain_ms) that became one is named."""
    with loopscope.profile() as prof:
        run_loop(prof)
    data = _recording.record(prof.finished)
    assert isinstance(data["profile"]["overhead"]["enter_ms"], dict)
    test_clock.set(0, 0)
    _replay.replay(json.loads(json.dumps(data))).report()  # the maps as recorded are fine
    bad = json.loads(json.dumps(data))
    bad["profile"]["overhead"]["drain_ms"] = {}
    with pytest.raises(_recording.RecordingError, match="overhead.drain_ms is an object"):
        _replay.replay(bad)
    assert not _core.active()


def test_ops_injected_in_chunks_give_the_same_summary(test_clock, tmp_path, monkeypatch):
    """Issue 41: a replay hands its ops to the C core in chunks (no second
    copy of millions of rows); chunks of 2 rows, across every run of one
    kind, give the summary of one chunk per run."""
    prof = rich_profile(test_clock)
    path = Path(prof.save_recording(tmp_path / "rec.json.gz"))
    test_clock.set(0, 0)
    whole = _replay.replay(_recording.load(path)).summary()
    monkeypatch.setattr(_replay, "INJECT_CHUNK", 2)
    test_clock.set(0, 0)
    chunked = _replay.replay(_recording.load(path)).summary()
    assert comparable(chunked) == comparable(whole)
    assert chunked["gpu"]["kernels"] == whole["gpu"]["kernels"] > 2  # more than one chunk


def test_records_the_model_ignored_are_counted_once_however_often_saved(tmp_path):
    """The bundled recording holds one record its model ignores (begun after
    the stop): it stays in the file, so the overhead a recording keeps leaves
    it out, and a replay's model counts it again, once."""
    replayed = loopscope.load(_recording.DEMO_RECORDING)
    assert replayed.model.ignored_records == 1
    assert replayed.summary()["overhead"]["records_after_stop"] == 1
    for i in range(2):
        path = _recording.save(replayed, tmp_path / f"again{i}.json")
        assert _recording.load(path)["profile"]["overhead"]["records_after_stop"] == 0
        replayed = loopscope.load(path)
        assert replayed.summary()["overhead"]["records_after_stop"] == 1
