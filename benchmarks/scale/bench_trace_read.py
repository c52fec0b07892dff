"""Time and peak memory of loopscope.analyze() on Kineto-shaped traces of
10k, 300k and 3M kernels (benchmarks/scale/make_kineto_trace.py), plain and gzip,
beside the obvious alternative: json.load of the file plus a plain Python
pass that computes the same gaps.  Each measurement runs in a fresh
process; peak RSS is that process's ru_maxrss.  CPU time (user + sys, all threads)
and the main thread's CPU time are printed beside wall time: on a shared
machine wall time depends on what else runs (the load average is printed
too); with a reader thread beside the parser, an idle 2-core machine's wall
time is about the main thread's CPU time.

    python benchmarks/scale/bench_trace_read.py --sizes 10000 300000 3000000 --dir /tmp/traces

Multi-GB files are written to --dir (check `df -h` first) and deleted at
the end unless --keep.  Prints numbers; asserts nothing."""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

ANALYZE = """
import json, resource, sys, time
import loopscope
t0 = time.perf_counter(); c0 = time.process_time(); m0 = time.thread_time()
s = loopscope.analyze(sys.argv[1], progress=False)
print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                  "main_cpu_s": time.thread_time() - m0,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "kernels": s["gpu"]["kernels"] + s["gpu"]["memcpys"] + s["gpu"]["memsets"],
                  "gaps": s["gaps"]["count"],
                  "steps": len(s["steps"]), "syncs": s["syncs"]["count"]}))
"""

BASELINE = """
import gzip, json, resource, sys, time
t0 = time.perf_counter(); c0 = time.process_time()
opener = gzip.open if sys.argv[1].endswith(".gz") else open
with opener(sys.argv[1], "rb") as f:
    doc = json.load(f)
ops = []
for e in doc["traceEvents"]:
    if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
        start = round(e["ts"] * 1000)
        ops.append((e["args"]["device"], start, start + round(e["dur"] * 1000)))
ops.sort()
gaps, end, dev = 0, None, None
for d, a, b in ops:
    if d == dev and a > end:
        gaps += 1
    end = b if d != dev or end is None else max(end, b)
    dev = d
print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                  "main_cpu_s": time.process_time() - c0,  # one thread
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "kernels": len(ops), "gaps": gaps}))
"""


def run(code: str, path: Path, limit_gb: float) -> dict:
    def cap():  # a runaway baseline must not take the machine down
        limit = int(limit_gb * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                          text=True, preexec_fn=cap)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": last[:120]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 300_000, 3_000_000])
    parser.add_argument("--dir", default="/tmp/loopscope-traces")
    parser.add_argument("--gzip", action="store_true", help="also the gzip files")
    parser.add_argument("--baseline-limit-gb", type=float, default=16.0,
                        help="address-space cap of the json.load baseline")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    args = parser.parse_args(argv)
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  {os.cpu_count()} CPUs  load "
          f"{os.getloadavg()[0]:.1f}  python {sys.version.split()[0]}")
    print(f"{'kernels':>9} {'file':>10} {'MB':>7} {'how':>18} {'wall s':>7} {'cpu s':>7} "
          f"{'main s':>7} {'RSS MB':>7}  result")
    made = []
    for n in args.sizes:
        variants = [False, True] if args.gzip else [False]
        for gz in variants:
            path = folder / f"k{n}.json{'.gz' if gz else ''}"
            if not path.exists():
                subprocess.run([sys.executable, str(HERE / "make_kineto_trace.py"), "--kernels",
                                str(n), "--no-flows", "--short-names", str(path)]
                               + (["--gzip"] if gz else []), check=True)
                made.append(path)
            size = path.stat().st_size / 1e6
            runs = [("loopscope.analyze", ANALYZE, 64.0)]
            if not args.no_baseline:
                runs.append(("json.load + pass", BASELINE, args.baseline_limit_gb))
            for how, code, limit in runs:
                r = run(code, path, limit)
                if "error" in r:
                    print(f"{n:>9} {'gzip' if gz else 'plain':>10} {size:>7.0f} {how:>18} "
                          f"{'-':>7} {'-':>7} {'-':>7} {'-':>7}  failed: {r['error']}")
                    continue
                result = f"{r['kernels']:,} GPU ops, {r['gaps']:,} gaps"
                print(f"{n:>9} {'gzip' if gz else 'plain':>10} {size:>7.0f} {how:>18} "
                      f"{r['wall_s']:>7.2f} {r['cpu_s']:>7.2f} {r['main_cpu_s']:>7.2f} "
                      f"{r['rss_mb']:>7.0f}  {result}",
                      flush=True)
    if not args.keep:
        for path in made:
            path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
