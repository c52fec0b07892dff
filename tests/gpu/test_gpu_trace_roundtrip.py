"""Real-GPU round trip of the trace export (marked gpu; skipped with a
reason where no GPU is present): a denoise-like eager loop with syncs at
known lines, profiled with everything on (trace, syncs, PM sampling),
exported with prof.export_trace and read back with loopscope.analyze:

- the gaps (count, class, cause, step, worst), GPU busy time, steps,
  SM/DRAM figures and kernel fill (each kernel's grid and block, the
  device's SM figures) are the live summary's;
- the syncs are the live ones (count, blocked time, kinds, sites but the
  thread ids, which a trace names by track);
- each step's graph readiness is the live one (steps are compared whole),
  the pageable host-to-device copy's blocker at its line included, and
  the allocations the caching allocator made inside steps, if any;
- the trace has one counter series per sampled figure on the GPU's
  process, a slice per sync on the loop's thread, and a flow arrow per
  launch that reached an op."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU visible to PyTorch", allow_module_level=True)

import loopscope  # noqa: E402

pytestmark = pytest.mark.gpu

SAME = ("gaps", "gpu", "steps", "ranges", "sm", "dram", "pcie", "diagnosis")


def _differences(live, back, path="", out=None):
    """Where two summary parts differ: [(path, live value, value read back)]."""
    out = [] if out is None else out
    if isinstance(live, dict) and isinstance(back, dict):
        for k in sorted(set(live) | set(back), key=str):
            _differences(live.get(k), back.get(k), f"{path}.{k}", out)
    elif isinstance(live, list) and isinstance(back, list) and len(live) == len(back):
        for i, (a, b) in enumerate(zip(live, back)):
            _differences(a, b, f"{path}[{i}]", out)
    elif live != back:
        out.append((path, live, back))
    return out[:20]


def run_loop(prof, x, w, bias, steps=6):
    for i in range(steps):
        with prof.step():
            with loopscope.range("Blocks"):
                for _ in range(20):
                    x = torch.tanh(x @ w)
            if i % 2 == 0:
                x.sum().item()                 # a sync at this line
            if i == 3:
                torch.cuda.synchronize()       # and one here
            if i == 5:
                x = x + bias.to("cuda")        # a pageable host-to-device copy here
    return x


def test_export_of_a_real_loop_reads_back_as_the_live_summary(tmp_path):
    x = torch.randn(512, 512, device="cuda")
    w = torch.randn(512, 512, device="cuda") / 32
    for _ in range(20):                        # warm up cuBLAS outside the profile
        x = torch.tanh(x @ w)
    torch.cuda.synchronize()
    bias = torch.ones(512)                     # pageable host memory
    with loopscope.profile() as prof:
        run_loop(prof, x, w, bias)
    live = prof.summary()
    if live["gaps"] is None:
        pytest.skip(f"GPU tracing unavailable here: {live['gpu_error']}")
    assert live["syncs"] is not None, live["syncs_error"]
    # three .item() (a copy and a stream sync: one sync each, as
    # tests/gpu/test_gpu_syncs.py shows), one torch.cuda.synchronize() and
    # the pageable host-to-device copy (it waits: one sync)
    item_steps = [i for i in range(6) if i % 2 == 0]
    assert live["syncs"]["count"] == len(item_steps) + 2 == 5, live["syncs"]["sites"]
    assert len(live["steps"]) == 6
    path = prof.export_trace(tmp_path / "loop.json")
    back = loopscope.analyze(path)
    for key in SAME:
        assert back[key] == live[key], (key, _differences(live[key], back[key]))

    def without_threads(syncs):
        out = {k: v for k, v in syncs.items() if k not in ("sites_from", "sites_unknown")}
        out["sites"] = [{k: v for k, v in s.items() if k != "thread_id"} for s in syncs["sites"]]
        return out

    assert without_threads(back["syncs"]) == without_threads(live["syncs"])
    assert back["graph_readiness"] == live["graph_readiness"]
    line = next(n for n, text in enumerate(open(__file__).read().splitlines(), 1)
                if text.strip().startswith("x = x + bias.to("))
    copies = [b for b in live["steps"][5]["graph_readiness"]["blockers"]
              if b["kind"] == "pageable_copy"]
    assert copies and copies[0]["where"].endswith(f"test_gpu_trace_roundtrip.py:{line}"), \
        live["steps"][5]["graph_readiness"]

    data = json.loads(open(path).read())
    events = data["traceEvents"]
    # the fill came back from the kernels' geometry and the device's SM figures
    assert live["gpu"]["fill_known_pct"] == 100.0 and live["gpu"]["fill_pct"] is not None
    kernels = [e for e in events if e["ph"] == "X" and e["cat"] == "kernel"]
    assert all(len(e["args"]["grid"]) == len(e["args"]["block"]) == 3 for e in kernels)
    (props,) = data["deviceProperties"]
    assert props["numSms"] == live["gpu"]["devices"][0]["sm_count"]
    counters = {e["name"] for e in events if e["ph"] == "C"}
    if live["sm"] is not None:
        assert {"SM active", "DRAM throughput"} <= counters
    syncs = [e for e in events if e["ph"] == "X" and e["cat"] == "sync"]
    assert len(syncs) == live["syncs"]["count"]
    # each sync names its site by an index into otherData.sync_sites (0 is one)
    sites = data["otherData"]["sync_sites"]
    assert all(isinstance(e["args"].get("site"), int) and 0 <= e["args"]["site"] < len(sites)
               for e in syncs), [e["args"] for e in syncs]
    starts = [e for e in events if e["ph"] == "s"]
    assert len(starts) >= live["gpu"]["kernels"] - live["gpu"]["ops_without_launch_record"]
    print(f"\n{len(events)} events; {len(syncs)} sync slices; counters {sorted(counters)}; "
          f"gaps {live['gaps']['count']} (by cause {live['gaps']['by_cause']}); "
          f"syncs {live['syncs']['count']}; SM {live['sm'] and live['sm']['active_pct']}%; "
          f"fill {live['gpu']['fill_pct']}% (back {back['gpu']['fill_pct']}%)")
    for step in back["steps"]:
        print(f"step {step['index']} readiness (read back): "
              f"{[(b['kind'], b['count'], b['where']) for b in step['graph_readiness']['blockers']]}")
