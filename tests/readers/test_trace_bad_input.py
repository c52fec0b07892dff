"""Bad trace files: a clear one-line error naming the file and the problem
(exit 2 from the CLI), never a traceback from deep inside, never a silently
empty summary; random and mutated input never crashes or hangs."""
from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loopscope
from trace_fixtures import check_summary, expected, make_events, trace_doc, write


def _one_line_error(path, call=loopscope.analyze):
    with pytest.raises(loopscope.TraceError) as info:
        call(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    return message


def test_missing_file(tmp_path):
    assert "no such file" in _one_line_error(tmp_path / "nope.json")


def test_directory(tmp_path):
    # a folder is a job of per-rank traces (tests/distributed/test_trace_folders.py); load() takes a file
    assert "a folder with no trace file in it" in _one_line_error(tmp_path)
    assert "is a directory" in _one_line_error(tmp_path, loopscope.load)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.json"
    path.write_bytes(b"")
    assert "is empty" in _one_line_error(path)


def test_truncated_gzip(tmp_path):
    good = write(tmp_path / "t.json.gz", trace_doc(make_events(seed=1)), gz=True)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    assert "truncated" in _one_line_error(cut)


def test_damaged_gzip(tmp_path):
    data = bytearray(gzip.compress(json.dumps(trace_doc(make_events(seed=1))).encode()))
    data[len(data) // 2: len(data) // 2 + 20] = b"\x00" * 20
    path = tmp_path / "bad.json.gz"
    path.write_bytes(bytes(data))
    message = _one_line_error(path)
    assert "gzip" in message or "JSON" in message


def test_truncated_json(tmp_path):
    text = json.dumps(trace_doc(make_events(seed=1)))
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) * 2 // 3])
    assert "ends in the middle" in _one_line_error(path)


def test_not_json(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello, this is not a trace\n")
    assert "not a trace" in _one_line_error(path)
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    assert "not a trace" in _one_line_error(binary)


def test_invalid_json_says_where(tmp_path):
    path = tmp_path / "bad.json"
    text = '{"traceEvents": [{"ph": "X", "ts": 1,, "dur": 2}]}'
    path.write_text(text)
    message = _one_line_error(path)
    assert f"not valid JSON at byte {text.index(',,') + 1}" in message  # the second comma


def test_json_that_is_not_a_trace(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model": "llama", "layers": [1, 2, 3]}))
    assert "no \"traceEvents\" list" in _one_line_error(path)


def test_extra_data_after_the_trace(tmp_path):
    path = tmp_path / "two.json"
    text = json.dumps(trace_doc(make_events(seed=1)))
    path.write_text(text + "\n" + text)
    assert "extra data" in _one_line_error(path)


def test_sqlite_of_another_schema(tmp_path):
    path = tmp_path / "shop.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    db.commit()
    db.close()
    assert "not an Nsight Systems export" in _one_line_error(path)


def test_nsys_table_without_its_columns(tmp_path):
    path = tmp_path / "odd.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (begin INT, finish INT)")
    db.commit()
    db.close()
    assert "has no column" in _one_line_error(path)


def test_load_reports_bad_files_the_same_way(tmp_path):
    _one_line_error(tmp_path / "nope.json", loopscope.load)


def test_bad_options_name_the_option(tmp_path):
    path = write(tmp_path / "t.json", trace_doc(make_events(seed=1)))
    with pytest.raises(ValueError, match="steps"):
        loopscope.analyze(path, steps="(unclosed")
    with pytest.raises(ValueError, match="device"):
        loopscope.analyze(path, device=-1)
    with pytest.raises(ValueError, match="gap_thresholds_us"):
        loopscope.analyze(path, gap_thresholds_us=(50, 20))


def test_cli_exits_2_with_one_line_per_bad_file(tmp_path):
    good = write(tmp_path / "t.json", trace_doc(make_events(seed=1)))
    run = subprocess.run([sys.executable, "-m", "loopscope", "analyze", str(good),
                          str(tmp_path / "missing.json"), str(tmp_path)],
                         capture_output=True, text=True)
    assert run.returncode == 2
    errors = [line for line in run.stderr.splitlines() if line.startswith("loopscope: ")]
    assert len(errors) == 2 and "Traceback" not in run.stderr
    assert "loopscope report" in run.stdout  # the good file is still reported


# -- property-based: random and mutated input ------------------------------------
_BASE = json.dumps(trace_doc(make_events(seed=11, steps=2, ops_per_step=5))).encode()


def _analyze_bytes(tmp_path, data: bytes, name="t.json"):
    path = tmp_path / name
    path.write_bytes(data)
    try:
        return loopscope.analyze(path, progress=False)
    except loopscope.TraceError as error:
        assert "\n" not in str(error) and str(path) in str(error)
        return None


def _reference(data: bytes):
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, (dict, list)) or (isinstance(doc, dict) and not isinstance(
            doc.get("traceEvents"), list)):
        return None
    return doc


def _well_formed_gpu_events(doc) -> bool:
    """The reference computation handles the shapes the generator makes."""
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    for e in events:
        if not isinstance(e, dict):
            return False
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "user_annotation"):
            if e.get("ph") != "X" or not all(isinstance(e.get(k), (int, float)) and
                                             0 <= e.get(k) < 1e15 for k in ("ts", "dur")):
                return False  # times past 2**61 ns are skipped as unusable
            args = e.get("args")
            if e.get("cat") != "user_annotation" and not isinstance(args, dict):
                return False
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and not (
                    isinstance(args.get("device"), int) and isinstance(args.get("stream"), int)
                    and isinstance(args.get("correlation"), int)):
                return False
            if e.get("cat") == "user_annotation" and not isinstance(e.get("tid"), int):
                return False
            if e.get("cat") == "cuda_runtime" and not isinstance(args.get("correlation", 0), int):
                return False
    return True


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, len(_BASE) - 1), st.sampled_from(
    [b"", b"{", b"}", b"[", b"]", b",", b":", b"\"", b"\\", b"0", b"-", b".", b"e", b"null",
     b"\x00", b"\xff", b"1e999", b"NaN", b"  "])), max_size=4))
def test_mutated_traces_give_a_clear_error_or_the_right_summary(tmp_path, edits):
    data = bytearray(_BASE)
    for at, text in edits:  # replace one byte, or delete it
        data[at:at + 1] = text
    data = bytes(data)
    path = tmp_path / "t.json"
    path.write_bytes(data)
    try:
        summary = loopscope.analyze(path, progress=False)
    except loopscope.TraceError as error:
        message = str(error)
        assert "\n" not in message and str(path) in message
        doc = _reference(data)
        if doc is not None:  # Python's json reads it: the error must be about the trace
            base = doc.get("baseTimeNanoseconds", 0) if isinstance(doc, dict) else 0
            assert "baseTimeNanoseconds" in message and not (
                isinstance(base, int) and 0 <= base < 2**61), message
        return
    doc = _reference(data)
    if doc is not None and _well_formed_gpu_events(doc) and summary["gaps"] is not None:
        check_summary(summary, expected(data))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300))
def test_random_bytes_never_crash(tmp_path, data):
    summary = _analyze_bytes(tmp_path, data, "r.bin")
    assert summary is None or "gaps" in summary


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.sampled_from(["ph", "cat", "ts", "dur", "pid", "tid",
                                                       "args", "name", "device", "stream",
                                                       "correlation", "x", "grid", "block",
                                                       "registers per thread",
                                                       "shared memory"]), inner, max_size=5),
                    max_leaves=30))
def test_random_json_values_never_crash(tmp_path, value):
    doc = {"traceEvents": value if isinstance(value, list) else [value]}
    summary = _analyze_bytes(tmp_path, json.dumps(doc).encode(), "j.json")
    assert summary is not None  # valid JSON with a traceEvents list is a trace, maybe empty
    assert summary["gaps"] is None or summary["gaps"]["count"] >= 0


_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
                       lambda inner: st.lists(inner, max_size=4), max_leaves=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["grid", "block", "registers per thread", "shared memory"]),
                       _VALUES),
       st.dictionaries(st.sampled_from(["id", "name", "numSms", "maxThreadsPerMultiprocessor",
                                        "maxBlocksPerMultiProcessor", "regsPerMultiprocessor",
                                        "sharedMemPerMultiprocessor"]), _VALUES))
def test_any_kernel_geometry_or_device_properties_never_crash(tmp_path, geometry, props):
    """Whatever a file puts in a kernel's geometry or the device properties,
    the kernel is read (its fill known or not, never an error)."""
    event = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2,
             "args": {"correlation": 1, "device": 0, "stream": 7, **geometry}}
    doc = {"traceEvents": [event], "deviceProperties": [props]}
    text = json.dumps(doc, allow_nan=True).encode()
    summary = _analyze_bytes(tmp_path, text, "g.json")
    assert summary is not None and summary["gpu"]["kernels"] == 1
    kept = summary["trace"]["kernel_geometry"]
    assert kept["kernels"] == 1 and kept["missing"] + kept["bad"] <= 1
    assert summary["gpu"]["fill_known_pct"] in (0.0, 100.0)
