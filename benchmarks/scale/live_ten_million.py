"""10M kernels in one live profile (issue 14, row G4 of tests/hostile/README.md),
with summary()'s time, CPU time and peak memory: CUDA-graph replays of 10,000
tiny kernels, 10 replays a step, 100 steps, metrics off (as the hostile GPU
test, which runs this script).  Prints one JSON line.  GPU machine only.

    python benchmarks/scale/live_ten_million.py
"""
import argparse
import json
import resource
import time
import warnings

warnings.simplefilter("ignore")
import torch  # noqa: E402

import loopscope  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    per_graph, replays_per_step, steps = 10_000, 10, 100
    x = torch.zeros(1, device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            x.add_(1)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(per_graph):
            x.add_(1)
    graph.replay()
    torch.cuda.synchronize()
    before = rss_mb()
    t0 = time.perf_counter()
    with loopscope.profile(metrics=False) as prof:
        for _ in range(steps):
            with prof.step():
                for _ in range(replays_per_step):
                    graph.replay()
                torch.cuda.synchronize()
    loop_s = time.perf_counter() - t0
    records = rss_mb()
    peak_capture = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    s = prof.summary()
    wall = time.perf_counter() - t
    usage1 = resource.getrusage(resource.RUSAGE_SELF)
    peak = usage1.ru_maxrss / 1024
    json.dumps(s, allow_nan=False)
    print(json.dumps({
        "loopscope": loopscope.__file__, "launched": per_graph * replays_per_step * steps,
        "kernels": s["gpu"]["kernels"], "dropped": s["dropped_records"],
        "buffers_refused": s["overhead"]["buffers_refused"], "steps": len(s["steps"]),
        "step0_kernels": s["steps"][0]["kernels"], "loop_s": round(loop_s, 2),
        "peak_capture_mb": round(peak_capture),
        "rss_before_mb": round(before), "rss_records_mb": round(records),
        "summary_s": round(wall, 2), "summary_user_s": round(usage1.ru_utime - usage0.ru_utime, 2),
        "summary_sys_s": round(usage1.ru_stime - usage0.ru_stime, 2),
        "peak_rss_mb": round(peak), "peak_above_records_mb": round(peak - records),
        "finish_ms": s["overhead"]["finish_ms"], "finish_wait_ms": s["overhead"]["finish_wait_ms"],
        "ops_without_launch": prof.model.ops_without_launch,
        "streams": len(prof.model.streams())}))


if __name__ == "__main__":
    main()
