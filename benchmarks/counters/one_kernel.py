"""One long kernel, for Nsight Compute and loopscope side by side
(benchmarks/counters/ncu_compare.sh).  --mode copy: a 4 GiB elementwise read+write kernel (DRAM bound);
--mode mm: a bf16 16384^3 matmul (compute bound).  Two warm-up launches,
then the measured one (ncu: --launch-skip 2 --launch-count 1).
--loopscope prints loopscope's figures over the measured kernel's busy time."""
from __future__ import annotations

import argparse
import json

import torch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("copy", "mm"), default="copy")
    parser.add_argument("--loopscope", action="store_true")
    args = parser.parse_args()
    if args.mode == "copy":
        src = torch.empty(1 << 31, dtype=torch.bfloat16, device="cuda")  # 4 GiB
        dst = torch.empty_like(src)
        # an elementwise kernel, not copy_ (a device copy goes to the copy
        # engine as a memcpy, which Nsight Compute does not profile)
        run = lambda: torch.mul(src, 2, out=dst)  # noqa: E731
    else:
        a = torch.randn(16384, 16384, dtype=torch.bfloat16, device="cuda")
        c = torch.empty_like(a)
        run = lambda: torch.mm(a, a, out=c)  # noqa: E731
    for _ in range(2):
        run()
    torch.cuda.synchronize()
    if not args.loopscope:
        run()
        torch.cuda.synchronize()
        return
    import loopscope

    with loopscope.profile(metrics=True, metrics_interval_us=50) as prof:
        with loopscope.range("measured"):
            run()
        torch.cuda.synchronize()
    s = prof.summary()
    r = s["ranges"][0]
    print(json.dumps({"mode": args.mode, "gpu_ms": r["gpu_ms"],
                      "loopscope_dram_pct": r["dram_busy_pct"],
                      "loopscope_sm_active_pct": r["sm_active_busy_pct"],
                      "samples": r["samples"], "metrics_error": s["metrics_error"]}))


if __name__ == "__main__":
    main()
