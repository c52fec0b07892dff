"""Graph-level mode on a real GPU (issue 27): `loopscope.prepare()` at the
top of a fresh process, then each CUDA-graph replay is one span.  Against a
plain process (a record per kernel) on the same loop: the same steps, busy
time and per-step GPU time within 2%, the same readiness, and no kernel
record for a graph's kernels.  The busy time is the union of the raw op
intervals, computed here in plain Python, not loopscope's figure.

Each mode runs in its own fresh process: prepare() must come before the
process's first CUDA call, which pytest's own process made long ago."""
from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU visible to PyTorch", allow_module_level=True)

import loopscope  # noqa: E402

pytestmark = pytest.mark.gpu

CHILD = r"""
import json, sys
import loopscope
mode, loop_kind = sys.argv[1], sys.argv[2]
if mode == "replays":
    loopscope.prepare()
import torch
from loopscope import demo

if loop_kind == "graph":
    model, x = demo.build()
    loop = demo.graph_loop_factory(model, x)
else:
    model, x = demo.build(depth=6)
    compiled = torch.compile(model, mode="reduce-overhead")

    @torch.no_grad()
    def loop(steps=10, prof=None):
        for _ in range(steps):
            if prof is None:
                compiled(x)
            else:
                with prof.step():
                    compiled(x)

    for _ in range(4):
        loop(3)
beside = len(sys.argv) > 3
if beside:  # torch.profiler before, between and after loopscope's profiles
    from torch.profiler import ProfilerActivity, profile as tprofile
def torch_profile():
    with tprofile(activities=[ProfilerActivity.CUDA]) as tp:
        loop(3)
        torch.cuda.synchronize()
    return sum(1 for e in tp.events() if e.device_type.name == "CUDA")
out = {"torch_events": []}
loop(10)
torch.cuda.synchronize()
for round_ in range(3):
    if beside:
        out["torch_events"].append(torch_profile())
    with loopscope.profile() as prof:
        loop(10, prof)
        torch.cuda.synchronize()
    s = prof.summary()
if beside:
    out["torch_events"].append(torch_profile())
cap = prof.capture
ops = cap.ops()
info = cap.info()
out.update(
    ops=[[o[0], o[1], o[2]] for o in ops],
    graph_level=info["graph_level"],
    dropped=info["dropped_records"], invalid=info["invalid_records"],
    steps=[[st["index"], st["gpu_ms"], (st.get("graph_readiness") or {}).get("status")]
           for st in s["steps"]],
    sm=(s.get("sm") or {}).get("active_pct"),
    gpu_error=s.get("gpu_error"),
    verdict=s["diagnosis"]["verdict"], busy_pct=s["gaps"]["busy_pct"],
    step_verdicts=[st["verdict"] for st in s["steps"]],
    gaps=s["gaps"]["count"],
    step_gaps=[[st["gaps"]["count"], st["gaps"]["busy_pct"]] for st in s["steps"]],
)
print("JSON" + json.dumps(out))
"""


def run_child(mode: str, loop: str, *extra: str) -> dict:
    return dict(_run_child(mode, loop, *extra))


@functools.lru_cache(maxsize=None)
def _run_child(mode: str, loop: str, *extra: str) -> tuple:
    """One fresh process per (mode, loop): the tests below share its run."""
    return tuple(_child(mode, loop, *extra).items())


def _child(mode: str, loop: str, *extra: str) -> dict:
    p = subprocess.run([sys.executable, "-c", CHILD, mode, loop, *extra], capture_output=True,
                       text=True, timeout=400)
    assert p.returncode == 0, p.stderr[-4000:]
    line = [x for x in p.stdout.splitlines() if x.startswith("JSON")]
    assert line, p.stdout[-2000:] + p.stderr[-2000:]
    return json.loads(line[-1][4:])


def union_ns(intervals) -> int:
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total, end = total + e - s, e
        elif e > end:
            total, end = total + e - end, e
    return total


def within(a: float, b: float, share: float) -> bool:
    return abs(a - b) <= share * max(abs(a), abs(b))


@pytest.mark.parametrize("loop", ["graph", "compiled"])
def test_graph_level_mode_matches_per_kernel_tracing(loop):
    kernels = run_child("kernels", loop)
    replays = run_child("replays", loop)
    assert kernels["graph_level"] is False and replays["graph_level"] is True
    assert kernels["gpu_error"] is None and replays["gpu_error"] is None
    kinds_k = [o[0] for o in kernels["ops"]]
    kinds_r = [o[0] for o in replays["ops"]]
    # one span per replay (one replay a step), and no record per node
    assert kinds_r.count("graph") == 10
    assert "graph" not in kinds_k
    assert kinds_k.count("kernel") >= 10 * 20  # the graphs' kernels, recorded one by one
    # what the replays hid: the same kernels each replay, none outside them
    in_graphs = kinds_k.count("kernel") - kinds_r.count("kernel")
    assert in_graphs > 0 and in_graphs % 10 == 0
    assert kinds_r.count("kernel") < 20  # only what ran outside the graphs
    assert replays["invalid"] == 0 and replays["dropped"] == 0
    busy_k = union_ns((o[1], o[2]) for o in kernels["ops"])
    busy_r = union_ns((o[1], o[2]) for o in replays["ops"])
    assert within(busy_k, busy_r, 0.02), (busy_k, busy_r)
    assert len(kernels["steps"]) == len(replays["steps"]) == 10
    # a per-kernel step's GPU time is its kernels' time: the idle between the
    # nodes of a replay (mostly the tracer's timestamps) is not busy (issue 39;
    # counted busy it read 4-5% over the graph-level steps, H200 2026-11-29)
    for (ik, gk, sk), (ir, gr, sr) in zip(kernels["steps"], replays["steps"]):
        assert ik == ir
        assert within(gk, gr, 0.02), (ik, gk, gr)
        assert sk == sr == "replays_graph"
    assert replays["sm"] is not None and kernels["sm"] is not None


def test_torch_profiler_beside_a_prepared_process():
    """torch.profiler before, between and after loopscope's profiles in a
    prepared process: nothing crashes, every torch.profiler run ends, and
    loopscope's last profile still holds exactly its ten replays and the
    copies between them.  (What torch.profiler itself sees there is less:
    on an H100, 2026-11-27, its first run recorded no GPU event and the
    later ones none of the graphs' kernels; docs/graph-replays.md says so.)"""
    out = run_child("replays", "graph", "beside")
    assert out["graph_level"] is True
    kinds = [o[0] for o in out["ops"]]
    assert kinds.count("graph") == 10 and "kernel" not in kinds
    assert len(out["torch_events"]) == 4
    assert out["invalid"] == 0 and out["dropped"] == 0


def test_prepare_after_cuda_started_refuses_with_the_reason():
    torch.zeros(1, device="cuda")  # this process's CUDA has started
    if loopscope.live._prepare.prepared():
        pytest.skip("graph-level mode already on in this process")
    with pytest.raises(RuntimeError, match="CUDA has already started"):
        loopscope.prepare()
    assert not loopscope.live._prepare.prepared()
    with loopscope.profile() as prof:  # profiles go on per kernel
        x = torch.ones(1 << 10, device="cuda")
        (x * 2).sum()
        torch.cuda.synchronize()
    assert prof.summary()["gpu"]["kernels"] >= 2


SWITCH = r"""
import json
import loopscope
loopscope.prepare()
import torch
from loopscope import demo
model, x = demo.build()
loop = demo.graph_loop_factory(model, x)
loop(10)
torch.cuda.synchronize()
out = {}
def profile(**options):
    with loopscope.profile(**options) as prof:
        loop(10, prof)
        torch.cuda.synchronize()
    s = prof.summary()
    info = prof.capture.info()
    kinds = [o[0] for o in prof.capture.ops()]
    return {"graphs": kinds.count("graph"), "kernels": kinds.count("kernel"),
            "graph_level": info["graph_level"], "graph_kernels": info["graph_kernels"],
            "ended": info["graph_level_ended"], "note": s["cupti_note"],
            "steps": [st["graph_readiness"]["status"] for st in s["steps"]]}
out["whole"] = profile()
out["per_kernel"] = profile(graph_kernels=True)
out["whole_again"] = profile()
# a graph instantiated inside a graph_kernels profile ends graph-level mode
with loopscope.profile(graph_kernels=True) as prof:
    loop2 = demo.graph_loop_factory(model, x)
    loop2(2)
    torch.cuda.synchronize()
info = prof.capture.info()
out["made_inside"] = {"ended": info["graph_level_ended"], "note": prof.summary()["cupti_note"]}
out["after"] = profile()
loop2(3)  # the graph made with the trace off replays safely (the trace stays off)
torch.cuda.synchronize()
out["after_replay"] = profile()
print("JSON" + json.dumps(out))
"""


def test_graph_kernels_records_each_replays_kernels_in_a_prepared_process():
    p = subprocess.run([sys.executable, "-c", SWITCH], capture_output=True, text=True,
                       timeout=400)
    assert p.returncode == 0, p.stderr[-4000:]
    out = json.loads([x for x in p.stdout.splitlines() if x.startswith("JSON")][-1][4:])
    whole, per_kernel, again = out["whole"], out["per_kernel"], out["whole_again"]
    assert whole["graph_level"] and whole["graphs"] == 10 and whole["kernels"] == 0
    assert per_kernel["graph_kernels"] and not per_kernel["graph_level"]
    assert per_kernel["graphs"] == 0 and per_kernel["kernels"] > 0
    assert per_kernel["kernels"] % 10 == 0  # the same kernels each replay
    assert again["graph_level"] and again["graphs"] == 10 and again["kernels"] == 0
    assert set(whole["steps"]) == set(per_kernel["steps"]) == {"replays_graph"}
    made = out["made_inside"]
    assert made["ended"] is True and "graph-level mode" in made["note"]
    for later in (out["after"], out["after_replay"]):
        assert not later["graph_level"] and later["graphs"] == 0
        assert later["kernels"] == per_kernel["kernels"]


GRAPH_SCRIPT = '''
import torch
import loopscope
from loopscope import demo

model, x = demo.build()
loop = demo.graph_loop_factory(model, x)
for i in range(10):
    with loopscope.range(f"Step_{i}"):
        loop(1)
torch.cuda.synchronize()
'''


def test_loopscope_run_graph_replays_as_a_user_runs_it(tmp_path):
    script = tmp_path / "graphs.py"
    script.write_text(GRAPH_SCRIPT)
    out = tmp_path / "out.json"
    p = subprocess.run([sys.executable, "-m", "loopscope", "run", "--graph-replays", "--steps",
                        r"Step_\d+", "--json", str(out), str(script)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "graph-level mode is off" not in p.stderr
    s = json.loads(out.read_text())
    assert s["gpu"]["graph_replays"] == 10
    assert len(s["steps"]) == 10
    assert all(st["graph_replays"] == 1 for st in s["steps"])


def test_pytest_option_graph_replays_as_a_user_runs_it(tmp_path):
    (tmp_path / "test_graph_loop.py").write_text('''
import torch
from loopscope import demo


def test_graph_loop(loopscope_profile):
    model, x = demo.build()
    loop = demo.graph_loop_factory(model, x)
    loop(10, loopscope_profile)
    torch.cuda.synchronize()
''')
    report = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--loopscope-graph-replays", f"--loopscope-report={report}",
                        str(tmp_path / "test_graph_loop.py")],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "graph-level mode is off" not in p.stdout
    tests = json.loads(report.read_text())["tests"]
    (entry,) = tests.values()
    assert entry["summary"]["gpu"]["graph_replays"] == 10


@pytest.mark.parametrize("loop", ["graph", "compiled"])
def test_per_kernel_and_graph_level_profiles_give_one_verdict(loop):
    """Issue 39: one loop, one reading, whether its replays are traced per
    kernel or whole.  The idle between the nodes of one replay traced per
    kernel is no gap and not busy (csrc/analysis/ls_model_timeline.c,
    one_replay), so a per-kernel profile has no more gaps than a
    graph-level one (one per step of slack for an idle too short to see in
    one mode); counted as gaps, the graph loop's ~110 kernels a replay
    would add ~100 a step.

    The two modes run in two processes, so what the host's timing decides
    differs between them: on an H200 (2026-11-29) the first step's late
    first replay took 204-287 us (2.5 points of the loop's busy share), and
    the compiled loop, launched close to the GPU's pace, read 51-63% busy
    per kernel and 40-75% per replay from one run to the next.  So the busy
    share is compared over the steady steps of the GPU-bound graph loop
    (within 2 points each), and the verdicts there; the compiled loop's
    verdict across processes is its run's, not the model's (pinned on
    synthetic records: tests/analysis/test_verdicts_projections.py).  A
    replay traced whole has no launch shapes, so where the per-kernel
    profile reads UNDER_FILLED from them the graph-level one reads what
    rules 2-3 give (docs/graph-replays.md)."""
    kernels = run_child("kernels", loop)
    replays = run_child("replays", loop)
    assert kernels["graph_level"] is False and replays["graph_level"] is True
    assert kernels["gaps"] <= replays["gaps"] + 10, (kernels["gaps"], replays["gaps"])
    if loop != "graph":
        return
    for i, ((gk, bk), (gr, br)) in enumerate(zip(kernels["step_gaps"][1:],
                                                 replays["step_gaps"][1:]), start=1):
        assert abs(bk - br) <= 2, (i, bk, br)
        assert gk <= gr + 1, (i, gk, gr)

    def same(k: str, r: str) -> bool:
        return k == r or (k == "UNDER_FILLED" and r in ("BALANCED", "GPU_BOUND"))

    assert same(kernels["verdict"], replays["verdict"]), (kernels["verdict"], replays["verdict"])
    assert all(same(k, r) for k, r in zip(kernels["step_verdicts"][1:],
                                          replays["step_verdicts"][1:])), \
        (kernels["step_verdicts"], replays["step_verdicts"])
