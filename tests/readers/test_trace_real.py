"""Real torch.profiler traces of the demo loop, recorded on an H200
(tests/data/kineto/README.md): the summary's figures against plain Python
over the same events (trace_fixtures.expected), and what only a real trace
has (graph launches, driver calls, cuda_sync events, deep stacks)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import fill_rule
import loopscope
from trace_fixtures import check_summary, expected

DATA = Path(__file__).resolve().parents[1] / "data" / "kineto"
FILES = ["demo_eager.json.gz", "demo_graph.json.gz", "demo_eager_stack.json.gz",
         "demo_eager_steps.json.gz", "demo_graph_steps.json.gz"]


def _events(name):
    return json.loads(gzip.decompress((DATA / name).read_bytes()))["traceEvents"]


@pytest.mark.parametrize("name", FILES)
def test_gaps_and_counts_match_plain_python(name):
    summary = loopscope.analyze(DATA / name)
    check_summary(summary, expected(gzip.decompress((DATA / name).read_bytes())))
    assert summary["gpu"]["device"] == "NVIDIA H200"
    assert summary["trace"]["skipped"] == {}
    launched = {e["args"]["correlation"] for e in _events(name)
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    gpu_ops = [e for e in _events(name) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    unmatched = sum(e["args"].get("correlation") not in launched for e in gpu_ops)
    assert summary["gpu"]["ops_without_launch_record"] == unmatched


def test_cuda_graph_replay_has_only_short_gaps_and_eager_has_severe_ones():
    graph = loopscope.analyze(DATA / "demo_graph.json.gz")
    eager = loopscope.analyze(DATA / "demo_eager.json.gz")
    assert graph["gaps"]["severe"] == 0 and graph["gaps"]["max_us"] < 20
    assert eager["gaps"]["severe"] > 0
    assert eager["diagnosis"]["verdict"] == "CPU_LAUNCH_BOUND"
    launches = [e for e in _events("demo_graph.json.gz") if e.get("name") == "cudaGraphLaunch"]
    assert len(launches) == 3  # one replay per step, every kernel tied to one of them
    assert graph["gpu"]["ops_without_launch_record"] == 0


def test_the_planted_item_is_found_with_its_python_function():
    summary = loopscope.analyze(DATA / "demo_eager_stack.json.gz")
    syncs = summary["syncs"]
    waits = [e for e in _events("demo_eager_stack.json.gz")
             if e.get("name") in ("cudaStreamSynchronize", "cudaDeviceSynchronize")]
    assert syncs["count"] == len(waits) == 3  # the .item() (copy + stream sync) and 2 synchronize()
    item = next(s for s in syncs["sites"] if s["kind"] == "item")
    assert item["function"] == "eager_with_sync" and item["call"] == "Tensor.item()"
    assert item["file"] == "record_kineto_fixtures.py" and item["count"] == 1
    sync = next(s for s in syncs["sites"] if s["kind"] == "synchronize")
    assert sync["call"] == "torch.cuda.synchronize()" and sync["count"] == 2
    assert summary["trace"]["python_stacks"] is True
    # the trace's cuda_sync events overlap the gaps that the host waits made
    assert summary["gaps"]["by_cause"]["sync"] >= 1


def test_without_stacks_the_real_trace_says_why():
    summary = loopscope.analyze(DATA / "demo_eager.json.gz")
    assert summary["syncs"]["count"] == 2
    assert "with_stack=True" in summary["syncs"]["sites_unknown"]


def test_annotations_as_steps_on_a_real_trace(tmp_path):
    """The eager trace with record_function-style annotations added around
    each of its three denoise steps (the kernels between the syncs)."""
    doc = json.loads(gzip.decompress((DATA / "demo_eager.json.gz").read_bytes()))
    launches = sorted(e for e in ((e["ts"], e["dur"]) for e in doc["traceEvents"]
                                  if e.get("name") == "cudaLaunchKernel"))
    third = len(launches) // 3
    tid = next(e["tid"] for e in doc["traceEvents"] if e.get("name") == "cudaLaunchKernel")
    pid = next(e["pid"] for e in doc["traceEvents"] if e.get("name") == "cudaLaunchKernel")
    for i in range(3):
        first, last = launches[i * third], launches[min(len(launches), (i + 1) * third) - 1]
        doc["traceEvents"].append({"ph": "X", "cat": "user_annotation", "name": f"denoise {i}",
                                   "pid": pid, "tid": tid, "ts": first[0] - 0.5,
                                   "dur": last[0] + last[1] - first[0] + 1})
    path = tmp_path / "steps.json"
    path.write_text(json.dumps(doc))
    summary = loopscope.analyze(path, steps=r"^denoise \d$")
    check_summary(summary, expected(path.read_bytes(), step_pattern=r"^denoise \d$"))
    windows = [(e["ts"], e["ts"] + e["dur"]) for e in doc["traceEvents"]
               if str(e.get("name")).startswith("denoise ")]
    launch = {}
    for e in doc["traceEvents"]:  # runtime first, as the launch of a correlation id
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            if e["cat"] == "cuda_runtime" or e["args"]["correlation"] not in launch:
                launch[e["args"]["correlation"]] = e["ts"]
    kernels = [launch.get(e["args"]["correlation"]) for e in doc["traceEvents"]
               if e.get("cat") == "kernel"]
    assert [s["kernels"] for s in summary["steps"]] == [
        sum(1 for t in kernels if t is not None and a <= t <= b) for a, b in windows]


@pytest.mark.parametrize("name", ["demo_eager.json.gz", "demo_graph.json.gz"])
def test_kernel_fill_from_the_trace_geometry(name):
    """Kineto writes each kernel's grid, block, registers per thread and
    shared memory, and the device's SM figures in deviceProperties: the
    fill comes from them (no blocks-per-SM figure in Kineto's properties:
    that limit is left out), as plain Python computes it here."""
    data = json.loads(gzip.decompress((DATA / name).read_bytes()))
    (props,) = data["deviceProperties"]
    assert "maxBlocksPerMultiProcessor" not in props and "maxBlocksPerMultiprocessor" not in props
    kernels = []
    for e in data["traceEvents"]:
        if e.get("cat") == "kernel":
            a = e["args"]
            fill = fill_rule.fill_of(
                a["grid"], a["block"], a["registers per thread"], a["shared memory"],
                sms=props["numSms"], threads_per_sm=props["maxThreadsPerMultiprocessor"],
                regs_per_sm=props["regsPerMultiprocessor"],
                shared_per_sm=props["sharedMemPerMultiprocessor"])
            kernels.append((round(e["dur"] * 1000), fill))
    fill_pct, known_pct = fill_rule.weighted_fill_pct(kernels)
    summary = loopscope.analyze(DATA / name)
    gpu = summary["gpu"]
    assert known_pct == 100.0 and 0 < fill_pct < 100
    assert gpu["fill_known_pct"] == known_pct
    assert gpu["fill_pct"] == pytest.approx(fill_pct, abs=0.01)
    (device,) = gpu["devices"]
    assert (device["sm_count"], device["max_threads_per_sm"]) == \
        (props["numSms"], props["maxThreadsPerMultiprocessor"])
    assert summary["trace"]["kernel_geometry"] == {"kernels": len(kernels), "missing": 0,
                                                   "bad": 0, "why": None}
    # the kernel that took the most time: its launch shape and fill
    top = summary["top_kernels"][0]
    mine = [e for e in data["traceEvents"] if e.get("cat") == "kernel" and e["name"] == top["name"]]
    assert {(tuple(e["args"]["grid"]), tuple(e["args"]["block"])) for e in mine} == \
        {(tuple(top["grid"]), tuple(top["block"]))}
    own = [k for k, e in zip(kernels, [e for e in data["traceEvents"] if e.get("cat") == "kernel"])
           if e["name"] == top["name"]]
    assert top["fill_pct"] == pytest.approx(fill_rule.weighted_fill_pct(own)[0], abs=0.01)


@pytest.mark.parametrize("name", ["demo_eager_steps.json.gz", "demo_graph_steps.json.gz"])
def test_profiler_steps_of_a_scheduled_trace_are_the_steps(name):
    """A trace recorded with a schedule has ProfilerStep#N ranges: they are
    the steps without asking, and each holds the kernels whose launch (the
    runtime call of their correlation id) fell inside it."""
    events = _events(name)
    windows = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in events
                     if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X")
    assert len(windows) == 3
    launch = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            if e["cat"] == "cuda_runtime" or e["args"]["correlation"] not in launch:
                launch[e["args"]["correlation"]] = e["ts"]
    kernels = [launch.get(e["args"]["correlation"]) for e in events if e.get("cat") == "kernel"]
    summary = loopscope.analyze(DATA / name)
    assert [s["name"] for s in summary["steps"]] == [w[2] for w in windows]
    assert [s["kernels"] for s in summary["steps"]] == [
        sum(1 for t in kernels if t is not None and a <= t <= b) for a, b, _ in windows]
    assert sum(s["kernels"] for s in summary["steps"]) == len(kernels)
