"""What loopscope.watch(steps=model) costs GPT-2's generate() loop (issue 40's
"the GPT-2 generate() loop watched with steps=model: <= 1.05x").

The loop is benchmarks/cost/overhead.py's: greedy `generate()` of 64 new
tokens from a random prompt, GPT-2 small with random weights (no download).
Each variant runs in its own process: `bare` (N generate() calls) and `watch`
(the same calls inside `loopscope.watch(steps=model, step_budget_ms=...)`, so
every top-level forward is a step), alternating round by round; the table
gives the medians, the whole block's and one `generate()` call's (steady
state, apart from the watch's enter and exit, which are given too), and
each process's quiet calls (its lower quartile; the median over processes),
the CPU time the process's other threads (the sampler's decoding) spent a
call, the main thread's own CPU time a call (a slow spell of the host,
waiting for a CPU or stolen by the hypervisor, adds none; its run-queue wait
and the machine's steal are given beside it), and `import loopscope`'s
time, paid once a process outside the block.  `--variants` adds watches with a part turned off, to
see where a cost goes: watch_nosync (syncs=False), watch_nometrics
(metrics=False), watch_host (both off: host step times only).  The budget is far above a token's time: nothing breaches,
so this is the always-on cost alone; the watch's own summary says how many
steps it kept and how many breaches it saw (must be 0).

  python benchmarks/watch/watch_generate.py --calls 40 --rounds 2
  python benchmarks/watch/watch_generate.py --calls 20 --rounds 1 --variants bare,watch,watch_nosync,watch_nometrics,watch_host
  python benchmarks/watch/watch_generate.py --in-process watch,watch_nosync --calls 4 --rounds 9
  python benchmarks/watch/watch_generate.py --in-process watch,watch_nosync --calls 2 --rounds 14 --settle
  python benchmarks/watch/watch_generate.py --taking-turns bare,bare_again,watch --calls 12 --rounds 4 --pin 8
  python benchmarks/watch/watch_generate.py --cpu --taking-turns bare,bare_again,hooks_only,watch_host --calls 12 --rounds 8 --pin 1

`--taking-turns` keeps one process a variant, all alive at once, taking
turns call by call on the GPU: the H200 host's slowness moves between
processes and cores within seconds (2026-11-30: a bare process's 12 calls
all 720-770 ms beside another's 340-376 ms; the main thread's CPU time a
call equalled its wall time, with no run-queue wait and no steal), so
variants minutes apart do not compare.  `bare_again`, a second bare
process, gives the method's own spread, `bare_imported` a bare process
that imports loopscope and never enters it, and `hooks_only` one with
steps=module's two forward hooks doing nothing (`watch_host_nosteps`: a
host-only watch with no steps=; `watch_nextcall` and
`watch_host_nextcall`: steps that end at the next call, sys.monitoring
unused); `--pin CPU` runs every variant's
main thread on one core (their other threads off it).  Only one process
can hold the GPU's counters: run one watch with metrics at a time (the
table says in how many processes SM was measured).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WATCH_OPTIONS = {"watch": {}, "watch_nosync": {"syncs": False},
                 "watch_nometrics": {"metrics": False},
                 "watch_host": {"syncs": False, "metrics": False},
                 # blocks held at 64 steps (one generate() call) instead of
                 # sized from their cost: does a long light block cost more a step?
                 "watch_b64": {"block_steps": 64},
                 # the counters sampled every 2 ms instead of 0.5: does a
                 # coarser interval cost the job's main thread less?
                 "watch_i2000": {"metrics_interval_us": 2000.0},
                 # host-only and no steps= (no hooks, no step a call): the
                 # block alone, to set apart what the steps cost from the rest
                 "watch_host_nosteps": {"syncs": False, "metrics": False, "steps": None},
                 # steps that end at the model's next call (sys.monitoring
                 # hidden from the watch, so its summary's `ends` names
                 # Python < 3.12): taking turns, each call's last step holds
                 # the other processes' turns and breaches the 1,000 ms
                 # budget when those run longer (H200 19:17Z: every call), so
                 # they weigh the caller-return rule only where that wait is
                 # under the budget (the CPU box's turns)
                 "watch_nextcall": {}, "watch_host_nextcall": {"syncs": False, "metrics": False}}
NEXT_CALL = ("watch_nextcall", "watch_host_nextcall")


def add_idle_step_hooks(model) -> list:
    """steps=module's two forward hooks, added as it adds them, doing
    nothing: torch's hook path alone, without loopscope (`hooks_only`)."""
    return [model.register_forward_pre_hook(lambda m, a, k: None, prepend=True, with_kwargs=True),
            model.register_forward_hook(lambda m, a, o: None, always_call=True)]


def watch_options(model, variant: str) -> dict:
    """loopscope.watch()'s arguments for a variant: each top-level call of
    the model a step, unless the variant says otherwise."""
    return {"steps": model, "step_budget_ms": 1000.0, "p99_factor": None,
            "dump_dir": tempfile.mkdtemp(prefix="watch-gen-"), **WATCH_OPTIONS[variant]}


def make_watch(model, variant: str):
    """loopscope.watch() for a variant, as a with-block: a *_nextcall
    variant's watch attaches its steps with sys.monitoring out of its
    reach (steps=module then ends each step at the next call)."""
    import loopscope
    from loopscope.live import _module_steps
    w = loopscope.watch(**watch_options(model, variant))
    if variant not in NEXT_CALL:
        return w

    @contextlib.contextmanager
    def block():
        returns = _module_steps.RETURNS
        held, returns.monitoring = returns.monitoring, None
        try:
            with w:
                returns.monitoring = held  # read only when the steps attach
                yield w
        finally:
            returns.monitoring = held
    return block()


# --in-process only: one light profile (no watch) over the block, stepped by
# the model, to tell what the watch adds (blocks, rows) from what its light
# profiles cost
PROFILE_OPTIONS = {"light": {}, "light_nosync": {"syncs": False}}
IN_PROCESS = (*WATCH_OPTIONS, *PROFILE_OPTIONS)
# --taking-turns processes that never enter a watch (bare_imported imports loopscope)
BARE_TURNS = ("bare", "bare_again", "bare_imported", "hooks_only")


def run_delay() -> float:
    """The main thread's time runnable but waiting for a CPU, so far
    (/proc/thread-self/schedstat's second field; 0 where there is none)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def steal() -> float:
    """CPU time the hypervisor gave other guests, so far, all CPUs together
    (/proc/stat's steal column, in s; 0 where there is none): a noisy
    neighbour outside the container shows here and nowhere in its load."""
    try:
        with open("/proc/stat") as f:
            return int(f.readline().split()[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def on_cpu() -> int:
    """The CPU the calling thread runs on now (/proc/thread-self/stat's
    39th field; -1 where there is none)."""
    try:
        with open("/proc/thread-self/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return -1


_ALLOWED: set[int] = set()  # the CPUs the process may use, read before the first pin


def pin_main_thread(cpu: int) -> None:
    """The main thread on `cpu` alone, every other thread of the process (the
    sampler's decoding, CUDA's, the worker) on every other CPU it may use:
    the variants' main threads then run on the same core, turn by turn,
    and no thread of theirs shares it.  Called again after each turn, for
    threads begun since.  The CPUs the process may use are read once, before
    the first pin: read again, they were the pinned thread's own (Linux
    answers sched_getaffinity(0) for the calling thread), and from the
    second turn on every thread of every variant ran on `cpu` (the runs of
    2026-11-30 10:12Z-10:26Z: the watch's sampler and worker threads beside
    the main threads)."""
    if not _ALLOWED:
        _ALLOWED.update(os.sched_getaffinity(0))
    allowed = _ALLOWED | {cpu}
    main = threading.get_native_id()
    for task in os.listdir("/proc/self/task"):
        tid = int(task)
        try:
            os.sched_setaffinity(tid, {cpu} if tid == main else (allowed - {cpu}) or allowed)
        except OSError:  # a thread that ended meanwhile
            pass


# --cpu: the same loop on a machine with no GPU (a tiny GPT-2, one torch thread)
ON_CPU = False


def drain(torch) -> None:
    """The GPU's work done (nothing to wait for with --cpu)."""
    if not ON_CPU:
        torch.cuda.synchronize()


def warm_gpt2():
    """(torch, model, loop): benchmarks/cost/overhead.py's GPT-2 generate()
    loop, three calls done and the GPU drained.  With --cpu: GPT-2 of 6
    layers of 128 on the CPU (~2.2 ms a token on this project's 2-core box,
    2026-11-30; GPT-2 small on an H200 ~5.5 ms of host time a token), a
    token of Python for a watch's step to be weighed against."""
    import torch

    sys.path.insert(0, os.path.join(HERE, "..", "cost"))
    from overhead import build_gpt2

    if ON_CPU:
        from transformers import GPT2Config

        torch.set_num_threads(1)
        model, loop = build_gpt2(torch, "cpu", GPT2Config(n_layer=6, n_head=4, n_embd=128,
                                                          vocab_size=1000, bos_token_id=0,
                                                          eos_token_id=0))
    else:
        model, loop = build_gpt2(torch)
    for _ in range(3):
        loop()
    drain(torch)
    return torch, model, loop


def turn_child(args: argparse.Namespace) -> int:
    """One process of --taking-turns: its variant's calls, one a turn.  It
    reads "go" or "end" from stdin; after each call (the GPU drained, so the
    next process's call begins on an idle GPU) it writes that call's line."""
    torch, model, loop = warm_gpt2()
    out = {"variant": args.turn}

    def turns():
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            if line.strip() != "go":
                break
            if args.pin is not None:
                pin_main_thread(args.pin)
            cpu0, t, m = on_cpu(), time.perf_counter(), time.thread_time()
            loop()
            call, main = time.perf_counter() - t, time.thread_time() - m
            cpu1 = on_cpu()
            drain(torch)
            print(json.dumps({"call_s": call, "main_cpu_s": main, "cpus": [cpu0, cpu1]}), flush=True)

    if args.turn in ("bare", "bare_again"):
        turns()
    elif args.turn == "hooks_only":
        add_idle_step_hooks(model)
        turns()
    elif args.turn == "bare_imported":
        # loopscope imported and never entered: does the import alone change the loop?
        t = time.perf_counter()
        import loopscope  # noqa: F401
        out["import_s"] = time.perf_counter() - t
        turns()
    else:
        t = time.perf_counter()
        import loopscope
        out["import_s"] = time.perf_counter() - t
        t0 = time.perf_counter()
        with make_watch(model, args.turn) as w:
            out["enter_s"] = time.perf_counter() - t0
            first = w._prof  # the first light block: its enter's phases, read after the watch
            turns()
            t_exit = time.perf_counter()
        out["exit_s"] = time.perf_counter() - t_exit
        t = time.perf_counter()
        s = w.summary()
        out["summary_s"] = time.perf_counter() - t  # block + summary(): what a reader pays
        out.update(steps=len(w.steps()), breaches=s["breaches"], dumps=len(w.dumps),
                   ends=(s.get("module_steps") or {}).get("ends"),
                   blocks=s["blocks"], missing=s["missing"])
        if first is not None and first.finished is not None:
            over = first.finished.step_figures()["overhead"]
            out["first_block"] = {k: over.get(k) for k in (
                "enter_ms", "start_phases_ms", "stop_ms", "finish_ms", "metrics_setup_ms",
                "metrics_start_delay_ms")}
    print(json.dumps(out), flush=True)
    return 0


def taking_turns(args: argparse.Namespace) -> int:
    """One process a variant, all alive at once, taking turns call by call
    on the GPU (each waits on a pipe while another runs), the order rotated
    each call; fresh processes each round.  The host's slow spells (seconds
    to a whole process: a bare process's 12 calls all 720-770 ms beside
    another's 340-376 ms, H200 2026-11-30) then fall on every variant alike:
    each call is compared with the other variants' calls of the same turn,
    ~0.4 s away."""
    variants = args.taking_turns.split(",")
    per = {v: [] for v in variants}       # each call: dict
    ends = {v: [] for v in variants}      # each process's last line
    ratios = {v: [] for v in variants}    # each turn: the call over the bare call of that turn
    for r in range(args.rounds):
        pin = [] if args.pin is None else ["--pin", str(args.pin)]
        cpu = ["--cpu"] if args.cpu else []
        procs = {v: subprocess.Popen([sys.executable, __file__, "--turn", v, *pin, *cpu], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
                 for v in variants}
        try:
            for v, p in procs.items():
                first = p.stdout.readline()
                if not first or not json.loads(first).get("ready"):
                    print(f"round {r + 1}: the {v} process did not start", file=sys.stderr)
                    return 1
            for i in range(args.calls):
                k = (r * args.calls + i) % len(variants)
                turn = {}
                for v in variants[k:] + variants[:k]:
                    procs[v].stdin.write("go\n")
                    procs[v].stdin.flush()
                    turn[v] = json.loads(procs[v].stdout.readline())
                    per[v].append(turn[v])
                for v in variants:
                    ratios[v].append(turn[v]["call_s"] / turn["bare"]["call_s"])
            for v, p in procs.items():
                p.stdin.write("end\n")
                p.stdin.flush()
                ends[v].append(json.loads(p.stdout.readline()))
                p.wait(timeout=120)
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
        print(f"round {r + 1}: " + ", ".join(
            f"{v} {statistics.median(c['call_s'] for c in per[v][-args.calls:]) * 1e3:.0f} ms"
            for v in variants), file=sys.stderr, flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"calls": per, "ends": ends}, f, indent=1)
    n = args.calls
    print(f"\nGPT-2 generate(64): {args.rounds} rounds, one process a variant alive at once, "
          f"taking turns call by call ({n} calls each)")
    print("| variant | a call, median | x (pooled) | a turn's ratio: median [q1, q3] | lower quartile x "
          "| main thread's CPU x | whole block over the bare calls, per round | enter, exit, import |")
    print("|---|---|---|---|---|---|---|---|")
    bare_calls = [c["call_s"] for c in per["bare"]]
    bare_cpu = [c["main_cpu_s"] for c in per["bare"]]
    for v in variants:
        calls = [c["call_s"] for c in per[v]]
        cpu = [c["main_cpu_s"] for c in per[v]]
        q = statistics.quantiles(ratios[v], n=4)
        block = [round((sum(calls[j * n:(j + 1) * n]) + e.get("enter_s", 0) + e.get("exit_s", 0))
                       / sum(bare_calls[j * n:(j + 1) * n]), 3) for j, e in enumerate(ends[v])]
        times = "" if v in BARE_TURNS else (
            f"{[round(e['enter_s'] * 1e3) for e in ends[v]]} ms, {[round(e['exit_s'] * 1e3) for e in ends[v]]} ms, "
            f"{[round(e['import_s'] * 1e3) for e in ends[v]]} ms; summary() "
            f"{[round(e.get('summary_s', 0) * 1e3) for e in ends[v]]} ms")
        print(f"| {v} | {statistics.median(calls) * 1e3:.1f} ms | "
              f"{statistics.median(calls) / statistics.median(bare_calls):.3f} | "
              f"{statistics.median(ratios[v]):.3f} [{q[0]:.3f}, {q[-1]:.3f}] | "
              f"{lower_quartile(calls) / lower_quartile(bare_calls):.3f} | "
              f"{statistics.median(cpu) / statistics.median(bare_cpu):.3f} | "
              f"median {statistics.median(block):.3f}: {block} | {times} |")
    for v in variants:
        if v in BARE_TURNS:
            continue
        with_summary = [round((sum(c["call_s"] for c in per[v][j * n:(j + 1) * n]) + e["enter_s"]
                               + e["exit_s"] + e.get("summary_s", 0))
                              / sum(bare_calls[j * n:(j + 1) * n]), 3) for j, e in enumerate(ends[v])]
        print(f"{v}: whole block + summary() over the bare calls, rounds' median "
              f"{statistics.median(with_summary):.3f} {with_summary}")
        for e in ends[v][:3]:
            print(f"  first block: {json.dumps(e.get('first_block'))}")
    for v in variants:
        if v not in BARE_TURNS:
            e = ends[v][-1]
            # a watch whose counters were refused (another process of this
            # run holds them) pays no decoding: its figure is not the watch's
            counted = sum("sm_active_pct" not in x["missing"] for x in ends[v])
            print(f"{v}: steps kept {e['steps']}, breaches {e['breaches']}, dumps {e['dumps']}, "
                  f"blocks {e['blocks']}, missing {sorted(e['missing'])}; SM measured in {counted} "
                  f"of {len(ends[v])} processes")
            for x in ends[v]:
                if x["missing"].get("sm_active_pct") and "turned off" not in x["missing"]["sm_active_pct"]:
                    print(f"  {v} SM missing: {x['missing']['sm_active_pct']}")
    # the host's spells by CPU: a call's time against the CPU it began on
    by_cpu: dict[int, list[float]] = {}
    for v in variants:
        for c in per[v]:
            by_cpu.setdefault(c["cpus"][0], []).append(c["call_s"] / statistics.median(bare_calls))
    print("a call's time over the bare median, by the CPU it began on: " + ", ".join(
        f"cpu {k}: {statistics.median(xs):.2f} ({len(xs)})" for k, xs in sorted(by_cpu.items())))
    for v in variants:
        print(f"{v} calls (ms): {[round(c['call_s'] * 1e3) for c in per[v]]}")
    return 0 if all(e.get("breaches", 0) == 0 for v in variants for e in ends[v]) else 1


def pooled_report(paths: list[str]) -> int:
    """--report: the rounds of saved --taking-turns runs (their --json, gzip
    or not) pooled, each watched variant against the mean of the two bare
    processes of its turn (bare and bare_again: either alone as the
    reference carries that one process's luck; on 2026-11-30 bare_again read
    0.947x bare over 15 rounds), with the A/A itself beside."""
    import gzip
    rounds: list[dict[str, tuple[list[dict], dict]]] = []  # each round: variant -> (calls, end)
    for path in paths:
        with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
            run = json.load(f)
        n = len(run["calls"]["bare"]) // len(run["ends"]["bare"])
        for j in range(len(run["ends"]["bare"])):
            rounds.append({v: (xs[j * n:(j + 1) * n], run["ends"][v][j])
                           for v, xs in run["calls"].items() if j < len(run["ends"][v])})
    if not all("bare_again" in r for r in rounds):
        print("--report: the runs need a bare_again process (the mean of both bare is the reference)")
        return 1

    def spread(xs: list[float]) -> str:
        q = statistics.quantiles(xs, n=4) if len(xs) > 1 else xs * 3
        return f"{statistics.median(xs):.3f} [{q[0]:.3f}, {q[2]:.3f}]"

    variants = list(dict.fromkeys(v for r in rounds for v in r if v != "bare"))
    print(f"{len(paths)} runs, {len(rounds)} rounds pooled; each over the mean of bare and bare_again "
          "(A/A: bare_again over bare); a variant over the rounds that ran it")
    print("| variant | rounds | whole block (enter + calls + exit), rounds' median [q1, q3] | mean +- "
          "standard error | + summary() | a turn [q1, q3] | main thread's CPU, rounds |")
    print("|---|---|---|---|---|---|---|")
    for v in variants:
        block, with_summary, turn, cpu = [], [], [], []
        for r in (r for r in rounds if v in r):
            (b, _), (a, _), (x, e) = r["bare"], r["bare_again"], r[v]
            ref = (sum(c["call_s"] for c in b) + sum(c["call_s"] for c in a)) / 2
            ref_cpu = (sum(c["main_cpu_s"] for c in b) + sum(c["main_cpu_s"] for c in a)) / 2
            if v == "bare_again":  # the A/A: one bare process over the other
                ref = sum(c["call_s"] for c in b)
                ref_cpu = sum(c["main_cpu_s"] for c in b)
            own = sum(c["call_s"] for c in x) + e.get("enter_s", 0) + e.get("exit_s", 0)
            block.append(own / ref)
            with_summary.append((own + e.get("summary_s", 0)) / ref)
            cpu.append(sum(c["main_cpu_s"] for c in x) / ref_cpu)
            for i, c in enumerate(x):
                turn.append(c["call_s"] / (b[i]["call_s"] if v == "bare_again"
                                           else (b[i]["call_s"] + a[i]["call_s"]) / 2))
        se = statistics.stdev(block) / len(block) ** 0.5 if len(block) > 1 else float("nan")
        print(f"| {v} | {len(block)} | {spread(block)} | {statistics.mean(block):.3f} +- {se:.3f} | "
              f"{spread(with_summary)} | {spread(turn)} | {spread(cpu)} |")
    return 0


def child(args: argparse.Namespace) -> dict:
    torch, model, loop = warm_gpt2()
    out = {"variant": args.variant}
    calls = []  # each generate()'s own time: steady state apart from enter and exit
    others = []  # CPU time of the process's other threads (the sampler's decoding) a call

    main_cpu = []  # the main thread's own CPU time a call
    waits = []  # the main thread's time runnable but not running a call, and the machine's steal

    def run_calls():
        for _ in range(args.calls):
            q, st = run_delay(), steal()
            t, c, m = time.perf_counter(), time.process_time(), time.thread_time()
            loop()
            calls.append(time.perf_counter() - t)
            main = time.thread_time() - m
            main_cpu.append(main)
            others.append(max(0.0, (time.process_time() - c) - main))
            waits.append((run_delay() - q, steal() - st))
        drain(torch)

    if args.variant != "bare":
        # the import is paid once a process, before any with-block: timed
        # apart (`import_s`), not in the block (it was, up to 2026-11-30)
        t = time.perf_counter()
        import loopscope
        out["import_s"] = time.perf_counter() - t
    t0 = time.perf_counter()
    if args.variant == "bare":
        run_calls()
        t_exit = time.perf_counter()
    else:
        with make_watch(model, args.variant) as w:
            t_in = time.perf_counter()
            run_calls()
            t_exit = time.perf_counter()
        out["enter_s"] = t_in - t0
    out["seconds"] = time.perf_counter() - t0
    out["exit_s"] = time.perf_counter() - t_exit
    out["calls_s"] = calls
    out["other_threads_cpu_s"] = others
    out["main_cpu_s"] = main_cpu
    out["run_delay_s"] = [w[0] for w in waits]
    out["steal_s"] = [w[1] for w in waits]
    if args.variant != "bare":
        s = w.summary()
        out["steps"] = len(w.steps())
        out["breaches"] = s["breaches"]
        out["dumps"] = len(w.dumps)
        out["blocks"] = s["blocks"]
        out["missing"] = s["missing"]
    return out


def in_process(args: argparse.Namespace) -> int:
    """One process, blocks of --calls generate() calls: bare and each watched
    variant of --in-process in turn, the order rotated each round, --rounds
    times.  The process-to-process spread (a bare call 345-548 ms between
    processes on one H200) is gone from the ratios; what is left is the
    machine's spells (calls near 400 ms, then near 750 ms for seconds), so
    the table gives the median call and the lower quartile, the quiet
    calls.  Each block's watch is a new `watch()`, its enter and exit timed
    apart from the calls; round 1 is left out of the pooled figures (its
    first enter sets CUPTI and the sampler up for the process)."""
    import loopscope

    try:
        from loopscope import _testhooks  # a build with LOOPSCOPE_TEST_HOOKS=1
        sampler_state = lambda: _testhooks._sampler_state()[0]  # noqa: E731
    except ImportError as error:
        if args.settle:
            print(f"--settle reads the sampler's state through the test hooks: {error}",
                  file=sys.stderr)
            return 2
        sampler_state = lambda: "unknown"  # noqa: E731

    torch, model, loop = warm_gpt2()
    variants = ["bare", *args.in_process.split(",")]

    def timed_calls():
        out = []
        for _ in range(args.calls):
            t = time.perf_counter()
            loop()
            out.append(time.perf_counter() - t)
        drain(torch)
        return out

    rows = []
    for r in range(args.rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        row = {}
        for v in order:
            if v == "bare":
                # a bare block right after a watched one may run beside a
                # sampler still running (it keeps running 1 s after its last
                # window): its state is noted, and --settle waits it out
                state, waited = sampler_state(), 0.0
                if args.settle and state == "running":
                    t = time.perf_counter()
                    while sampler_state() == "running" and time.perf_counter() - t < 5.0:
                        time.sleep(0.05)
                    waited = time.perf_counter() - t
                row[v] = {"calls": timed_calls(), "sampler": state, "settled_s": waited}
                continue
            t0 = time.perf_counter()
            block = (loopscope.profile(trace=False, steps=model, **PROFILE_OPTIONS[v])
                     if v in PROFILE_OPTIONS else
                     make_watch(model, v))
            with block as held:
                t1 = time.perf_counter()
                calls = timed_calls()
                t2 = time.perf_counter()
            t3 = time.perf_counter()
            s = held.summary()
            row[v] = {"calls": calls, "enter_s": t1 - t0, "exit_s": t3 - t2}
            if v in PROFILE_OPTIONS:
                row[v].update(steps=len(s.get("steps") or ()), syncs=(s.get("syncs") or {}).get("count"))
            else:
                row[v].update(breaches=s["breaches"], blocks=s["blocks"])
        rows.append(row)
        print(f"round {r + 1}: " + ", ".join(
            f"{v} {statistics.median(row[v]['calls']) * 1e3:.0f} ms" for v in order),
            file=sys.stderr, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    later = rows[1:] or rows

    def pooled(v):
        return sorted(c for x in later for c in x[v]["calls"])

    bare = pooled("bare")
    print(f"\nGPT-2 generate(64), one process, {args.rounds} rounds of {args.calls} calls a "
          f"variant, rotated (round 1 left out)")
    print("| variant | a call, median | x | lower quartile | x | rounds' ratios: median [q1, q3] "
          "| whole block: rounds' median | per round (medians) | enter, exit |")
    print("|---|---|---|---|---|---|---|---|---|")
    for v in variants:
        xs = pooled(v)
        per_round = [round(statistics.median(x[v]["calls"]) / statistics.median(x["bare"]["calls"]), 3)
                     for x in later]
        times = "" if v == "bare" else (
            f"{[round(x[v]['enter_s'] * 1e3) for x in rows]} ms, "
            f"{[round(x[v]['exit_s'] * 1e3) for x in rows]} ms")
        # each round's ratio to the bare calls of the same round: a round's
        # calls lie seconds apart, so a slow spell of the host tends to hit
        # both sides (not shown to be steadier: H200 18:35Z, rounds 0.72-1.56x)
        q = statistics.quantiles(per_round, n=4) if len(per_round) > 1 else per_round * 3
        # what a user pays for the block: enter + its calls + exit over the
        # same round's bare calls
        block = statistics.median(
            (sum(x[v]["calls"]) + x[v].get("enter_s", 0) + x[v].get("exit_s", 0))
            / sum(x["bare"]["calls"]) for x in later)
        print(f"| {v} | {statistics.median(xs) * 1e3:.1f} ms | "
              f"{statistics.median(xs) / statistics.median(bare):.3f} | {lower_quartile(xs) * 1e3:.1f} ms | "
              f"{lower_quartile(xs) / lower_quartile(bare):.3f} | {statistics.median(per_round):.3f} "
              f"[{q[0]:.3f}, {q[-1]:.3f}] | {block:.3f} | {per_round} | {times} |")
    states = [x["bare"]["sampler"] for x in later]
    if "unknown" in states:
        print("bare blocks begun beside a running sampler: not known (a build without test hooks)")
    else:
        print(f"bare blocks begun beside a running sampler: {states.count('running')} of {len(states)}"
              + (f" (--settle waited {statistics.median(x['bare']['settled_s'] for x in later):.2f} s, "
                 f"median)" if args.settle else ""))
    for v in variants:  # what each block held: the watch's block size and rotation cost, the profile's steps and syncs
        last = later[-1][v]
        if "blocks" in last:
            print(f"{v}: blocks {last['blocks']}")
        elif "steps" in last:
            print(f"{v}: steps {last['steps']}, syncs {last['syncs']}")
    return 0 if all(x[v].get("breaches", 0) == 0 for x in rows for v in variants) else 1


def lower_quartile(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=4)[0] if len(xs) > 1 else xs[0]


def parent(args: argparse.Namespace) -> int:
    variants = args.variants.split(",")
    results: dict[str, list[dict]] = {v: [] for v in variants}
    for r in range(args.rounds):
        for variant in (variants if r % 2 == 0 else variants[::-1]):
            done = subprocess.run([sys.executable, __file__, "--variant", variant,
                                   "--calls", str(args.calls)], capture_output=True, text=True)
            if done.returncode != 0:
                print(done.stdout, done.stderr[-4000:], file=sys.stderr)
                return 1
            results[variant].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1} {variant}: {results[variant][-1]['seconds']:.3f} s",
                  file=sys.stderr, flush=True)
            if args.json:  # after every process: a run cut short keeps what it measured
                with open(args.json, "w") as f:
                    json.dump(results, f, indent=1)
    bare = statistics.median(x["seconds"] for x in results["bare"])
    # a process's quiet calls: the host runs in spells (a bare call 350 ms,
    # then 500-600 ms for seconds, H200 2026-11-30), so each process's lower
    # quartile (first call left out), the median over processes
    quiet_bare = statistics.median(lower_quartile(x["calls_s"][1:]) for x in results["bare"])
    print(f"\nGPT-2 generate(64) x {args.calls}, {args.rounds} rounds (one process each, alternating)")
    ok = True
    for v in variants:
        xs = results[v]
        med = statistics.median(x["seconds"] for x in xs)
        per_round = [round(x["seconds"] / b["seconds"], 3) for x, b in zip(xs, results["bare"])]
        call = statistics.median(c for x in xs for c in x["calls_s"][1:])
        bare_call = statistics.median(c for x in results["bare"] for c in x["calls_s"][1:])
        slowest = max(max(x["calls_s"]) for x in xs)
        quiet = statistics.median(lower_quartile(x["calls_s"][1:]) for x in xs)
        other_cpu = statistics.median(c for x in xs for c in x["other_threads_cpu_s"][1:])
        # the main thread's own CPU a call: what a slow spell of the host
        # (waiting for a CPU, or stolen by the hypervisor) does not add to
        cpu = statistics.median(c for x in xs for c in x["main_cpu_s"][1:])
        bare_cpu = statistics.median(c for x in results["bare"] for c in x["main_cpu_s"][1:])
        delay = statistics.median(c for x in xs for c in x["run_delay_s"][1:])
        stolen = sum(c for x in xs for c in x["steal_s"][1:]) / max(1, sum(len(x["steal_s"]) - 1 for x in xs))
        line = (f"| {v} | {med:.3f} s | {med / bare:.3f}x | per round {per_round} | a call "
                f"(median, first left out) {call * 1e3:.1f} ms = {call / bare_call:.3f}x, slowest "
                f"{slowest * 1e3:.0f} ms | a process's quiet calls (lower quartile, median of processes) "
                f"{quiet * 1e3:.1f} ms = {quiet / quiet_bare:.3f}x | other threads' CPU a call "
                f"{other_cpu * 1e3:.0f} ms | main thread's CPU a call {cpu * 1e3:.1f} ms = {cpu / bare_cpu:.3f}x, "
                f"its run-queue wait {delay * 1e3:.1f} ms, steal (all CPUs) {stolen * 1e3:.0f} ms | enter {[round(x.get('enter_s', 0) * 1e3) for x in xs]} ms, "
                f"exit {[round(x['exit_s'] * 1e3) for x in xs]} ms, "
                f"import {[round(x.get('import_s', 0) * 1e3) for x in xs]} ms |")
        if v != "bare":
            last = xs[-1]
            ok = ok and all(x["dumps"] == 0 for x in xs)
            line += (f" steps kept {last['steps']}, breaches {last['breaches']}, dumps {last['dumps']}, "
                     f"blocks {last['blocks']}, missing {sorted(last['missing'])} |")
        print(line)
    # each process's calls in order: a slow start (seen 2026-11-29 23:55Z:
    # the first 3-6 calls of 2 of 4 watched processes) shows here
    for v in variants:
        for i, x in enumerate(results[v]):
            print(f"{v} process {i + 1} calls (ms): {[round(c * 1e3) for c in x['calls_s']]}")
    return 0 if ok else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--calls", type=int, default=40, help="generate() calls a process (default 40)")
    p.add_argument("--rounds", type=int, default=2, help="rounds of bare + watch (default 2)")
    p.add_argument("--variants", default="bare,watch",
                   help="bare first, then any of: " + ", ".join(WATCH_OPTIONS) + " (default bare,watch)")
    p.add_argument("--json", metavar="OUT", help="write every process's results to OUT")
    p.add_argument("--in-process", metavar="VARIANTS",
                   help="one process: bare and each of VARIANTS (comma-separated: "
                        + ", ".join(IN_PROCESS) + ") in blocks of --calls, rotated, --rounds times")
    p.add_argument("--settle", action="store_true",
                   help="--in-process: before a bare block, wait until the sampler stops "
                        "running (it runs on 1 s after a watch), so bare calls pay none of it")
    p.add_argument("--taking-turns", metavar="VARIANTS",
                   help="bare first, then any of the watch variants: one process each, alive at "
                        "once, taking turns call by call (--calls turns), fresh processes each of "
                        "--rounds rounds")
    p.add_argument("--variant", choices=("bare", *WATCH_OPTIONS), help=argparse.SUPPRESS)
    p.add_argument("--pin", type=int, metavar="CPU",
                   help="--taking-turns: each process's main thread on this CPU alone (the "
                        "others' threads off it), so every variant runs on the same core")
    p.add_argument("--cpu", action="store_true",
                   help="a tiny GPT-2 (6 layers of 128) on the CPU instead of GPT-2 small on the "
                        "GPU: the method on a machine with no GPU (counters and syncs then have "
                        "nothing to read: watch_host and its kin)")
    p.add_argument("--turn", choices=(*BARE_TURNS, *WATCH_OPTIONS),
                   help=argparse.SUPPRESS)
    p.add_argument("--report", nargs="+", metavar="JSON",
                   help="pool saved --taking-turns runs (their --json) that have a bare_again "
                        "process: each variant over the mean of both bare processes")
    args = p.parse_args()
    global ON_CPU
    ON_CPU = args.cpu
    if args.report:
        return pooled_report(args.report)
    if not args.variant and (args.variants.split(",")[0] != "bare"
                             or not set(args.variants.split(",")[1:]) <= set(WATCH_OPTIONS)):
        p.error(f"--variants: bare first, then any of {', '.join(WATCH_OPTIONS)}; got {args.variants!r}")
    if args.in_process and not set(args.in_process.split(",")) <= set(IN_PROCESS):
        p.error(f"--in-process: any of {', '.join(IN_PROCESS)}; got {args.in_process!r}")
    if args.taking_turns and (args.taking_turns.split(",")[0] != "bare" or not set(
            args.taking_turns.split(",")[1:]) <= {*BARE_TURNS[1:], *WATCH_OPTIONS}):
        p.error(f"--taking-turns: bare first, then any of bare_again (a second bare process: "
                f"the method's own spread), {', '.join((*BARE_TURNS[2:], *WATCH_OPTIONS))}; "
                f"got {args.taking_turns!r}")
    if args.cpu and not (args.taking_turns or args.turn):
        p.error("--cpu: goes with --taking-turns")
    if args.pin is not None and not args.turn and (not args.taking_turns
                                                   or args.pin not in os.sched_getaffinity(0)):
        p.error(f"--pin: goes with --taking-turns, and must be a CPU this process may run on "
                f"({sorted(os.sched_getaffinity(0))}); got {args.pin}")
    if args.turn:
        return turn_child(args)
    if args.taking_turns:
        return taking_turns(args)
    if args.variant:
        print(json.dumps(child(args)))
        return 0
    if args.in_process:
        return in_process(args)
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
