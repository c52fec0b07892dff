"""`loopscope doctor` and `loopscope.doctor()`: what this machine's stack gives
loopscope, and what will not work and why, for a bug report.

It reports the driver and the CUDA it runs, the CUDA runtime the process
uses (or would: torch's build), the CUPTI a profile loads (path, version,
why that one, what was left out), PM sampling and its metrics on each GPU
(a tiny counters-only profile on each), the profiling permission, and torch.
Each problem is one sentence with its fix; the command exits 0 when there is
none, 1 otherwise.  Like `python -m torch.utils.collect_env`, the text is
what a user pastes into an issue.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
from typing import Any

from .. import _core
from ..live import _cupti_paths
from .._version import __version__
from ._cli import write_json

DESCRIPTION = """\
Says what this machine's stack gives loopscope: the driver and the CUDA it
runs, the CUDA runtime of the process (torch's build), the CUPTI a profile
loads and why, PM sampling (SM/DRAM) and its metrics on each GPU, the
profiling permission, and what will not work, each with its fix.  Paste its
output into a bug report.

examples:
  %(prog)s
  %(prog)s --json -          # the same as a JSON object on stdout
  %(prog)s --no-torch        # without importing torch (a CuPy or JAX process)
  %(prog)s --no-torch --runtime /path/to/libcudart.so.12   # as a process on that runtime

exit status: 0 everything loopscope measures is available here; 1 something
is not (each problem is listed with its fix); 2 usage error."""


def _cuda_text(version: int | None) -> str | None:
    return f"{version // 1000}.{version % 1000 // 10}" if version else None


def _cupti_cuda(version: int) -> str | None:
    """CUDA release of a CUPTI API version: 130001 -> 13.0; 18..28 -> 12.x."""
    if version >= 100000:
        return f"{version // 10000}.{version // 100 % 100}"
    table = {18: "12.0", 19: "12.1", 20: "12.2", 21: "12.3", 22: "12.4", 23: "12.5",
             24: "12.6", 25: "12.7", 26: "12.8", 27: "12.9", 28: "12.9"}
    return table.get(version)


def _permission() -> dict[str, Any]:
    restricted = None
    try:
        with open("/proc/driver/nvidia/params") as f:
            for line in f:
                if line.startswith("RmProfilingAdminOnly"):
                    restricted = line.split(":", 1)[1].strip() == "1"
    except OSError:
        pass
    return {"restricted_to_admins": restricted, "root": os.geteuid() == 0,
            "source": "/proc/driver/nvidia/params (RmProfilingAdminOnly)"}


def _torch(use_torch: bool) -> tuple[dict[str, Any] | None, Any]:
    if not use_torch:
        return {"skipped": "--no-torch"}, None
    try:
        import torch
    except ImportError:
        return None, None
    available = torch.cuda.is_available()
    return {"version": torch.__version__, "cuda": torch.version.cuda,
            "cuda_available": available,
            "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            if available else []}, torch if available else None


def _gpu_metrics(torch: Any) -> list[dict[str, Any]]:
    """A counters-only profile of one small matmul on each GPU: the chip,
    the metrics kept in one pass, those left out, or why there are none."""
    from .._profile import profile

    current = torch.cuda.current_device()  # loopscope.doctor() in a user's process: put back
    try:
        return _each_gpu(torch, profile)
    finally:
        torch.cuda.set_device(current)


def _each_gpu(torch: Any, profile: Any) -> list[dict[str, Any]]:
    gpus: list[dict[str, Any]] = []
    for index in range(torch.cuda.device_count()):
        torch.cuda.set_device(index)
        a = torch.randn(2048, 2048, device="cuda")
        torch.cuda.synchronize()
        with profile(trace=False, syncs=False) as prof:
            for _ in range(20):
                a = a @ a
                a = a / a.norm()
            torch.cuda.synchronize()
        summary = prof.summary()
        metrics = summary.get("metrics") or {}
        gpus.append({
            "index": index, "name": torch.cuda.get_device_name(index),
            "chip": metrics.get("chip"),
            "pm_sampling": summary.get("sm", {}).get("active_pct") is not None
            if isinstance(summary.get("sm"), dict) else False,
            "metrics": [m for m in (metrics.get("cupti_metrics") or "").split(", ") if m],
            "left_out": [m for m in (metrics.get("dropped_metrics") or "").split(", ") if m],
            "error": summary.get("metrics_error"),
        })
    return gpus


def doctor(torch: bool = True, gpus: bool = True) -> dict[str, Any]:
    """What this machine's stack gives loopscope, as a plain dict; its
    "problems" list says what will not work and how to fix it (empty when
    all is there).  torch=False: do not import torch.  gpus=False: skip the
    small counters-only profile on each GPU."""
    torch_info, torch_module = _torch(torch)
    facts = _cupti_paths.facts()  # after torch: importing it may load its CUDA and CUPTI
    plan = _cupti_paths.plan(facts)
    problems: list[str] = []
    driver_present = facts.driver is not None or _core.driver_cuda_version() > 0
    if not driver_present:
        problems.append("no NVIDIA GPU driver on this machine (/proc/driver/nvidia/version is "
                        "missing): loopscope reads traces offline (loopscope analyze) and "
                        "shows its bundled recording (loopscope demo); profiles record host "
                        "steps only")
    runtime_major = _cupti_paths.major_of(facts.runtime) if facts.runtime else None
    runtime_cuda = facts.torch_cuda or (f"{runtime_major}.x" if runtime_major else None)
    if facts.driver_cuda and runtime_cuda:
        # CUDA's minor version compatibility: a 12.x runtime runs on any CUDA 12 driver.
        if facts.driver_cuda < int(runtime_cuda.split(".")[0]) * 1000:
            problems.append(f"the driver ({facts.driver}) runs CUDA up to "
                            f"{_cuda_text(facts.driver_cuda)}, older than the CUDA runtime "
                            f"{runtime_cuda}: nothing runs on the GPU; update the driver (580+ "
                            f"for CUDA 13), or use a CUDA {_cuda_text(facts.driver_cuda)} "
                            "build of torch")
    loaded = _core.cupti_load(plan.candidates)
    cupti: dict[str, Any] = {
        "path": loaded["path"], "version": loaded["version"] or None,
        "cuda": _cupti_cuda(loaded["version"]) if loaded["ok"] else None,
        "how": loaded["how"], "pm_sampling": loaded["ok"] and loaded["pm_missing"] is None,
        "order": plan.why_order, "candidates": list(plan.candidates),
        "left_out": [{"what": what, "why": why} for what, why in plan.left_out],
        "error": loaded["error"],
    }
    if not loaded["ok"]:
        problems.append(f"no CUPTI: {loaded['error']}")
    elif loaded["pm_missing"] is not None:
        problems.append(f"SM and DRAM need CUPTI 12.6 or later: {loaded['path']} (CUDA "
                        f"{cupti['cuda']}) lacks {loaded['pm_missing']}; kernels, gaps and syncs "
                        "are traced. Fix: torch's cu126 or newer wheels, or "
                        "pip install 'nvidia-cuda-cupti-cu12>=12.6'")
    permission = _permission()
    if permission["restricted_to_admins"] and not permission["root"]:
        problems.append("the driver lets only administrators read the GPU's performance "
                        "counters (RmProfilingAdminOnly=1): SM and DRAM will be missing; run as "
                        "root or load the driver with NVreg_RestrictProfilingToAdminUsers=0 "
                        "(https://developer.nvidia.com/ERR_NVGPUCTRPERM)")
    if torch_info is None:
        problems.append("torch is not installed: loopscope profiles PyTorch loops (other CUDA "
                        "code is traced too, but the demo and doctor's GPU check need torch)")
    elif torch_info.get("cuda") is None and "version" in torch_info:
        problems.append(f"torch {torch_info['version']} is a CPU build: install a CUDA build "
                        "to profile on the GPU")
    elif torch_info.get("cuda_available") is False and driver_present:
        problems.append("torch sees no CUDA GPU although a driver is present (see "
                        "python -m torch.utils.collect_env)")
    devices: list[dict[str, Any]] = []
    if gpus and torch_module is not None and loaded["ok"]:
        devices = _gpu_metrics(torch_module)
        for gpu in devices:
            if gpu["error"]:
                problems.append(f"GPU {gpu['index']} ({gpu['name']}): {gpu['error']}")
    return {
        "ok": not problems,
        "loopscope": __version__,
        "python": sys.version.split()[0],
        "platform": f"{platform.system()} {platform.machine()}",
        "driver": {"version": facts.driver, "cuda": _cuda_text(facts.driver_cuda)},
        "runtime": {"loaded": facts.runtime, "torch_cuda": facts.torch_cuda},
        "cupti": cupti,
        "torch": torch_info,
        "gpus": devices,
        "profiling_permission": permission,
        "problems": problems,
    }


def format_doctor(d: dict[str, Any]) -> str:
    """The dict as the lines `loopscope doctor` prints."""
    cupti = d["cupti"]
    torch = d["torch"]
    lines = [
        f"loopscope {d['loopscope']} on Python {d['python']}, {d['platform']}",
        f"driver:      {d['driver']['version'] or 'none'}"
        + (f" (runs CUDA up to {d['driver']['cuda']})" if d["driver"]["cuda"] else ""),
        f"CUDA runtime: {d['runtime']['loaded'] or 'not loaded yet'}"
        + (f"; torch built for CUDA {d['runtime']['torch_cuda']}"
           if d["runtime"]["torch_cuda"] else ""),
        (f"CUPTI:       {cupti['path']} (API {cupti['version']}, CUDA {cupti['cuda']}; "
         f"{cupti['how']}; PM sampling {'yes' if cupti['pm_sampling'] else 'no'})")
        if cupti["path"] else f"CUPTI:       none ({cupti['error']})",
        f"  order:     {cupti['order']}",
    ]
    lines += [f"  left out:  {x['what']}: {x['why']}" for x in cupti["left_out"]]
    if torch is None:
        lines.append("torch:       not installed")
    elif "skipped" in torch:
        lines.append("torch:       not imported (--no-torch)")
    else:
        lines.append(f"torch:       {torch['version']} (CUDA {torch['cuda'] or 'none: CPU build'}"
                     f"; {len(torch['devices'])} GPU(s) visible)")
    for gpu in d["gpus"]:
        lines.append(f"GPU {gpu['index']}:       {gpu['name']} (chip {gpu['chip'] or '?'}): "
                     + (f"PM sampling, {len(gpu['metrics'])} metrics"
                        + (f"; left out to fit one pass: {', '.join(gpu['left_out'])}"
                           if gpu["left_out"] else "") if gpu["pm_sampling"]
                        else f"no PM sampling: {gpu['error']}"))
    perm = d["profiling_permission"]
    lines.append("counters:    " + ("restricted to administrators" if perm["restricted_to_admins"]
                                    else "open to all users" if perm["restricted_to_admins"]
                                    is False else "permission unknown (no driver)")
                 + (" (running as root)" if perm["root"] else ""))
    if d["problems"]:
        lines.append("will not work:")
        lines += [f"  - {p}" for p in d["problems"]]
    else:
        lines.append("all of loopscope's measurements are available here")
    return "\n".join(lines)


def add_doctor_parser(sub: Any) -> None:
    p = sub.add_parser("doctor", help="what this machine's stack gives loopscope (for bug "
                       "reports)", description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", metavar="OUT", help="also write the dict as JSON to OUT ('-': "
                   "stdout, JSON alone there; the text then goes to stderr)")
    p.add_argument("--no-torch", action="store_true",
                   help="do not import torch (and skip the per-GPU counters check)")
    p.add_argument("--runtime", metavar="LIBCUDART",
                   help="load this CUDA runtime first, as your program does (a libcudart.so.N "
                   "of a CUDA 12 application without torch): the answer is then that process's")


def doctor_command(args: argparse.Namespace) -> int:
    if args.runtime:
        import ctypes

        try:
            ctypes.CDLL(args.runtime, mode=ctypes.RTLD_GLOBAL)
        except OSError as error:
            print(f"loopscope doctor: error: --runtime {args.runtime}: {error}", file=sys.stderr)
            return 2
    d = doctor(torch=not args.no_torch)
    print(format_doctor(d))  # on stderr when --json names stdout (route_stdout)
    if args.json and not write_json("--json", args.json, d):
        return 2
    return 0 if d["ok"] else 1
