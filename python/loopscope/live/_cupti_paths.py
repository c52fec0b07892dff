"""Which CUPTI to load, best first: CUDA 12 and CUDA 13 stacks alike.

The C core takes a CUPTI already mapped in the process (torch's profiler
loads its own) before any of these, and never loads a second one. When none
is mapped, the candidates come in this order (issue "Every stack a PyTorch
user has"):

1. the CUPTI beside the CUDA runtime the process uses (a ``libcudart.so.N``
   already mapped; else torch's CUDA build, read from its ``version.py``
   without importing torch; else the one major whose CUPTI wheel is
   installed; else the newest major the driver runs);
2. the pip wheels (``nvidia/cu13/lib`` for CUDA 13, ``nvidia/cuda_cupti/lib``
   for CUDA 12), then the toolkits (``$CUDA_HOME``, ``$CUDA_PATH``,
   ``/usr/local/cuda``, ``/usr/local/cuda-N.M``);
3. the bare soname, for the dynamic loader's own search.

Each major is tried in that order, the runtime's first, then the other. A
CUDA 13 CUPTI is left out on a driver that runs only CUDA 12 (older than
580): it cannot work there, and the plan says so (``loopscope doctor``).
"""
from __future__ import annotations

import dataclasses
import glob
import importlib.util
import os
import re
import sys
from pathlib import Path

from .. import _core

MAJORS = (13, 12)

# The oldest Linux driver of each CUDA release (NVIDIA's CUDA Toolkit release
# notes, table "CUDA Toolkit and Minimum Required Driver Version"): what the
# driver's version in /proc says it can run, when libcuda is not loaded yet.
_DRIVER_CUDA = (((580, 65, 6), 13000), ((575, 51, 3), 12090), ((570, 26, 0), 12080),
                ((560, 28, 3), 12060), ((555, 42, 2), 12050), ((550, 54, 14), 12040),
                ((545, 23, 6), 12030), ((535, 54, 3), 12020), ((530, 30, 2), 12010),
                ((525, 60, 13), 12000))


@dataclasses.dataclass(frozen=True)
class Facts:
    """What decides the choice; gathered by :func:`facts`, built by hand in tests."""
    mapped_cupti: str | None = None       # a libcupti.so* already in the process
    runtime: str | None = None            # a libcudart.so.N already in the process
    torch_cuda: str | None = None         # torch.version.cuda ("12.8"), None without torch
    driver: str | None = None             # "580.159.04", None without a driver
    driver_cuda: int | None = None        # 13000 for CUDA 13.0, None when unknown
    search_paths: tuple[str, ...] = ()    # sys.path, where the nvidia wheels live
    toolkit_roots: tuple[str, ...] = ()   # CUDA toolkits, best first


@dataclasses.dataclass(frozen=True)
class Plan:
    facts: Facts
    majors: tuple[int, ...]                   # the order tried
    why_order: str                            # what decided it
    candidates: tuple[str, ...]               # for the C core, best first
    left_out: tuple[tuple[str, str], ...]     # (what, why) never tried


def major_of(name: str) -> int | None:
    """12 for .../libcudart.so.12 or libcupti.so.12.9.79, None otherwise."""
    m = re.search(r"\.so\.(\d+)", os.path.basename(name))
    return int(m.group(1)) if m else None


def driver_cuda_of(driver: str | None) -> int | None:
    """The newest CUDA (13000 for 13.0) a driver of this version runs."""
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", driver or "")
    if not m:
        return None
    version = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    return next((cuda for oldest, cuda in _DRIVER_CUDA if version >= oldest), 11000)


def _mapped(maps: str) -> tuple[str | None, str | None]:
    cupti = runtime = None
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        path = fields[5] if len(fields) == 6 else ""
        base = os.path.basename(path.strip())
        if cupti is None and base.startswith("libcupti.so"):
            cupti = path.strip()
        elif runtime is None and base.startswith("libcudart.so.") and major_of(base):
            runtime = path.strip()
    return cupti, runtime


def _torch_cuda() -> str | None:
    """torch.version.cuda, read from torch/version.py unless torch is imported
    already: importing torch here would cost seconds and load its CUDA."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return getattr(getattr(torch, "version", None), "cuda", None)
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        text = (Path(list(spec.submodule_search_locations)[0]) / "version.py").read_text()
    except OSError:
        return None
    m = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([\d.]+)['\"]", text, re.M)
    return m.group(1) if m else None


def _driver() -> str | None:
    try:
        with open("/proc/driver/nvidia/version") as f:
            m = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", f.read())
    except OSError:
        return None
    return m.group(1) if m else None


def _toolkit_roots() -> tuple[str, ...]:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    versioned = glob.glob("/usr/local/cuda-[0-9]*")
    versioned.sort(key=lambda p: [int(x) for x in re.findall(r"\d+", os.path.basename(p))],
                   reverse=True)
    return tuple(dict.fromkeys(r for r in roots + versioned if r))


def facts() -> Facts:
    """This process's facts, read now (a /proc read, no import of torch)."""
    try:
        with open("/proc/self/maps") as f:
            cupti, runtime = _mapped(f.read())
    except OSError:
        cupti = runtime = None
    driver = _driver()
    known = _core.driver_cuda_version()  # asks a driver already loaded
    return Facts(mapped_cupti=cupti, runtime=runtime, torch_cuda=_torch_cuda(), driver=driver,
                 driver_cuda=known or driver_cuda_of(driver), search_paths=tuple(sys.path),
                 toolkit_roots=_toolkit_roots())


def _beside_runtime(runtime: str, major: int) -> list[str]:
    """Where a CUPTI of the runtime's own stack lives: its folder (CUDA 13's
    wheel), the CUDA 12 wheels' sibling folder, a toolkit's extras."""
    lib = Path(runtime).parent
    name = f"libcupti.so.{major}"
    return [str(lib / name), str(lib.parent.parent / "cuda_cupti" / "lib" / name),
            str(lib.parent / "extras" / "CUPTI" / "lib64" / name)]


def _wheels(search_paths: tuple[str, ...], major: int) -> list[str]:
    name = f"libcupti.so.{major}"
    subs = (f"cu{major}/lib", "cuda_cupti/lib")
    return [str(Path(base) / "nvidia" / sub / name) for base in search_paths if base
            for sub in subs]


def _toolkits(roots: tuple[str, ...], major: int) -> list[str]:
    name = f"libcupti.so.{major}"
    subs = ("extras/CUPTI/lib64", "lib64", "targets/x86_64-linux/lib",
            "targets/sbsa-linux/lib")
    return [str(Path(root) / sub / name) for root in roots for sub in subs]


def _existing(paths: list[str]) -> list[str]:
    return [p for p in paths if os.path.exists(p)]


def plan(f: Facts) -> Plan:
    """The candidates for these facts, best first, and what was left out."""
    runtime_major = major_of(f.runtime) if f.runtime else None
    torch_major = int(f.torch_cuda.split(".")[0]) if f.torch_cuda else None
    # a CUDA 11 runtime or torch build decides nothing: loopscope reads CUPTI 12 and 13 only
    runtime_major = runtime_major if runtime_major in MAJORS else None
    torch_major = torch_major if torch_major in MAJORS else None
    if runtime_major:
        first, why = runtime_major, f"the CUDA runtime loaded in this process ({f.runtime})"
    elif torch_major:
        first, why = torch_major, f"torch's CUDA build ({f.torch_cuda})"
    elif len(wheel_majors := [m for m in MAJORS if _existing(_wheels(f.search_paths, m))]) == 1:
        first = wheel_majors[0]
        why = f"the one CUDA major whose CUPTI wheel is installed ({first})"
    elif f.driver_cuda:
        first = 13 if f.driver_cuda >= 13000 else 12
        why = f"the newest CUDA the driver runs ({f.driver_cuda // 1000}.{f.driver_cuda % 1000 // 10})"
    else:
        first, why = MAJORS[0], "no CUDA runtime, torch build or driver tells (CUDA 13 first)"
    majors = (first,) + tuple(m for m in MAJORS if m != first)
    found: list[str] = []
    left_out: list[tuple[str, str]] = []
    for major in majors:
        if major >= 13 and f.driver_cuda is not None and f.driver_cuda < 13000:
            left_out.append((f"libcupti.so.{major}",
                             f"CUPTI {major} needs a driver of CUDA {major} (580 or newer); "
                             f"driver {f.driver} runs CUDA {f.driver_cuda // 1000}."
                             f"{f.driver_cuda % 1000 // 10}"))
            continue
        paths = (_beside_runtime(f.runtime, major) if f.runtime and runtime_major == major
                 else [])
        paths += _wheels(f.search_paths, major) + _toolkits(f.toolkit_roots, major)
        found += _existing(paths)
        found.append(f"libcupti.so.{major}")  # the loader's own search
    unique = tuple(os.path.realpath(p) if os.sep in p else p for p in found)
    seen: dict[str, str] = {}
    for original, real in zip(found, unique):
        seen.setdefault(real, original)
    return Plan(f, majors, why, tuple(seen.values()), tuple(left_out))


def candidates() -> tuple[str, ...]:
    """For the C core at each profile start: nothing once CUPTI is loaded
    (the core keeps the one it has) or where there is no driver (the core
    loads none then), else the plan for this process now (~2 ms in a torch
    process: /proc/self/maps, torch's version.py)."""
    if _core.cupti_loaded() or not _core.driver_present():
        return ()
    return plan(facts()).candidates
