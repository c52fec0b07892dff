"""What sync detection sees on a real GPU: the raw blocking calls of one
.item(), one .cpu(), one print(t), torch.cuda.synchronize(), a pageable
non_blocking copy and a driver-API cuCtxSynchronize, how they group into
syncs, the blocked time, and the report's sync lines.  Also checks whether
the runtime's own driver calls reach the driver-API callbacks (duplicates).
Usage: python benchmarks/probes/sync_probe.py [--json OUT]
"""
from __future__ import annotations

import argparse
import ctypes
import json

import torch

import loopscope


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    x = torch.randn(4, device="cuda", dtype=torch.bfloat16)
    host = torch.randn(1 << 20)  # 4 MiB pageable
    libcuda = ctypes.CDLL("libcuda.so.1")
    for _ in range(2):  # warm up every path once
        x.sum().item(), x.cpu(), str(x), host.to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    with loopscope.profile() as prof:
        with prof.step():
            v = x.sum().item()
        with prof.step():
            c = x.cpu()
        with prof.step():
            text = str(x)
        with prof.step():
            torch.cuda.synchronize()
        with prof.step():
            d = host.to("cuda", non_blocking=True)
        with prof.step():
            libcuda.cuCtxSynchronize()
    summary = prof.summary()
    calls = prof.capture.calls()
    waits = prof.model.syncs()
    print(f"{len(calls)} blocking calls recorded, {len(waits)} syncs, "
          f"{summary['syncs']['unjudged_async_copies']} async copies without a record")
    print(f"{'step':>4} {'api':<24} {'class':<11} {'us':>8} {'launches_before':>15}  innermost frame")
    wait_of = {i: w for w in waits for i in w[6]}
    for i, c in enumerate(calls):
        f = c["frames"][0] if c["frames"] else None
        where = f"{f[0].rsplit('/', 1)[-1]}:{f[3]} {f[1]}" if f else "-"
        step = wait_of[i][4] if i in wait_of else "-"
        mark = "" if i in wait_of else "   (not a wait)"
        print(f"{step!s:>4} {c['api']:<24} {c['wait_class']:<11} "
              f"{(c['exit_ns'] - c['enter_ns']) / 1e3:>8.1f} {c['launches_before']:>15}  {where}{mark}")
    print()
    print(prof.report())
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "calls": calls,
                       "syncs": summary["syncs"]}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
