"""Issue 26: a job read afterwards from one trace per rank
(loopscope.analyze(DIR), a list of files, `loopscope analyze DIR`, ranks
files and `loopscope merge`).  Synthetic folders (tests/rank_traces.py)
with a planted straggler and a balanced control: the expected figures come
from the times written, worked out in rank_traces.py and here."""
from __future__ import annotations

import json
import statistics
import subprocess
import sys

import pytest

import loopscope
from loopscope.readers._sniff import TraceError

from rank_traces import GEMM_NS, PERIOD_NS, write_job

STEPS = 4


def expected_waits(p, world, k):
    comm = {r: p["end"][r, k] - p["arrive"][r, k] for r in range(world)}
    least = min(comm.values())
    return [(comm[r] - least) / 1e6 for r in range(world)]


@pytest.fixture(scope="module")
def straggler_job(tmp_path_factory):
    folder = tmp_path_factory.mktemp("job")
    p = write_job(folder, 3, STEPS, {2: 3_000_000})  # rank 2's host 3 ms late every step
    return folder, p


def test_folder_is_read_as_one_job_with_the_straggler(straggler_job):
    folder, p = straggler_job
    s = loopscope.analyze(folder, workers=1, progress=False)
    assert (s["rank"], s["world_size"]) == (0, 3)
    assert [c["rank"] for c in s["ranks"]] == [0, 1, 2]
    skew = s["skew"]
    assert skew["missing"] == [] and skew["not_measured"] == []
    for k, row in enumerate(skew["steps"]):
        arrive = [p["arrive"][r, k] for r in range(3)]
        assert row["late_from"] == "arrival"
        assert row["late_ms"] == pytest.approx((max(arrive) - min(arrive)) / 1e6)
        assert row["last_arrival_rank"] == 2
        assert row["wait_ms"] == pytest.approx(expected_waits(p, 3, k))
    st = skew["straggler"]
    assert (st["rank"], st["last_in_steps"], st["steps_compared"]) == (2, STEPS, STEPS)
    assert st["late_ms"] == pytest.approx(3.0)  # as planted
    # its host called the all-reduce 3 ms later into the step than the others' hosts
    calls = [p["call"][r, 0] - (1_000_000 + 0 * PERIOD_NS) for r in range(3)]
    assert st["host_late_ms"] == pytest.approx((calls[2] - statistics.median(calls[:2])) / 1e6)
    # the others' step: the longer of their host step (19 ms) and GPU time (the gemm and
    # their all-reduce, spinning included)
    host_ms = (PERIOD_NS - 1_000_000) / 1e6
    others = statistics.median(
        [statistics.mean([max(host_ms, (GEMM_NS + p["end"][r, k] - p["arrive"][r, k]) / 1e6)
                          for k in range(STEPS)]) for r in (0, 1)])
    assert st["share_of_step_pct"] == pytest.approx(round(100 * 3.0 / others, 2))
    assert s["diagnosis"]["verdict"] == "COMMUNICATION_WAIT"
    assert s["distributed"]["gather"] == "read from 3 trace files"
    assert s["job"]["rank_from"] == ["distributedInfo"]
    assert "shared by every rank of one host" in s["skew"]["clock"]["method"]
    # the ranks' bases differ by 3 us, their times the other way: aligned, step starts agree
    assert all(row["start_skew_us"] == 0.0 for row in skew["steps"])
    text = loopscope.views._report.format_report(s)
    assert "STRAGGLER: rank 2 is the straggler" in text


def test_each_rank_as_read_alone(straggler_job):
    """Every rank's compact figures are those of its file read alone."""
    folder, _ = straggler_job
    job = loopscope.analyze(folder, workers=2, progress=False)  # a pool of two processes
    for r in range(3):
        alone = loopscope.analyze(folder / f"rank{r}.json.gz", progress=False)
        c = job["ranks"][r]
        assert c["gpu_busy_ms"] == alone["gpu"]["busy_ms"]
        assert c["comm_ms"] == alone["gpu"]["comm_ms"]
        assert [s["gpu_ms"] for s in c["steps"]] == [s["gpu_ms"] for s in alone["steps"]]
        assert [s["comm_ms"] for s in c["steps"]] == [s["comm_ms"] for s in alone["steps"]]
    assert job["job"]["workers"] == 2


def test_balanced_control_names_no_straggler(tmp_path, monkeypatch):
    """Ranks 0.5 ms apart (the spread H100s show with no straggler): balanced, with
    the largest lateness and its share."""
    p = write_job(tmp_path, 2, STEPS, {1: 500_000})
    s = loopscope.analyze([tmp_path / "rank0.json.gz", tmp_path / "rank1.json.gz"], workers=1,
                          progress=False)
    assert s["skew"]["straggler"] is None
    b = s["skew"]["balance"]
    assert (b["rank"], b["late_ms"]) == (1, pytest.approx(0.5))
    host_ms = (PERIOD_NS - 1_000_000) / 1e6  # longer than its GPU time: the step
    others = statistics.mean([max(host_ms, (GEMM_NS + p["end"][0, k] - p["arrive"][0, k]) / 1e6)
                              for k in range(STEPS)])
    assert b["share_of_step_pct"] == pytest.approx(round(100 * 0.5 / others, 2))
    assert s["diagnosis"]["verdict"] != "COMMUNICATION_WAIT"
    assert "BALANCED: the ranks are balanced" in loopscope.views._report.format_report(s)
    monkeypatch.setattr(loopscope.views._html, "_matplotlib", lambda: None)  # tables only
    assert "<b>Balanced:</b> the ranks are balanced: rank 1 arrived last" in \
        loopscope.views._html.render(s)


def test_ranks_from_names_and_missing_ones(tmp_path):
    write_job(tmp_path, 4, STEPS, {}, names="trace_rank-{rank}.json.gz", distributed=False,
              skip=(2,))
    s = loopscope.analyze(tmp_path, workers=1, progress=False)
    assert s["job"]["rank_from"] == ["file name"]
    # no distributedInfo: the world is what the names show (ranks 0-3, 2 absent)
    assert s["world_size"] == 4
    assert s["skew"]["missing"] == [{"rank": 2, "reason": "no trace of it was read"}]
    assert s["ranks"][2] == {"rank": 2, "missing": "no trace of it was read"}


def test_duplicate_ranks_and_unknown_ranks_are_errors(tmp_path):
    write_job(tmp_path, 2, 2, {})
    (tmp_path / "again_rank1.json.gz").write_bytes((tmp_path / "rank1.json.gz").read_bytes())
    with pytest.raises(TraceError, match=r"rank 1 has two traces: .*again_rank1.json.gz and "
                                         r".*rank1.json.gz \(one trace per rank"):
        loopscope.analyze(tmp_path, workers=1, progress=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TraceError, match="a folder with no trace file in it"):
        loopscope.analyze(empty, progress=False)
    other = tmp_path / "other"
    write_job(other, 1, 2, {}, names="run.json.gz", distributed=False)
    with pytest.raises(TraceError, match="which rank it is cannot be told"):
        loopscope.analyze(other, workers=1, progress=False)
    with pytest.raises(ValueError, match="workers must be a whole number >= 1, got 0"):
        loopscope.analyze(tmp_path, workers=0)


def test_cli_folder_ranks_out_and_merge(straggler_job, tmp_path):
    folder, _ = straggler_job
    part = tmp_path / "part"
    write_job(part, 3, STEPS, {2: 3_000_000})  # the same job, split over two "nodes"
    (part / "rank2.json.gz").unlink()
    node2 = tmp_path / "node2"
    node2.mkdir()
    (node2 / "rank2.json.gz").write_bytes((folder / "rank2.json.gz").read_bytes())
    run = [sys.executable, "-m", "loopscope"]
    a = subprocess.run(run + ["analyze", str(part), "--ranks-out", str(tmp_path / "a.json"),
                              "--workers", "1"], capture_output=True, text=True)
    assert a.returncode == 0, a.stderr
    assert "read 2 of 2" in a.stderr  # progress lines off a terminal
    b = subprocess.run(run + ["analyze", str(node2), "--ranks-out", str(tmp_path / "b.json.gz")],
                       capture_output=True, text=True)
    assert b.returncode == 0, b.stderr
    m = subprocess.run(run + ["merge", str(tmp_path / "a.json"), str(tmp_path / "b.json.gz"),
                              "--json", str(tmp_path / "m.json")], capture_output=True, text=True)
    assert m.returncode == 0, m.stderr
    assert "STRAGGLER: rank 2 is the straggler" in m.stdout
    merged = json.loads((tmp_path / "m.json").read_text())
    whole = loopscope.analyze(folder, workers=1, progress=False)
    assert merged["skew"]["straggler"] == whole["skew"]["straggler"]
    assert merged["skew"]["steps"] == whole["skew"]["steps"]
    # the same rank in two ranks files, and a file that is not one: exit 2, named
    bad = subprocess.run(run + ["merge", str(tmp_path / "a.json"), str(tmp_path / "a.json")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "rank 0 is in two ranks files" in bad.stderr
    bad = subprocess.run(run + ["merge", str(folder / "rank0.json.gz")], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "not a loopscope ranks file" in bad.stderr


def test_rank_skew_budget_on_a_folder(straggler_job, tmp_path):
    folder, _ = straggler_job
    run = [sys.executable, "-m", "loopscope", "analyze", str(folder), "--workers", "1"]
    ok = subprocess.run(run + ["--max-rank-skew-us", "10"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr  # step starts agree on the shared clock
    assert "max_rank_skew_us" in ok.stderr


# -- real traces: two ranks of HTA's 128-rank job ------------------------------------
DATA = __import__("pathlib").Path(__file__).resolve().parents[1] / "data"
HTA_RANKS = {0: DATA / "public" / "hta_sampled_rank0.json.gz",
             1: DATA / "ranks" / "hta_sampled_rank1.json.gz"}


def _step_starts_us(path) -> dict[str, float]:
    """ProfilerStep name -> its start (us, as written, plus the base), read
    from the file here."""
    import gzip

    doc = json.loads(gzip.decompress(path.read_bytes()))
    base_us = doc.get("baseTimeNanoseconds", 0) / 1e3
    return {e["name"]: e["ts"] + base_us for e in doc["traceEvents"]
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")}


def test_hta_ranks_read_as_one_job(tmp_path):
    if not HTA_RANKS[0].exists():
        pytest.skip("tests/data/public/hta_sampled_rank0.json.gz comes with the public traces "
                    "(tests/data/public/README.md): not in this checkout")
    for r, src in HTA_RANKS.items():
        (tmp_path / f"rank{r}_{src.name}").write_bytes(src.read_bytes())
    job = loopscope.analyze(tmp_path, workers=2, progress=False)
    assert (job["rank"], job["world_size"]) == (0, 128)  # distributedInfo
    assert job["skew"]["missing"] == [{"rank": r, "reason": "no trace of it was read"}
                                      for r in range(2, 128)]
    text = loopscope.views._report.format_report(job)
    assert "missing: ranks 2-127 no trace of it was read" in text
    assert "2-127  MISSING: no trace of it was read" in text
    alone = {r: loopscope.analyze(p, progress=False) for r, p in HTA_RANKS.items()}
    for r in (0, 1):
        c = job["ranks"][r]
        assert c["gpu_busy_ms"] == alone[r]["gpu"]["busy_ms"]
        assert c["comm_ms"] == alone[r]["gpu"]["comm_ms"]
        assert c["host_ms"] == alone[r]["host_ms"]
        assert [(s["name"], s["gpu_ms"], s["comm_ms"]) for s in c["steps"]] == [
            (s["name"], s["gpu_ms"], s["comm_ms"]) for s in alone[r]["steps"]]
    # this rank 0's own figures are the job's top level
    assert job["gpu"]["busy_ms"] == alone[0]["gpu"]["busy_ms"]
    starts = {r: _step_starts_us(p) for r, p in HTA_RANKS.items()}
    for row in job["skew"]["steps"]:
        comm = [alone[r]["steps"][row["index"]]["comm_ms"] for r in (0, 1)]
        assert row["wait_ms"][:2] == pytest.approx([c - min(comm) for c in comm])
        skew_us = abs(starts[0][row["name"]] - starts[1][row["name"]])
        assert row["start_skew_us"] == pytest.approx(skew_us, abs=1e-3)
    # each rank last in one of the two steps: nobody is named
    assert sorted(r["last_arrival_rank"] for r in job["skew"]["steps"]) == [0, 1]
    assert job["skew"]["straggler"] is None and job["skew"]["balance"]["rank"] is None


@pytest.mark.parametrize("budget_us, ok", [(299.0, False), (301.0, True)])
def test_max_rank_skew_us_on_a_folder(tmp_path, budget_us, ok):
    """Rank 1's steps begin 300 us after rank 0's (the same host clock)."""
    from loopscope.figures._budgets import evaluate

    write_job(tmp_path, 2, STEPS, {}, step_late={1: 300_000})
    job = loopscope.analyze(tmp_path, workers=1, progress=False)
    assert [row["start_skew_us"] for row in job["skew"]["steps"]] == [300.0] * STEPS
    out = evaluate(job, {"max_rank_skew_us": budget_us}).outcomes[0]
    assert (out.measured, out.ok) == (300.0, ok)


def test_html_and_trace_export_views_of_a_folder(straggler_job, monkeypatch):
    folder, p = straggler_job
    job = loopscope.analyze(folder, workers=1, progress=False)
    monkeypatch.setattr(loopscope.views._html, "_matplotlib", lambda: None)  # tables only
    page = loopscope.views._html.render(job)
    assert page.index("<b>Straggler:</b> rank 2 is the straggler") < page.index("Ranks per step")
    # the other ranks' steps drawn on the lowest rank's clock: where they ran
    events = loopscope.distributed._ranks_view.rank_trace_events(job, t0_ns=0, profile=0)
    steps = sorted((e["pid"], e["ts"]) for e in events if e["ph"] == "X")
    rank0 = [s["start_ns"] for s in job["ranks"][0]["steps"]]
    assert steps == sorted((1000 + r, start / 1e3) for r in (1, 2) for start in rank0)


@pytest.mark.parametrize("late_ns, resolved", [(1_000, False), (2_000, True)])
def test_folder_skews_within_the_traces_resolution_count_as_none(tmp_path, late_ns, resolved):
    """Kineto times are written to the ns but taken as +-1 us: a 1 us skew
    is not resolved (the budget reads 0), 2 us is."""
    from loopscope.figures._budgets import evaluate

    write_job(tmp_path, 2, 2, {}, step_late={1: late_ns})
    job = loopscope.analyze(tmp_path, workers=1, progress=False)
    assert job["skew"]["clock"]["error_us"] == 1.0
    out = evaluate(job, {"max_rank_skew_us": 100.0}).outcomes[0]
    assert out.measured == (late_ns / 1e3 if resolved else 0.0)


def test_a_bad_trace_in_the_pool_is_named_and_ranks_flag_reads_files(tmp_path):
    write_job(tmp_path, 2, 2, {})
    files = [str(tmp_path / "rank0.json.gz"), str(tmp_path / "rank1.json.gz")]
    run = [sys.executable, "-m", "loopscope", "analyze", "--ranks"] + files
    ok = subprocess.run(run, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "Rank 0 of 2 (nccl); gathering: read from 2 trace files" in ok.stdout
    (tmp_path / "rank1.json.gz").write_bytes(b"garbage")
    with pytest.raises(TraceError, match=r"rank1.json.gz: is not a trace"):
        loopscope.analyze(tmp_path, workers=2, progress=False)  # raised in a worker process
    bad = subprocess.run(run, capture_output=True, text=True)
    assert bad.returncode == 2 and "rank1.json.gz: is not a trace" in bad.stderr
    assert "Traceback" not in bad.stderr
    usage = subprocess.run([sys.executable, "-m", "loopscope", "analyze", files[0],
                            "--ranks-out", str(tmp_path / "r.json")], capture_output=True,
                           text=True)
    assert usage.returncode == 2 and "--ranks-out and --workers apply to a job" in usage.stderr


def test_a_run_of_missing_ranks_is_one_line(tmp_path):
    write_job(tmp_path, 6, 2, {}, skip=(2, 3, 5))
    text = loopscope.views._report.format_report(loopscope.analyze(tmp_path, workers=1,
                                                             progress=False)).splitlines()
    assert [line.split("  MISSING: ")[0].strip() for line in text if "MISSING" in line] == [
        "2-3", "5"]
    assert "missing: ranks 2-3, 5 no trace of it was read" in "\n".join(text)
    assert any(line.startswith("Clocks: the traces' own clock") for line in text)


# -- real traces: a host straggler on 2 x H100 (issue 26; tests/data/ranks/README.md) -------
def _host_into_us(path, step_prefix: str, call_op: str | None = None) -> list[float]:
    """Per step (in order), how far into the step its host called the
    collective, read from the file here: the launch call of the step's
    first NCCL kernel (the earliest to start of those launched in the
    step), or with call_op the start of the step's first CPU op of that
    name; minus the step range's start.  us."""
    import gzip

    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("ph") == "X"
                   and e.get("cat") == "user_annotation"
                   and str(e.get("name", "")).startswith(step_prefix))
    launch = {e["args"]["correlation"]: e["ts"] for e in events if e.get("ph") == "X"
              and e.get("cat") in ("cuda_driver", "cuda_runtime") and "Launch" in e["name"]}
    nccl = [e for e in events if e.get("cat") == "kernel" and "nccl" in e["name"].lower()]
    ops = [e["ts"] for e in events if e.get("ph") == "X" and e.get("name") == call_op]
    out = []
    for a, b in spans:
        if call_op:
            out.append(min(t for t in ops if a <= t < b) - a)
            continue
        mine = [k for k in nccl if a <= launch.get(k["args"]["correlation"], -1) < b]
        first = min(mine, key=lambda k: k["ts"])
        out.append(launch[first["args"]["correlation"]] - a)
    return out


def _median_excess_ms(folder, pattern: str, step_prefix: str, call_op: str | None = None):
    into = [_host_into_us(folder / pattern.format(r), step_prefix, call_op) for r in (0, 1)]
    assert len(into[0]) == len(into[1]) == 30
    return statistics.median(b - a for a, b in zip(*into)) / 1e3


@pytest.mark.parametrize("folder, pattern, step_prefix", [
    ("h100x2_host", "rank{}.json.gz", "Step_"),                       # loopscope's export
    ("h100x2_kineto_host", "rank{}.pt.trace.json.gz", "ProfilerStep#"),  # torch.profiler
])
def test_a_real_host_straggler_read_from_its_ranks_traces(folder, pattern, step_prefix):
    """Rank 1's host spun 1.5 ms at the start of every step (2 x H100,
    benchmarks/ranks/distributed_straggler.py).  Its host lateness is the median
    over the steps of how much later into the step its host called the
    all_reduce than rank 0's, as the files say.  (It reads 1.64 and 1.70
    ms, not 1.5: rank 1's host also launched the step's work slower, as it
    does with no delay -- see the control folder below.)"""
    path = DATA / "ranks" / folder
    job = loopscope.analyze(path, workers=1, progress=False)
    st = job["skew"]["straggler"]
    assert (st["rank"], st["cause"], st["last_in_steps"]) == (1, "host late", 30)
    want = _median_excess_ms(path, pattern, step_prefix)
    assert st["host_late_ms"] == pytest.approx(want, abs=1e-5)
    assert st["late_ms"] > st["host_late_ms"]  # its GPU arrives later still (launch lag)
    if step_prefix == "ProfilerStep#":
        # the c10d call (the record_param_comms CPU op) instead of the NCCL kernel's launch:
        # 16 us apart in 1.7 ms, so either is "when the host reached the collective"
        by_op = _median_excess_ms(path, pattern, step_prefix, "record_param_comms")
        assert abs(by_op - st["host_late_ms"]) <= 0.02 * st["host_late_ms"]


def test_real_ranks_with_no_delay_are_balanced():
    """The same loop with no delay: rank 1's host still reaches the
    all_reduce later into its steps (its launches are slower), but its GPU
    arrives within the no-straggler spread: nobody is named."""
    path = DATA / "ranks" / "h100x2_control"
    skew = loopscope.analyze(path, workers=1, progress=False)["skew"]
    assert skew["straggler"] is None and skew["balance"]["balanced"]
    assert 0.1 < _median_excess_ms(path, "rank{}.json.gz", "Step_") < 0.5


def test_collectives_without_their_launch_calls_are_said_not_measured(tmp_path):
    """The torch.profiler folder with the NCCL kernels' launch calls taken
    out (as a profiler that records no driver-API launches writes it): the
    kernels fall in no step, and the job says so instead of "balanced"."""
    import gzip

    src = DATA / "ranks" / "h100x2_kineto_host"
    for r in (0, 1):
        doc = json.loads(gzip.decompress((src / f"rank{r}.pt.trace.json.gz").read_bytes()))
        nccl = {e["args"]["correlation"] for e in doc["traceEvents"]
                if e.get("cat") == "kernel" and "nccl" in e["name"].lower()}
        doc["traceEvents"] = [e for e in doc["traceEvents"] if not (
            e.get("cat") == "cuda_driver" and e.get("args", {}).get("correlation") in nccl)]
        (tmp_path / f"rank{r}.pt.trace.json").write_text(json.dumps(doc))
    skew = loopscope.analyze(tmp_path, workers=1, progress=False)["skew"]
    assert skew["straggler"] is None and skew["balance"] is None
    assert any("collective kernels ran, but none in a step" in n for n in skew["not_measured"])


# -- real traces: torch.profiler on 4 x H100 (issue 26; tests/data/ranks/README.md) --------
def _kineto_steps(path) -> list[tuple[float, float, float]]:
    """Per ProfilerStep# (in order): (its host start, the launch call of the
    step's first NCCL kernel -- the earliest to start of those launched in
    the step --, that kernel's GPU start), us, as the file says."""
    import gzip

    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("ph") == "X"
                   and e.get("cat") == "user_annotation"
                   and str(e.get("name", "")).startswith("ProfilerStep#"))
    launch = {e["args"]["correlation"]: e["ts"] for e in events if e.get("ph") == "X"
              and e.get("cat") in ("cuda_driver", "cuda_runtime") and "Launch" in e["name"]}
    nccl = [e for e in events if e.get("cat") == "kernel" and "nccl" in e["name"].lower()]
    out = []
    for a, b in spans:
        first = min((k for k in nccl if a <= launch.get(k["args"]["correlation"], -1) < b),
                    key=lambda k: k["ts"])
        out.append((a, launch[first["args"]["correlation"]], first["ts"]))
    return out


def _host_excess_ms(steps: list[list[tuple]], rank: int) -> float:
    """Median over the steps of how much later into its step `rank`'s host
    called the collective than the other ranks' median."""
    into = [[call - start for start, call, _ in mine] for mine in steps]
    return statistics.median(
        into[rank][k] - statistics.median(into[r][k] for r in range(len(steps)) if r != rank)
        for k in range(len(into[0]))) / 1e3


def test_a_host_straggler_its_gpu_queue_hid_is_said_not_measured(monkeypatch):
    """Rank 1 spun 2.5 ms at the start of every step (its own stamps: 2.566
    ms later into its steps than the others').  But in this trace ranks
    1-3's GPUs ran 0.82-0.99 s behind their hosts (rank 0 began its
    recorded steps that much later): rank 0 reached every all_reduce last,
    and nobody waited for rank 1.  The reader pairs the steps as the files
    do; the job says the straggler is not measured, with rank 1's host
    lateness, instead of "balanced"."""
    path = DATA / "ranks" / "h100x4_kineto_host"
    steps = [_kineto_steps(path / f"rank{r}.pt.trace.json.gz") for r in range(4)]
    assert [len(s) for s in steps] == [30] * 4
    job = loopscope.analyze(path, workers=1, progress=False)
    # the reader's pairing is the file's, rank by rank and step by step (own clocks)
    for r in range(4):
        got = [(s["call_ns"] - s["start_ns"], s["arrive_ns"] - s["call_ns"])
               for s in job["ranks"][r]["steps"]]
        want = [(round((call - start) * 1e3), round((gpu - call) * 1e3))
                for start, call, gpu in steps[r]]
        assert all(abs(g[0] - w[0]) <= 1 and abs(g[1] - w[1]) <= 1 for g, w in zip(got, want))
    # the order the GPUs reached each all_reduce: rank 0 last, every step
    assert all(max(range(4), key=lambda r: steps[r][k][2]) == 0 for k in range(30))
    lead_ms = [(gpu - call) / 1e3 for _, call, gpu in steps[1]]
    assert min(lead_ms) > 800
    skew = job["skew"]
    assert skew["straggler"] is None and skew["balance"] is None
    b = skew["backlog"]
    assert b["rank"] == 1 and b["steps_compared"] == 30
    assert b["host_late_ms"] == pytest.approx(_host_excess_ms(steps, 1), abs=1e-5)
    assert abs(b["host_late_ms"] - 2.566) <= 0.1 * 2.566  # the rank's own perf_counter stamps
    assert b["gpu_behind_ms"] == [pytest.approx(lead_ms[0], abs=1e-3),
                                  pytest.approx(lead_ms[-1], abs=1e-3)]
    assert b["arrival"]["rank"] == 0
    text = loopscope.views._report.format_report(job)
    assert "NOT MEASURED: straggler not measured: rank 1's host called the collective" in text
    assert "BALANCED" not in text and "STRAGGLER:" not in text
    assert job["diagnosis"]["reasons"][0].startswith("straggler not measured: rank 1's host")
    monkeypatch.setattr(loopscope.views._html, "_matplotlib", lambda: None)  # tables only
    html = loopscope.views._html.render(job)
    assert "<b>Not measured:</b> straggler not measured: rank 1&#x27;s host" in html


def test_real_four_ranks_with_no_delay_are_balanced():
    """The same loop with no delay (each rank's GPU started one of its
    collectives within 10 us of its launch: no queue from before the steps):
    no host is a millisecond late into its steps, and nobody is named."""
    path = DATA / "ranks" / "h100x4_kineto_control"
    steps = [_kineto_steps(path / f"rank{r}.pt.trace.json.gz") for r in range(4)]
    assert max(_host_excess_ms(steps, r) for r in range(4)) < 1.0
    assert max(min(gpu - call for _, call, gpu in s) for s in steps) < 10  # us
    skew = loopscope.analyze(path, workers=1, progress=False)["skew"]
    assert skew["straggler"] is None and skew["backlog"] is None
    assert skew["balance"]["balanced"] and skew["not_measured"] == []
