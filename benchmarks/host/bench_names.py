"""What showing kernel names costs: demangling (the C++ runtime's
abi::__cxa_demangle through _core.demangle) and shortening (_names), over
the kernel names of the bundled demo recording.  CPU only; prints numbers,
asserts nothing.  With the packages installed it also times the
alternatives that were weighed: cxxfilt (ctypes to the same runtime
function), itanium_demangler (pure Python) and the c++filt program.

    python benchmarks/host/bench_names.py [--rounds 2000]
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import time

from loopscope import _core
from loopscope.figures import _names
from loopscope.files import _recording


def per_name_us(fn, names: list[str], rounds: int) -> float:
    t0 = time.perf_counter()
    for _ in range(rounds):
        for n in names:
            fn(n)
    return (time.perf_counter() - t0) / (rounds * len(names)) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    data = _recording.bundled_demo()
    if data is None:
        raise SystemExit("no bundled demo recording in this checkout")
    names = [n for n in data["names"] if n.startswith("_Z")]
    print(f"{len(names)} mangled kernel names from the bundled recording, "
          f"{sum(map(len, names)) // len(names)} characters on average; "
          f"{args.rounds} rounds")
    print(f"  _core.demangle (__cxa_demangle)   {per_name_us(_core.demangle, names, args.rounds):8.2f} us a name")
    print(f"  _names.kernel_name, uncached        "
          f"{per_name_us(_names.kernel_name.__wrapped__, names, args.rounds):8.2f} us a name")
    print(f"  _names.kernel_name, cached          {per_name_us(_names.kernel_name, names, args.rounds):8.2f} us a name")
    try:
        import cxxfilt

        print(f"  cxxfilt.demangle (ctypes)         {per_name_us(cxxfilt.demangle, names, args.rounds):8.2f} us a name")
    except ImportError:
        print("  cxxfilt: not installed")
    try:
        import itanium_demangler

        def parse(name: str) -> str | None:
            try:
                return str(itanium_demangler.parse(name))
            except Exception:  # it does not read every name (local names: lambdas)
                return None

        failed = sum(parse(n) is None for n in names)
        us = per_name_us(parse, names, max(1, args.rounds // 20))
        print(f"  itanium_demangler (pure Python)   {us:8.2f} us a name, "
              f"{failed} of {len(names)} names not read")
    except ImportError:
        print("  itanium_demangler: not installed")
    cxxfilt_program = shutil.which("c++filt")
    if cxxfilt_program:
        t0 = time.perf_counter()
        subprocess.run([cxxfilt_program], input="\n".join(names), capture_output=True, text=True,
                       check=True)
        print(f"  c++filt program, one call for all  {(time.perf_counter() - t0) * 1e3:8.2f} ms")


if __name__ == "__main__":
    main()
