"""What a whole profile costs, loopscope beside its peers, in one run (issues 11, 27).

Every row of the table, on three loops: the demo denoise loop (10 steps x 18
MLP blocks, ~1,100 kernels) eager and replayed from CUDA graphs, and GPT-2
(transformers, random weights, no download) generate() of 64 new tokens:

  loopscope             loopscope.profile() defaults (trace + syncs + counters)
  ls_metrics_off        loopscope.profile(metrics=False)
  ls_counters_only      loopscope.profile(trace=False): PM sampling (+ syncs), no tracing
  ls_instrument         the defaults + loopscope.instrument(model) (made and removed
                        inside the timed block)
  torch_cuda            torch.profiler, CUDA activity only
  torch_cpu_cuda        torch.profiler, CPU + CUDA
  torch_stack           torch.profiler, CPU + CUDA, with_stack=True
  sync_debug            torch.cuda.set_sync_debug_mode("warn") around the loop
  nvtx_steps            torch.cuda.nvtx.range around each step

Steps: the demo loops call prof.step() around each denoise step; GPT-2's
generate() has no place for it, so each forward of the model is a step (a
forward pre-hook enters prof.step(), the forward hook leaves it; hooks are on
only while a profile runs).  torch.profiler's and sync_debug's loops mark no
steps.

Each variant runs in its own process (so none inherits another's CUPTI
state, and the first profile of a process is timed too), and alternates
profiled rounds with bare rounds of the same loop in that process.  A round
times, with the GPU idle at its start:
  enter    the profiler's start (loopscope: profile().__enter__())
  loop     the loop inside it, ending in torch.cuda.synchronize()
  exit     the profiler's stop (__exit__)
  post     what a user does next: summary() (which waits for loopscope's
           worker if it is still finishing) or key_averages().table()
  block    enter + loop + exit: what the user's code pays; block/bare is
           the ratio quoted in docs/counters.md ("x"), loop/bare the loop-only one;
           block+post/bare is the "blk+post x" column.
Medians over the rounds; the first profiled block of each process is
reported apart ("first").

--back-to-back adds, in each process after the rounds, profiles one after
another with no summary() between them (a test suite, a server's requests):
each repeat times K bare loops one after another, then (after one untimed
profile, so that every timed enter follows a profile as it does in a long
series) K profiles one after another, each around one run of the loop, end
to end including every enter and exit, ending in torch.cuda.synchronize().
"b2b x" = median sequence / median bare sequence.  After each timed sequence
the last profile's post runs untimed for loopscope (it waits for the worker,
so the next bare sequence runs beside no finish).

Counts: --rounds 20, K = --profiles 8, --repeats 5; --quick: 6, 4, 3.  GPT-2
(~0.8 s a generate() on an H100) runs a third of the rounds, half of K and
of the repeats, at least 2 each (quick: 2 rounds, K 2, 2 repeats).

Time, estimated per process on one H100 (not yet measured; a process starts
Python, torch and CUDA in ~4-8 s, torch.profiler's first profile adds ~4 s,
GPT-2 ~5 s for transformers and the random 124M-parameter model):
  --quick --back-to-back:  eager/graph ~6-9 s a loopscope, sync_debug or
  nvtx_steps row, ~10-15 s a torch.profiler row: ~2.5-3 min both loops.
  gpt2 (17 generate() calls a process) ~25-30 s a loopscope, sync_debug or
  nvtx_steps row, ~35-40 s torch_cuda, ~60-90 s each torch_cpu_cuda and
  torch_stack (key_averages() over ~40k CPU events): ~6 min.
  Full counts: both demo loops ~4-5 min, gpt2 ~10 min.
torch_cpu_cuda and torch_stack run last in each loop, so --budget-s (no new
process after that many seconds) leaves them out first; the table keeps the
order above.

Usage (GPU machine):
  python benchmarks/cost/overhead.py [--rounds 20] [--loops eager,graph,gpt2]
                                [--variants a,b] [--back-to-back] [--quick]
                                [--profiles K] [--repeats R] [--json OUT.json]
  python benchmarks/cost/overhead.py --dry      # lists the runs; no torch, no GPU
The gpt2 loop is skipped, with the reason printed, where transformers is not
installed.  The short table comes last; --json keeps every figure (written
after each process).  Environment variables pass through to the children
(LOOPSCOPE_INTERNAL: see python/loopscope/live/_settings.py).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

VARIANTS = {
    "loopscope": "loopscope default (trace + syncs + counters)",
    "ls_metrics_off": "loopscope metrics=False",
    "ls_counters_only": "loopscope trace=False (counters only)",
    "ls_instrument": "loopscope default + instrument(model)",
    "torch_cuda": "torch.profiler CUDA only",
    "torch_cpu_cuda": "torch.profiler CPU+CUDA",
    "torch_stack": "torch.profiler CPU+CUDA, with_stack=True",
    "sync_debug": 'torch.cuda.set_sync_debug_mode("warn")',
    "nvtx_steps": "torch.cuda.nvtx.range per step",
}
LOOPSCOPE_OPTIONS = {"loopscope": {}, "ls_metrics_off": {"metrics": False},
                     "ls_counters_only": {"trace": False}, "ls_instrument": {}}
# The slowest rows run last in each loop, so a --budget-s cuts them first.
RUN_LAST = ("torch_cpu_cuda", "torch_stack")
DEMO_LOOPS = ("eager", "graph")
LOOPS = {"eager": "the demo loop, eager", "graph": "the demo loop, CUDA-graph replays",
         "gpt2": "GPT-2 generate(), 64 new tokens"}
CHILD_TIMEOUT_S = {"eager": 150, "graph": 150, "gpt2": 180}
COUNTS = {"full": {"rounds": 20, "profiles": 8, "repeats": 5},
          "quick": {"rounds": 6, "profiles": 4, "repeats": 3}}
GPT2_NEW_TOKENS = 64
GPT2_PROMPT_TOKENS = 16


def loop_counts(loop_kind: str, rounds: int, profiles: int, repeats: int) -> dict:
    """The counts one process of this loop runs: GPT-2's generate() takes
    ~0.8 s, so it runs a third of the rounds and half of K and of the
    repeats, at least 2 each."""
    if loop_kind == "gpt2":
        return {"rounds": max(2, rounds // 3), "profiles": max(2, profiles // 2),
                "repeats": max(2, repeats // 2)}
    return {"rounds": rounds, "profiles": profiles, "repeats": repeats}


def transformers_missing() -> str | None:
    """Why the gpt2 loop cannot run in this Python, or None (torch not imported)."""
    try:
        found = importlib.util.find_spec("transformers") is not None
    except (ImportError, ValueError):  # a broken or blocked install
        found = False
    if not found:
        return f"transformers is not installed in {sys.executable} (pip install transformers)"
    return None


# -- the child: one variant, one loop, one process --------------------------

@contextlib.contextmanager
def steps_per_forward(module, prof):
    """While inside: each call of `module` is one prof.step() (entered by a
    forward pre-hook, left by a forward hook that runs even when the forward
    raises).  Nothing is hooked when prof is None or has no step()."""
    if prof is None or not hasattr(prof, "step"):
        yield
        return
    open_steps = []

    def before(_module, _args):
        step = prof.step()
        step.__enter__()
        open_steps.append(step)

    def after(_module, _args, _output):
        if open_steps:
            open_steps.pop().__exit__(None, None, None)

    handles = [module.register_forward_pre_hook(before),
               module.register_forward_hook(after, always_call=True)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        while open_steps:  # only if a hook itself failed half-way
            open_steps.pop().__exit__(None, None, None)


def build_gpt2(torch, device: str = "cuda", config=None):
    """(model, loop(prof=None)): one loop = one greedy generate() of
    GPT2_NEW_TOKENS tokens (min_new_tokens too, so never fewer) from a fixed
    random prompt, under torch.no_grad().  Random weights: no download."""
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel

    transformers.logging.set_verbosity_error()  # no per-call notices inside the timing
    torch.manual_seed(0)
    config = config or GPT2Config()
    model = GPT2LMHeadModel(config).to(device).eval()
    ids = torch.randint(0, config.vocab_size, (1, GPT2_PROMPT_TOKENS), device=device)
    mask = torch.ones_like(ids)  # given, and pad_token_id, so generate() warns of neither

    def loop(prof=None):
        with torch.no_grad(), steps_per_forward(model, prof):
            return model.generate(ids, attention_mask=mask, max_new_tokens=GPT2_NEW_TOKENS,
                                  min_new_tokens=GPT2_NEW_TOKENS, do_sample=False,
                                  pad_token_id=config.eos_token_id)

    return model, loop


def build_loop(kind: str):
    """(torch, model, loop(prof=None)): the loop, warmed up."""
    import torch

    if kind == "gpt2":
        model, loop = build_gpt2(torch)
        warm_up = 2
    else:
        from loopscope.demo import build, eager_loop, graph_loop_factory

        model, x = build()
        if kind == "graph":
            replay = graph_loop_factory(model, x)
            loop = lambda prof=None: replay(10, prof)  # noqa: E731
        else:
            loop = lambda prof=None: eager_loop(model, x, 10, prof)  # noqa: E731
        warm_up = 5
    for _ in range(warm_up):
        loop()
    torch.cuda.synchronize()
    return torch, model, loop


class NvtxSteps:
    """Stands in for a profile: each step is a torch.cuda.nvtx.range."""

    def __init__(self, torch) -> None:
        self.torch, self.i = torch, 0

    def step(self):
        self.i += 1
        return self.torch.cuda.nvtx.range(f"Step_{self.i - 1}")


def make_profiler(variant: str, torch, model):
    """(enter() -> handle for the loop, exit(), post()) of one variant."""
    import loopscope

    if variant in LOOPSCOPE_OPTIONS:
        state = {}

        def enter():
            if variant == "ls_instrument":
                state["handle"] = loopscope.instrument(model)
            state["prof"] = loopscope.profile(**LOOPSCOPE_OPTIONS[variant]).__enter__()
            return state["prof"]

        def exit_():
            state["prof"].__exit__(None, None, None)
            if "handle" in state:
                state.pop("handle").remove()

        def post():
            return state["prof"].summary()

        return enter, exit_, post
    if variant.startswith("torch_"):
        acts = [torch.profiler.ProfilerActivity.CUDA]
        if variant != "torch_cuda":
            acts.insert(0, torch.profiler.ProfilerActivity.CPU)
        state = {}

        def enter():
            state["p"] = torch.profiler.profile(activities=acts,
                                                with_stack=variant == "torch_stack")
            state["p"].__enter__()
            return None

        def exit_():
            state["p"].__exit__(None, None, None)

        def post():
            return state["p"].key_averages().table(row_limit=20)

        return enter, exit_, post
    if variant == "sync_debug":
        return (lambda: torch.cuda.set_sync_debug_mode("warn"),
                lambda: torch.cuda.set_sync_debug_mode(0), lambda: None)
    if variant == "nvtx_steps":
        return (lambda: NvtxSteps(torch), lambda: None, lambda: None)
    raise SystemExit(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")


def loopscope_figures(summary: dict, post_ms: float) -> dict:
    """loopscope's own account of a profile, from its summary (post_ms: how
    long summary() took, its wait for the worker included)."""
    o = summary["overhead"]
    return {
        "finish_wait_ms": o.get("finish_wait_ms"), "finish_ms": o.get("finish_ms"),
        "start_ms": o.get("start_ms"), "stop_ms": o.get("stop_ms"),
        "decode_ms": o.get("decode_ms"), "in_loop_estimate_ms": o.get("in_loop_estimate_ms"),
        "tail_samples": o.get("tail_samples"), "tail_decode_ms": o.get("tail_decode_ms"),
        "summary_build_ms": post_ms - (o.get("finish_wait_ms") or 0.0),
        "start_phases_ms": o.get("start_phases_ms"), "finish_phases_ms": o.get("finish_phases_ms"),
        "kernels": (summary.get("gpu") or {}).get("kernels"),
        "steps": len(summary.get("steps") or []),
        "samples": (summary.get("sm") or {}).get("samples"),
        "coverage_pct": (summary.get("sm") or {}).get("coverage_pct"),
        "metrics_error": summary.get("metrics_error"),
        "metrics_setup_ms": o.get("metrics_setup_ms"),
        "setup_phases_ms": (summary.get("metrics") or {}).get("setup_ms"),
        "config_source": (summary.get("metrics") or {}).get("config_source"),
    }


def is_loopscope_summary(result) -> bool:
    return isinstance(result, dict) and "overhead" in result


def one_round(torch, loop, enter, exit_, post, clock=time.perf_counter_ns) -> dict:
    torch.cuda.synchronize()
    t0 = clock()
    handle = enter()
    t1 = clock()
    loop(handle)
    torch.cuda.synchronize()
    t2 = clock()
    exit_()
    t3 = clock()
    result = post()
    t4 = clock()
    row = {"enter": (t1 - t0) / 1e6, "loop": (t2 - t1) / 1e6, "exit": (t3 - t2) / 1e6,
           "block": (t3 - t0) / 1e6, "post": (t4 - t3) / 1e6, "block_post": (t4 - t0) / 1e6}
    if is_loopscope_summary(result):
        row["loopscope"] = loopscope_figures(result, (t4 - t3) / 1e6)
    return row


def timed_bare(torch, loop, times: int = 1, clock=time.perf_counter_ns) -> float:
    """ms for `times` bare loops one after another, from an idle GPU to the
    last one's synchronize()."""
    torch.cuda.synchronize()
    t0 = clock()
    for _ in range(times):
        loop()
    torch.cuda.synchronize()
    return (clock() - t0) / 1e6


def timed_profiles(torch, loop, enter, exit_, times: int, clock=time.perf_counter_ns) -> float:
    """ms for `times` profiles one after another, each around one run of the
    loop, nothing between them: every enter and exit inside, from an idle
    GPU to the last one's synchronize()."""
    torch.cuda.synchronize()
    t0 = clock()
    for _ in range(times):
        handle = enter()
        loop(handle)
        exit_()
    torch.cuda.synchronize()
    return (clock() - t0) / 1e6


def back_to_back(torch, loop, enter, exit_, drain, profiles: int, repeats: int,
                 clock=time.perf_counter_ns) -> dict:
    """Repeats of: K bare loops in a row; one untimed profile (so the first
    timed enter, like every later one, follows a profile); K profiles in a
    row, timed; then drain() untimed (loopscope's summary(), which waits
    for the worker's finish of the last profile, so the next bare sequence
    runs beside no finish).  x = median sequence / median bare sequence."""
    bare, seq, drains = [], [], []
    for _ in range(repeats):
        bare.append(timed_bare(torch, loop, profiles, clock))
        timed_profiles(torch, loop, enter, exit_, 1, clock)
        seq.append(timed_profiles(torch, loop, enter, exit_, profiles, clock))
        t0 = clock()
        result = drain()
        drain_ms = (clock() - t0) / 1e6
        drains.append(loopscope_figures(result, drain_ms) if is_loopscope_summary(result)
                      else {"drain_ms": drain_ms})
    bare_ms, seq_ms = statistics.median(bare), statistics.median(seq)
    return {"profiles": profiles, "repeats": repeats, "bare_sequence_ms": bare,
            "sequence_ms": seq, "x": seq_ms / bare_ms, "per_profile_ms": seq_ms / profiles,
            "bare_loop_ms": bare_ms / profiles, "drains": drains}


def median_of(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def run_child(variant: str, loop_kind: str, rounds: int, profiles: int = 0,
              repeats: int = 0) -> dict:
    """The rounds, then (profiles and repeats > 0) the back-to-back series."""
    warnings.filterwarnings("ignore")
    torch, model, loop = build_loop(loop_kind)
    enter, exit_, post = make_profiler(variant, torch, model)
    first = one_round(torch, loop, enter, exit_, post)  # the process's first profile
    bare, rows = [], []
    for _ in range(rounds):
        bare.append(timed_bare(torch, loop))
        rows.append(one_round(torch, loop, enter, exit_, post))
    bare_ms = statistics.median(bare)
    keys = ("enter", "loop", "exit", "block", "post", "block_post")
    out = {"variant": variant, "loop": loop_kind, "rounds": rounds,
           "device": torch.cuda.get_device_name(), "bare_ms": bare_ms, "bare": bare,
           "first": first, "median": {k: median_of(rows, k) for k in keys}, "rows": rows}
    out["block_x"] = out["median"]["block"] / bare_ms
    out["loop_x"] = out["median"]["loop"] / bare_ms
    out["block_post_x"] = out["median"]["block_post"] / bare_ms
    if profiles > 0 and repeats > 0:
        # Only loopscope finishes after its exit (on its worker); torch.profiler's
        # exit has done its work, the others have none.
        drain = post if variant in LOOPSCOPE_OPTIONS else (lambda: None)
        out["back_to_back"] = back_to_back(torch, loop, enter, exit_, drain, profiles, repeats)
    return out


# -- the parent -------------------------------------------------------------

def spawn(variant: str, loop_kind: str, counts: dict, back: bool) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", variant, "--loops", loop_kind,
           "--rounds", str(counts["rounds"])]
    if back:
        cmd += ["--back-to-back", "--profiles", str(counts["profiles"]),
                "--repeats", str(counts["repeats"])]
    timeout = CHILD_TIMEOUT_S[loop_kind]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"variant": variant, "loop": loop_kind, "error": f"timed out after {timeout} s"}
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"variant": variant, "loop": loop_kind,
                "error": (done.stderr or done.stdout)[-800:] or f"exit {done.returncode}"}


def run_order(variants: list[str]) -> list[str]:
    return [v for v in variants if v not in RUN_LAST] + [v for v in variants if v in RUN_LAST]


def fmt(value, spec: str) -> str:
    """value in `spec`, or a dash as wide."""
    if isinstance(value, (int, float)):
        return format(value, spec)
    return format("-", ">" + spec.split(".")[0])


def table(results: list[dict]) -> list[str]:
    lines = [f"{'variant':<18} {'loop':<6} {'bare ms':>8} {'block x':>8} {'loop x':>7} "
             f"{'blk+post x':>10} {'b2b x':>7} {'enter':>7} {'exit':>7} {'post ms':>8} "
             f"{'first blk':>9} {'first ent':>9}"]
    for r in results:
        if "error" in r:
            lines.append(f"{r['variant']:<18} {r['loop']:<6} ERROR {r['error'].splitlines()[-1][:90]}")
            continue
        m, f = r["median"], r["first"]
        b2b = (r.get("back_to_back") or {}).get("x")
        lines.append(f"{r['variant']:<18} {r['loop']:<6} {r['bare_ms']:>8.3f} {r['block_x']:>8.3f} "
                     f"{r['loop_x']:>7.3f} {fmt(r.get('block_post_x'), '10.3f')} {fmt(b2b, '7.3f')} "
                     f"{m['enter']:>7.3f} {m['exit']:>7.3f} {m['post']:>8.2f} "
                     f"{f['block']:>9.1f} {f['enter']:>9.1f}")
    return lines


def details(results: list[dict]) -> list[str]:
    """loopscope's own figures: where its time went (medians of the rounds)."""
    lines = []
    for r in results:
        rows = [x["loopscope"] for x in r.get("rows", []) if "loopscope" in x]
        if not rows:
            continue
        med = lambda key, rows=rows: statistics.median((x.get(key) or 0) for x in rows)  # noqa: E731
        phases = lambda key: {k: round(statistics.median(x[key][k] for x in rows), 3)  # noqa: E731
                              for k in (rows[0].get(key) or {})}
        first = r["first"].get("loopscope", {})
        lines.append(f"{r['variant']} / {r['loop']}: summary waited {med('finish_wait_ms'):.3f} ms "
                     f"for the worker (finish {med('finish_ms'):.3f} ms, decode {med('decode_ms'):.3f} "
                     f"ms); start {med('start_ms'):.3f} ms, stop {med('stop_ms'):.3f} ms; in-loop "
                     f"estimate {med('in_loop_estimate_ms'):.3f} ms; kernels {med('kernels')}, "
                     f"steps {med('steps')}, samples {med('samples')}, coverage "
                     f"{med('coverage_pct')} %")
        lines.append(f"    finish decoded a tail of {med('tail_samples')} samples in "
                     f"{med('tail_decode_ms'):.3f} ms; summary() built in "
                     f"{med('summary_build_ms'):.3f} ms after its wait")
        lines.append(f"    start phases {phases('start_phases_ms')}")
        lines.append(f"    finish phases {phases('finish_phases_ms')}")
        lines.append(f"    first profile: sampler set-up {first.get('metrics_setup_ms')} ms "
                     f"(config {first.get('config_source')}), {first.get('setup_phases_ms')}; "
                     f"metrics_error {first.get('metrics_error')!r}")
        b = r.get("back_to_back")
        if b:
            drains = [d for d in b["drains"] if "finish_wait_ms" in d]
            wait = statistics.median((d["finish_wait_ms"] or 0) for d in drains) if drains else None
            lines.append(f"    back to back: {b['per_profile_ms']:.3f} ms a profile against "
                         f"{b['bare_loop_ms']:.3f} ms a bare loop ({b['profiles']} in a row, "
                         f"{b['repeats']} repeats); the last one's summary() then waited "
                         f"{fmt(wait, '.3f')} ms for the worker")
    return lines


def listing(loops: list[str], variants: list[str], counts: dict, back: bool,
            skip: dict[str, str]) -> list[str]:
    """--dry: one line per process the run would start."""
    lines = []
    for loop_kind in loops:
        c = loop_counts(loop_kind, **counts)
        for name in run_order(variants):
            line = f"{loop_kind:<6} {name:<18} {VARIANTS[name]}; {c['rounds']} rounds"
            if back:
                line += f"; back to back: {c['profiles']} profiles x {c['repeats']} repeats"
            if loop_kind in skip:
                line += f" (skipped here: {skip[loop_kind]})"
            lines.append(line)
    return lines


def write_json(path: str | None, out: dict) -> None:
    if path:
        with open(path, "w") as f:
            json.dump(out, f, indent=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=None,
                        help=f"profiled rounds a process (default {COUNTS['full']['rounds']}, "
                             f"--quick {COUNTS['quick']['rounds']})")
    parser.add_argument("--loops", default=",".join(LOOPS))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--back-to-back", action="store_true",
                        help="also time K profiles in a row, no summary() between them")
    parser.add_argument("--profiles", type=int, default=None,
                        help=f"K, profiles in a back-to-back sequence (default "
                             f"{COUNTS['full']['profiles']}, --quick {COUNTS['quick']['profiles']})")
    parser.add_argument("--repeats", type=int, default=None,
                        help=f"back-to-back sequences a process (default "
                             f"{COUNTS['full']['repeats']}, --quick {COUNTS['quick']['repeats']})")
    parser.add_argument("--quick", action="store_true",
                        help="fewer rounds, a smaller K and fewer repeats (see the counts above)")
    parser.add_argument("--json", help="write every figure here")
    parser.add_argument("--dry", action="store_true", help="list the runs and exit (no GPU)")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="start no new process after this many seconds (the rest is "
                             "reported as skipped), so one device call is never cut short")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    loops = [x for x in args.loops.split(",") if x]
    variants = [x for x in args.variants.split(",") if x]
    for name in variants:
        if name not in VARIANTS:
            parser.error(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
    for name in loops:
        if name not in LOOPS:
            parser.error(f"unknown loop {name!r}; known: {', '.join(LOOPS)}")
    defaults = COUNTS["quick" if args.quick else "full"]
    counts = {key: defaults[key] if getattr(args, key) is None else getattr(args, key)
              for key in ("rounds", "profiles", "repeats")}
    for key, value in counts.items():
        if value < 1:
            parser.error(f"--{key} must be at least 1, got {value}")
    if args.child:
        back = (counts["profiles"], counts["repeats"]) if args.back_to_back else (0, 0)
        print(json.dumps(run_child(args.child, loops[0], counts["rounds"], *back)))
        return
    skip = {"gpt2": reason for reason in [transformers_missing()] if reason and "gpt2" in loops}
    if args.dry:
        print("\n".join(listing(loops, variants, counts, args.back_to_back, skip)))
        return
    for loop_kind, reason in skip.items():
        print(f"the {loop_kind} loop is skipped: {reason}", flush=True)
    started = time.time()
    results = []
    out = {"date": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), "command": sys.argv,
           "quick": args.quick, "back_to_back": args.back_to_back, "counts": counts,
           "skipped_loops": skip, "results": results}
    for loop_kind in loops:
        if loop_kind in skip:
            continue
        c = loop_counts(loop_kind, **counts)
        for name in run_order(variants):
            if args.budget_s is not None and time.time() - started > args.budget_s:
                results.append({"variant": name, "loop": loop_kind,
                                "error": f"skipped: past the {args.budget_s:.0f} s budget"})
                continue
            result = spawn(name, loop_kind, c, args.back_to_back)
            results.append(result)
            if "error" in result:
                done = "error"
            else:
                b2b = (result.get("back_to_back") or {}).get("x")
                done = (f"block {result['block_x']:.3f}x, block+post {result['block_post_x']:.3f}x"
                        + (f", back to back {b2b:.3f}x" if b2b is not None else ""))
            print(f"[{time.time() - started:6.1f} s] {loop_kind} {name}: {done}", flush=True)
            out["device"] = next((r["device"] for r in results if "device" in r), None)
            write_json(args.json, out)  # after each process: a cut-short run keeps what it has
    order = {name: i for i, name in enumerate(VARIANTS)}
    results.sort(key=lambda r: (list(LOOPS).index(r["loop"]), order[r["variant"]]))
    out["device"] = next((r["device"] for r in results if "device" in r), None)
    write_json(args.json, out)
    print()
    for line in details(results):
        print(line)
    print()
    rounds = ", ".join(f"{k} {loop_counts(k, **counts)['rounds']}" for k in loops if k not in skip)
    print(f"{out['device']}, rounds a variant: {rounds}; medians; x = time / bare loop; "
          f"ms unless said; first = the first profile of a process; blk+post = enter + loop + "
          f"exit + post; b2b = profiles back to back, no post between")
    for loop_kind, reason in skip.items():
        print(f"{loop_kind}: skipped: {reason}")
    for line in table(results):
        print(line)


if __name__ == "__main__":
    main()
