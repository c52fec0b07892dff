"""What a watch costs a step on the host, apart from the GPU (issue 40), on
any machine: no GPU needed.

--block: one light block as GPT-2 generate() makes them (--steps steps,
--syncs fake stream syncs a step, each from --depth Python frames, through
the real switchboard: the C test hooks, so build with LOOPSCOPE_TEST_HOOKS=1).
Printed: the watch's exit, which reads the block's rows, and on one
finished block the time of FinishedProfile.step_figures() (what a light
block's rows read since 2026-11-30) against summary() (what they read
before: every sync's site named), the least of --repeat each.

--generate: a tiny GPT-2 (transformers, random weights, 2 layers of 64, CPU,
one thread) generating 64 tokens, --calls calls a block, variants
alternating over --rounds rounds in one process: bare; the two forward
hooks steps=module adds (no-ops); profile(steps=model) with nothing else;
watch(steps=model) (no GPU here: host times only).  Printed: the host time
each adds a step (the calls alone, the with-block's enter and exit apart),
median and lower quartile of the rounds.  A GPU machine's host runs the
same Python; its tokens are ~5x longer (GPT-2 small, ~5.4 ms a token on an
H200's host), so the share there is ~5x smaller.

--parts: the same GPT-2 (--layers layers) under watch(steps=model), each
part of a step timed: steps=module's hooks (_before holds _find_caller,
_close_open and the new step's enter; _close_open holds the last step's
exit, which holds the watch's _stepped, which holds a block's _rotate),
in µs a step, inclusive.  The timers' own frames read as loopscope's (their
code is compiled under its folder), so the caller lookup walks past them as
it walks past the hooks; each adds ~0.1-0.3 µs to what it times.

  LOOPSCOPE_TEST_HOOKS=1 pip install -e . && python benchmarks/watch/watch_step_cost.py --block
  python benchmarks/watch/watch_step_cost.py --generate --rounds 30
  python benchmarks/watch/watch_step_cost.py --parts --layers 6
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
import warnings


def block(args: argparse.Namespace) -> None:
    import loopscope
    from loopscope import _testhooks

    def deep(n: int) -> None:
        if n == 0:
            _testhooks._inject_calls([("cudaStreamSynchronize", 2000)])
            _testhooks._inject_calls([("cudaLaunchKernel", 0)])
            return
        deep(n - 1)

    exits = []
    for _ in range(args.repeat):
        w = loopscope.watch(dump_dir=tempfile.mkdtemp(), block_steps=args.steps + 1,
                            p99_factor=None, metrics=False)
        with w:
            for _ in range(args.steps):
                with w.step():
                    for _ in range(args.syncs):
                        deep(args.depth)
            t = time.perf_counter()
        exits.append(time.perf_counter() - t)
    with loopscope.profile(trace=False, metrics=False) as prof:
        for _ in range(args.steps):
            with loopscope.step():
                for _ in range(args.syncs):
                    deep(args.depth)
    done = prof.finished
    figures, whole = [], []
    for _ in range(args.repeat):
        # a new FinishedProfile over the same records each time: no summary
        # kept from the last (the capture keeps its model for both alike)
        again = type(done)(done.capture, state=done.state, thresholds=done.thresholds,
                           host_ns=done.host_ns)
        t = time.perf_counter()
        again.step_figures()
        figures.append(time.perf_counter() - t)
        t = time.perf_counter()
        again.summary()
        whole.append(time.perf_counter() - t)
    print(f"a light block of {args.steps} steps x {args.syncs} syncs ({args.depth} frames deep), "
          f"least of {args.repeat}:")
    print(f"  the watch's exit (reads the block's rows): {min(exits) * 1e3:.1f} ms "
          f"(median {statistics.median(exits) * 1e3:.1f})")
    print(f"  step_figures(): {min(figures) * 1e3:.1f} ms; summary(): {min(whole) * 1e3:.1f} ms")


TOKENS = 64


def tiny_gpt2(layers: int = 2):
    """(model, call): a GPT-2 with random weights on the CPU, one torch
    thread; call() generates TOKENS tokens.  2 layers of 64 (--generate's),
    or more of 128 (watch_generate.py --cpu's)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    wide = layers > 2
    model = GPT2LMHeadModel(GPT2Config(n_layer=layers, n_head=4 if wide else 2,
                                       n_embd=128 if wide else 64, vocab_size=1000,
                                       bos_token_id=0, eos_token_id=0)).eval()
    ids = torch.randint(0, 1000, (1, 8))

    def call() -> None:
        with torch.inference_mode():
            model.generate(ids, max_new_tokens=TOKENS, min_new_tokens=TOKENS, do_sample=False,
                           pad_token_id=0)

    return model, call


def generate(args: argparse.Namespace) -> None:
    import loopscope
    model, call = tiny_gpt2()
    tokens = TOKENS

    class Hooks:
        def __enter__(self) -> None:
            self.handles = [
                model.register_forward_pre_hook(lambda m, a, k: None, with_kwargs=True, prepend=True),
                model.register_forward_hook(lambda m, a, o: None, always_call=True)]

        def __exit__(self, *exc: object) -> None:
            for h in self.handles:
                h.remove()

    variants = {
        "bare": contextlib.nullcontext,
        "hooks": Hooks,
        "profile": lambda: loopscope.profile(steps=model, trace=False, metrics=False, syncs=False),
        "watch": lambda: loopscope.watch(steps=model, p99_factor=None,
                                         dump_dir=tempfile.mkdtemp(prefix="watch-step-cost-")),
    }
    for _ in range(3):
        call()
    inner: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(args.rounds):
        names = list(variants)
        for v in names[r % len(names):] + names[:r % len(names)]:
            with variants[v]():
                t = time.thread_time()
                for _ in range(args.calls):
                    call()
                inner[v].append(time.thread_time() - t)
    steps = args.calls * tokens
    bare, bare_q1 = statistics.median(inner["bare"]), statistics.quantiles(inner["bare"], n=4)[0]
    print(f"tiny GPT-2 generate({tokens}) on the CPU, {args.calls} calls a block, {args.rounds} "
          f"rounds: bare {bare / steps * 1e6:.0f} us a step")
    for v in variants:
        if v == "bare":
            continue
        m, q1 = statistics.median(inner[v]), statistics.quantiles(inner[v], n=4)[0]
        print(f"  {v:8s} adds {(m - bare) / steps * 1e6:5.1f} us a step ({m / bare:.4f}x); "
              f"lower quartile {(q1 - bare_q1) / steps * 1e6:5.1f} us")


# (module under loopscope, class, methods): the parts of a watched step
PARTS = (("live._module_steps", "ModuleSteps", ("_before", "_find_caller", "_close_open", "_after")),
         ("watching._watch", "WatchStep", ("__enter__", "__exit__")),
         ("watching._watch", "Watch", ("_stepped", "_rotate")))
TIMER = """def timer(f, slot, clock):
    def timed(*args, **kwargs):
        t = clock()
        try:
            return f(*args, **kwargs)
        finally:
            slot[0] += clock() - t
            slot[1] += 1
    return timed
"""


def parts(args: argparse.Namespace) -> None:
    import importlib
    import os

    import loopscope
    model, call = tiny_gpt2(args.layers)
    tokens = TOKENS

    space: dict = {}
    exec(compile(TIMER, os.path.join(os.path.dirname(loopscope.__file__), "<step parts timer>"),
                 "exec"), space)
    totals: dict[str, list[int]] = {}
    restore = []
    for module_name, class_name, methods in PARTS:
        cls = getattr(importlib.import_module(f"loopscope.{module_name}"), class_name)
        for name in methods:
            slot = totals.setdefault(f"{class_name}.{name}", [0, 0])
            restore.append((cls, name, cls.__dict__[name]))
            setattr(cls, name, space["timer"](cls.__dict__[name], slot, time.perf_counter_ns))
    for _ in range(3):
        call()
    try:
        with loopscope.watch(steps=model, p99_factor=None,
                             dump_dir=tempfile.mkdtemp(prefix="watch-step-cost-")) as w:
            t = time.perf_counter_ns()
            for _ in range(args.calls):
                call()
            spent = time.perf_counter_ns() - t
    finally:
        for cls, name, original in restore:
            setattr(cls, name, original)
    # the steps opened: steps=module's pre-hook runs once a top-level call
    # (w.steps() keeps only the last keep_steps of them)
    steps = totals["ModuleSteps._before"][1] or 1
    print(f"GPT-2 of {args.layers} layers, generate({tokens}) on the CPU under watch(steps=model), "
          f"{args.calls} calls: {spent / steps / 1e3:.0f} us a step, {steps} steps; each part, "
          f"inclusive, us a step:")
    for key, (ns, n) in sorted(totals.items(), key=lambda kv: -kv[1][0]):
        print(f"  {key:26s} {ns / steps / 1e3:7.2f}   ({n} calls, {ns / max(n, 1) / 1e3:.2f} us each)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--block", action="store_true")
    p.add_argument("--generate", action="store_true")
    p.add_argument("--parts", action="store_true")
    p.add_argument("--layers", type=int, default=2, help="--parts: GPT-2's layers (default 2)")
    p.add_argument("--steps", type=int, default=768, help="--block: steps (default 768)")
    p.add_argument("--syncs", type=int, default=8, help="--block: syncs a step (default 8)")
    p.add_argument("--depth", type=int, default=12, help="--block: frames under a sync (default 12)")
    p.add_argument("--repeat", type=int, default=5, help="--block: repeats (default 5)")
    p.add_argument("--calls", type=int, default=5, help="--generate: calls a block (default 5)")
    p.add_argument("--rounds", type=int, default=20, help="--generate: rounds (default 20)")
    args = p.parse_args()
    if not (args.block or args.generate or args.parts):
        p.error("say --block, --generate, --parts, or more than one")
    if args.block:
        block(args)
    if args.generate:
        generate(args)
    if args.parts:
        parts(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
