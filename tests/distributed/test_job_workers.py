"""Issue 41, item 0: the processes that read a folder of per-rank traces.
`loopscope.analyze(FOLDER)` from the most ordinary script -- no
`if __name__ == "__main__":` guard, or a script read from stdin -- reads the
job (the workers run nothing of the caller's), and a worker that dies names
the file, its rank and the cause."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

import loopscope
from loopscope.readers import _job
from loopscope.readers._sniff import TraceError

from rank_traces import write_job

SCRIPT = """
import loopscope
s = loopscope.analyze({folder!r}, workers=2, progress=False)
print("ranks read:", [c["rank"] for c in s["ranks"]], s["distributed"]["gather"])
"""


@pytest.fixture(scope="module")
def job_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("job")
    write_job(folder, 3, 2, {})
    return folder


def expected_line(world):
    return f"ranks read: {list(range(world))} read from {world} trace files"


def test_a_script_without_a_main_guard_reads_a_folder(job_folder, tmp_path):
    script = tmp_path / "no_guard.py"
    script.write_text(SCRIPT.format(folder=str(job_folder)))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # once: a worker that re-ran the script would print the line again (or break the pool)
    assert done.stdout.splitlines() == [expected_line(3)]
    assert "Traceback" not in done.stderr


def test_a_script_on_stdin_reads_a_folder(job_folder, tmp_path):
    done = subprocess.run([sys.executable, "-"], input=SCRIPT.format(folder=str(job_folder)),
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [expected_line(3)]


def test_what_a_worker_prints_does_not_spoil_its_result(job_folder, monkeypatch):
    # the reader prints on stdout (as a library it calls might): the result still comes back
    tail = "from loopscope.readers._job import _worker_main; _worker_main(task)"
    assert _job._WORKER_BOOT.endswith(tail)
    noisy = _job._WORKER_BOOT.replace(tail, (
        "from loopscope.readers import _job as j; read = j.read_rank; "
        "j.read_rank = lambda *a: (print('noise from the reader'), read(*a))[1]; "
        "j._worker_main(task)"))
    monkeypatch.setattr(_job, "_WORKER_BOOT", noisy)
    s = loopscope.analyze(job_folder, workers=2, progress=False)
    assert [c["rank"] for c in s["ranks"]] == [0, 1, 2]


def test_a_worker_that_dies_names_its_file_rank_and_cause(job_folder, monkeypatch):
    kill = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    monkeypatch.setattr(_job, "_WORKER_BOOT", kill)
    with pytest.raises(TraceError) as e:
        loopscope.analyze(job_folder, workers=2, progress=False)
    text = str(e.value)
    assert "rank" in text and ".json.gz (rank " in text
    assert "was killed by SIGKILL" in text and "out-of-memory" in text


def test_a_worker_that_exits_names_its_status_and_last_words(job_folder, monkeypatch):
    code = "import sys; sys.stderr.write('cannot go on\\n'); sys.exit(7)"
    monkeypatch.setattr(_job, "_WORKER_BOOT", code)
    with pytest.raises(TraceError, match=r"rank\d\.json\.gz \(rank \d\): the process reading it "
                                         r"exited with status 7 before giving a result; its "
                                         r"last words: cannot go on"):
        loopscope.analyze(job_folder, workers=2, progress=False)


def test_the_command_line_says_which_worker_died(job_folder, tmp_path):
    # the CLI in a child whose worker boot is replaced: exit 2 with the cause, no traceback
    runner = textwrap.dedent(f"""
        import sys
        from loopscope.readers import _job
        _job._WORKER_BOOT = "import os; os._exit(9)"
        from loopscope.__main__ import main
        sys.exit(main(["analyze", {str(job_folder)!r}]))
    """)
    done = subprocess.run([sys.executable, "-c", runner], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "exited with status 9 before giving a result" in done.stderr
    assert "Traceback" not in done.stderr


def test_signal_names_are_those_of_the_platform():
    # the name in the message is the platform's own for the number (not a table of ours)
    assert signal.Signals(signal.SIGKILL).name == "SIGKILL"
    msg = _job._died(_job.Path("t/rank5.json"), -int(signal.SIGTERM), b"")
    assert msg == "t/rank5.json (rank 5): the process reading it was killed by SIGTERM " \
                  "before giving a result"


# -- item 10: traces that cannot be of one job ---------------------------------------------
def test_ranks_far_apart_are_named_as_not_one_job(tmp_path):
    from rank_traces import PERIOD_NS

    steps = 2
    window = steps * PERIOD_NS - 1_000_000  # a rank's steps: ProfilerStep#0 start to the last end
    days = 630 * 86_400 * 10**9
    write_job(tmp_path, 2, steps, {}, clock={1: window + days})
    s = loopscope.analyze(tmp_path, workers=1, progress=False)
    said = ("rank 1's steps begin 630.0 days after rank 0's end, by their traces' clocks: they "
            "cannot be of one job")
    assert s["job"]["apart"].startswith(said)
    text = loopscope.views._report.format_report(s)
    assert f"WARNING: {said}" in text
    ranks_file = tmp_path.parent / f"{tmp_path.name}.ranks.json"
    _job.write_ranks(str(ranks_file), s)
    merged = _job.merge_files([ranks_file])
    assert merged["job"]["apart"].startswith(said)


@pytest.mark.parametrize("gap_s, named", [(59, False), (61, True)])
def test_the_one_job_limit_on_each_side(tmp_path, gap_s, named):
    from rank_traces import PERIOD_NS

    steps = 2
    window = steps * PERIOD_NS - 1_000_000
    write_job(tmp_path, 2, steps, {}, clock={1: window + gap_s * 10**9})
    s = loopscope.analyze(tmp_path, workers=1, progress=False)
    assert (s["job"]["apart"] is not None) is named
    if named:
        assert s["job"]["apart"].startswith("rank 1's steps begin 61.0 s after rank 0's end")


def test_merge_json_is_read_by_diff(tmp_path):
    folder = tmp_path / "job"
    write_job(folder, 2, 2, {})
    ranks = tmp_path / "r.json"
    assert _job.write_ranks(str(ranks), loopscope.analyze(folder, workers=1,
                                                          progress=False)) is None
    out = tmp_path / "m.json"
    env_run = [sys.executable, "-m", "loopscope"]
    merged = subprocess.run(env_run + ["merge", str(ranks), "--json", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert merged.returncode == 0, merged.stderr
    assert merged.stdout.startswith("loopscope: the ranks of a job")  # the ranks' view
    done = subprocess.run(env_run + ["diff", str(out), str(out)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"loopscope diff: {out} -> {out}" in done.stdout


def test_without_an_interpreter_to_start_the_ranks_are_read_here(job_folder, monkeypatch):
    # an embedded Python (sys.executable empty) cannot start workers: read in-process
    monkeypatch.setattr(sys, "executable", "")
    monkeypatch.setattr(_job, "_WORKER_BOOT", "raise SystemExit(3)")  # never used
    s = loopscope.analyze(job_folder, workers=2, progress=False)
    assert [c["rank"] for c in s["ranks"]] == [0, 1, 2]


def test_a_worker_that_cannot_be_started_is_said(job_folder, monkeypatch):
    def refuse(*args, **kwargs):
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(_job.subprocess, "Popen", refuse)
    with pytest.raises(TraceError, match=r"rank\d\.json\.gz: no process could be started to "
                                         r"read it \(Resource temporarily unavailable\); "
                                         r"--workers 1 reads the ranks one by one"):
        loopscope.analyze(job_folder, workers=2, progress=False)
