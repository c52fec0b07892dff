"""loopscope.watch()'s dumps: one folder per breach with the report, the
recordings, the Perfetto trace and the window (breaching step marked), one
line on stderr; the rate limit and the caps on both sides; a full disk and
a read-only folder (the writer made to fail as they do: this box runs as
root, and has no tiny tmpfs); w.capture(); and nothing raising into the job."""
from __future__ import annotations

import errno
import inspect
import json
import os

import pytest

import loopscope
import watch_loop
from loopscope.watching import _dumps as _watch_dump
from loopscope.watching import _watch

FILES = {"README.txt", "breach.json", "window.json", "report.txt", "profile.loopscope.json.gz",
         "trace.json", "breach_block_report.txt", "breach_block.loopscope.json.gz"}
SYNC_LINE = inspect.getsourcelines(watch_loop.one_sync)[1] + 1  # the fake sync's line


def watched(tmp_path, **options):
    options = {"dump_dir": tmp_path / "dumps", "warmup_steps": 0, "block_steps": 4,
               "p99_factor": None, "step_budget_ms": 10, "profile_steps": 2, **options}
    return loopscope.watch(**options)


def test_a_breach_writes_one_whole_dump(tmp_path, monkeypatch, capsys):
    clock = watch_loop.install(monkeypatch)
    host = [1.0] * 6 + [50.0] + [1.0] * 8
    syncs = [0] * 6 + [1] + [0] * 8
    with watched(tmp_path) as w:
        watch_loop.run(w, clock, host, syncs=syncs)
    assert len(w.dumps) == 1 and os.path.basename(w.dumps[0]).endswith("-step6")
    assert set(os.listdir(w.dumps[0])) == FILES
    assert os.listdir(tmp_path / "dumps") == [os.path.basename(w.dumps[0])]  # no temporary left
    breach = json.loads(open(os.path.join(w.dumps[0], "breach.json")).read())
    assert breach["step"] == 6 and breach["profiled_steps"] == [7, 8]
    assert breach["rules"] == ["step_budget_ms: host 50.000 ms > budget 10 ms"]
    assert [(s["file"], s["line"]) for s in breach["sync_sites"]] == [(watch_loop.__file__,
                                                                       SYNC_LINE)]
    window = json.loads(open(os.path.join(w.dumps[0], "window.json")).read())
    assert [r["step"] for r in window["rows"] if r["breaching"]] == [6] == [window["breaching_step"]]
    assert [r["profile"] for r in window["rows"] if r["step"] in (7, 8)] == ["full", "full"]
    readme = open(os.path.join(w.dumps[0], "README.txt")).read()
    assert "step 6" in readme and f"{watch_loop.__file__}:{SYNC_LINE}" in readme
    assert "Step_6" in open(os.path.join(w.dumps[0], "breach_block_report.txt")).read()
    assert loopscope.load(os.path.join(w.dumps[0], "profile.loopscope.json.gz")).summary()[
        "steps"][0]["index"] == 7
    trace = json.loads(open(os.path.join(w.dumps[0], "trace.json")).read())
    assert trace["otherData"]["producer"] == "loopscope"
    lines = [l for l in capsys.readouterr().err.splitlines() if l.startswith("loopscope.watch")]
    assert len(lines) == 1 and "step 6" in lines[0] and w.dumps[0] in lines[0]


def test_rate_limit_both_sides():
    now = [100.0]
    dumps = _watch_dump.Dumps("unused", 10, 1 << 30, 60.0, clock=lambda: now[0])
    assert dumps.refusal(forced=False) is None
    dumps.last_at = 100.0
    now[0] = 100.0 + 60.0 - 0.001
    assert dumps.refusal(forced=False) == "rate_limit"
    assert dumps.refusal(forced=True) is None           # w.capture() / SIGUSR1 pass it
    now[0] = 100.0 + 60.0
    assert dumps.refusal(forced=False) is None


def test_rate_limited_breaches_are_counted_not_dumped(tmp_path, monkeypatch):
    clock = watch_loop.install(monkeypatch)
    host = [1.0] * 4 + [50.0] + [1.0] * 7 + [50.0] + [1.0] * 7
    with watched(tmp_path, min_dump_interval_s=3600) as w:
        watch_loop.run(w, clock, host)
    assert w.breach_count == 2 and len(w.dumps) == 1
    assert w.summary()["dumps_skipped"]["rate_limit"] == 1
    assert [b["dump"] for b in w.breaches][1] == "not written: rate_limit"


@pytest.mark.parametrize("max_dumps", [0, 1, 2])
def test_max_dumps_both_sides(tmp_path, monkeypatch, max_dumps):
    clock = watch_loop.install(monkeypatch)
    host = ([1.0] * 4 + [50.0] + [1.0] * 7) * 2
    with watched(tmp_path, min_dump_interval_s=0, max_dumps=max_dumps) as w:
        watch_loop.run(w, clock, host)
    assert len(w.dumps) == min(2, max_dumps)
    assert w.summary()["dumps_skipped"]["max_dumps"] == 2 - min(2, max_dumps)


def test_max_dump_mb_removes_a_dump_that_would_pass_it(tmp_path, monkeypatch):
    clock = watch_loop.install(monkeypatch)
    with watched(tmp_path, max_dump_mb=1 / 1024) as w:    # 1 KiB: less than any dump
        watch_loop.run(w, clock, [1.0] * 4 + [50.0] + [1.0] * 7)
    assert w.dumps == [] and w.summary()["dumps_skipped"]["max_bytes"] == 1
    assert os.listdir(tmp_path / "dumps") == []


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_a_failing_disk_is_said_once_and_the_job_goes_on(tmp_path, monkeypatch, capsys, code):
    clock = watch_loop.install(monkeypatch)

    def full(path, writer):
        raise OSError(code, os.strerror(code), path)

    monkeypatch.setattr(_watch_dump, "_write_file", full)
    host = ([1.0] * 4 + [50.0] + [1.0] * 7) * 2
    with watched(tmp_path, min_dump_interval_s=0) as w:
        watch_loop.run(w, clock, host)
    assert w.dumps == [] and w.summary()["dumps_skipped"]["write_failed"] == 2
    assert [r["step"] for r in w.steps()] == list(range(len(host)))   # every step kept
    said = [l for l in capsys.readouterr().err.splitlines() if "cannot write dumps" in l]
    assert len(said) == 1 and os.strerror(code) in said[0]
    assert os.listdir(tmp_path / "dumps") == []                       # nothing half-written


def test_capture_arms_the_same_dump(tmp_path, monkeypatch):
    clock = watch_loop.install(monkeypatch)
    with watched(tmp_path, step_budget_ms=None, min_dump_interval_s=3600) as w:
        watch_loop.run(w, clock, [1.0] * 5)
        w.capture(steps=3)
        watch_loop.run(w, clock, [1.0] * 6)
    assert len(w.dumps) == 1
    breach = json.loads(open(os.path.join(w.dumps[0], "breach.json")).read())
    assert breach["source"] == "capture" and breach["profiled_steps"] == [6, 8]
    with pytest.raises(ValueError, match="steps must be between 1"):
        w.capture(steps=0)


def test_an_internal_failure_never_reaches_the_job(tmp_path, monkeypatch, capsys):
    clock = watch_loop.install(monkeypatch)

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(_watch.Watch, "_process", broken)
    with watched(tmp_path) as w:
        watch_loop.run(w, clock, [1.0] * 12 + [50.0] + [1.0] * 3)
    assert w.summary()["error"] == "RuntimeError: boom"
    rows = w.steps()
    assert rows[-1]["step"] == 15 and rows[-1]["profile"] == "host"
    assert sum("internal error" in l for l in capsys.readouterr().err.splitlines()) == 1
    assert not loopscope._core.active()
