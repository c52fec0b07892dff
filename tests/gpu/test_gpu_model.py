"""Real-GPU checks of the analysed model's attribution and its compute /
communication split (marked gpu; skipped with a reason where no GPU is
present):

- 8 Python threads launch kernels at once, each inside its own steps: every
  kernel goes to the step of the thread that launched it (the launch
  callbacks carry the thread), not to whichever step holds its launch in
  time, which with overlapping steps is the wrong one most of the time.
- NCCL all-reduces (across the visible GPUs from one process; with one GPU,
  in a one-rank group, skipped if NCCL runs no kernel for it) are
  communication: summary["gpu"]["comm_ms"] > 0 and every step's comm_ms
  too, while the matmuls count as compute."""
from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU visible to PyTorch", allow_module_level=True)

import loopscope  # noqa: E402

pytestmark = pytest.mark.gpu

THREADS, STEPS, KERNELS = 8, 3, 20


def test_kernels_go_to_the_step_of_the_thread_that_launched_them():
    x = [torch.ones(1024, device="cuda") for _ in range(THREADS)]
    for t in x:
        t.add_(1)
    torch.cuda.synchronize()
    start = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def worker(steps, i):
        try:
            stream = torch.cuda.Stream()
            start.wait()
            with torch.cuda.stream(stream):
                for step in steps:
                    with step:
                        for _ in range(KERNELS):
                            x[i].add_(1)
            stream.synchronize()
        except BaseException as error:  # reported below
            errors.append(error)

    with loopscope.profile() as prof:
        # steps made here (each takes the next index), entered in the threads
        steps = [[prof.step(f"T{i}_{{i}}") for _ in range(STEPS)] for i in range(THREADS)]
        threads = [threading.Thread(target=worker, args=(steps[i], i)) for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors
    s = prof.summary()
    assert s["source"] == "cupti", s["gpu_error"]
    assert s["gpu"]["kernels"] == THREADS * STEPS * KERNELS
    steps = s["steps"]
    assert len(steps) == THREADS * STEPS
    print({st["name"]: st["kernels"] for st in steps})
    assert [st["kernels"] for st in steps] == [KERNELS] * len(steps)
    # the steps did overlap in time: attribution by time alone could not tell them apart
    spans = sorted((r["start_ns"], r["end_ns"]) for r in prof.model.steps())
    assert any(b[0] < a[1] for a, b in zip(spans, spans[1:]))


def _all_reduce_loop(prof=None):
    """NCCL all-reduces between matmuls: across every visible GPU from this
    process (torch.cuda.nccl) when there are two or more, else in a one-rank
    process group."""
    devices = torch.cuda.device_count()
    tensors = [torch.randn(1024, 1024, device=f"cuda:{d}") for d in range(devices)]
    for _ in range(5):
        if prof is None:
            scope = None
        else:
            scope = prof.step()
            scope.__enter__()
        if devices >= 2:
            torch.cuda.nccl.all_reduce(tensors)
        else:
            torch.distributed.all_reduce(tensors[0])
        tensors = [t @ t.T / 1024 for t in tensors]
        if scope is not None:
            scope.__exit__(None, None, None)
    for d in range(devices):
        torch.cuda.synchronize(d)


def test_nccl_all_reduce_counts_as_communication(tmp_path):
    dist = pytest.importorskip("torch.distributed", reason="needs torch.distributed")
    one_rank = torch.cuda.device_count() < 2
    if one_rank:
        if not dist.is_nccl_available():
            pytest.skip("this torch has no NCCL")
        dist.init_process_group("nccl", init_method=f"file://{tmp_path / 'pg'}", rank=0,
                                world_size=1)
    try:
        _all_reduce_loop()
        with loopscope.profile() as prof:
            _all_reduce_loop(prof)
    finally:
        if one_rank:
            dist.destroy_process_group()
    s = prof.summary()
    assert s["source"] == "cupti", s["gpu_error"]
    ops = prof.capture.ops()
    names = {o[6] for o in ops if o[0] == "kernel"}
    comm = sorted(n for n in names if n and "nccl" in n.lower())
    print("collective kernels:", comm, "gpu:",
          {k: s["gpu"][k] for k in ("comm_ms", "compute_ms", "comm_pct")},
          "steps:", [(st["comm_ms"], st["compute_ms"]) for st in s["steps"]])
    if not comm and one_rank:
        pytest.skip(f"NCCL ran no kernel for a one-rank group here (kernels: {sorted(names)}); "
                    "run on two GPUs")
    assert comm, names
    flags = {o[6]: c for o, c in zip(ops, prof.model.op_column("comm"))}
    assert all(flags[n] == 1 for n in comm)
    assert all(flags[n] == 0 for n in names - set(comm))
    assert s["gpu"]["comm_ms"] > 0 and s["gpu"]["compute_ms"] > 0
    assert all(st["comm_ms"] > 0 and st["compute_ms"] > 0 for st in s["steps"])
