"""benchmarks/scale/bench_summary.py --recording: the recording replayed as a live
capture makes the recording's syncs, sites and blocking calls again (the
figures its timings are quoted for), read from the file itself."""
from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GPT2 = ROOT / "benchmarks" / "data" / "gpt2_generate64.json.gz"


@pytest.fixture
def bench():
    sys.path.insert(0, str(ROOT / "benchmarks" / "scale"))
    try:
        import bench_summary
        yield bench_summary
    finally:
        sys.path.remove(str(ROOT / "benchmarks" / "scale"))


def test_the_gpt2_recording_replays_with_its_syncs_and_calls(bench, tmp_path):
    with gzip.open(GPT2) as f:
        data = json.load(f)
    recorded = data["sections"]["syncs"]
    calls = int(re.search(r"(\d+) blocking calls", data["profile"]["overhead"]["in_loop_estimate"])[1])
    prof = bench.recording_profile(str(GPT2), str(tmp_path))
    summary = prof.summary()
    syncs = summary["syncs"]
    assert syncs["count"] == recorded["count"] == sum(s["count"] for s in recorded["sites"])
    assert sorted(s["count"] for s in syncs["sites"]) == sorted(s["count"] for s in recorded["sites"])
    assert prof.capture.info()["calls"] == calls
    assert summary["gpu"]["kernels"] == sum(1 for k in data["ops"]["kind"] if k == 0)


def test_the_recording_mode_prints_its_figures(bench, capsys):
    bench.bench_recording(str(GPT2), 1)
    out = capsys.readouterr().out
    assert "133 syncs in 5 sites, 532 blocking calls" in out
    assert re.search(r"first summary\(\) of the process .*: [\d.]+ ms", out)
    assert re.search(r"median of 1: [\d.]+ ms", out)
