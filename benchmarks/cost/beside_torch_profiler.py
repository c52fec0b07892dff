"""Issue 24: loopscope's GPU times beside torch.profiler in one process.

torch.profiler's Kineto registers its own CUPTI timestamp source (the CPU's
TSC) and leaves it registered: before loopscope registered its own at every
start, each later loopscope profile read its GPU times ~2.05x too long.  This
runs, in one process, on the demo loop (10 eager steps): loopscope, then
torch.profiler CPU+CUDA, loopscope, CPU+CUDA with_stack=True, loopscope,
CUDA-only, loopscope, the whole sequence --cycles times; then a real model
nobody here wrote (transformers' GPT-2, random weights, generate()) before and
after torch.profiler.  Each loopscope profile prints its GPU busy time, mean
per-step GPU time, GPU time line against the with-block, and the clock's rate
against the host; each torch.profiler run its CUDA kernel total (so a change
that broke torch.profiler's own figures would show too).

    python benchmarks/cost/beside_torch_profiler.py --cycles 3

Needs a CUDA GPU and torch (transformers for the GPT-2 part: --no-gpt2 skips).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time


def loopscope_row(label, run):
    import loopscope

    t0 = time.perf_counter()
    with loopscope.profile() as prof:
        run(prof)
    block_ms = (time.perf_counter() - t0) * 1e3
    s = prof.summary()
    info = prof.capture.info()
    steps = [st["gpu_ms"] for st in s["steps"] if st.get("gpu_ms") is not None]
    return {"label": label, "busy_ms": s["gpu"]["busy_ms"], "span_ms": s["gpu"]["span_ms"],
            "block_ms": round(block_ms, 3), "kernels": s["gpu"]["kernels"],
            "step_gpu_ms": round(statistics.mean(steps), 4) if steps else None,
            "clock_rate": info.get("clock_rate"), "timestamps": info.get("timestamp_source"),
            "checks_failed": [c["name"] for c in s.get("checks", []) if not c["ok"]]}


def torch_row(label, run, activities, with_stack=False):
    import torch
    from torch.profiler import ProfilerActivity, profile

    acts = [getattr(ProfilerActivity, a) for a in activities]
    with profile(activities=acts, with_stack=with_stack) as p:
        run(None)
    total_us = sum(e.self_device_time_total for e in p.key_averages())
    torch.cuda.synchronize()
    return {"label": label, "torch_cuda_total_ms": round(total_us / 1e3, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--no-gpt2", action="store_true")
    parser.add_argument("--out", help="write the rows as JSON lines here too")
    args = parser.parse_args()
    import torch

    from loopscope.demo import build, eager_loop

    model, x = build()
    eager_loop(model, x, 5)
    torch.cuda.synchronize()

    def run(prof):
        eager_loop(model, x, 10, prof)
        torch.cuda.synchronize()

    rows = [loopscope_row("loopscope first", run)]
    for cycle in range(args.cycles):
        for label, acts, stack in (("CPU+CUDA", ("CPU", "CUDA"), False),
                                   ("CPU+CUDA with_stack", ("CPU", "CUDA"), True),
                                   ("CUDA only", ("CUDA",), False)):
            rows.append(torch_row(f"c{cycle} torch.profiler {label}", run, acts, stack))
            rows.append(loopscope_row(f"c{cycle} loopscope after {label}", run))
    if not args.no_gpt2:
        from transformers import GPT2Config, GPT2LMHeadModel

        torch.manual_seed(0)
        gpt = GPT2LMHeadModel(GPT2Config()).cuda().eval()
        ids = torch.randint(0, 50000, (1, 16), device="cuda")

        def gen(prof):
            with torch.inference_mode():
                gpt.generate(ids, max_new_tokens=32, do_sample=False, pad_token_id=0)
            torch.cuda.synchronize()

        gen(None)
        rows.append(loopscope_row("gpt2 generate, before torch.profiler", gen))
        rows.append(torch_row("gpt2 torch.profiler CPU+CUDA", gen, ("CPU", "CUDA")))
        rows.append(loopscope_row("gpt2 generate, after torch.profiler", gen))
    if args.out:
        with open(args.out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    first = rows[0]
    print(f"{'profile':42} {'busy ms':>8} {'vs 1st':>7} {'step ms':>8} {'span':>7} "
          f"{'block':>7} {'rate':>7} checks")
    for r in rows:
        if "busy_ms" not in r:
            print(f"{r['label']:42} torch CUDA total {r['torch_cuda_total_ms']} ms")
            continue
        base = first if not r["label"].startswith("gpt2") else next(
            q for q in rows if q["label"].startswith("gpt2 generate, before"))
        ratio = r["busy_ms"] / base["busy_ms"] if base["busy_ms"] else float("nan")
        rate = r["clock_rate"]
        print(f"{r['label']:42} {r['busy_ms']:>8.3f} {ratio:>7.3f} "
              f"{r['step_gpu_ms'] if r['step_gpu_ms'] is not None else '-':>8} "
              f"{r['span_ms']:>7.2f} {r['block_ms']:>7.2f} "
              f"{rate if rate is None else round(rate, 4)!s:>7} {','.join(r['checks_failed']) or 'ok'}")


if __name__ == "__main__":
    main()
