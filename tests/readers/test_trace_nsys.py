"""loopscope.analyze() over Nsight Systems SQLite exports, built here with
sqlite3 from the documented schema (NVIDIA's "SQLite Schema Reference");
figures checked against plain Python over the same rows."""
from __future__ import annotations

import random
import subprocess
import sys
import sqlite3

import pytest

import fill_rule
import loopscope
from loopscope.readers._sniff import TraceError
from trace_fixtures import check_summary, figures

SCHEMA = """
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);
CREATE TABLE TARGET_INFO_GPU (vmId INT, id INT, name TEXT, busLocation TEXT, smCount INT,
    cuDevice INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT NOT NULL, end INT NOT NULL,
    deviceId INT NOT NULL, contextId INT NOT NULL, streamId INT NOT NULL,
    correlationId INT, globalPid INT, demangledName INT NOT NULL, shortName INT NOT NULL,
    mangledName INT, gridX INT, gridY INT, gridZ INT, blockX INT, blockY INT, blockZ INT,
    registersPerThread INT, graphNodeId INT, graphId INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INT NOT NULL, end INT NOT NULL,
    deviceId INT NOT NULL, contextId INT NOT NULL, streamId INT NOT NULL, correlationId INT,
    globalPid INT, bytes INT NOT NULL, copyKind INT NOT NULL, srcKind INT, dstKind INT,
    graphNodeId INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INT NOT NULL, end INT NOT NULL,
    deviceId INT NOT NULL, contextId INT NOT NULL, streamId INT NOT NULL, correlationId INT,
    globalPid INT, value INT NOT NULL, bytes INT NOT NULL, graphNodeId INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT NOT NULL, end INT NOT NULL,
    eventClass INT NOT NULL, globalTid INT, correlationId INT, nameId INT NOT NULL,
    returnValue INT NOT NULL, callchainId INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INT NOT NULL, end INT NOT NULL,
    deviceId INT NOT NULL, contextId INT NOT NULL, streamId INT NOT NULL,
    correlationId INT, globalPid INT, syncType INT NOT NULL, eventId INT NOT NULL);
CREATE TABLE NVTX_EVENTS (start INT NOT NULL, end INT, eventType INT NOT NULL, rangeId INT,
    category INT, color INT, text TEXT, globalTid INT, endGlobalTid INT, textId INT,
    domainId INT, uint64Value INT, int64Value INT, doubleValue REAL, uint32Value INT,
    int32Value INT, floatValue REAL, jsonTextId INT, jsonText TEXT);
CREATE TABLE TARGET_INFO_GPU_METRICS (typeName TEXT NOT NULL, sourceId INT NOT NULL,
    typeId INT NOT NULL, metricId INT NOT NULL, metricName TEXT NOT NULL);
CREATE TABLE GPU_METRICS (timestamp INT, typeId INT NOT NULL, metricId INT NOT NULL,
    value INT NOT NULL);
"""
SCHEMA_TABLES = [s.split("TABLE")[1].split("(")[0].strip() for s in SCHEMA.split(";") if s.strip()]
TID = (4242 << 24) | 4242  # globalTid: PID << 24 | TID
PUSH_POP = 59


class Export:
    """An export under construction, and what went into it."""

    def __init__(self, path, tables=None) -> None:
        self.db = sqlite3.connect(path)
        statements = [s for s in SCHEMA.split(";") if s.strip()]
        for s in statements:
            name = s.split("TABLE")[1].split("(")[0].strip()
            if tables is None or name in tables:
                self.db.execute(s)
        self.strings: dict[str, int] = {}
        self.ops, self.launches, self.ranges = [], {}, []
        self.path = path

    def string(self, text: str) -> int:
        if text not in self.strings:
            self.strings[text] = len(self.strings) + 1
            self.db.execute("INSERT INTO StringIds VALUES (?, ?)", (self.strings[text], text))
        return self.strings[text]

    def launch(self, start, corr, name="cudaLaunchKernel_v7000", dur=1_500):
        self.db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,0,?,?,?,0,0)",
                        (start, start + dur, TID, corr, self.string(name)))
        self.launches.setdefault(corr, start)

    def kernel(self, start, end, corr, device=0, stream=7, name="void gemm<128>(float*)"):
        sid = self.string(name)
        self.db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES "
                        "(?,?,?,1,?,?,1,?,?,?,1,1,1,128,1,1,32,0,0)",
                        (start, end, device, stream, corr, sid, sid, sid))
        self.ops.append((device, start, end, "kernel", corr))

    def nvtx(self, start, end, text, by_id=False):
        if by_id:
            self.db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, textId) "
                            "VALUES (?,?,?,?,?)", (start, end, PUSH_POP, TID, self.string(text)))
        else:
            self.db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, text) "
                            "VALUES (?,?,?,?,?)", (start, end, PUSH_POP, TID, text))
        self.ranges.append((start, end, text))

    def close(self):
        self.db.execute("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.11.1')")
        self.db.commit()
        self.db.close()


def seed_style_export(path, steps=4, layers=3, seed=0):
    """Denoise_Step_N ranges with Step_N/Layer_i and Step_N/Layer_i/MLP below,
    two kernels per MLP, random launch delays; a stream sync per step."""
    rng = random.Random(seed)
    ex = Export(path)
    ex.db.execute("INSERT INTO TARGET_INFO_GPU (vmId, id, name, cuDevice) VALUES "
                  "(0, 0, 'NVIDIA H200', 0)")
    t, gpu, corr = 1_000_000, 0, 0
    for s in range(steps):
        step_start = t
        for layer in range(layers):
            layer_start = t
            t += 500
            mlp_start = t
            for _ in range(2):
                corr += 1
                t += rng.choice([1_000, 5_000, 60_000])
                ex.launch(t, corr)
                start = max(gpu, t + 3_000)
                gpu = start + rng.choice([2_000, 8_000])
                ex.kernel(start, gpu, corr)
                t += 1_500
            ex.nvtx(mlp_start, t, f"Step_{s}/Layer_{layer}/MLP", by_id=layer % 2 == 0)
            t += 500
            ex.nvtx(layer_start, t, f"Step_{s}/Layer_{layer}")
        corr += 1
        wait = max(1_000, gpu - t + 500)
        ex.launch(t, corr, "cudaStreamSynchronize_v3020", dur=wait)
        ex.db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (?,?,0,1,7,?,1,3,0)",
                      (t + 100, t + wait - 100, corr))
        t += wait + 1_000
        ex.nvtx(step_start, t, f"Denoise_Step_{s}")
        t += 2_000
    return ex


def test_seed_style_export_matches_plain_python(tmp_path):
    ex = seed_style_export(tmp_path / "r.sqlite")
    ex.close()
    summary = loopscope.analyze(ex.path)
    assert summary["source"] == "nsys"
    steps = [r for r in ex.ranges if r[2].startswith("Denoise_Step_")]
    check_summary(summary, figures(ex.ops, ex.launches, steps))
    assert [s["name"] for s in summary["steps"]] == [f"Denoise_Step_{i}" for i in range(4)]
    assert summary["gpu"]["device"] == "NVIDIA H200"
    trace = summary["trace"]
    assert trace["schema_version"] == "3.11.1"
    assert trace["missing_tables"] == ["CUPTI_ACTIVITY_KIND_DRIVER"]  # not traced here
    # the range tree: Step_N/Layer_i under each step, Step_N/Layer_i/MLP under
    # those, grouped over the steps without their "Step_N/" prefix
    assert [r["name"] for r in summary["ranges"]] == [
        "Layer_0", "Layer_0/MLP", "Layer_1", "Layer_1/MLP", "Layer_2", "Layer_2/MLP"]
    mlp = next(r for r in summary["ranges"] if r["name"] == "Layer_1/MLP")
    assert mlp["parent"] == "Layer_1" and mlp["depth"] == 1
    assert mlp["count"] == 4 and mlp["kernels"] == 8


def test_syncs_from_runtime_rows_and_sync_records(tmp_path):
    ex = seed_style_export(tmp_path / "r.sqlite", steps=3)
    ex.close()
    summary = loopscope.analyze(ex.path)
    syncs = summary["syncs"]
    assert syncs["count"] == 3 and syncs["by_kind"] == {"stream_sync": 3}
    assert syncs["sites"][0]["steps"] == [0, 1, 2]
    assert "Nsight Systems" in syncs["sites_unknown"]
    # the sync records overlap the gaps after each step's last kernel
    assert summary["gaps"]["by_cause"]["sync"] >= 1


def test_gpu_metrics_give_sm_and_dram(tmp_path):
    ex = seed_style_export(tmp_path / "r.sqlite", steps=2)
    names = [(1, "SMs Active [Throughput %]"), (2, "DRAM Read Bandwidth [Throughput %]"),
             (3, "DRAM Write Bandwidth [Throughput %]"), (4, "GPC Clock Frequency [MHz]")]
    for metric_id, name in names:
        ex.db.execute("INSERT INTO TARGET_INFO_GPU_METRICS VALUES ('GH100', 0, 0, ?, ?)",
                      (metric_id, name))
    first = min(o[1] for o in ex.ops)
    last = max(o[2] for o in ex.ops)
    times = list(range(first, last + 20_000, 10_000))
    for i, ts in enumerate(times):
        for metric_id, value in ((1, 40 + i % 3 * 10), (2, 20), (3, 5 + i % 2), (4, 1755)):
            ex.db.execute("INSERT INTO GPU_METRICS VALUES (?, 0, ?, ?)", (ts, metric_id, value))
    ex.close()
    summary = loopscope.analyze(ex.path)
    window = (first, last)

    def average(value_at):
        total = sum(value_at(i) * max(0, min(b, window[1]) - max(a, window[0]))
                    for i, (a, b) in enumerate(zip(times, times[1:])))
        return total / (window[1] - window[0])

    assert summary["sm"]["active_pct"] == pytest.approx(average(lambda i: 40 + i % 3 * 10), abs=0.01)
    assert summary["dram"]["throughput_pct"] == pytest.approx(average(lambda i: 25 + i % 2), abs=0.01)
    assert summary["metrics"]["source"] == "nsys_gpu_metrics"


def test_missing_tables_are_tolerated_and_named(tmp_path):
    ex = Export(tmp_path / "k.sqlite", tables={"StringIds", "META_DATA_EXPORT",
                                               "CUPTI_ACTIVITY_KIND_KERNEL"})
    for i, (a, b) in enumerate([(1_000, 2_000), (2_500, 3_000), (90_000, 91_000)]):
        ex.kernel(a, b, i + 1)
    ex.close()
    summary = loopscope.analyze(ex.path)
    assert summary["gaps"]["count"] == 2 and summary["gaps"]["severe"] == 1
    assert "CUPTI_ACTIVITY_KIND_RUNTIME" in summary["trace"]["missing_tables"]
    assert "NVTX_EVENTS" in summary["trace"]["missing_tables"]
    assert summary["syncs"] is None and "RUNTIME" in summary["syncs_error"]
    assert summary["gpu"]["ops_without_launch_record"] == 3
    assert "Tables not in the export" in loopscope.load(ex.path).report()


def test_an_export_without_gpu_work_says_so(tmp_path):
    ex = Export(tmp_path / "cpu.sqlite", tables={"StringIds", "NVTX_EVENTS", "META_DATA_EXPORT"})
    ex.nvtx(1_000, 50_000, "Step_0")
    ex.close()
    summary = loopscope.analyze(ex.path)
    assert summary["gaps"] is None and "no GPU operations" in summary["gpu_error"]
    assert len(summary["steps"]) == 1


def test_rows_with_missing_values_are_counted(tmp_path):
    ex = seed_style_export(tmp_path / "r.sqlite", steps=2)
    ex.db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, text) VALUES "
                  "(5, NULL, 59, 1, 'never closed')")
    ex.close()
    summary = loopscope.analyze(ex.path)
    assert summary["trace"]["skipped"] == {"user_annotation": 1}
    assert "never closed" not in {r["name"] for r in summary["ranges"]}


def test_multi_device_export_and_device_option(tmp_path):
    ex = Export(tmp_path / "two.sqlite")
    corr = 0
    for device in (0, 1):
        t = 10_000 * (device + 1)
        for k in range(5):
            corr += 1
            ex.launch(t, corr)
            ex.kernel(t + 2_000, t + 4_000, corr, device=device, stream=7 + device)
            t += (3_000, 30_000, 80_000)[k % 3]
    ex.close()
    both = loopscope.analyze(ex.path)
    check_summary(both, figures(ex.ops, ex.launches, []))
    one = loopscope.analyze(ex.path, device=1)
    check_summary(one, figures([o for o in ex.ops if o[0] == 1], ex.launches, []))


def test_kernel_geometry_and_gpu_facts_give_fill(tmp_path):
    """gridX/Y/Z, blockX/Y/Z, registersPerThread and static + dynamic shared
    memory of each kernel row against TARGET_INFO_GPU's SM figures (threads
    per SM: maxWarpsPerSm x threadsPerWarp) give the fill, as plain Python
    computes it here; rows without geometry, or with values that cannot be
    one (NULL block, text, a block of 2048), keep an unknown fill and are
    counted, never an error."""
    ex = Export(tmp_path / "g.sqlite", tables=set(SCHEMA_TABLES) - {"TARGET_INFO_GPU"})
    ex.db.execute("CREATE TABLE TARGET_INFO_GPU (vmId INT, id INT, name TEXT, smCount INT, "
                  "cuDevice INT, maxShmemPerSm INT, maxRegistersPerSm INT, threadsPerWarp INT, "
                  "maxWarpsPerSm INT, maxBlocksPerSm INT)")
    ex.db.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, 0, 'NVIDIA H200', 132, 0, 233472, "
                  "65536, 32, 64, 32)")
    for column in ("staticSharedMemory", "dynamicSharedMemory"):
        ex.db.execute(f"ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN {column} INT")
    shapes = [  # (grid, block, registers, static, dynamic shared), and its fate
        (((64, 1, 1), (256, 1, 1), 32, 0, 0), "ok"),
        (((4, 22, 1), (384, 1, 1), 168, 200_000, 31_868), "ok"),
        (((4096, 2, 1), (256, 1, 1), 40, 1_024, 0), "ok"),
        (((1, 1, 1), (33, 1, 1), 255, 0, None), "ok"),          # no dynamic: shared unknown
        (((None, None, None), (None, None, None), None, None, None), "missing"),
        (((64, 1, 1), (None, 1, 1), 32, 0, 0), "bad"),           # a side missing
        (((64, 1, 1), (2048, 1, 1), 32, 0, 0), "bad"),
        ((("many", 1, 1), (256, 1, 1), 32, 0, 0), "bad"),        # text in an INT column
        (((64, 1, 1), (256, 1, 1), 32, -8, 0), "bad"),
    ]
    sid = ex.string("void k(float*)")
    kernels = []
    for i, ((grid, block, regs, static, dynamic), fate) in enumerate(shapes):
        start, end = 10_000 * i, 10_000 * i + 1_000 * (i + 1)
        ex.db.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, "
            "correlationId, demangledName, shortName, gridX, gridY, gridZ, blockX, blockY, "
            "blockZ, registersPerThread, staticSharedMemory, dynamicSharedMemory) VALUES "
            "(?,?,0,1,7,?,?,?,?,?,?,?,?,?,?,?,?)",
            (start, end, i + 1, sid, sid, *grid, *block, regs, static, dynamic))
        shared = static + dynamic if dynamic is not None else 0
        fill = fill_rule.fill_of(grid, block, regs, shared, sms=132, threads_per_sm=64 * 32,
                                 blocks_per_sm=32, regs_per_sm=65536,
                                 shared_per_sm=233472) if fate == "ok" else None
        kernels.append((end - start, fill))
    ex.close()
    summary = loopscope.analyze(ex.path)
    fill_pct, known_pct = fill_rule.weighted_fill_pct(kernels)
    assert summary["gpu"]["fill_pct"] == pytest.approx(fill_pct, abs=0.01)
    assert summary["gpu"]["fill_known_pct"] == pytest.approx(known_pct, abs=0.01)
    (device,) = summary["gpu"]["devices"]
    assert (device["name"], device["sm_count"], device["max_threads_per_sm"]) == \
        ("NVIDIA H200", 132, 2048)
    fates = [f for _, f in shapes]
    geometry = summary["trace"]["kernel_geometry"]
    assert (geometry["kernels"], geometry["missing"], geometry["bad"]) == \
        (len(fates), fates.count("missing"), fates.count("bad"))
    assert "block side" in geometry["why"]


def test_gpu_facts_that_cannot_be_used_leave_fill_unknown(tmp_path):
    ex = seed_style_export(tmp_path / "r.sqlite", steps=1)
    ex.db.execute("DROP TABLE TARGET_INFO_GPU")
    ex.db.execute("CREATE TABLE TARGET_INFO_GPU (cuDevice INT, name TEXT, smCount INT, "
                  "maxWarpsPerSm INT, threadsPerWarp INT)")
    ex.db.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA H200', 'many', 64, 32.5)")
    ex.close()
    summary = loopscope.analyze(ex.path)
    (device,) = summary["gpu"]["devices"]
    assert (device["sm_count"], device["max_threads_per_sm"]) == (None, None)
    assert summary["trace"]["device_facts_not_understood"] == 2
    assert summary["gpu"]["fill_pct"] is None and summary["gpu"]["fill_known_pct"] == 0.0
    assert summary["trace"]["kernel_geometry"]["missing"] == 0  # the kernels have their grids


@pytest.mark.parametrize("table, column, value, shown", [
    ("CUPTI_ACTIVITY_KIND_KERNEL", "start", "12:00", "a text value ('12:00')"),
    ("CUPTI_ACTIVITY_KIND_KERNEL", "end", 1.5, "a real value (1.5)"),
    ("CUPTI_ACTIVITY_KIND_KERNEL", "demangledName", "gemm", "a text value ('gemm')"),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "correlationId", b"\x01", "a blob value (X'01')"),
    ("StringIds", "value", b"\xff", "a blob value (X'FF')"),
    ("NVTX_EVENTS", "eventType", "push", "a text value ('push')"),
])
def test_a_value_of_another_type_is_a_trace_error_naming_its_column(tmp_path, table, column,
                                                                    value, shown):
    """Text, reals or blobs where the reader wants integers (times, ids, the
    id of a name) or text (a name): a TraceError naming the file, the table,
    the column and the value, never a TypeError from inside."""
    ex = seed_style_export(tmp_path / "r.sqlite", steps=1)
    ex.db.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = 1", (value,))
    ex.close()
    with pytest.raises(loopscope.TraceError) as info:
        loopscope.analyze(ex.path)
    assert str(info.value) == (
        f"{ex.path}: table {table} column {column} holds {shown} where "
        f"{'text' if column == 'value' else 'an integer'} is expected: not an Nsight Systems "
        "export loopscope can read")


def test_a_time_beyond_the_records_is_skipped_and_counted(tmp_path):
    """A kernel ending 2**62 ns after zero cannot be held (times stay within
    2**61 ns): it is skipped and counted under its class, not lost."""
    ex = Export(tmp_path / "k.sqlite", tables={"StringIds", "META_DATA_EXPORT",
                                               "CUPTI_ACTIVITY_KIND_KERNEL"})
    for i, (a, b) in enumerate([(1_000, 2_000), (2_500, 2**62), (90_000, 91_000)]):
        ex.kernel(a, b, i + 1)
    ex.close()
    summary = loopscope.analyze(ex.path)
    assert summary["gpu"]["kernels"] == 2
    assert summary["trace"]["skipped"] == {"kernel": 1}
    assert "2**61" in summary["trace"]["skip_reasons"]["kernel"]


@pytest.mark.parametrize("strings", ["missing", "empty"])
def test_an_export_whose_names_are_gone_names_string_ids(tmp_path, strings):
    """Issue 41: without StringIds the 8 runtime calls read as 0 syncs, the
    steps were lost and --max-syncs 0 passed."""
    ex = seed_style_export(tmp_path / "r.sqlite", steps=2)
    calls = ex.db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    assert calls == 2 * 3 * 2 + 2  # two launches per MLP, a sync per step
    ex.db.execute("DROP TABLE StringIds" if strings == "missing" else "DELETE FROM StringIds")
    ex.close()
    state = "has no StringIds table" if strings == "missing" else "has an empty StringIds table"
    with pytest.raises(TraceError, match=f"r.sqlite: {state}, which names the rows of "
                                         "CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_KERNEL, "
                                         "NVTX_EVENTS"):
        loopscope.analyze(ex.path)
    done = subprocess.run([sys.executable, "-m", "loopscope", "analyze", str(ex.path),
                           "--max-syncs", "0"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and state in done.stderr and "Traceback" not in done.stderr


def test_an_export_that_names_nothing_through_string_ids_needs_none(tmp_path):
    ex = Export(tmp_path / "k.sqlite", tables={"META_DATA_EXPORT", "NVTX_EVENTS"})
    ex.nvtx(1_000, 50_000, "Step_0")  # its text in the row itself
    ex.close()
    assert len(loopscope.analyze(ex.path)["steps"]) == 1
