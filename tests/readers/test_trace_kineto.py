"""loopscope.analyze() over torch.profiler / Kineto traces: the figures
match a plain-Python computation over the same events (trace_fixtures)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

import fill_rule
import loopscope
from trace_fixtures import check_summary, expected, make_events, trace_doc, us, write


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gaps_steps_and_counts_match_plain_python(tmp_path, seed):
    doc = trace_doc(make_events(seed=seed, steps=5))
    path = write(tmp_path / "t.json", doc, indent=1)
    summary = loopscope.analyze(path)
    assert summary["source"] == "kineto"
    check_summary(summary, expected(path.read_bytes()))
    assert summary["gpu"]["device"] == "Test GPU 0"
    assert summary["trace"]["skipped"] == {}


def test_gzip_and_plain_give_the_same_summary(tmp_path):
    doc = trace_doc(make_events(seed=3))
    plain = loopscope.analyze(write(tmp_path / "a.json", doc))
    packed = loopscope.analyze(write(tmp_path / "b.json.gz", doc, gz=True))
    for key in ("gaps", "gpu", "steps", "syncs", "ranges", "diagnosis"):
        assert plain[key] == packed[key], key
    assert packed["trace"]["gzip"] is True


def test_bare_event_list_and_absolute_timestamps(tmp_path):
    """Old traces: a bare list, absolute microsecond times whose ns digits a
    float64 would lose (1712195495505772.8 has 17 significant digits)."""
    base = 1_712_195_495_505_772_800  # ns
    events = []
    for i, (start, dur) in enumerate([(0, 1_000), (1_002, 1_000), (2_002 + 20_001, 5)]):
        events.append({"ph": "X", "cat": "Kernel", "name": f"k{i}", "pid": 0, "tid": 7,
                       "ts": f"@{base + start}", "dur": us(dur),
                       "args": {"correlation": i + 1, "device": 0, "stream": 7}})
    text = json.dumps(events)
    for e in events:  # exact decimal text, as Kineto prints it
        ns = int(e["ts"][1:])
        text = text.replace(json.dumps(e["ts"]), f"{ns // 1000}.{ns % 1000:03d}")
    path = tmp_path / "old.json"
    path.write_text(text)
    summary = loopscope.analyze(path)
    gaps = summary["gaps"]
    assert gaps["count"] == 2
    assert gaps["max_us"] == 20.001  # not 20.0 or 20.002: every ns digit kept
    assert gaps["normal"] == 1 and gaps["warning"] == 1
    check_summary(summary, expected(text))
    assert summary["trace"]["time_offset_ns"] == 0


def test_torch_1_8_categories_and_steps(tmp_path):
    """torch 1.8/1.9: ProfilerStep#N is cat "Operator" (a step), other
    Operator events are CPU ops (no step), kernels "Kernel", launches
    "Runtime"; a modern trace's cpu_op named ProfilerStep#N is no step."""
    def step(i, cat):
        return {"ph": "X", "cat": cat, "name": f"ProfilerStep#{i}", "pid": 1, "tid": "77",
                "ts": us(10_000 * i), "dur": us(9_000)}
    events = [step(0, "Operator"), step(1, "Operator"), step(2, "cpu_op"),
              {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 1, "tid": "77",
               "ts": us(100), "dur": us(500)}]
    for i in range(3):
        events += [{"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": "77",
                    "ts": us(10_000 * i + 1_000), "dur": us(100), "args": {"correlation": i + 1}},
                   {"ph": "X", "cat": "Kernel", "name": "k", "pid": 0, "tid": "stream 7",
                    "ts": us(10_000 * i + 2_000), "dur": us(1_000),
                    "args": {"correlation": i + 1, "device": 0, "stream": 7}}]
    summary = loopscope.analyze(write(tmp_path / "old.json", trace_doc(events)))
    assert [s["name"] for s in summary["steps"]] == ["ProfilerStep#0", "ProfilerStep#1"]
    assert [s["kernels"] for s in summary["steps"]] == [1, 1]
    assert summary["gpu"]["kernels"] == 3


def test_each_device_is_its_own_time_line_and_device_selects_one(tmp_path):
    doc = trace_doc(make_events(seed=4, devices=2, ops_per_step=10), devices=2)
    path = write(tmp_path / "multi.json", doc)
    text = path.read_bytes()
    both = loopscope.analyze(path)
    check_summary(both, expected(text))
    assert [d["id"] for d in both["gpu"]["devices"]] == [0, 1]
    assert [d["name"] for d in both["gpu"]["devices"]] == ["Test GPU 0", "Test GPU 1"]
    one = loopscope.analyze(path, device=1)
    exp = expected(text, device=1)
    assert one["gaps"]["count"] == exp["gaps"]["count"]
    assert one["gpu"]["kernels"] == exp["counts"]["kernels"]
    assert one["gpu"]["device"] == "Test GPU 1"
    with pytest.raises(loopscope.TraceError, match="device 5 ran no GPU operation"):
        loopscope.analyze(path, device=5)


def test_steps_from_a_user_pattern_and_thresholds(tmp_path):
    events = [e for e in make_events(seed=5) if e.get("cat") != "user_annotation"]
    for e in make_events(seed=5):
        if e.get("cat") == "user_annotation":
            events.append(dict(e, name=e["name"].replace("ProfilerStep#", "Denoise_Step_")))
            events.append(dict(e, name="inner", ts=e["ts"] + 0.001, dur=e["dur"] - 0.002))
    path = write(tmp_path / "t.json", trace_doc(events))
    summary = loopscope.analyze(path, steps=r"Denoise_Step_\d+", gap_thresholds_us=(5, 10))
    check_summary(summary, expected(path.read_bytes(), (5, 10), step_pattern=r"Denoise_Step_\d+"))
    assert summary["steps_from"] == "ranges"
    assert [r["name"] for r in summary["ranges"]] == ["inner"]
    assert summary["ranges"][0]["count"] == 4
    default = loopscope.analyze(path)  # Denoise_Step_N is in the default pattern too
    assert len(default["steps"]) == 4
    none = loopscope.analyze(path, steps="nothing-matches")
    assert none["steps"] == [] and none["gaps"]["count"] == summary["gaps"]["count"]


def test_syncs_come_from_runtime_calls_with_their_python_site(tmp_path):
    path = write(tmp_path / "t.json", trace_doc(make_events(seed=6, steps=6)))
    syncs = loopscope.analyze(path)["syncs"]
    waits = [e for e in json.loads(path.read_text())["traceEvents"]
             if e.get("name") == "cudaStreamSynchronize"]
    assert syncs["count"] == len(waits) == 3
    assert syncs["blocked_ms"] == pytest.approx(sum(e["dur"] for e in waits) / 1000, abs=1e-6)
    (site,) = syncs["sites"]
    assert (site["file"], site["line"], site["function"]) == ("loop.py", 21, "denoise")
    assert site["kind"] == "item" and site["call"] == "Tensor.item()"
    assert site["steps"] == [1, 3, 5]
    assert syncs["sites_unknown"] is None


def test_without_stacks_the_sites_are_unknown_and_the_summary_says_why(tmp_path):
    path = write(tmp_path / "t.json", trace_doc(make_events(seed=6, steps=4, with_stack=False)))
    summary = loopscope.analyze(path)
    assert summary["syncs"]["count"] == 2
    assert summary["syncs"]["sites"][0]["file"] is None
    assert "with_stack=True" in summary["syncs"]["sites_unknown"]
    assert "with_stack=True" in loopscope.load(path).report()


def test_cuda_sync_events_make_gaps_sync_caused(tmp_path):
    events = [
        {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
         "args": {"correlation": 1, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 100, "dur": 5,
         "args": {"correlation": 2, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 8, "dur": 1, "args": {"correlation": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 40, "dur": 1, "args": {"correlation": 2}},  # launched in the sync, not queued
        {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 1000007,
         "ts": 20, "dur": 30, "args": {"stream": 7, "correlation": 9}},
    ]
    summary = loopscope.analyze(write(tmp_path / "s.json", trace_doc(events)))
    assert summary["gaps"]["by_cause"] == {"host": 0, "sync": 1, "other": 0}


def test_counter_events_give_sm_and_dram(tmp_path):
    events = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": t, "dur": 50,
               "args": {"correlation": i, "device": 0, "stream": 7}}
              for i, t in enumerate([0, 100, 200, 300])]
    values = [(0, 40, 70), (100, 60, 30), (200, 80, 50), (300, 20, 10), (400, 0, 0)]
    for ts, sm, dram in values:
        events.append({"ph": "C", "name": "GPU 0 Counters", "pid": "GPU 0 Counters", "ts": ts,
                       "args": {"sm__cycles_active.avg.pct_of_peak_sustained_elapsed": sm,
                                "dram__throughput.avg.pct_of_peak_sustained_elapsed": dram,
                                "some_other_counter": 1}})
    summary = loopscope.analyze(write(tmp_path / "c.json", trace_doc(events)))
    # each value holds until the next time of its series; averaged over the
    # GPU span [first kernel start, last kernel end] = [0, 350] us
    def span_average(column):
        window = (0, 350)
        weighted = sum(v[column] * max(0, min(b[0], window[1]) - max(a[0], window[0]))
                       for a, b, v in zip(values, values[1:], values))
        return weighted / (window[1] - window[0])

    assert summary["sm"]["active_pct"] == pytest.approx(span_average(1), abs=0.01)
    assert summary["dram"]["throughput_pct"] == pytest.approx(span_average(2), abs=0.01)
    assert summary["metrics"]["source"] == "kineto_counters"
    assert summary["trace"]["counter_values_not_understood"] == 5


def test_events_with_missing_fields_are_counted_skipped_and_reported(tmp_path):
    events = make_events(seed=7, steps=2)
    kernels = [e for e in events if e.get("cat") == "kernel"]
    del kernels[0]["dur"]
    del kernels[1]["args"]["device"], kernels[1]["pid"]
    runtime = next(e for e in events if e.get("cat") == "cuda_runtime")
    runtime["ts"] = "soon"
    path = write(tmp_path / "t.json", trace_doc(events))
    summary = loopscope.analyze(path)
    assert summary["trace"]["skipped"] == {"kernel": 2, "cuda_runtime": 1}
    assert summary["trace"]["skip_reasons"] == {"kernel": "no usable dur",
                                                "cuda_runtime": "no usable ts"}
    report = loopscope.load(path).report()
    assert "Skipped 3 events with missing or unusable fields" in report
    good = [e for e in events if e not in kernels[:2] and e is not runtime]  # skipped there too
    exp = expected(json.dumps(trace_doc(good)))
    check_summary(summary, exp)


# (args of a kernel, what its fill should be: "ok", "missing" or "bad")
GEOMETRIES = [
    ({"grid": [64, 1, 1], "block": [256, 1, 1], "registers per thread": 32,
      "shared memory": 0}, "ok"),
    ({"grid": [4, 22, 1], "block": [384, 1, 1], "registers per thread": 168,
      "shared memory": 231868}, "ok"),
    ({"grid": [50, 1, 1], "block": [32, 4, 1]}, "ok"),          # ROCm-style: no registers
    ({}, "missing"),                                             # an old trace
    ({"grid": [64, 1, 1], "registers per thread": 32}, "missing"),  # no block
    ({"grid": [64, 1], "block": [256, 1, 1]}, "bad"),           # two sides
    ({"grid": "64x1x1", "block": [256, 1, 1]}, "bad"),
    ({"grid": [64, "1", 1], "block": [256, 1, 1]}, "bad"),
    ({"grid": [64, 1, 1], "block": [2048, 1, 1]}, "bad"),       # beyond CUDA's 1024
    ({"grid": [0, 1, 1], "block": [256, 1, 1]}, "bad"),
    ({"grid": [2.5, 1, 1], "block": [256, 1, 1]}, "bad"),
    ({"grid": [64, 1, 1], "block": [256, 1, 1], "registers per thread": 300}, "bad"),
    ({"grid": [64, 1, 1], "block": [256, 1, 1], "shared memory": -1}, "bad"),
    ({"grid": [64, 1, 1], "block": [256, 1, 1], "shared memory": None}, "bad"),
    ({"grid": [[64], 1, 1], "block": [256, 1, 1]}, "bad"),
    ({"grid": [64, 1, 1], "block": {"x": 256}}, "bad"),
]
DEVICE = {"numSms": 132, "maxThreadsPerMultiprocessor": 2048, "regsPerMultiprocessor": 65536,
          "sharedMemPerMultiprocessor": 233472}


def test_kernel_geometry_gives_fill_and_bad_geometry_leaves_it_unknown(tmp_path):
    """Each kernel's fill comes from its grid, block, registers and shared
    memory against the deviceProperties; a kernel whose geometry is missing
    or unusable keeps an unknown fill, is counted with the first reason, and
    never stops the reading."""
    events, kernels = [], []
    for i, (args, what) in enumerate(GEOMETRIES):
        dur = 1_000 * (i + 1)
        events.append({"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7,
                       "ts": us(10_000 * i), "dur": us(dur),
                       "args": {"correlation": i + 1, "device": 0, "stream": 7, **args}})
        fill = None
        if what == "ok":
            fill = fill_rule.fill_of(args["grid"], args["block"],
                                     args.get("registers per thread", 0),
                                     args.get("shared memory", 0), sms=132, threads_per_sm=2048,
                                     regs_per_sm=65536, shared_per_sm=233472)
        kernels.append((dur, fill))
    doc = trace_doc(events)
    doc["deviceProperties"][0].update(DEVICE)
    summary = loopscope.analyze(write(tmp_path / "g.json", doc))
    fill_pct, known_pct = fill_rule.weighted_fill_pct(kernels)
    assert summary["gpu"]["fill_pct"] == pytest.approx(fill_pct, abs=0.01)
    assert summary["gpu"]["fill_known_pct"] == pytest.approx(known_pct, abs=0.01)
    whats = [w for _, w in GEOMETRIES]
    geometry = summary["trace"]["kernel_geometry"]
    assert (geometry["kernels"], geometry["missing"], geometry["bad"]) == \
        (len(whats), whats.count("missing"), whats.count("bad"))
    assert geometry["why"] == "a grid side that is not an integer in CUDA's limits"
    assert summary["trace"]["skipped"] == {} and summary["gpu"]["kernels"] == len(whats)
    report = loopscope.load(tmp_path / "g.json").report()
    assert (f"Kernel fill unknown for {len(whats) - whats.count('ok')} of {len(whats)} kernels: "
            f"{whats.count('missing')} without a launch geometry in the trace; "
            f"{whats.count('bad')} with one that cannot be used (a grid side that is not an "
            "integer in CUDA's limits)") in report
    assert "Kernel fill unknown on GPU" not in report


@pytest.mark.parametrize("props, facts, bad", [
    ({}, (None, None), 0),                                        # names only: no fill
    ({"numSms": "132", "maxThreadsPerMultiprocessor": 2048}, (None, 2048), 1),
    ({"numSms": True, "maxThreadsPerMultiprocessor": -5}, (None, None), 2),
    ({"numSms": 2**70, "maxThreadsPerMultiprocessor": 2048.0}, (None, None), 2),
    ({"numSms": 132, "maxThreadsPerMultiProcessor": 1536}, (132, 1536), 0),  # either spelling
])
def test_device_properties_that_are_missing_or_unusable(tmp_path, props, facts, bad):
    events = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0, "dur": 5,
               "args": {"correlation": 1, "device": 0, "stream": 7, "grid": [8, 1, 1],
                        "block": [128, 1, 1]}}]
    doc = trace_doc(events)
    doc["deviceProperties"] = [{"id": 0, "name": "Test GPU 0", **props}]
    summary = loopscope.analyze(write(tmp_path / "d.json", doc))
    (device,) = summary["gpu"]["devices"]
    assert (device["sm_count"], device["max_threads_per_sm"]) == facts
    assert summary["trace"]["device_facts_not_understood"] == bad
    report = loopscope.load(tmp_path / "d.json").report()
    assert ("Kernel fill unknown on GPU 0: the trace's deviceProperties gives no SM count and "
            "threads per SM for it" in report) == (None in facts)
    assert (f"Device properties not understood: {bad} values" in report) == (bad > 0)
    if None in facts:
        assert summary["gpu"]["fill_pct"] is None and summary["gpu"]["fill_known_pct"] == 0.0
    else:
        assert summary["gpu"]["fill_pct"] == pytest.approx(
            100 * fill_rule.fill_of((8, 1, 1), (128, 1, 1), sms=facts[0],
                                    threads_per_sm=facts[1]), abs=0.01)


def test_a_trace_with_no_gpu_events_says_so(tmp_path):
    events = [e for e in make_events(seed=8) if e.get("cat") not in
              ("kernel", "gpu_memcpy", "gpu_memset")]
    summary = loopscope.analyze(write(tmp_path / "cpu.json", trace_doc(events)))
    assert summary["gaps"] is None and summary["gpu"] is None
    assert "no GPU operations" in summary["gpu_error"]
    assert len(summary["steps"]) == 4 and summary["steps"][0]["host_ms"] > 0


def test_load_gives_a_profile_with_report_html_and_export(tmp_path):
    path = write(tmp_path / "t.json", trace_doc(make_events(seed=9)))
    prof = loopscope.load(path)
    assert "loopscope report - Test GPU 0 - 4 steps" in prof.report()
    assert "Trace: torch.profiler (Kineto) trace" in prof.report()
    out = prof.export_trace(tmp_path / "out.json")
    exported = json.loads(open(out).read())
    names = {e.get("name") for e in exported["traceEvents"]}
    assert "ProfilerStep#0" in names
    assert repr(prof).startswith("<loopscope.Profile steps=4")


@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="matplotlib's extension dies under a preloaded ASan (as in .ci/run)")
def test_load_gives_a_profile_with_notebook_html(tmp_path):
    path = write(tmp_path / "t.json", trace_doc(make_events(seed=9)))
    html = loopscope.load(path)._repr_html_()
    assert "CPU_LAUNCH_BOUND" in html or "GPU_BOUND" in html or "SYNC_BOUND" in html
    assert "ProfilerStep#3" in html


def test_cli_analyze_prints_the_report_writes_json_and_checks_budgets(tmp_path):
    path = write(tmp_path / "t.json", trace_doc(make_events(seed=6, steps=4)))
    out = tmp_path / "s.json"
    run = subprocess.run([sys.executable, "-m", "loopscope", "analyze", str(path), "--json",
                          str(out), "--max-severe-gaps", "1000"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "loopscope report" in run.stdout and "budgets met" in run.stderr
    assert json.loads(out.read_text())["source"] == "kineto"
    run = subprocess.run([sys.executable, "-m", "loopscope", "analyze", str(path),
                          "--max-syncs", "0"], capture_output=True, text=True)
    assert run.returncode == 1 and "BUDGET FAILED" in run.stderr
    assert "Tensor.item()" in run.stderr


def test_load_replays_a_saved_loopscope_profile():
    from loopscope.files._recording import DEMO_RECORDING

    prof = loopscope.load(DEMO_RECORDING)
    summary = prof.summary()
    assert summary["source"] == "recording"
    assert summary["gaps"]["count"] > 0 and len(summary["steps"]) == 10
    assert loopscope.analyze(DEMO_RECORDING)["gaps"] == summary["gaps"]
    with pytest.raises(loopscope.TraceError, match="loopscope recording"):
        loopscope.load(DEMO_RECORDING, steps="x")
    stricter = loopscope.analyze(DEMO_RECORDING, gap_thresholds_us=(1, 2))
    assert stricter["gaps"]["thresholds_us"] == [1.0, 2.0]
    assert stricter["gaps"]["count"] == summary["gaps"]["count"]


def test_cli_analyze_reads_a_recording(tmp_path):
    from loopscope.files._recording import DEMO_RECORDING

    run = subprocess.run([sys.executable, "-m", "loopscope", "analyze", str(DEMO_RECORDING)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("RECORDING:") and "loopscope report" in run.stdout


class _Terminal:
    def __init__(self, tty: bool) -> None:
        self.tty, self.text = tty, ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


def test_progress_bar_only_on_a_terminal_and_only_after_a_while(monkeypatch):
    from loopscope.readers import _kineto

    quick = _kineto.Progress("t.json", 1000, stream=_Terminal(True))
    quick.update(500)
    quick.close()
    assert quick.stream.text == ""  # under PROGRESS_AFTER_S: nothing
    monkeypatch.setattr(_kineto, "PROGRESS_AFTER_S", 0.0)
    slow = _kineto.Progress("t.json", 1000, stream=_Terminal(True))
    slow.update(500)
    assert "50.0%" in slow.stream.text and "t.json" in slow.stream.text
    slow.close()
    assert slow.stream.text.endswith("\r")  # the line is cleared again
    piped = _kineto.Progress("t.json", 1000, stream=_Terminal(False))
    piped.update(500)
    assert piped.stream.text == ""


def test_a_rank_trace_says_its_rank(tmp_path):
    doc = trace_doc(make_events(seed=2))
    doc["distributedInfo"] = {"backend": "nccl", "rank": 3, "world_size": 8}
    summary = loopscope.analyze(write(tmp_path / "rank3.json", doc))
    assert (summary["rank"], summary["world_size"]) == (3, 8)
    assert summary["trace"]["distributed"]["backend"] == "nccl"


def test_cli_analyze_steps_and_device_options(tmp_path):
    path = write(tmp_path / "t.json", trace_doc(make_events(seed=4, devices=2), devices=2))
    run = subprocess.run([sys.executable, "-m", "loopscope", "analyze", str(path), "--steps",
                          "no-such-range"], capture_output=True, text=True)
    assert run.returncode == 0 and "no range name matched --steps 'no-such-range'" in run.stderr
    assert "ProfilerStep#0" in run.stderr  # the names that exist are listed
    run = subprocess.run([sys.executable, "-m", "loopscope", "analyze", str(path), "--device", "1"],
                         capture_output=True, text=True)
    assert run.returncode == 0 and "Device: only GPU 1 analysed" in run.stdout
    run = subprocess.run([sys.executable, "-m", "loopscope", "analyze", str(path), "--device", "7"],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "device 7 ran no GPU operation" in run.stderr
    run = subprocess.run([sys.executable, "-m", "loopscope", "analyze", str(path), "--steps", "("],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "not a valid regular expression" in run.stderr


# -- what loopscope's own export adds (see _trace_export) ----------------------
def _kernels(pid, device):
    return [{"ph": "X", "cat": "kernel", "name": "k", "pid": pid, "tid": 1, "ts": t, "dur": 50,
             "args": {"correlation": i, "device": device, "stream": 7}}
            for i, t in enumerate([0, 100, 200, 300])]


def test_a_gpu_process_named_so_gives_its_counters_a_device(tmp_path):
    """Counters on a numeric pid that a process_name "GPU <n> ..." names
    belong to device n (loopscope's export numbers GPU processes from 100),
    and separate series sampled at the same times make one sample per
    interval, with every figure."""
    values = [(0, 40.0, 70.0), (100, 60.0, 30.0), (200, 80.0, 50.0), (400, 0.0, 0.0)]
    events = _kernels(101, 1)
    for ts, sm, dram in values:
        events.append({"ph": "C", "name": "SM active", "pid": 101, "ts": ts, "args": {"%": sm}})
        events.append({"ph": "C", "name": "DRAM throughput", "pid": 101, "ts": ts,
                       "args": {"%": dram}})
    events.append({"ph": "M", "name": "process_name", "pid": 101,
                   "args": {"name": "GPU 1 Test GPU 1"}})
    summary = loopscope.analyze(write(tmp_path / "c.json", trace_doc(events, devices=2)))
    window = (0, 350)  # the kernels' span on device 1

    def span_average(column):
        weighted = sum(v[column] * max(0, min(b[0], window[1]) - max(a[0], window[0]))
                       for a, b, v in zip(values, values[1:], values))
        return weighted / (window[1] - window[0])

    assert summary["sm"]["active_pct"] == pytest.approx(span_average(1), abs=0.01)
    assert summary["dram"]["throughput_pct"] == pytest.approx(span_average(2), abs=0.01)
    assert summary["sm"]["samples"] == len(values) - 1
    assert summary["trace"]["counter_values_not_understood"] == 0


def _own_doc(events, producer="loopscope"):
    doc = trace_doc(events)
    doc["otherData"] = {"producer": producer, "export_version": 1, "span_ns": [0, 1_000_000], "sync_sites": [
        {"file": "/x/train.py", "line": 12, "function": "loop", "code": "y = x.item()",
         "call": "x.item()", "kind": "item"}]}
    return doc


def test_own_export_takes_its_tagged_waits_and_nothing_else(tmp_path):
    """In loopscope's export the calls that made the host wait are tagged
    with their sync and site; an untagged blocking call (a launch record
    named like one) is only a launch there.  Without the producer mark the
    same file is read as any Kineto trace."""
    events = _kernels(100, 0) + [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": 3,
         "ts": 60, "dur": 30, "args": {"correlation": 50, "sync": 0, "site": 0,
                                       "launches_before": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": 3,
         "ts": 160, "dur": 30, "args": {"correlation": 51, "sync": 1, "site": 0,
                                        "launches_before": 2}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 3,
         "ts": 260, "dur": 30, "args": {"correlation": 52}},
    ]
    own = loopscope.analyze(write(tmp_path / "own.json", _own_doc(events)))
    assert own["syncs"]["count"] == 2
    assert [(s["file"], s["line"], s["function"], s["kind"], s["call"], s["count"])
            for s in own["syncs"]["sites"]] == [("/x/train.py", 12, "loop", "item", "x.item()", 2)]
    assert own["syncs"]["blocked_ms"] == pytest.approx(0.06)
    other = loopscope.analyze(write(tmp_path / "other.json", _own_doc(events, "someone")))
    assert other["syncs"]["count"] == 3  # each blocking call by its name
    assert other["syncs"]["sites_unknown"] is not None


def test_own_export_span_and_recorded_steps(tmp_path):
    """The export's span is the profile's, and its steps are the ranges it
    marks with args.step, whatever their names (unless steps= is given)."""
    events = _kernels(100, 0) + [
        {"ph": "X", "cat": "user_annotation", "name": "denoise", "pid": 1, "tid": 3, "ts": -10,
         "dur": 150, "args": {"step": 0}},
        {"ph": "X", "cat": "user_annotation", "name": "denoise", "pid": 1, "tid": 3, "ts": 140,
         "dur": 200, "args": {"step": 1}},
        {"ph": "X", "cat": "user_annotation", "name": "Step_9", "pid": 1, "tid": 3, "ts": 150,
         "dur": 10, "args": {}},
    ]
    path = write(tmp_path / "own.json", _own_doc(events))
    summary = loopscope.analyze(path)
    assert [(s["index"], s["name"]) for s in summary["steps"]] == [(0, "denoise"), (1, "denoise")]
    assert summary["host_ms"] == 1.0  # span_ns: [0, 1 ms]
    by_name = loopscope.analyze(path, steps="^Step_")
    assert [s["name"] for s in by_name["steps"]] == ["Step_9"]


def test_a_counter_end_stops_the_value_until_the_next_one(tmp_path):
    """A counter holds its value until its next event; an instant of
    category counter_end (args.series) stops it there instead (loopscope's
    export marks pauses in sampling so)."""
    points = [(0, 40.0), (100, 60.0), (300, 80.0), (400, 10.0)]
    events = _kernels(0, 0) + [{"ph": "C", "name": "SM active", "pid": 0, "ts": ts,
                                "args": {"%": v}} for ts, v in points]
    events.append({"ph": "i", "s": "p", "cat": "counter_end", "name": "no sample", "pid": 0,
                   "ts": 150, "args": {"series": "SM active"}})
    summary = loopscope.analyze(write(tmp_path / "c.json", trace_doc(events)))
    covered = [(0, 100, 40.0), (100, 150, 60.0), (300, 350, 80.0)]  # within the kernels' span
    expected = sum(v * (b - a) for a, b, v in covered) / sum(b - a for a, b, _ in covered)
    assert summary["sm"]["active_pct"] == pytest.approx(expected, abs=0.01)
    assert summary["sm"]["samples"] == 3  # [0,100], [100,150], [300,400]


def test_a_loaded_trace_holds_its_names_and_frees_them_with_it(tmp_path):
    """The kernel and range names of a trace go into the process's name
    table, held by the loaded profile's records: they read right after the
    table churned (freed ids are reused), and they go with the profile."""
    import gc

    from loopscope import _core, _testhooks
    events = make_events(seed=4)
    path = write(tmp_path / "t.json", trace_doc(events))
    gc.collect()
    base = _testhooks._names()["count"]
    prof = loopscope.load(path)
    assert _testhooks._names()["count"] > base
    for j in range(5000):  # names made and freed: their ids are reused
        _core.Stepper(f"churn_{j}_{{i}}")
    kernels = sorted(e["name"] for e in events if e.get("cat") == "kernel")
    assert sorted(op[6] for op in prof.capture.ops() if op[0] == "kernel") == kernels
    steps = sorted(e["name"] for e in events if e.get("cat") == "user_annotation")
    assert [s["name"] for s in prof.summary()["steps"]] == steps
    assert _testhooks._names()["check"] == 0
    del prof
    gc.collect()
    assert _testhooks._names()["count"] == base
    assert _testhooks._names()["check"] == 0


def test_allocations_in_a_step_block_its_graph_capture_at_their_python_line(tmp_path):
    """A torch.profiler trace records cudaMalloc / cudaFree as runtime
    calls: inside a step they are its "memory" readiness blocker, counted
    once each, named by the Python function around them (with_stack);
    cudaMallocAsync is stream ordered (no blocker)."""
    def call(name, ts, dur, corr):
        return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 10, "tid": 10,
                "ts": ts, "dur": dur, "args": {"correlation": corr}}

    allocs = {0: [], 1: [("cudaMalloc", 30), ("cudaMalloc", 40)], 2: [("cudaMallocAsync", 30)]}
    events, corr = [], 1
    for step, made in allocs.items():
        t = 100 * step
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                       "pid": 10, "tid": 10, "ts": t, "dur": 90})
        events.append({"ph": "X", "cat": "python_function", "name": "train.py(12): loop",
                       "pid": 10, "tid": 10, "ts": t + 1, "dur": 88})
        events.append(call("cudaLaunchKernel", t + 10, 2, corr))
        events.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,
                       "ts": t + 20, "dur": 5,
                       "args": {"correlation": corr, "device": 0, "stream": 7}})
        corr += 1
        for name, at in made:
            events.append(call(name, t + at, 3, corr))
            corr += 1
    summary = loopscope.analyze(write(tmp_path / "t.json", trace_doc(events)))
    for step in summary["steps"]:
        blocking = [n for n, _ in allocs[step["index"]] if n == "cudaMalloc"]
        blockers = step["graph_readiness"]["blockers"]
        assert [b["kind"] for b in blockers] == ["memory"] * bool(blocking)
        if blocking:
            assert (blockers[0]["count"], blockers[0]["where"]) == (len(blocking), "train.py:12")


def test_a_thread_named_by_a_string_is_shown_by_its_name(tmp_path):
    """Issue 24: a trace whose "tid" is a string ("python thread") carried
    the string's hash as the thread of its sync sites, printed as a number;
    the site now names the thread as the trace does."""
    events = _kernels(100, 0) + [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1,
         "tid": "python thread", "ts": 260, "dur": 30, "args": {"correlation": 52}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1,
         "tid": 7, "ts": 360, "dur": 30, "args": {"correlation": 53}},
    ]
    summary = loopscope.analyze(write(tmp_path / "t.json", {"traceEvents": events}))
    threads = sorted(str(s["thread_id"]) for s in summary["syncs"]["sites"])
    assert threads == ["7", "python thread"]
    from loopscope.figures._syncs import format_site

    lines = [format_site(s) for s in summary["syncs"]["sites"]]
    assert any(line.startswith("thread python thread (no Python frame)") for line in lines)
    # Issue 39: the reasons and actions that quote a site (the headline's
    # "most costly") said the hash while the sync list said the name: one
    # thread, one name, everywhere the summary shows it.
    shown = " ".join(summary["diagnosis"]["reasons"] + summary["diagnosis"]["actions"])
    assert "thread python thread (no Python frame)" in shown
    numbers = {int(w) for w in re.findall(r"thread (\d+)", shown)}
    assert numbers <= {7}, numbers
