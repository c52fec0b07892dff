"""Property-based tests (hypothesis) over every reader of outside data that
exists now: the test hooks (_testhooks._inject, _testhooks._inject_calls, also inside
strict mode), the recording reader (_recording.load / replay), the Nsight
Systems SQLite reader (values of any type in the columns it reads), the
budget and pytest-marker parsing, and the command line's arguments.

Random and mutated input must give a clear error of the documented type (its
message names the hook, record or option), or a correct summary: strict JSON,
the report and the trace export built, and the counts matching an
independent count of what went in.  Never another exception, a crash (the
suite also runs under ASan/UBSan), a hang, or a profile left running.

Examples are few and have no deadline (the sanitizer run is slow); under CI
(CI set) the examples are the same on every run.  LOOPSCOPE_EXAMPLES=N runs
N examples a test (e.g. 2000 for a longer search)."""
from __future__ import annotations

import contextlib
import copy
import gzip
import io
import itertools
import json
import os
import sqlite3
import sys
import tempfile
import textwrap

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import loopscope
from loopscope import _core, _testhooks
from loopscope.files import _recording
from loopscope.readers import _replay
from loopscope.figures._budgets import BUDGETS, BudgetError, check_budgets
from loopscope.files._recording import RecordingError

settings.register_profile(
    "hostile", max_examples=int(os.environ.get("LOOPSCOPE_EXAMPLES", 40)), deadline=None,
    database=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile("hostile")

BIG = sys.float_info.max
EDGE_INTS = [0, 1, -1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1, 2**64,
             -2**63, 10**30]
SCALARS = st.one_of(
    st.sampled_from(EDGE_INTS), st.integers(-2**70, 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([BIG, -BIG, 1e308, 5e-324]),
    st.text(max_size=6), st.binary(max_size=4), st.none(), st.booleans(),
    st.just(()), st.just([]), st.just({}))
FIGURES = ["sm_active_pct", "dram_throughput_pct", "gr_active_pct", "sm_issue",
           "warp_occupancy_pct", "dram_read_gbps", "dram_write_gbps", "pcie_read_gbps",
           "pcie_write_gbps", "tensor_active_pct"]
OP_KINDS = ["kernel", "memcpy", "memset"]
KINDS = OP_KINDS + ["api", "sync_record", "sample"]


def no_profile_left() -> None:
    leaked = _core.active()
    if leaked:
        _core.stop()
    assert not leaked, "a profile was left running"


def strict_views(prof) -> dict:
    """The summary, checked strict JSON; the report and trace export built."""
    summary = prof.summary()
    json.loads(json.dumps(summary, allow_nan=False))
    assert prof.report()
    with tempfile.TemporaryDirectory() as folder:
        json.loads(open(prof.export_trace(os.path.join(folder, "t.json"))).read())
    return summary


# ---------------------------------------------------------------------------
# _testhooks._inject

@st.composite
def plausible_record(draw, kind: str):
    start = draw(st.integers(1, 2**40))
    end = start + draw(st.integers(0 if kind != "sample" else 1, 10**6))
    if kind == "sample":
        figures = draw(st.dictionaries(st.sampled_from(FIGURES),
                                       st.floats(0, 1e308, allow_nan=False), max_size=4))
        extra = draw(st.lists(st.integers(0, 3), max_size=1))
        return (start, end, figures, *extra)
    if kind == "sync_record":
        return (start, end, *draw(st.lists(st.integers(0, 20), max_size=1)))
    if kind == "api":
        thread = draw(st.lists(st.integers(0, 9), max_size=1))
        return (start, end, draw(st.integers(0, 50)), *thread)
    head = (start, end, draw(st.integers(0, 3)), draw(st.integers(0, 20)), draw(st.integers(0, 50)))
    tail = [draw(st.one_of(st.none(), st.text(max_size=8))), draw(st.integers(0, 2**40))]
    if kind == "memcpy":
        tail += [draw(st.integers(0, 10)), draw(st.integers(0, 3))]
    return head + tuple(tail[:draw(st.integers(0, len(tail)))])


@st.composite
def hostile_record(draw, kind: str):
    record = list(draw(plausible_record(kind)))
    how = draw(st.sampled_from(["keep", "replace", "drop", "extend", "not a tuple", "figure"]))
    if how == "replace" and record:
        record[draw(st.integers(0, len(record) - 1))] = draw(SCALARS)
    elif how == "drop" and record:
        record.pop(draw(st.integers(0, len(record) - 1)))
    elif how == "extend":
        record += draw(st.lists(SCALARS, min_size=1, max_size=4))
    elif how == "not a tuple":
        return draw(st.one_of(SCALARS, st.just(record)))
    elif how == "figure" and kind == "sample":
        record[2] = draw(st.dictionaries(st.one_of(st.sampled_from(FIGURES), st.text(max_size=4),
                                                   st.integers()), SCALARS, max_size=3))
    return tuple(record)


@st.composite
def injections(draw):
    kind = draw(st.one_of(st.sampled_from(KINDS), SCALARS))
    records = draw(st.lists(hostile_record(kind if kind in KINDS else "kernel"), max_size=5))
    return kind, draw(st.sampled_from([list, tuple, iter]))(records) if records else records


@given(st.lists(injections(), min_size=1, max_size=4))
def test_inject_takes_a_list_whole_or_refuses_it_by_name(batches):
    accepted = {k: 0 for k in KINDS}
    with loopscope.profile() as prof:
        for kind, records in batches:
            records = list(records) if not isinstance(records, (list, tuple)) else records
            try:
                count = _testhooks._inject(kind, records)
            except (TypeError, ValueError) as error:
                assert str(error).startswith(("loopscope._inject: ", "_inject(")), error
            else:
                assert count == len(records)
                accepted[kind] += count
    summary = strict_views(prof)
    if any(accepted[k] for k in OP_KINDS + ["api", "sync_record"]):
        gpu = summary["gpu"]
        assert (gpu["kernels"], gpu["memcpys"], gpu["memsets"]) == (
            accepted["kernel"], accepted["memcpy"], accepted["memset"])
    else:
        assert summary["gpu"] is None
    if accepted["sample"]:
        assert summary["metrics"]["samples"] == accepted["sample"]
    no_profile_left()


# ---------------------------------------------------------------------------
# _testhooks._inject_calls, alone and under strict mode

APIS = ["cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
        "cudaMemcpyAsync", "cuMemcpyDtoH_v2", "cuMemcpyDtoHAsync_v2", "cudaLaunchKernel",
        "cuLaunchKernel", "cudaFree", "cuMemFree_v2", "cudaGraphLaunch"]


@st.composite
def fake_call(draw):
    call = [draw(st.one_of(st.sampled_from(APIS), st.text(max_size=12))),
            draw(st.integers(0, 10**7)), draw(st.integers(0, 2**32 - 1)),
            draw(st.integers(0, 2**64 - 1))]
    call = call[:draw(st.integers(2, 4))]
    if draw(st.booleans()):
        position = draw(st.integers(0, len(call)))
        if position < len(call):
            call[position] = draw(SCALARS)
        else:
            call.append(draw(SCALARS))
    return tuple(call) if draw(st.integers(0, 9)) else draw(SCALARS)


@given(st.lists(fake_call(), max_size=6), st.booleans(), st.booleans())
def test_inject_calls_refuses_by_name_or_reports_the_syncs(calls, strict, release_gil):
    with loopscope.profile() as prof:
        guard = (loopscope.no_sync(allow=loopscope.SYNC_KINDS) if strict
                 else contextlib.nullcontext())
        with guard:
            try:
                tokens = _testhooks._inject_calls(calls, release_gil=release_gil)
            except (TypeError, ValueError) as error:
                assert str(error).startswith("loopscope._inject_calls: "), error
                tokens = None
            else:
                assert len(tokens) == len(calls) and all(t >= 0 for t in tokens)
    summary = strict_views(prof)
    syncs = summary["syncs"]
    if tokens is None:  # nothing went in: syncs were not watched
        assert syncs is None and summary["syncs_error"]
    else:
        assert syncs["count"] == sum(s["count"] for s in syncs["sites"])
    no_profile_left()


# ---------------------------------------------------------------------------
# Recordings: load() and replay() on mutated recordings

def _seed_recording() -> dict:
    _testhooks._set_test_clock(1_000_000, 1_000)
    try:
        with loopscope.profile(syncs=False) as prof:
            for i in range(2):
                with prof.step():
                    with loopscope.range("inner"):
                        pass
            _testhooks._inject("api", [(1_002_100, 1_002_600, 1, 9), (1_005_100, 1_005_600, 3, 9)])
            _testhooks._inject("kernel", [(1_010_000, 1_012_000, 0, 7, 1, "gemm"),
                                     (1_042_000, 1_043_000, 0, 9, 2, "softmax")])
            _testhooks._inject("memcpy", [(1_200_000, 1_201_000, 0, 7, 3, "DtoH", 4096)])
            _testhooks._inject("sync_record", [(1_150_000, 1_201_500, 7)])
    finally:
        _testhooks._set_test_clock(0, 0)
    return _recording.record(prof.finished, command="seed")


SEED = None


def seed() -> dict:
    global SEED
    if SEED is None:
        SEED = _seed_recording()
    return copy.deepcopy(SEED)


@st.composite
def mutation(draw, data):
    """Changes one place of `data` in place: replaces, deletes or truncates."""
    node, path = data, []
    while isinstance(node, (dict, list)) and node and draw(st.integers(0, 3)):
        key = draw(st.sampled_from(sorted(node, key=str) if isinstance(node, dict)
                                   else range(len(node))))
        path.append((node, key))
        node = node[key]
    if not path:
        return
    parent, key = path[-1]
    how = draw(st.sampled_from(["replace", "replace", "delete", "truncate", "duplicate"]))
    if how == "replace":
        parent[key] = draw(SCALARS)
    elif how == "delete":
        del parent[key]
    elif how == "truncate" and isinstance(node, (list, str)):
        parent[key] = node[:draw(st.integers(0, max(0, len(node) - 1)))]
    elif how == "duplicate" and isinstance(node, list) and node:
        node.append(copy.deepcopy(node[-1]))


@st.composite
def mutated_recordings(draw):
    data = seed()
    for _ in range(draw(st.integers(1, 3))):
        draw(mutation(data))
    return data


def replay_or_refuse(data):
    try:
        prof = _replay.replay(data)
    except RecordingError as error:
        assert str(error)
        return None
    finally:
        no_profile_left()
    summary = strict_views(prof)
    late = ops_after_stop(data, prof.capture.info()["stop_ns"] - data["profile"]["start_ns"])
    kinds = data["ops"].get("kind", [])  # absent: accepted only with no op rows at all
    expected = [sum(k == n for i, k in enumerate(kinds) if i not in late) for n in range(3)]
    gpu = summary["gpu"]
    if gpu is None:
        assert sum(expected) == 0
    else:
        assert [gpu["kernels"], gpu["memcpys"], gpu["memsets"]] == expected
    # every op row is counted: in the GPU figures or as begun after the stop
    was = data["profile"]["overhead"].get("ops_after_stop")
    recorded = was if isinstance(was, int) and not isinstance(was, bool) and was >= 0 else 0
    assert summary["overhead"]["ops_after_stop"] == recorded + len(late)
    return summary


def ops_after_stop(data, stop) -> set[int]:
    """Indices of the op rows a finish leaves out of a replay stopped at
    `stop` (ns after the recording's start): begun after it, and their
    correlation id only on launch records begun after it (the replay is not
    traced, so an op with no launch record stays).  Plain Python over the
    delta-encoded columns."""
    def undelta(values):
        return list(itertools.accumulate(values))

    ops, apis = data["ops"], data["apis"]
    op_starts, op_corrs = undelta(ops.get("start", [])), undelta(ops.get("correlation", []))
    api_starts, api_corrs = undelta(apis.get("start", [])), undelta(apis.get("correlation", []))
    kept = {c for t, c in zip(api_starts, api_corrs) if t <= stop}
    late = {c for t, c in zip(api_starts, api_corrs) if t > stop} - kept
    return {i for i, (t, c) in enumerate(zip(op_starts, op_corrs)) if t > stop and c in late}


def test_the_seed_recording_replays_to_its_summary():
    summary = replay_or_refuse(seed())
    assert [s["name"] for s in summary["steps"]] == ["Step_0", "Step_1"]
    assert summary["gpu"]["kernels"] == 2


@pytest.mark.parametrize("stop_ns", [0, 2_000, 5_000, 10**9])
def test_a_recording_stopped_before_its_launches_counts_the_ops_left_out(stop_ns):
    """A damaged stop_ns (0, or earlier than some launches): the replay's
    finish leaves out the ops launched after it, as a live one does, and
    counts them in overhead.ops_after_stop on top of the recorded count."""
    data = seed()
    data["profile"]["stop_ns"] = stop_ns
    base = data["profile"]["start_ns"]
    # the seed's launch records (start, correlation) and ops (kind, start,
    # correlation), in ns after its start, as _seed_recording injects them
    launches = [(1_002_100 - base, 1), (1_005_100 - base, 3)]
    ops = [("kernel", 1_010_000 - base, 1), ("kernel", 1_042_000 - base, 2),
           ("memcpy", 1_200_000 - base, 3)]
    summary = replay_or_refuse(data)
    launched_after = {c for t, c in launches if t > stop_ns}
    left_out = [k for k, t, c in ops if t > stop_ns and c in launched_after]
    kept = [k for k, t, c in ops if not (t > stop_ns and c in launched_after)]
    assert summary["overhead"]["ops_after_stop"] == len(left_out)
    assert (summary["gpu"]["kernels"], summary["gpu"]["memcpys"]) == (
        kept.count("kernel"), kept.count("memcpy"))
    if stop_ns == 0:
        assert len(left_out) == 2  # the launched kernel and the copy; the unlaunched one stays


@given(mutated_recordings())
def test_replay_of_a_mutated_recording_is_refused_or_right(data):
    replay_or_refuse(data)


@given(st.data())
def test_load_of_damaged_bytes_is_refused_or_read(data):
    raw = json.dumps(seed()).encode()
    if data.draw(st.booleans()):
        raw = gzip.compress(raw, mtime=0)
    raw = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4))):
        how = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        at = data.draw(st.integers(0, len(raw) - 1))
        if how == "flip":
            raw[at] = data.draw(st.integers(0, 255))
        elif how == "cut":
            del raw[at:]
        else:
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=8))
        if not raw:
            break
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "r.json.gz")
        with open(path, "wb") as f:
            f.write(bytes(raw))
        try:
            loaded = _recording.load(path)
        except RecordingError as error:
            assert str(error)
            return
    replay_or_refuse(loaded)


# ---------------------------------------------------------------------------
# The Nsight Systems SQLite reader: values of another type in its columns

# (table, column, what it must hold) of every column the reader reads that a
# mutation may change; "int" columns take integers or NULL, "text" text or
# NULL, "number" integers, reals or NULL
NSYS_COLUMNS = (
    [("CUPTI_ACTIVITY_KIND_KERNEL", c, "int") for c in
     ("start", "end", "deviceId", "streamId", "correlationId", "demangledName")]
    + [("CUPTI_ACTIVITY_KIND_MEMCPY", c, "int") for c in
       ("start", "end", "deviceId", "streamId", "correlationId", "bytes", "copyKind", "srcKind",
        "dstKind")]
    + [("CUPTI_ACTIVITY_KIND_MEMSET", c, "int") for c in
       ("start", "end", "deviceId", "streamId", "correlationId", "bytes")]
    + [("CUPTI_ACTIVITY_KIND_RUNTIME", c, "int") for c in
       ("start", "end", "globalTid", "correlationId", "nameId")]
    + [("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", c, "int") for c in
       ("start", "end", "streamId", "correlationId", "syncType")]
    + [("NVTX_EVENTS", c, "int") for c in ("start", "end", "eventType", "globalTid", "textId")]
    + [("NVTX_EVENTS", "text", "text"), ("StringIds", "value", "text"),
       ("GPU_METRICS", "timestamp", "int"), ("GPU_METRICS", "typeId", "int"),
       ("GPU_METRICS", "value", "number")])
NSYS_VALUES = st.one_of(
    st.sampled_from(["abc", "", "1.5e3", "12", 1.5, 2.0, -0.25, b"", b"\x01\xff", None, 0, 1, 7,
                     59, 70_000, 2**32, 2**63 - 1]),
    st.integers(0, 2**40), st.floats(allow_nan=False), st.text(max_size=4),
    st.binary(max_size=3))


def _nsys_seed(path) -> None:
    """A small export with a row in every table the reader reads."""
    from test_trace_nsys import seed_style_export

    ex = seed_style_export(path, steps=1, layers=1)
    ex.db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES "
                  "(900000, 901000, 0, 1, 7, 40, 1, 4096, 2, 1, 0, 0)")
    ex.db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES "
                  "(902000, 903000, 0, 1, 7, 41, 1, 0, 4096, 0)")
    ex.db.execute("INSERT INTO TARGET_INFO_GPU_METRICS VALUES ('GH100', 0, 0, 1, "
                  "'SMs Active [Throughput %]')")
    ex.db.execute("INSERT INTO TARGET_INFO_GPU_METRICS VALUES ('GH100', 0, 0, 2, "
                  "'DRAM Read Bandwidth [Throughput %]')")
    for i in range(3):
        for metric in (1, 2):
            ex.db.execute("INSERT INTO GPU_METRICS VALUES (?, 0, ?, ?)",
                          (1_000_000 + 50_000 * i, metric, 10 * (i + metric)))
    ex.close()


_NSYS_SEED: bytes | None = None


def _fits(value, what: str) -> bool:
    """Does a value read back with Python's sqlite3 hold what its column must?"""
    if value is None:
        return True
    if what == "text":
        return isinstance(value, str)
    return isinstance(value, int) or (what == "number" and isinstance(value, float))


def _nsys_expected(path):
    """([(table, column) of the columns read that hold a value of another
    type], GPU op counts {kind: n}: rows with both times, 2**61 ns from zero
    at most, and a device and stream id) by plain sqlite3 over the export."""
    db = sqlite3.connect(path)
    try:
        def rows(table, *cols):
            return db.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()

        # the rows the reader reads: NVTX ranges are eventType 59/60 (or a value
        # of another type, which is itself the error); names only of ids in use
        used_ids = set()
        for table, col in (("CUPTI_ACTIVITY_KIND_KERNEL", "demangledName"),
                           ("CUPTI_ACTIVITY_KIND_RUNTIME", "nameId")):
            used_ids |= {v for (v,) in rows(table, col) if isinstance(v, int)}
        used_ids |= {i for e, t, i in rows("NVTX_EVENTS", "eventType", "text", "textId")
                     if t is None and isinstance(i, int) and (not isinstance(e, int) or e in (59, 60))}
        wrong = []
        for table, col, what in NSYS_COLUMNS:
            if table == "StringIds":
                values = [v for i, v in rows(table, "id", col) if i in used_ids]
            elif table == "NVTX_EVENTS":
                values = [v for e, v in rows(table, "eventType", col)
                          if not isinstance(e, int) or e in (59, 60) or col == "eventType"]
            else:
                values = [v for (v,) in rows(table, col)]
            if not all(_fits(v, what) for v in values):
                wrong.append((table, col))
        counts = {}
        if wrong:  # no summary to count for
            return wrong, counts
        for kind in ("KERNEL", "MEMCPY", "MEMSET"):
            counts[kind] = sum(
                1 for a, b, dev, stream in rows(f"CUPTI_ACTIVITY_KIND_{kind}", "start", "end",
                                                "deviceId", "streamId")
                if a is not None and b is not None and -2**61 < a <= b < 2**61 and dev is not None
                and 0 <= dev <= 0xFFFF and stream is not None and 0 <= stream < 2**32)
        return wrong, counts
    finally:
        db.close()


_KERNEL_END = ("CUPTI_ACTIVITY_KIND_KERNEL", "end", "int")
_KERNEL_NAME = ("CUPTI_ACTIVITY_KIND_KERNEL", "demangledName", "int")
_NVTX_END = ("NVTX_EVENTS", "end", "int")
_NVTX_TEXT_ID = ("NVTX_EVENTS", "textId", "int")


@given(st.lists(st.tuples(st.sampled_from(NSYS_COLUMNS), st.integers(1, 8), NSYS_VALUES),
                min_size=1, max_size=3))
# Once flaky (issue 28): a row the reader skips for its times (it ends before
# it starts, or has no end) had its name left unchecked; every row's name is
# checked now, and these examples run on every run.
@example([(_KERNEL_END, 1, 0), (_KERNEL_NAME, 1, "abc")])
@example([(_KERNEL_NAME, 1, "abc"), (_KERNEL_END, 1, 0)])
@example([(_NVTX_END, 1, None), (_NVTX_TEXT_ID, 1, "abc")])
def test_nsys_export_with_values_of_any_type_is_refused_by_name_or_right(changes):
    """Any value in any column the Nsight Systems reader reads: a TraceError
    naming the file, table and column of a value of another type, or a
    summary whose op counts match a plain count of the rows."""
    global _NSYS_SEED
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "r.sqlite")
        if _NSYS_SEED is None:
            _nsys_seed(path)
            with open(path, "rb") as f:
                _NSYS_SEED = f.read()
        with open(path, "wb") as f:
            f.write(_NSYS_SEED)
        db = sqlite3.connect(path)
        for (table, col, _), row, value in changes:
            try:
                db.execute(f"UPDATE {table} SET {col} = ? WHERE rowid = ?", (value, row))
            except sqlite3.IntegrityError:  # NOT NULL: this change cannot be made
                pass
        db.commit()
        db.close()
        wrong, counts = _nsys_expected(path)
        try:
            summary = loopscope.analyze(path, progress=False)
        except loopscope.TraceError as error:
            message = str(error)
            assert "\n" not in message and path in message
            assert wrong, message
            assert any(f"table {t} column {c} holds" in message for t, c in wrong), (message, wrong)
            return
        assert not wrong, wrong
        json.loads(json.dumps(summary, allow_nan=False))
        gpu = summary["gpu"]
        got = {"KERNEL": 0, "MEMCPY": 0, "MEMSET": 0} if gpu is None else {
            "KERNEL": gpu["kernels"], "MEMCPY": gpu["memcpys"], "MEMSET": gpu["memsets"]}
        assert got == counts


# ---------------------------------------------------------------------------
# Budgets and the pytest marker

@given(st.dictionaries(st.one_of(st.sampled_from(list(BUDGETS)), st.text(max_size=8)), SCALARS,
                       max_size=4))
def test_budgets_are_numbers_or_refused(budgets):
    def valid(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= BIG

    ok = set(budgets) <= set(BUDGETS) and all(valid(v) for v in budgets.values())
    try:
        checked = check_budgets(budgets)
    except BudgetError as error:
        assert not ok and str(error).startswith(("unknown loopscope budget", "loopscope budget "))
    else:
        assert ok and checked == {k: float(v) for k, v in budgets.items()}


class Marker:
    def __init__(self, args, kwargs):
        self.args, self.kwargs = args, kwargs


OPTION_VALUES = st.dictionaries(
    st.sampled_from(["trace", "syncs", "buffer_mb", "max_buffer_mb", "gap_thresholds_us",
                     "metrics_interval_us", "step_name", "bogus"]), SCALARS, max_size=3)


@given(st.lists(SCALARS, max_size=2),
       st.dictionaries(st.sampled_from(list(BUDGETS) + ["steps", "profile", "bogus"]),
                       st.one_of(SCALARS, OPTION_VALUES), max_size=4))
def test_marker_is_parsed_or_a_usage_error(args, kwargs):
    from loopscope.pytest_plugin import _parse_marker

    try:
        budgets, steps, options = _parse_marker(Marker(tuple(args), kwargs))
    except pytest.UsageError as error:
        assert str(error).startswith("@pytest.mark.loopscope")
    else:
        assert not args and set(budgets) <= set(BUDGETS)
        assert steps is None or isinstance(steps, str)
        loopscope.profile(**options)  # accepted options make a profile


# ---------------------------------------------------------------------------
# The command line

SCRIPT_TEXT = textwrap.dedent("""
    import sys
    import loopscope
    with loopscope.profile(trace=False) as prof:
        with prof.step():
            pass
    if sys.argv[1:2] == ["fail"]:
        raise SystemExit(3)
""")
SAFE_TEXT = st.text(alphabet="abc019_-.=*( ", max_size=8)  # no path separator: stays in cwd


@st.composite
def argv(draw, script: str):
    words = [draw(st.sampled_from(["run", "demo", "--help", "analyze", ""])),
             *draw(st.lists(st.one_of(
                 st.sampled_from(["--steps", "--json", "--trace", "--max-syncs",
                                  "--max-severe-gaps", "--graph", "--layers", "-h", script,
                                  "/nonexistent/out.json", "fail", "--"]),
                 SAFE_TEXT), max_size=6))]
    if words[0] == "run" and draw(st.booleans()):
        words.append(script)
    return words


@given(st.data())
@settings(max_examples=max(1, settings().max_examples * 3 // 4))
def test_command_line_exits_cleanly_whatever_the_arguments(data):
    with tempfile.TemporaryDirectory() as folder:
        script = os.path.join(folder, "s.py")
        with open(script, "w") as f:
            f.write(SCRIPT_TEXT)
        words = data.draw(argv(script))
        from loopscope.__main__ import main

        out, err = io.StringIO(), io.StringIO()
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    status = main(words)
                except SystemExit as exit_:
                    status = exit_.code
        finally:
            os.chdir(cwd)
    assert status in (0, 1, 2, 3), (words, status, err.getvalue())
    assert "Traceback" not in err.getvalue(), err.getvalue()
    no_profile_left()
