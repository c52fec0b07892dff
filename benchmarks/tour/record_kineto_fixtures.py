"""Records the small real torch.profiler (Kineto) traces the trace-reader tests
use (tests/data/kineto/): the demo loop, 3 steps of 4 blocks, eager and as
CUDA-graph replays, with and without with_stack; the with_stack trace also
has a planted `.item()` sync in step 1 and cuda_sync events on.
demo_*.json.gz have no step markers (a profiler without a schedule records
no ProfilerStep#N); demo_*_steps.json.gz use a schedule (ProfilerStep#N) and
a record_function("Denoise_Step_{i}") around each step.
Usage (GPU machine): python benchmarks/tour/record_kineto_fixtures.py --out DIR
"""
from __future__ import annotations

import argparse
import gzip
import os
import shutil

import torch
from torch.profiler import ProfilerActivity, profile

from loopscope.demo import build, denoise_step


def record(path: str, loop, steps: int, scheduled: bool = False, **options) -> None:
    plain = path[: -len(".gz")]
    if scheduled:
        # ProfilerStep#N ranges exist only with a schedule; a cycle's events
        # are cleared when the next one begins, so the trace is written from
        # on_trace_ready at the end of the one active cycle (repeat=1)
        options["schedule"] = torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1)
        options["on_trace_ready"] = lambda p: p.export_chrome_trace(plain)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], **options) as p:
        for i in range(steps + (1 if scheduled else 0)):
            if scheduled:
                with torch.profiler.record_function(f"Denoise_Step_{i}"):
                    loop(i)
            else:
                loop(i)
            if scheduled:
                torch.cuda.synchronize()  # the step's kernels end inside its cycle
            p.step()
        torch.cuda.synchronize()
    if not scheduled:
        p.export_chrome_trace(plain)
    with open(plain, "rb") as src, gzip.open(path, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(plain)
    print(f"{path}: {os.path.getsize(path)} bytes")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    model, x = build(depth=4)
    with torch.no_grad():
        for _ in range(3):
            denoise_step(model, x)
    torch.cuda.synchronize()

    def eager(i):
        with torch.no_grad():
            denoise_step(model, x)

    def eager_with_sync(i):
        with torch.no_grad():
            y = denoise_step(model, x)
            if i == 1:
                y.float().sum().item()  # the planted sync

    graph = torch.cuda.CUDAGraph()
    static_x = x.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):
            denoise_step(model, static_x)
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph), torch.no_grad():
        denoise_step(model, static_x)

    def replay(i):
        graph.replay()

    record(os.path.join(args.out, "demo_eager.json.gz"), eager, 3)
    record(os.path.join(args.out, "demo_graph.json.gz"), replay, 3)
    config = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    record(os.path.join(args.out, "demo_eager_stack.json.gz"), eager_with_sync, 3,
           with_stack=True, experimental_config=config)
    record(os.path.join(args.out, "demo_eager_steps.json.gz"), eager, 3, scheduled=True)
    record(os.path.join(args.out, "demo_graph_steps.json.gz"), replay, 3, scheduled=True)
    print("device", torch.cuda.get_device_name(), "torch", torch.__version__)


if __name__ == "__main__":
    main()
