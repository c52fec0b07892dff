"""Graph-level mode against per-kernel tracing (issue 27), one process per variant.

For each loop (the demo's CUDA-graph loop; a torch.compile(mode="reduce-overhead") MLP)
and each mode (kernels: a plain process, every kernel of every replay recorded;
replays: loopscope.prepare() at the top, each replay one span), a fresh process:
builds the loop, warms it up, then alternates rounds of the bare loop and of the
profiled one (enter + loop + exit), and reads what the last profile measured.

What it prints, per variant: the bare loop's median (ms), the with-block's and the
loop-inside-the-profile's medians as ratios to the SAME process's bare loop, and
to the unprepared process's bare loop (graph-level mode keeps the graph trace on
between profiles too: its bare loop pays that); the profile's steps, busy time
(the union of its GPU ops, computed here from the raw records), per-step GPU
time, readiness states, ops by kind, and SM active.  Then the comparison the issue
asks for: steps equal, busy within 2%, readiness equal.

Usage:
  python benchmarks/cost/graph_mode.py [--rounds 15] [--repeat 2] [--loops graph,compiled]
      [--json OUT]
  python benchmarks/cost/graph_mode.py --child --mode replays --loop graph   # one variant
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time


def union_ns(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def build_loop(kind: str):
    import torch

    from loopscope import demo

    if kind == "graph":
        model, x = demo.build()
        return demo.graph_loop_factory(model, x)
    model, x = demo.build(depth=8)
    compiled = torch.compile(model, mode="reduce-overhead")

    @torch.no_grad()
    def loop(steps: int = 10, prof=None):
        y = x
        for _ in range(steps):
            if prof is None:
                y = compiled(x)
            else:
                with prof.step():
                    y = compiled(x)
        return y

    for _ in range(5):  # compile, record the graph tree, replay
        loop(3)
    return loop


def child(args: argparse.Namespace) -> dict:
    import os

    if args.internal:
        os.environ["LOOPSCOPE_INTERNAL"] = args.internal
    import loopscope

    options = json.loads(args.options) if args.options else {}

    prepared = None
    if args.mode == "replays":
        t0 = time.perf_counter()
        loopscope.prepare()
        prepared = (time.perf_counter() - t0) * 1e3
    import torch

    loop = build_loop(args.loop)
    for _ in range(3):
        loop(10)
    torch.cuda.synchronize()
    with loopscope.profile():  # the process's first profile pays its set-up: not timed
        loop(10)
        torch.cuda.synchronize()
    bare, block, inside = [], [], []
    prof = None
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        loop(10)
        torch.cuda.synchronize()
        bare.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        with loopscope.profile(**options) as prof:
            t1 = time.perf_counter()
            loop(10, prof)
            torch.cuda.synchronize()
            inside.append(time.perf_counter() - t1)
        block.append(time.perf_counter() - t0)
    s = prof.summary()
    cap = prof.capture
    # back to back: 4 profiles in a row (no summary() between) against 4 bare
    # loops; then block + summary() against one bare loop
    bare4, b2b, posted, summary_only, waits, b2b_infos = [], [], [], [], [], []
    b2b_parts = []  # each back-to-back profile: (enter, loop, exit) seconds on the user's thread
    posted_parts, posted_infos = [], []  # block + summary(): (enter, loop, exit, summary) seconds
    for _ in range(args.rounds // 3 or 1):
        t0 = time.perf_counter()
        for _ in range(4):
            loop(10)
            torch.cuda.synchronize()
        bare4.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        b2b_profiles = []
        for _ in range(4):
            t_enter = time.perf_counter()
            with loopscope.profile(**options) as p:
                t_in = time.perf_counter()
                loop(10, p)
                torch.cuda.synchronize()
                t_out = time.perf_counter()
            t_exit = time.perf_counter()
            b2b_parts.append((t_in - t_enter, t_out - t_in, t_exit - t_out))
            b2b_profiles.append(p)
        b2b.append(time.perf_counter() - t0)
        for q in b2b_profiles[1:]:  # what each later enter waited for (read after the timing)
            qi = q.capture.info()
            waits.append((qi.get("start_phases_ns") or {}).get("wait", 0) / 1e6)
            b2b_infos.append(qi)
        t0 = time.perf_counter()
        with loopscope.profile(**options) as p:
            t_in = time.perf_counter()
            loop(10, p)
            torch.cuda.synchronize()
            t_out = time.perf_counter()
        t1 = time.perf_counter()
        p.summary()
        posted.append(time.perf_counter() - t0)
        summary_only.append(time.perf_counter() - t1)
        posted_parts.append((t_in - t0, t_out - t_in, t1 - t_out, time.perf_counter() - t1))
        posted_infos.append(p.capture.info())
    info = cap.info()
    pm = info.get("pm") or {}
    last = b2b_infos[-1] if b2b_infos else {}
    last_pm = last.get("pm") or {}
    ops = cap.ops()
    kinds: dict[str, int] = {}
    for o in ops:
        kinds[o[0]] = kinds.get(o[0], 0) + 1
    start, stop = info.get("start_ns"), info.get("stop_ns")
    busy = union_ns([(o[1], o[2]) for o in ops])
    steps = s.get("steps") or []
    return {
        "mode": args.mode, "loop": args.loop, "prepare_ms": prepared,
        "bare_ms": statistics.median(bare) * 1e3,
        "block_ms": statistics.median(block) * 1e3,
        "inside_ms": statistics.median(inside) * 1e3,
        "back_to_back_x": statistics.median(b2b) / statistics.median(bare4),
        "block_summary_ms": statistics.median(posted) * 1e3,
        "summary_ms": statistics.median(summary_only) * 1e3,
        "internal": args.internal, "options": options,
        "ops_by_kind": kinds, "busy_ms_raw": busy / 1e6,
        "graph_level": info.get("graph_level"), "timestamp_source": info.get("timestamp_source"),
        "dropped": info.get("dropped_records"), "invalid": info.get("invalid_records"),
        "window_ms": (stop - start) / 1e6 if start and stop else None,
        "steps": len(steps), "step_gpu_ms": [st.get("gpu_ms") for st in steps],
        "readiness": [(st.get("graph_readiness") or {}).get("status") for st in steps],
        "summary_busy_pct": (s.get("gpu") or {}).get("busy_pct"),
        "summary_kernels": (s.get("gpu") or {}).get("kernels"),
        "graph_replays": (s.get("gpu") or {}).get("graph_replays"),
        "graphs": s.get("graphs"),
        "sm_active_pct": (s.get("sm") or {}).get("active_pct"),
        "samples": info.get("samples"), "pm_interval_ns": pm.get("interval"),
        "b2b_wait_ms": statistics.median(waits) if waits else None,
        "posted_enter_loop_exit_summary_ms": median_parts_ms(posted_parts),
        "posted_phases_ms": {kind: median_phases_ms(posted_infos, kind)
                             for kind in ("start_phases_ns", "stop_phases_ns", "finish_phases_ns")},
        "b2b_start_phases_ms": median_phases_ms(b2b_infos, "start_phases_ns"),
        "b2b_enter_loop_exit_ms": median_parts_ms(b2b_parts),
        "b2b_samples": last.get("samples"),
        # each later back-to-back profile: samples kept, decoded in its window, outside it,
        # its window (ms) and the sampler's note: a window of W ms at interval I holds ~W/I
        "b2b_each": [(q.get("samples"), (q.get("pm") or {}).get("samples"), q.get("samples_outside"),
                      round(((q.get("stop_ns") or 0) - (q.get("start_ns") or 0)) / 1e6, 3),
                      (q.get("pm") or {}).get("error") or q.get("metrics_reason"),
                      {k: (q.get("pm") or {}).get(k) for k in ("clock_delta_ns", "clock_shift_ns", "started_ns", "incomplete",
                                                               "start_delay_ns", "tail_samples")})
                     for q in b2b_infos], "b2b_tail_samples": last_pm.get("tail_samples"),
        "b2b_tail_decode_ms": (last_pm.get("tail_decode_ns") or 0) / 1e6,
        "b2b_finish_ms": (last.get("finish_ns") or 0) / 1e6,
        "b2b_pm": {k: last_pm.get(k) for k in ("stop_ns", "decode_data_ns", "evaluate_ns", "decodes",
                                               "phases_ns", "max_samples", "counter_data_bytes",
                                               "hw_buffer_bytes", "samples")},
        "b2b_finish_phases_ms": {k: v / 1e6 for k, v in (last.get("finish_phases_ns") or {}).items()},
        "metrics_error": s.get("metrics_error"),
    }


def median_parts_ms(parts: list[tuple[float, ...]]) -> list[float] | None:
    """The median of each position of equal-length tuples of seconds, in ms."""
    return [round(statistics.median(column) * 1e3, 3) for column in zip(*parts)] if parts else None


def median_phases_ms(infos: list[dict], kind: str) -> dict[str, float] | None:
    """The median of each phase of the captures' info()[kind] (ns), in ms; a
    phase one capture lacks counts as 0 there."""
    if not infos:
        return None
    names = dict.fromkeys(name for i in infos for name in (i.get(kind) or {}))
    return {name: round(statistics.median((i.get(kind) or {}).get(name, 0) for i in infos) / 1e6, 3)
            for name in names}


# Variant extras that set LOOPSCOPE_INTERNAL switches (the others set profile options).
# (overlap, overlap0/1, nostop and msNNN went with their switches, issue 43: a
# start goes on beside the last finish, and the PM sampler runs across profiles.)
INTERNAL_EXTRAS = {
    "ownts0": "own_timestamps=0",  # no new registration of CUPTI's timestamp source a start
    "nocallbacks": "callbacks=0",  # activity records only: the floor of tracing's cost
}


def parent(args: argparse.Namespace) -> int:
    rows = []
    for loop in args.loops.split(","):
        for rep in range(args.repeat):
            for variant in args.variants.split(","):
                mode, *extras = variant.split("+")
                internal = ",".join(INTERNAL_EXTRAS[e] for e in extras if e in INTERNAL_EXTRAS)
                chosen = {}
                if "decode2" in extras:
                    chosen["metrics_decode_ms"] = 2
                if "nometrics" in extras:
                    chosen["metrics"] = False
                for extra in extras:
                    if extra[:1] == "i" and extra[1:].isdigit():  # iNNN: metrics_interval_us=NNN
                        chosen["metrics_interval_us"] = int(extra[1:])
                    if extra[:3] == "buf" and extra[3:].isdigit():  # bufNN: metrics_buffer_mb=NN
                        chosen["metrics_buffer_mb"] = int(extra[3:])
                options = json.dumps(chosen) if chosen else ""
                cmd = [sys.executable, __file__, "--child", "--mode", mode, "--loop", loop,
                       "--rounds", str(args.rounds), "--internal", internal,
                       "--options", options]
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                line = [x for x in p.stdout.splitlines() if x.startswith("{")]
                if p.returncode != 0 or not line:
                    print(f"{loop} {mode} rep {rep}: exit {p.returncode}\n{p.stderr[-3000:]}",
                          flush=True)
                    rows.append({"mode": mode, "loop": loop, "failed": p.returncode,
                                 "variant": variant})
                    continue
                row = json.loads(line[-1])
                row["rep"] = rep
                row["variant"] = variant
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print(f"\n{'loop':9} {'variant':16} {'bare ms':>8} {'block/bare':>10} {'inside/bare':>11} "
          f"{'inside/plain bare':>17} {'b2b x':>6} {'blk+sum x':>9} {'busy ms':>8} {'steps':>5} "
          f"{'summary ms':>10} {'ops':>24} graph_level")
    for loop in args.loops.split(","):
        for rep in range(args.repeat):
            plain = next((r for r in rows if r.get("loop") == loop and r.get("rep") == rep
                          and r.get("variant") == "kernels" and "bare_ms" in r), None)
            for r in rows:
                if r.get("loop") != loop or r.get("rep") != rep or "bare_ms" not in r:
                    continue
                base = plain["bare_ms"] if plain else float("nan")
                print(f"{loop:9} {r['variant']:16} {r['bare_ms']:8.3f} {r['block_ms'] / r['bare_ms']:10.3f} "
                      f"{r['inside_ms'] / r['bare_ms']:11.3f} {r['inside_ms'] / base:17.3f} "
                      f"{r['back_to_back_x']:6.3f} {r['block_summary_ms'] / r['bare_ms']:9.3f} "
                      f"{r['busy_ms_raw']:8.3f} {r['steps']:5d} {r['summary_ms']:10.3f} "
                      f"{str(r['ops_by_kind']):>24} "
                      f"{r['graph_level']}")
    # where back to back goes: each later enter's wait for the last finish,
    # and that finish's PM tail (samples decoded after the stop)
    print(f"\n{'loop':9} {'variant':16} {'interval us':>11} {'samples':>7} {'b2b wait ms':>11} "
          f"{'finish ms':>9} {'tail samples':>12} {'tail decode ms':>14} {'b2b enter/loop/exit ms':>24}")
    for r in rows:
        if "bare_ms" not in r:
            continue
        interval = (r.get("pm_interval_ns") or 0) / 1e3
        print(f"{r['loop']:9} {r['variant']:16} {interval:11.0f} {r.get('b2b_samples') or 0:7d} "
              f"{r.get('b2b_wait_ms') or 0:11.2f} {r.get('b2b_finish_ms') or 0:9.2f} "
              f"{r.get('b2b_tail_samples') or 0:12d} {r.get('b2b_tail_decode_ms') or 0:14.2f} "
              f"{str(r.get('b2b_enter_loop_exit_ms')):>24}")
    # where block + summary() goes, and what each later back-to-back start did
    for r in rows:
        if "bare_ms" in r:
            print(f"{r['loop']:9} {r['variant']:16} posted enter/loop/exit/summary ms "
                  f"{r.get('posted_enter_loop_exit_summary_ms')}; phases {r.get('posted_phases_ms')}; "
                  f"b2b start phases {r.get('b2b_start_phases_ms')}")
    # CUPTI's part of that profile's PM host time (ms): the stop call, DecodeData, the
    # evaluation, and the start/stop/reset phases
    print(f"\n{'loop':9} {'variant':16} {'stop':>6} {'decode':>7} {'eval':>6} {'decodes':>7} "
          f"{'ph start':>8} {'ph stop':>7} {'ph reset':>8} {'image MiB':>9}")
    for r in rows:
        pm = r.get("b2b_pm") or {}
        if "bare_ms" not in r or not pm.get("samples"):
            continue
        ph = pm.get("phases_ns") or {}
        print(f"{r['loop']:9} {r['variant']:16} {(pm.get('stop_ns') or 0) / 1e6:6.2f} "
              f"{(pm.get('decode_data_ns') or 0) / 1e6:7.2f} {(pm.get('evaluate_ns') or 0) / 1e6:6.2f} "
              f"{pm.get('decodes') or 0:7d} {(ph.get('start') or 0) / 1e6:8.2f} "
              f"{(ph.get('stop') or 0) / 1e6:7.2f} {(ph.get('reset') or 0) / 1e6:8.2f} "
              f"{(pm.get('counter_data_bytes') or 0) / 2**20:9.1f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=15, help="alternating rounds a process")
    p.add_argument("--repeat", type=int, default=2, help="processes of each variant")
    p.add_argument("--loops", default="graph,compiled", help="graph, compiled (comma-separated)")
    p.add_argument("--json", help="write every variant's figures here")
    p.add_argument("--variants", default="kernels,replays",
                   help="MODE[+EXTRA...], comma-separated; MODE kernels or replays; EXTRA decode2 "
                        "(metrics_decode_ms=2), nometrics (metrics=False), iNNN (metrics_interval_us=NNN), "
                        "bufNN (metrics_buffer_mb=NN), ownts0 (LOOPSCOPE_INTERNAL=own_timestamps=0) "
                        "or nocallbacks (LOOPSCOPE_INTERNAL=callbacks=0)")
    p.add_argument("--internal", default="", help=argparse.SUPPRESS)
    p.add_argument("--options", default="", help=argparse.SUPPRESS)
    p.add_argument("--timeout", type=float, default=240, help="seconds a process may take")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--mode", choices=("kernels", "replays"), default="kernels")
    p.add_argument("--loop", choices=("graph", "compiled"), default="graph")
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)), flush=True)
        return 0
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
