"""One profile of the CUDA-graph demo loop with CUPTI's graph-level trace in
place of per-kernel records (LOOPSCOPE_INTERNAL=kernel_activity=graphs, set
by this script), printing what the summary saw.  Run under gdb on the GPU
machine to see where a crash happens:
    gdb -batch -ex run -ex bt --args python3 benchmarks/graph_trace_probe.py
"""
from __future__ import annotations

import os
import sys
import warnings

os.environ["LOOPSCOPE_INTERNAL"] = os.environ.get("LOOPSCOPE_INTERNAL") or "kernel_activity=graphs"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import build_loop  # noqa: E402


def main() -> None:
    warnings.filterwarnings("ignore")
    import loopscope

    torch, _model, loop = build_loop(os.environ.get("PROBE_LOOP", "graph"))
    for i in range(3):
        prof = loopscope.profile(metrics=False)
        with prof:
            loop(prof)
            torch.cuda.synchronize()
        print(f"profile {i}: exited", flush=True)
        s = prof.summary()
        print(f"profile {i}: gpu {s['gpu'] and {k: s['gpu'][k] for k in ('kernels', 'busy_pct')}}; "
              f"gpu_error {s['gpu_error']}; steps {len(s['steps'])}; verdict "
              f"{s['diagnosis']['verdict']}", flush=True)


if __name__ == "__main__":
    main()
