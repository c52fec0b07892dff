"""Issue 25: hostile files and paths.  Every reader is bounded (a cap on the
inflated text of a saved summary or recording, on a Kineto trace's inflated
content, on one Kineto event and one name), every entry point checks a path
before it opens it (one helper, _inputs), nothing blocks on a FIFO, the
command line exits 2 for any input it cannot read, the counter cache never
stops a run, recordings carry a checksum, and nsys joins read each event
once.

The bombs (a small .json.gz that inflates to gigabytes) run in a child
process under an address-space limit of 1 GiB: each must end in a
TraceError naming the file (under ASan, which reserves terabytes of shadow
memory, without the limit)."""
from __future__ import annotations

import gzip
import json
import os
import random
import sqlite3
import subprocess
import sys
import textwrap
import time
import warnings
import zlib
from contextlib import contextmanager
from pathlib import Path

import pytest

import loopscope
from loopscope import _core, _testhooks
from loopscope.live import _settings
from loopscope.files import _inputs, _recording
from loopscope.__main__ import main

pytest_plugins = ["pytester"]
PYTHON_DIR = str(Path(loopscope.__file__).resolve().parent.parent)
UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")
MiB, GiB = 1 << 20, 1 << 30


# -- helpers -------------------------------------------------------------------
RESCUER = """
import os, sys, time
time.sleep(2.0)
try:  # succeeds only while a reader has the FIFO open: one blocked in open()
    os.close(os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK))
    print("rescued a reader", flush=True)
except OSError:
    pass
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)  # frees a writer blocked in open()
time.sleep(0.3)
try:
    if os.read(fd, 1 << 16):
        print("rescued a writer", flush=True)
except BlockingIOError:  # a writer has it open, with nothing written yet
    print("rescued a writer", flush=True)
os.close(fd)
"""


@contextmanager
def rescued_fifo(path: Path):
    """A FIFO at `path`, with a process that opens its other end after 2 s
    so that a reader or writer blocked on it (the bug) is set free instead
    of hanging the suite (a process, not a thread: a C call blocked in
    open() may hold the GIL); yields a list that holds True when it had to."""
    os.mkfifo(path)
    rescuer = subprocess.Popen([sys.executable, "-c", RESCUER, str(path)],
                               stdout=subprocess.PIPE, text=True)
    rescued: list[bool] = []
    try:
        yield rescued
    finally:
        if rescuer.poll() is None:
            rescuer.kill()
        out, _ = rescuer.communicate()
        rescued += [True] * out.count("rescued")


def bomb(prefix: bytes, fill: bytes, gib: float, suffix: bytes = b"") -> bytes:
    """A gzip file of a few MB whose content is `prefix`, then `gib` GiB of
    `fill`, then `suffix`: one 1 MiB block of fill, deflated after a full
    flush, is the same bytes every time, so it is repeated as it is (the
    trailer's CRC is the first block's: every reader stops long before it)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = c.compress(prefix) + c.flush(zlib.Z_FULL_FLUSH)
    block = fill * MiB
    c.compress(block)
    c.flush(zlib.Z_FULL_FLUSH)  # the first block differs (no history yet): made, dropped
    same = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    return head + same * int(gib * 1024) + c.compress(suffix) + c.flush()


def run_child(code: str, env: dict[str, str] | None = None, timeout: float = 60):
    """`code` in a fresh interpreter under RLIMIT_AS = 1 GiB (without it
    under ASan, whose shadow memory no such limit holds); its stdout."""
    limit = "" if UNDER_ASAN else \
        "import resource\nresource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
    script = limit + textwrap.dedent(code)
    full_env = dict(os.environ, PYTHONPATH=PYTHON_DIR, CUDA_VISIBLE_DEVICES="", **(env or {}))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=full_env, timeout=timeout)
    assert "MemoryError" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    return done.stdout


def cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR, CUDA_VISIBLE_DEVICES="",
               PYTHONWARNINGS="ignore::RuntimeWarning")
    return subprocess.run([sys.executable, "-m", "loopscope", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def kineto_doc(kernel_name: str = "void k<float>(float*)") -> dict:
    """Two steps, each launching one kernel, as torch.profiler writes them."""
    events = []
    for s in range(2):
        t = 10.0 + s * 100.0
        events += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1,
                    "tid": 1, "ts": t, "dur": 90.0},
                   {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                    "tid": 1, "ts": t + 1, "dur": 2.0, "args": {"correlation": 10 + s}},
                   {"ph": "X", "cat": "kernel", "name": kernel_name, "pid": 0, "tid": 7,
                    "ts": t + 5, "dur": 20.0,
                    "args": {"correlation": 10 + s, "device": 0, "stream": 7}}]
    return {"schemaVersion": 1, "baseTimeNanoseconds": 1_700_000_000_000_000_000,
            "traceEvents": events}


def saved_summary(folder: Path) -> Path:
    """A saved summary (as `run --json` writes it) of a small trace."""
    trace = folder / "t.json"
    trace.write_text(json.dumps(kineto_doc()))
    path = folder / "s.json"
    path.write_text(json.dumps(loopscope.analyze(trace), indent=1))
    return path


# -- paths: one check, before any open ------------------------------------------
def test_compare_with_a_fifo_refuses_it_without_blocking(tmp_path):
    summary = saved_summary(tmp_path)
    fifo = tmp_path / "after.json"
    with rescued_fifo(fifo) as rescued:
        t0 = time.monotonic()
        with pytest.raises(loopscope.TraceError) as caught:
            loopscope.compare(summary, fifo)
        took = time.monotonic() - t0
    assert not rescued and took < 1.5, "compare() blocked on the FIFO"
    assert str(fifo) in str(caught.value) and "FIFO" in str(caught.value)


@pytest.mark.parametrize("entry", ["analyze", "load", "compare", "recording", "save",
                                   "export"])
def test_every_entry_point_refuses_a_fifo_without_blocking(tmp_path, entry):
    summary = saved_summary(tmp_path)
    fifo = tmp_path / "x.json"
    prof = loopscope.load(tmp_path / "t.json")
    calls = {"analyze": lambda: loopscope.analyze(fifo), "load": lambda: loopscope.load(fifo),
             "compare": lambda: loopscope.compare(fifo, summary),
             "recording": lambda: _recording.load(fifo),
             "save": lambda: prof.save_recording(fifo), "export": lambda: prof.export_trace(fifo)}
    with rescued_fifo(fifo) as rescued:
        with pytest.raises(loopscope.TraceError, match="FIFO"):
            calls[entry]()
    assert not rescued, f"{entry} blocked on the FIFO"


def test_each_refusal_names_the_path_and_what_it_is(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    os.mkfifo(tmp_path / "fifo")
    cases = {tmp_path: "is a directory", tmp_path / "fifo": "is a FIFO",
             Path("/dev/null"): "is a character device", tmp_path / "loop": "is a symlink loop",
             tmp_path / ("a" * 5000): "the path is too long",
             tmp_path / "missing.json": "no such file"}
    for path, what in cases.items():
        with pytest.raises(loopscope.TraceError) as caught:
            _inputs.check_input(path)
        assert str(caught.value) == f"{path}: {what}" or str(caught.value).startswith(
            f"{path}: {what}"), caught.value
        # the command line says the same, exit 2 (before: "no such file" for all)
        with pytest.raises(SystemExit) as exited:
            main(["diff", str(path), str(path)])
        assert exited.value.code == 2


def test_diff_says_what_each_unreadable_path_is(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for path, what in ((tmp_path, "is a directory"), (tmp_path / "fifo", "is a FIFO"),
                       (tmp_path / "loop", "is a symlink loop")):
        done = cli("diff", str(path), str(path))
        assert done.returncode == 2, done.stderr
        assert f"cannot read {str(path)!r}: {what}" in done.stderr
        assert "no such file" not in done.stderr


def test_an_output_path_that_is_no_file_is_refused_by_name(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    assert _inputs.output_problem(tmp_path / "fifo").startswith("a FIFO")
    assert _inputs.output_problem(tmp_path) == "that is a folder"
    assert _inputs.output_problem("/dev/null").startswith("a character device")
    assert _inputs.output_problem(tmp_path / "new.json") is None


BASELINE_TESTS = """
import pytest
from synthetic_loop import run_loop


@pytest.mark.loopscope(baseline="folder.json")
def test_folder(loopscope_profile, test_clock):
    run_loop(loopscope_profile)


@pytest.mark.loopscope(baseline="fifo.json")
def test_fifo(loopscope_profile, test_clock):
    run_loop(loopscope_profile)
"""


def test_a_baseline_that_is_a_folder_or_a_fifo_fails_by_name(pytester, monkeypatch):
    from test_pytest_plugin import CONFTEST, plugin_args

    monkeypatch.setenv("PYTHONPATH", PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    pytester.makepyfile(synthetic_loop=(Path(__file__).parent.parent / "synthetic_loop.py")
                        .read_text())
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_base=BASELINE_TESTS)
    (pytester.path / "folder.json").mkdir()
    with rescued_fifo(pytester.path / "fifo.json") as rescued:
        result = pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider")
    assert not rescued, "the baseline check blocked on the FIFO"
    result.assert_outcomes(failed=2)  # before: "does not exist" for both
    result.stdout.fnmatch_lines_random([
        "*cannot compare with the baseline *folder.json: cannot read *folder.json: is a "
        "directory*",
        "*cannot compare with the baseline *fifo.json: cannot read *fifo.json: is a FIFO*"])


def test_run_refuses_a_script_that_is_no_file_by_name(tmp_path):
    os.mkfifo(tmp_path / "loop.py")
    done = cli("run", str(tmp_path / "loop.py"))  # before: "no such file"
    assert done.returncode == 2
    assert f"cannot run {str(tmp_path / 'loop.py')!r}: is a FIFO" in done.stderr


# -- exit codes and messages --------------------------------------------------
def test_a_summary_nested_100000_deep_exits_2_without_a_traceback(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"schema": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    done = cli("diff", str(deep), str(deep))
    assert done.returncode == 2, done.stderr  # before: 1, the "regressed" code
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    assert f"{deep}: its JSON is nested too deeply" in done.stderr


def test_exit_called_twice_says_so_and_keeps_the_profile(test_clock):
    prof = loopscope.profile(trace=False, syncs=False, metrics=False)
    with prof:
        with prof.step():
            pass
    before = prof.summary()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert prof.__exit__(None, None, None) is False
    texts = [str(w.message) for w in caught]
    assert len(texts) == 1 and "called again" in texts[0]
    assert not any("stopping the profile failed" in t for t in texts)
    assert prof.summary() == before and len(before["steps"]) == 1


# -- the counter cache never stops a run ----------------------------------------
@pytest.mark.parametrize("variable", ["LOOPSCOPE_CACHE_DIR", "XDG_CACHE_HOME"])
def test_a_cache_path_over_1023_bytes_turns_the_cache_off_with_a_note(monkeypatch, tmp_path,
                                                                       variable):
    monkeypatch.delenv("LOOPSCOPE_CACHE_DIR", raising=False)
    long = str(tmp_path) + "/" + "d" * 1100
    monkeypatch.setenv(variable, long)
    monkeypatch.setattr(_settings, "_cache", {})
    with loopscope.profile(trace=False, syncs=False, metrics=False) as prof:  # before: ValueError
        with prof.step():
            pass
    assert len(prof.summary()["steps"]) == 1
    assert _settings.cache_dir() is None
    note = _settings.cache_note()
    assert variable in note and "longer than the 1023" in note


def test_the_cache_path_length_bound_is_exact(monkeypatch, tmp_path):
    base = str(tmp_path) + "/"
    for size, ok in ((1023, True), (1024, False)):
        rest = "d" * (size - len(base))  # in parts of 100: each name under NAME_MAX
        folder = base + "/".join(rest[i:i + 99] for i in range(0, len(rest), 100))
        folder += "d" * (size - len(folder))
        assert len(folder.encode()) == size
        monkeypatch.setenv("LOOPSCOPE_CACHE_DIR", folder)
        monkeypatch.setattr(_settings, "_cache", {})
        assert (_settings.cache_dir() == folder) is ok
        assert (_settings.cache_note() is None) is ok


def test_a_cache_folder_that_is_a_file_turns_the_cache_off(monkeypatch, tmp_path):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("LOOPSCOPE_CACHE_DIR", str(tmp_path / "file"))
    monkeypatch.setattr(_settings, "_cache", {})
    assert _settings.cache_dir() is None and "is not a folder" in _settings.cache_note()


def test_a_fifo_in_place_of_the_cache_file_does_not_block_its_load(tmp_path):
    key = dict(folder=str(tmp_path), chip="GH100", names=["a", "b"], cupti_version=1,
               availability=bytes(range(16)))
    path = Path(_testhooks._pmcache("path", **key))
    with rescued_fifo(path) as rescued:
        found, kept, image, note = _testhooks._pmcache("load", **key)
    assert not rescued, "ls_pmcache_load blocked on the FIFO"
    assert found == -1 and image is None
    assert note == f"the cached PM config {path} is not a regular file (a FIFO, a device or a " \
                   "folder): ignored"


# -- recordings carry a checksum ------------------------------------------------
def small_recording(tmp_path: Path, test_clock, name: str) -> Path:
    with loopscope.profile(trace=False, syncs=False, metrics=False) as prof:
        for _ in range(3):
            with prof.step():
                with loopscope.range("inner"):
                    pass
    return Path(prof.save_recording(tmp_path / name))


def test_a_plain_recording_with_one_flipped_bit_is_refused(tmp_path, test_clock):
    path = small_recording(tmp_path, test_clock, "r.json")
    good = path.read_bytes()
    assert _recording.load(path)["format"] == "loopscope-recording"
    # the checksum is the CRC-32 of the text before it (computed here by zlib)
    body, _, tail = good.rpartition(b',"checksum":"crc32:')
    assert tail == b"%08x\"}" % zlib.crc32(body)
    rng = random.Random(25)
    for at in sorted(rng.sample(range(len(good)), 150)):
        bad = bytearray(good)
        bad[at] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(bad))
        with pytest.raises(loopscope.TraceError) as caught:  # before: 35 of 150 replayed
            _recording.load(path)
        assert str(path) in str(caught.value)


def test_a_plain_recording_without_a_checksum_is_refused_by_name(tmp_path, test_clock):
    path = small_recording(tmp_path, test_clock, "r.json")
    data = json.loads(path.read_bytes())
    del data["checksum"]
    path.write_text(json.dumps(data))
    with pytest.raises(_recording.RecordingError, match="has no checksum"):
        _recording.load(path)
    gz = tmp_path / "old.json.gz"  # gzip has its own CRC: older gzip recordings still load
    gz.write_bytes(gzip.compress(json.dumps(data).encode()))
    assert _recording.load(gz)["names"] == data["names"]


def test_a_gzip_recording_carries_the_checksum_too(tmp_path, test_clock):
    path = small_recording(tmp_path, test_clock, "r.json.gz")
    text = gzip.decompress(path.read_bytes())
    body, _, tail = text.rpartition(b',"checksum":"crc32:')
    assert tail == b"%08x\"}" % zlib.crc32(body)
    assert len(loopscope.load(path).summary()["steps"]) == 3


# -- nsys: duplicate StringIds ids ----------------------------------------------
def test_duplicate_string_ids_do_not_double_the_kernels(tmp_path):
    path = tmp_path / "dup.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")  # no key: ids may repeat
    db.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, "
               "contextId INT, streamId INT, correlationId INT, globalPid INT, "
               "demangledName INT, shortName INT)")
    db.executemany("INSERT INTO StringIds VALUES (?, ?)", [(1, "kb"), (1, "ka"), (2, "other")])
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,0,1,7,?,1,1,1)",
                   [(1_000, 2_000, 1), (5_000, 7_000, 2)])
    db.commit()
    db.close()
    summary = loopscope.analyze(path)
    assert summary["gpu"]["kernels"] == 2  # before: 4, each kernel joined to both names
    assert [k["name"] for k in summary["top_kernels"]] == ["ka"]  # the least value of id 1
    assert summary["trace"]["duplicate_string_ids"] == 1
    assert "StringIds holds 1 ids more than once" in loopscope.load(path).report()


def test_a_long_nsys_name_is_cut_and_says_so(tmp_path):
    n = _core.TRACE_MAX_NAME
    path = tmp_path / "long.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    db.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, "
               "contextId INT, streamId INT, correlationId INT, globalPid INT, "
               "demangledName INT, shortName INT)")
    db.executemany("INSERT INTO StringIds VALUES (?, ?)", [(1, "é" * n), (2, "k" * (n + 1))])
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,0,1,7,?,1,?,?)",
                   [(1_000, 2_000, 1, 1, 1), (5_000, 9_000, 2, 2, 2)])
    db.commit()
    db.close()
    names = {k["name"] for k in loopscope.analyze(path)["top_kernels"]}
    assert names == {"é" * n, "k" * n + f" [name cut: {n + 1} characters]"}


def test_a_recorded_name_over_the_cap_is_cut_when_replayed(tmp_path, test_clock):
    n = _core.TRACE_MAX_NAME
    with loopscope.profile(trace=False, syncs=False, metrics=False) as prof:
        with prof.step():
            with loopscope.range("r" * n):
                pass
            with loopscope.range("é" * n):  # 2 bytes each: cut at n bytes
                pass
    path = prof.save_recording(tmp_path / "long.json.gz")
    names = {r["name"] for r in loopscope.load(path).summary()["ranges"]}
    assert names == {"r" * n, "é" * (n // 2) + f" [name cut: {2 * n} bytes]"}


# -- Kineto: one event, one name, the whole content -------------------------------
def test_a_kineto_name_at_the_cap_is_kept_and_one_byte_over_is_cut(tmp_path):
    n = _core.TRACE_MAX_NAME
    assert n == 65536
    for size, want in ((n, "k" * n), (n + 1, "k" * n + f" [name cut: {n + 1} bytes]")):
        path = tmp_path / f"k{size}.json"
        path.write_text(json.dumps(kineto_doc("k" * size)))
        summary = loopscope.analyze(path)
        assert [k["name"] for k in summary["top_kernels"]] == [want]
        assert summary["gpu"]["kernels"] == 2


def test_a_cut_name_never_splits_a_character(tmp_path):
    n = _core.TRACE_MAX_NAME
    path = tmp_path / "u.json"
    path.write_text(json.dumps(kineto_doc("k" + "é" * n), ensure_ascii=False), encoding="utf-8")
    name = loopscope.analyze(path)["top_kernels"][0]["name"]
    # "k" then 2-byte characters: 65,536 bytes end inside one, so 65,535 are kept
    assert name == "k" + "é" * ((n - 1) // 2) + f" [name cut: {1 + 2 * n} bytes]"


def test_one_kineto_event_at_the_cap_is_held_and_one_byte_over_is_refused():
    cap = _core.TRACE_MAX_UNIT
    assert cap == 64 * MiB
    start = b'{"name":"'
    reader = _core._trace_reader()
    _core._trace_feed(reader, b"[" + start + b"a" * (cap - len(start)), False)  # held: = cap
    with pytest.raises(ValueError) as caught:
        _core._trace_feed(reader, b"a", False)
    assert str(caught.value) == ("the event or top-level member at byte 1 is longer than the cap "
                                 f"of {cap} bytes (64 MiB) for one: refused")
    del reader


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def test_white_space_between_events_is_never_kept():
    reader = _core._trace_reader()
    _core._trace_feed(reader, b"[", False)
    space = b" \n" * (MiB // 2)
    before = rss_mib()
    for _ in range(80):  # 80 MiB of white space: over the one-unit cap, if it were kept
        _core._trace_feed(reader, space, False)
    grew = rss_mib() - before
    _core._trace_feed(reader, b"]", True)
    assert grew < 24, f"the reader holds {grew:.0f} MiB after 80 MiB of white space"


@pytest.mark.parametrize("gz", [False, True])
def test_the_trace_content_cap_is_exact(tmp_path, monkeypatch, gz):
    monkeypatch.setenv("LOOPSCOPE_MAX_TRACE_GB", repr(MiB / GiB))  # a 1 MiB cap
    text = json.dumps(kineto_doc()).encode()
    for size, ok in ((MiB, True), (MiB + 1, False)):
        content = text + b" " * (size - len(text))
        path = tmp_path / f"t{size}.json{'.gz' if gz else ''}"
        path.write_bytes(gzip.compress(content) if gz else content)
        if ok:
            assert loopscope.analyze(path)["gpu"]["kernels"] == 2
        else:
            with pytest.raises(loopscope.TraceError) as caught:
                loopscope.analyze(path)
            assert str(caught.value).startswith(f"{path}: its content passes the cap of "
                                                "1,048,576 bytes")


def test_the_gzip_nsys_content_cap_is_exact(tmp_path, monkeypatch):
    path = tmp_path / "k.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    db.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, "
               "contextId INT, streamId INT, correlationId INT, globalPid INT, "
               "demangledName INT, shortName INT)")
    db.execute("INSERT INTO StringIds VALUES (1, 'k')")
    db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1000, 2000, 0, 1, 7, 1, 1, 1, 1)")
    db.commit()
    db.close()
    size = path.stat().st_size
    gz = tmp_path / "k.sqlite.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    monkeypatch.setenv("LOOPSCOPE_MAX_TRACE_GB", repr(size / GiB))  # the cap: the file's size
    assert loopscope.analyze(gz)["gpu"]["kernels"] == 1
    monkeypatch.setenv("LOOPSCOPE_MAX_TRACE_GB", repr((size - 1) / GiB))
    with pytest.raises(loopscope.TraceError, match=f"^{gz}: its content passes the cap of "
                                                   f"{size - 1:,} bytes"):
        loopscope.analyze(gz)


def test_a_ranks_file_is_read_with_the_json_bounds(tmp_path, monkeypatch):
    from loopscope.readers import _job

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(loopscope.TraceError, match="its JSON is nested too deeply"):
        _job._read_ranks_file(deep)  # before: RecursionError
    big = tmp_path / "big.json.gz"
    big.write_bytes(gzip.compress(b'{"a": "' + b"x" * (2 * MiB) + b'"}'))
    monkeypatch.setenv("LOOPSCOPE_MAX_JSON_MB", "1")
    with pytest.raises(loopscope.TraceError, match="passes the cap of 1,048,576 bytes"):
        _job._read_ranks_file(big)
    (tmp_path / "text.json").write_text("not json")
    with pytest.raises(loopscope.TraceError, match="not a loopscope ranks file"):
        _job._read_ranks_file(tmp_path / "text.json")


# -- saved summaries and recordings: the inflated text ------------------------------
@pytest.mark.parametrize("gz", [False, True])
def test_the_json_text_cap_is_exact(tmp_path, monkeypatch, gz):
    monkeypatch.setenv("LOOPSCOPE_MAX_JSON_MB", "1")
    for size, ok in ((MiB, True), (MiB + 1, False)):
        content = b'{"a": "' + b"x" * (size - 9) + b'"}'
        assert len(content) == size
        path = tmp_path / f"j{size}.json{'.gz' if gz else ''}"
        path.write_bytes(gzip.compress(content) if gz else content)
        if ok:
            assert len(_inputs.read_json(path)["a"]) == size - 9
        else:
            with pytest.raises(loopscope.TraceError) as caught:
                _inputs.read_json(path)
            assert str(caught.value).startswith(
                f"{path}: its JSON text passes the cap of 1,048,576 bytes (1 MiB) at offset "
                "1,048,576")


def test_a_cap_variable_that_is_no_number_is_refused_by_name(tmp_path, monkeypatch):
    path = tmp_path / "a.json"
    path.write_text("{}")
    for value in ("abc", "0", "-1", "inf"):
        monkeypatch.setenv("LOOPSCOPE_MAX_JSON_MB", value)
        with pytest.raises(loopscope.TraceError, match=f"LOOPSCOPE_MAX_JSON_MB: '{value}' is "
                                                       "not a number above 0"):
            _inputs.read_json(path)


# -- the bombs ------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["recording", "summary"])
def test_a_json_gz_bomb_ends_in_a_trace_error(tmp_path, case):
    """3 GiB of one long string inside a recording or a saved summary: the
    default cap (256 MiB of text) stops it."""
    prefix = {"recording": b'{"format":"loopscope-recording","version":2,"names":["',
              "summary": b'{"schema": 1, "note": "'}[case]
    path = tmp_path / f"{case}.json.gz"
    path.write_bytes(bomb(prefix, b"A", 3))
    assert path.stat().st_size < 4 * MiB
    call = ("loopscope.files._recording.load(path)" if case == "recording"
            else "loopscope.compare(path, path)")
    out = run_child(f"""
        import loopscope, loopscope.files._recording
        path = {str(path)!r}
        try:
            {call}
        except loopscope.TraceError as error:
            print("TraceError:", error)
    """)
    assert out.startswith("TraceError:") and str(path) in out
    assert "passes the cap of 268,435,456 bytes (256 MiB) at offset 268,435,456" in out


@pytest.mark.parametrize("case", ["white space in an event", "one long string"])
def test_a_kineto_bomb_in_one_event_ends_at_the_event_cap(tmp_path, case):
    prefix, fill = {"white space in an event": (b'{"traceEvents":[{"ph":"X",', b" "),
                    "one long string": (b'{"traceEvents":[{"name":"', b"A")}[case]
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(bomb(prefix, fill, 3))
    out = run_child(f"""
        import loopscope
        path = {str(path)!r}
        try:
            loopscope.analyze(path)
        except loopscope.TraceError as error:
            print("TraceError:", error)
    """)
    assert out.startswith(f"TraceError: {path}: the event or top-level member at byte 16 is "
                          "longer than the cap of 67108864 bytes (64 MiB) for one: refused"), out


@pytest.mark.skipif(UNDER_ASAN, reason="ASan's quarantine keeps freed chunks: RSS is no measure")
def test_a_kineto_white_space_bomb_keeps_memory_flat(tmp_path):
    """White space between events is never kept: 256 MiB of it inflated
    (the content cap set to that, to keep the test short) moves the peak
    RSS by far less than the white space (before: the buffer held it all)."""
    path = tmp_path / "ws.json.gz"
    path.write_bytes(bomb(b'{"traceEvents":[', b" ", 3))
    out = run_child(f"""
        import resource, loopscope
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            loopscope.analyze({str(path)!r})
        except loopscope.TraceError as error:
            print("TraceError:", error)
        print("grew_kb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
    """, env={"LOOPSCOPE_MAX_TRACE_GB": "0.25"})
    lines = out.splitlines()
    assert lines[0].startswith(f"TraceError: {path}: its content passes the cap of 268,435,456 "
                               "bytes (0.25 GiB)"), out
    grew_mb = int(lines[1].split()[1]) / 1024
    assert grew_mb < 96, f"peak RSS grew {grew_mb:.0f} MB while reading 256 MiB of white space"
