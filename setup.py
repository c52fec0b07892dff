"""Build of loopscope's C core.

The CUDA headers (cupti*.h, cuda.h, nvtx3/) come from a CUDA toolkit when one
is found (CUDA_HOME, CUDA_PATH, /usr/local/cuda), otherwise from the PyPI
wheels nvidia-cuda-cupti, nvidia-cuda-runtime, nvidia-cuda-crt and
nvidia-nvtx (build requirements in pyproject.toml).  Nothing is linked
against CUDA: CUPTI is opened with dlopen at run time.

LOOPSCOPE_TEST_HOOKS=1 builds the test build: the C test hooks
(csrc/testhooks/ls_test_hooks.c, reached through loopscope._testhooks) go into _core;
without it (a release wheel) _core carries only the product.
"""
import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

REQUIRED_HEADERS = ("cupti.h", "cuda.h", "crt/host_defines.h", "nvtx3/nvToolsExt.h")


def toolkit_dirs():
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for root in filter(None, roots):
        yield Path(root) / "include"
        yield Path(root) / "extras" / "CUPTI" / "include"


def wheel_dirs():
    """Include folders of the nvidia-* wheels (namespace package `nvidia`)."""
    for entry in sys.path:
        base = Path(entry or ".") / "nvidia"
        if base.is_dir():
            for sub in sorted(base.iterdir()):
                if (sub / "include").is_dir():
                    yield sub / "include"


def find_include_dirs():
    found = {}
    for source in (toolkit_dirs, wheel_dirs):
        for folder in source():
            for header in REQUIRED_HEADERS:
                if header not in found and (folder / header).is_file():
                    found[header] = folder
        if len(found) == len(REQUIRED_HEADERS):
            break
    missing = [h for h in REQUIRED_HEADERS if h not in found]
    if missing:
        sys.exit(
            "loopscope: cannot build, CUDA headers not found: " + ", ".join(missing) + ".\n"
            "Install the CUDA 13 toolkit (set CUDA_HOME), or let pip install the build "
            "requirements (nvidia-cuda-cupti, nvidia-cuda-runtime, nvidia-cuda-crt, "
            "nvidia-nvtx 13.x); with --no-build-isolation install them yourself first."
        )
    return sorted({str(p) for p in found.values()})


C_STANDARD = ["-std=c11"]
# ls_pmconfig.cpp is C++ only because cupti_profiler_host.h is, ls_demangle.cpp
# for <cxxabi.h>: no exceptions, no RTTI, no STL.  From the C++ runtime only
# abi::__cxa_demangle is used (libstdc++.so.6, which torch loads anyway).
CXX_STANDARD = ["-std=c++17", "-fno-exceptions", "-fno-rtti"]


def compile_args():
    """Flags common to the C and the C++ sources."""
    args = ["-Wall", "-Wextra", "-fvisibility=hidden"]
    for folder in find_include_dirs():
        args += ["-isystem", folder]  # CUDA's headers are not ours to warn about
    if os.environ.get("LOOPSCOPE_WERROR"):
        args.append("-Werror")
    if os.environ.get("LOOPSCOPE_SANITIZE"):
        args += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-O1", "-g"]
    if os.environ.get("LOOPSCOPE_COVERAGE"):  # gcov line counts (CI's coverage report)
        args += ["--coverage", "-O0", "-g"]
    return args


def link_args():
    args = ["-ldl", "-lpthread", "-lstdc++"]  # named: the link may run through the C driver
    if os.environ.get("LOOPSCOPE_SANITIZE"):
        args += ["-fsanitize=address,undefined"]
    if os.environ.get("LOOPSCOPE_COVERAGE"):
        args += ["--coverage"]
    return args


class BuildExt(build_ext):
    """One Extension of C and C++ sources: the compiler driver compiles both,
    each with its own language standard (a C++ flag on a C file is an error)."""

    def build_extensions(self):
        compile_one = self.compiler._compile

        def _compile(obj, src, ext, cc_args, extra_postargs, pp_opts):
            standard = CXX_STANDARD if src.endswith(".cpp") else C_STANDARD
            compile_one(obj, src, ext, cc_args, standard + list(extra_postargs), pp_opts)

        self.compiler._compile = _compile
        # A _core built before with the hooks set otherwise looks up to date
        # (its sources did not change): the variant noted beside the objects
        # forces a rebuild when it changes.
        variant = Path(self.build_temp) / "loopscope-variant.txt"
        wanted = "test hooks" if TEST_HOOKS else "product"
        if not variant.is_file() or variant.read_text() != wanted:
            self.force = True
        super().build_extensions()
        variant.parent.mkdir(parents=True, exist_ok=True)
        variant.write_text(wanted)


# csrc/ holds one folder per floor (csrc/README.md): every source of every
# floor is compiled, and each floor is an include folder, so a file includes
# "ls_x.h" wherever ls_x lives (tests/house/test_import_graph.py keeps includes
# going down the floors).
FLOORS = sorted(str(p) for p in Path("csrc").iterdir() if p.is_dir())
sources = sorted(str(p) for p in Path("csrc").glob("*/*.c")) + sorted(
    str(p) for p in Path("csrc").glob("*/*.cpp"))


def test_hooks_wanted():
    """LOOPSCOPE_TEST_HOOKS: "1" the test build, unset, "" or "0" the product only."""
    value = os.environ.get("LOOPSCOPE_TEST_HOOKS", "")
    if value not in ("", "0", "1"):
        sys.exit(f"loopscope: LOOPSCOPE_TEST_HOOKS must be 1 (build the test hooks) or 0, "
                 f"got {value!r}")
    return value == "1"


TEST_HOOKS = test_hooks_wanted()
# The hooks' file is left out of a product build (matched by name, wherever it lives).
sources = [s for s in sources if TEST_HOOKS or Path(s).name != "ls_test_hooks.c"]

setup(
    cmdclass={"build_ext": BuildExt},
    ext_modules=[
        Extension(
            "loopscope._core",
            sources=sources,
            include_dirs=FLOORS,
            depends=sorted(str(p) for p in Path("csrc").glob("*/*.h")),
            define_macros=[("LOOPSCOPE_TEST_HOOKS", "1")] if TEST_HOOKS else [],
            extra_compile_args=compile_args(),
            extra_link_args=link_args(),
        )
    ],
)
