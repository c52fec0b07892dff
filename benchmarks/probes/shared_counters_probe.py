"""Two processes on one GPU: does the process that holds the counters keep
its SM and DRAM while another process profiles beside it?

The H200 run of 2026-11-30 04:55Z (four `watch_generate.py` variants taking
turns) left the holder's every sample out as lying 148-170 ms before where
sampling began.  One process beside a bare one read SM every time then;
but at 07:56Z a watched process beside two bare ones lost it the same way
(1 of 7), so another profiler is not needed for the loss.  In 8 scenario
runs (07:24Z, 07:47Z) this probe read SM every time.  It puts one holder (a counters profile, lazy as `watch()`'s blocks, or
waiting as `profile()`) beside one other process of each kind, in turn:

  alone      no other process
  bare       a torch loop, no loopscope
  nometrics  loopscope with metrics=False (CUPTI's activity and callbacks)
  refused    loopscope with metrics on: refused the counters, the holder has them
  together   as refused, but both enter at once (the other's set-up beside the holder's)
  retrying   the other opens a 100 ms counters profile after another, each refused
             (as a refused watch() asks again at every block)

Each scenario is two fresh processes; the other starts its profile `--delay`
seconds after the holder's (0 for `together`).  Printed: the holder's SM, its
samples, decodes, set-up phases and why SM is missing; the other's reason.
Usage: python benchmarks/probes/shared_counters_probe.py [--seconds 6] [--only a,b]
       [--holder lazy|on] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

SCENARIOS = ("alone", "bare", "nometrics", "refused", "together", "retrying")


def child(role: str, metrics: str, seconds: float) -> int:
    """One process: warms up, says `ready`, waits for `go`, profiles (or
    not) a matmul loop for `seconds`, prints one JSON line."""
    import torch
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)

    def step() -> None:
        for _ in range(8):
            a @ a
        torch.cuda.synchronize()
        time.sleep(0.002)

    for _ in range(5):
        step()
    if role != "bare":
        import loopscope  # noqa: F401  (imported before `go`: its time is not the race's)
    print("ready", flush=True)
    sys.stdin.readline()
    out: dict = {"role": role}
    t0 = time.perf_counter()
    steps = 0
    if role == "bare":
        while time.perf_counter() - t0 < seconds:
            step()
            steps += 1
    elif role == "retrying":
        import loopscope
        reasons = set()
        print("entered", flush=True)
        while time.perf_counter() - t0 < seconds:
            with loopscope.profile(trace=False, syncs=False, metrics="lazy") as prof:
                for _ in range(10):
                    step()
                    steps += 1
            reasons.add(prof.summary()["metrics_error"])
        out["profiles"] = steps // 10
        out["metrics_error"] = " | ".join(sorted(map(str, reasons)))
    else:
        import loopscope
        want = {"lazy": "lazy", "on": True, "off": False}[metrics]
        with loopscope.profile(trace=False, syncs=False, metrics=want) as prof:
            out["enter_s"] = time.perf_counter() - t0
            print("entered", flush=True)
            while time.perf_counter() - t0 < seconds:
                step()
                steps += 1
        s = prof.summary()
        m = s.get("metrics") or {}
        out.update(sm=(s.get("sm") or {}).get("active_pct"), metrics_error=s["metrics_error"],
                   samples=m.get("samples"), decodes=m.get("decodes"),
                   skipped=m.get("skipped_samples"), overflows=m.get("overflows"),
                   setup_ms=m.get("setup_ms"), sampler_reused=m.get("sampler_reused"),
                   config_source=m.get("config_source"), error=m.get("error"))
    out["steps"] = steps
    out["wall_s"] = time.perf_counter() - t0
    print(json.dumps(out), flush=True)
    return 0


def spawn(role: str, metrics: str, seconds: float) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, __file__, "--child", role, "--child-metrics", metrics,
                          "--seconds", str(seconds)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().strip()
    if line != "ready":
        raise RuntimeError(f"{role}: said {line!r} before `ready`")
    return p


def last_json(p: subprocess.Popen) -> dict:
    out, _ = p.communicate(timeout=120)
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {"error": f"no JSON line (rc {p.returncode})"}


def scenario(name: str, args: argparse.Namespace) -> dict:
    holder = spawn("holder", args.holder, args.seconds)
    other = None
    if name != "alone":
        role = {"bare": "bare", "nometrics": "other", "refused": "other",
                "together": "other", "retrying": "retrying"}[name]
        other = spawn(role, "off" if name == "nometrics" else "on", args.seconds / 2)
    if name == "together":
        holder.stdin.write("go\n")
        other.stdin.write("go\n")
        holder.stdin.flush()
        other.stdin.flush()
    else:
        holder.stdin.write("go\n")
        holder.stdin.flush()
        entered = holder.stdout.readline().strip()
        if entered != "entered":
            raise RuntimeError(f"holder: said {entered!r} before `entered`")
        if other is not None:
            time.sleep(args.delay)
            other.stdin.write("go\n")
            other.stdin.flush()
    out = {"scenario": name, "holder": last_json(holder)}
    if other is not None:
        out["other"] = last_json(other)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=6.0, help="the holder's profile (s)")
    ap.add_argument("--delay", type=float, default=1.0,
                    help="the other's profile starts this long after the holder's (s)")
    ap.add_argument("--holder", choices=("lazy", "on"), default="lazy",
                    help="the holder's metrics: lazy as watch()'s blocks, on as profile()")
    ap.add_argument("--only", default=",".join(SCENARIOS))
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-metrics", choices=("lazy", "on", "off"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.child_metrics, args.seconds)
    rows = []
    for name in args.only.split(","):
        if name not in SCENARIOS:
            ap.error(f"--only: {name!r} is not one of {', '.join(SCENARIOS)}")
        t0 = time.perf_counter()
        try:
            rows.append(scenario(name, args))
        except Exception as error:  # report and go on
            rows.append({"scenario": name, "error": f"{type(error).__name__}: {error}"})
        print(f"--- {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print(f"| scenario | holder SM % | samples | decodes | skipped | set-up start ms | holder's "
          f"missing | other's |")
    for r in rows:
        h, o = r.get("holder", {}), r.get("other", {})
        why = h.get("metrics_error") or h.get("error") or ""
        why = why if len(why) < 400 else f"{why[:120]} ... {why[-260:]}"
        print(f"| {r['scenario']} | {h.get('sm')} | {h.get('samples')} | {h.get('decodes')} | "
              f"{h.get('skipped')} | {(h.get('setup_ms') or {}).get('start')} | {why} | "
              f"{(o.get('metrics_error') or o.get('error') or '-')[:120]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
