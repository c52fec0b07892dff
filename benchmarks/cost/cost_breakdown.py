"""Where a profile's cost goes (issue 27): back-to-back profiles, the
worker's finish, PM decoding per sample, and summary() on GPT-2.

For each loop (the demo's eager and CUDA-graph loops, 10 steps):
  - N profiles back to back (no summary() between), each timed on the
    user's thread (enter, loop, exit), then every summary's overhead
    section: the enter's wait for the previous finish, the finish's phases,
    PM decodes (CUPTI's decode, evaluation, the rest) per sample;
  - N profiles each followed by summary(), summary() timed.
GPT-2 (transformers, random weights) generate(max_new_tokens=64): one
profile with defaults and one with metrics=False, summary() timed, and
cProfile's top functions of summary() printed; the recording saved
(--save-recording) for replay on a CPU machine.

One JSON line per figure set goes to --json; a short table is printed.
LOOPSCOPE_INTERNAL passes through (callbacks=0 or own_timestamps=0, parsed
once per process: run the script once per value).

Usage (GPU machine): python benchmarks/cost/cost_breakdown.py [--profiles 8]
        [--loops eager,graph] [--no-gpt2] [--json OUT.jsonl]
        [--save-recording DIR]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _block import timed_block  # noqa: E402  (a sibling module, by path)


def _ms(ns: int) -> float:
    return round(ns / 1e6, 3)


def _pm(summary: dict) -> dict:
    m = summary.get("metrics") or {}
    o = summary.get("overhead") or {}
    samples = m.get("samples") or 0
    per = (lambda ms: round(1e3 * ms / samples, 1) if samples and ms is not None else None)
    return {"samples": samples, "decodes": m.get("decodes"),
            "decode_ms": m.get("decode_ms"), "decode_cupti_ms": m.get("decode_cupti_ms"),
            "evaluate_ms": m.get("evaluate_ms"),
            "us_per_sample": per(m.get("decode_ms")),
            "cupti_us_per_sample": per(m.get("decode_cupti_ms")),
            "evaluate_us_per_sample": per(m.get("evaluate_ms")),
            "image_samples": m.get("counter_data_samples"), "image_mb": m.get("counter_data_mb"),
            "tail_samples": o.get("tail_samples"), "tail_decode_ms": o.get("tail_decode_ms"),
            "finish_ms": o.get("finish_ms"), "finish_wait_ms": o.get("finish_wait_ms"),
            "finish_phases_ms": o.get("finish_phases_ms"),
            "start_phases_ms": o.get("start_phases_ms"), "stop_ms": o.get("stop_ms"),
            "enter_ms": o.get("enter_ms")}


def _loops():
    import torch

    from loopscope.demo import build, eager_loop, graph_loop_factory

    model, x = build()
    replay = graph_loop_factory(model, x)
    return torch, {"eager": lambda prof=None: eager_loop(model, x, 10, prof),
                   "graph": lambda prof=None: replay(10, prof)}


def run_loop(name, loop, torch, loopscope, n, emit):
    for _ in range(3):  # warm: the first profile's set-up is not this benchmark's
        with loopscope.profile() as p:
            loop(p)
        torch.cuda.synchronize()
        p.summary()
    bare = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        loop()
        torch.cuda.synchronize()
        bare.append(time.perf_counter_ns() - t0)
    for mode in ("back_to_back", "with_summary"):
        profs, times = [], []
        torch.cuda.synchronize()
        seq0 = time.perf_counter_ns()
        for _ in range(n):  # one series: no wait for the GPU before each block
            prof, t = timed_block(loopscope, torch, loop, sync_first=False,
                                  summary=mode == "with_summary")
            profs.append(prof)
            times.append(t)
        seq = time.perf_counter_ns() - seq0
        for i, prof in enumerate(profs):
            s = prof.summary()
            t = times[i]
            row = {"loop": name, "mode": mode, "i": i, **_pm(s), "enter_ms": round(t["enter"], 3),
                   "loop_ms": round(t["loop"], 3), "exit_ms": round(t["exit"], 3),
                   "post_ms": round(t["summary"] or 0.0, 3),
                   "start_wait_ms": (s["overhead"].get("start_phases_ms") or {}).get("wait"),
                   "continued": prof.capture.info().get("continued_tracing")}
            emit(row)
        emit({"loop": name, "mode": mode, "sequence_ms": _ms(seq),
              "bare_median_ms": _ms(statistics.median(bare)),
              "ratio": round(seq / (n * statistics.median(bare)), 3)})


def run_gpt2(torch, loopscope, emit, save_dir):
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError as error:
        print(f"gpt2: skipped ({error})")
        return
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).cuda().eval()
    ids = torch.randint(0, 50000, (1, 16), device="cuda")

    def gen():
        with torch.no_grad():
            model.generate(ids, max_new_tokens=64, min_new_tokens=64, do_sample=False,
                           pad_token_id=0)

    gen()
    for options in ({}, {"metrics": False}):
        for attempt in range(2):
            with loopscope.profile(**options) as prof:
                gen()
            torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
            profiler = cProfile.Profile()
            profiler.enable()
            s = prof.summary()
            profiler.disable()
            took = time.perf_counter_ns() - t0
            row = {"loop": "gpt2", "options": options, "attempt": attempt,
                   "summary_ms": _ms(took), "kernels": s.get("gpu", {}).get("kernels"),
                   **_pm(s)}
            emit(row)
            if attempt == 1:
                text = io.StringIO()
                pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(30)
                print(f"--- gpt2 {options} summary() {took / 1e6:.1f} ms, cProfile (cumulative):")
                print("\n".join(text.getvalue().splitlines()[:60]))
                text = io.StringIO()
                pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(20)
                print(f"--- gpt2 {options} tottime:")
                print("\n".join(text.getvalue().splitlines()[:45]))
                if save_dir and not options:
                    os.makedirs(save_dir, exist_ok=True)
                    prof.save_recording(os.path.join(save_dir, "gpt2_generate64.json.gz"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", type=int, default=8)
    parser.add_argument("--loops", default="eager,graph")
    parser.add_argument("--no-gpt2", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--save-recording")
    args = parser.parse_args()
    import loopscope

    out = open(args.json, "a") if args.json else None
    rows = []

    def emit(row):
        row["internal"] = os.environ.get("LOOPSCOPE_INTERNAL", "")
        rows.append(row)
        if out:
            out.write(json.dumps(row) + "\n")

    torch, loops = _loops()
    for name in filter(None, args.loops.split(",")):
        run_loop(name, loops[name], torch, loopscope, args.profiles, emit)
    if not args.no_gpt2:
        run_gpt2(torch, loopscope, emit, args.save_recording)
    print(f"internal={os.environ.get('LOOPSCOPE_INTERNAL', '')!r}")
    print("loop   mode          ratio  enter  loop   exit   post  wait  finish tail(n/ms)  "
          "us/sample(cupti/eval) image")
    for r in rows:
        if "ratio" in r:
            print(f"{r['loop']:6} {r['mode']:13} {r['ratio']:.3f}  seq {r['sequence_ms']} ms, "
                  f"bare {r['bare_median_ms']} ms")
            continue
        if r["loop"] == "gpt2":
            print(f"gpt2 {r['options']} summary {r['summary_ms']} ms, samples {r['samples']}, "
                  f"decode {r['decode_ms']} ms, finish {r['finish_ms']} wait {r['finish_wait_ms']}")
            continue
        med = lambda k: r.get(k)  # noqa: E731
        print(f"{r['loop']:6} {r['mode']:13} {r['i']:>5}  {med('enter_ms'):5} {med('loop_ms'):6} "
              f"{med('exit_ms'):5} {med('post_ms'):6} {med('start_wait_ms')}/{med('finish_wait_ms')} "
              f"{med('finish_ms')} c={med('continued')} "
              f"{med('tail_samples')}/{med('tail_decode_ms')} {med('us_per_sample')}"
              f"({med('cupti_us_per_sample')}/{med('evaluate_us_per_sample')}) "
              f"{med('image_samples')}")


if __name__ == "__main__":
    main()
