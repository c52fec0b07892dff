"""instrument() on a real GPU (marked gpu; skipped with a reason where no
GPU is present): per-layer GPU times of the demo loop add up to the step's,
the MLPs dominate, and a CUDA graph replay gives all its kernels to the step.
The numbers seen are written down in benchmarks/RESULTS.md."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU visible to PyTorch", allow_module_level=True)

import loopscope  # noqa: E402
from loopscope.demo import build, eager_loop, graph_loop_factory  # noqa: E402

pytestmark = pytest.mark.gpu
BLOCKS = 18
LEAVES = ("norm", "up", "act", "down")


@pytest.fixture(scope="module")
def demo():
    model, x = build()
    eager_loop(model, x, 3)  # warm-up: cuBLAS handles, allocator
    torch.cuda.synchronize()
    return model, x


def test_per_layer_gpu_times_add_up_to_the_steps(demo):
    """The 18 blocks' GPU busy times sum to within 5% of the steps' (the
    rest is the step's own `x - 0.1 * model(x)`); MLP (up, act, down)
    outweighs LayerNorm."""
    model, x = demo
    with loopscope.instrument(model) as handle:
        eager_loop(model, x, 2)  # first calls build the range names
        torch.cuda.synchronize()
        with loopscope.profile() as prof:
            eager_loop(model, x, 10, prof)
    s = prof.summary()
    print(prof.report())
    assert s["source"] == "cupti", s["gpu_error"]
    assert s["dropped_records"] == 0
    assert handle.mismatches == 0 and s["overhead"]["instrument_mismatches"] == 0
    r = {e["name"]: e for e in s["ranges"]}
    blocks = [r[str(i)] for i in range(BLOCKS)]
    assert all(b["count"] == 10 and b["parent"] == "Sequential" for b in blocks)
    assert all(r[f"{i}/{leaf}"]["count"] == 10 for i in range(BLOCKS) for leaf in LEAVES)
    step_busy = sum(st["gpu_ms"] for st in s["steps"])
    layer_busy = sum(b["gpu_ms"] for b in blocks)
    print(f"blocks {layer_busy:.3f} ms of steps {step_busy:.3f} ms "
          f"({100 * layer_busy / step_busy:.1f}%)")
    assert layer_busy <= step_busy * 1.001
    assert layer_busy >= 0.95 * step_busy
    # the model's range holds the same kernels as its blocks together
    assert r["Sequential"]["kernels"] == sum(b["kernels"] for b in blocks)
    assert abs(r["Sequential"]["gpu_ms"] - layer_busy) <= 0.001 * layer_busy
    # every kernel of a step is in a block but the step's own few (mul, sub)
    step_kernels = sum(st["kernels"] for st in s["steps"])
    assert step_kernels == s["gpu"]["kernels"]
    assert 0 < step_kernels - r["Sequential"]["kernels"] <= 4 * 10
    leaf = {name: sum(r[f"{i}/{name}"]["gpu_ms"] for i in range(BLOCKS)) for name in LEAVES}
    mlp = leaf["up"] + leaf["act"] + leaf["down"]
    print("per leaf over all blocks, ms:", {k: round(v, 3) for k, v in leaf.items()})
    assert mlp >= 3 * leaf["norm"]
    wins = sum(r[f"{i}/up"]["gpu_ms"] + r[f"{i}/act"]["gpu_ms"] + r[f"{i}/down"]["gpu_ms"]
               > r[f"{i}/norm"]["gpu_ms"] for i in range(BLOCKS))
    assert wins == BLOCKS
    # the leaves of a block hold all of its kernels (the residual add is the block's own)
    for i in range(BLOCKS):
        inside = sum(r[f"{i}/{name}"]["kernels"] for name in LEAVES)
        assert blocks[i]["kernels"] - inside in (0, 10), (i, blocks[i]["kernels"], inside)


def test_graph_replay_gives_every_kernel_to_the_step(demo):
    """Captured with the layer ranges on (no error: the wrapped module calls
    make no CUDA call), the replay runs no Python: no layer ranges, every
    kernel in its step."""
    model, x = demo
    with loopscope.instrument(model) as handle:
        loop = graph_loop_factory(model, x)
        loop(3)
        torch.cuda.synchronize()
        with loopscope.profile() as prof:
            loop(10, prof)
    s = prof.summary()
    print(prof.report())
    assert s["source"] == "cupti", s["gpu_error"]
    assert s["ranges"] == []
    steps = s["steps"]
    assert sum(st["kernels"] for st in steps) == s["gpu"]["kernels"]
    assert len({st["kernels"] for st in steps}) == 1 and steps[0]["kernels"] >= BLOCKS * 4
    assert s["gpu"]["ops_without_launch_record"] == 0
    assert handle.mismatches == 0


def test_capture_inside_a_profile_with_layer_ranges(demo):
    """A CUDA graph captured inside a profile, inside a step, with every
    block's call wrapped: the capture succeeds (the wrappers make no CUDA
    call, so nothing is illegal during capture), the layer ranges of the
    capture are recorded (host only: captured kernels do not run), and the
    replays afterwards give the graph's kernels to their steps and the
    output of the eager model."""
    model, x = demo
    with loopscope.instrument(model) as handle:
        with loopscope.profile() as prof:
            with torch.no_grad():
                static_x = x.clone()
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(3):
                        model(static_x)  # warm-up outside the capture
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with prof.step("Capture"):
                    with torch.cuda.graph(graph):
                        static_out = model(static_x)
                for _ in range(5):
                    with prof.step():
                        graph.replay()
            torch.cuda.synchronize()
        with torch.no_grad():
            expected = model(x)
    s = prof.summary()
    print(prof.report())
    assert s["source"] == "cupti", s["gpu_error"]
    assert handle.mismatches == 0 and s["overhead"]["range_mismatches"] == 0
    assert torch.allclose(static_out.float(), expected.float(), rtol=2e-2, atol=2e-2)
    r = {e["name"]: e for e in s["ranges"]}
    assert r["Sequential"]["count"] == 1 + 3  # the capture and the three warm-up calls
    assert all(r[str(i)]["count"] == 4 for i in range(BLOCKS))
    capture, *replays = s["steps"]
    assert capture["name"] == "Capture" and len(replays) == 5
    assert len({st["kernels"] for st in replays}) == 1 and replays[0]["kernels"] >= BLOCKS * 4
    assert s["gpu"]["ops_without_launch_record"] == 0
