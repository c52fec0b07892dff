"""CUDA 12 and CUDA 13 in one build: which CUPTI is loaded, and that one build
reads both (issue "Every stack a PyTorch user has").

- The plan (_cupti_paths.plan) on fake library trees: 12 only, 13 only, both,
  torch's build, a loaded runtime, a driver too old for CUPTI 13. Expected
  orders are written out by hand here.
- The C loader on fake CUPTI libraries built here with gcc (each a tiny .so
  exporting the symbols loopscope requires, cuptiGetVersion answering a
  chosen version), one fresh process per case: the copy already in the process
  wins, a broken file or a too-old CUPTI is passed over and named.
- The record fields loopscope reads sit at the same offsets in CUPTI 12.0,
  12.6, 12.9 and 13's headers, and the callback ids it maps have the same
  values (compiled here against each header set; the headers come from
  NVIDIA's wheels, which .ci/run unpacks under $LOOPSCOPE_TEST_WHEELS).
- `loopscope doctor` on this CPU machine with the CUDA 12 CUPTI wheel: it names
  libcupti.so.12 and says there is no driver (exit 1).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loopscope.live import _cupti_paths
from loopscope.live._cupti_paths import Facts, plan

ROOT = Path(__file__).resolve().parents[2]
WHEELS = os.environ.get("LOOPSCOPE_TEST_WHEELS")
NEED_WHEELS = pytest.mark.skipif(
    not WHEELS or not Path(WHEELS).is_dir(),
    reason="LOOPSCOPE_TEST_WHEELS (NVIDIA's CUPTI wheels unpacked, as .ci/run does) is not set")
NEED_GCC = pytest.mark.skipif(shutil.which("gcc") is None, reason="no gcc to build fake CUPTIs")


def touch(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return str(path)


@pytest.fixture
def trees(tmp_path):
    """A site-packages with both CUPTI wheels, and two toolkits."""
    site = tmp_path / "site"
    t = {
        "w13": touch(site / "nvidia/cu13/lib/libcupti.so.13"),
        "w12": touch(site / "nvidia/cuda_cupti/lib/libcupti.so.12"),
        "rt12": touch(site / "nvidia/cuda_runtime/lib/libcudart.so.12"),
        "rt13": touch(site / "nvidia/cu13/lib/libcudart.so.13"),
        "tk13": touch(tmp_path / "cuda-13.0/extras/CUPTI/lib64/libcupti.so.13"),
        "tk12": touch(tmp_path / "cuda-12.9/extras/CUPTI/lib64/libcupti.so.12"),
        "site": str(site), "tk13root": str(tmp_path / "cuda-13.0"),
        "tk12root": str(tmp_path / "cuda-12.9"),
    }
    return t


def facts(t, **kw) -> Facts:
    base = dict(search_paths=(t["site"],), toolkit_roots=(t["tk13root"], t["tk12root"]))
    base.update(kw)
    return Facts(**base)


def test_nothing_tells_cuda_13_first_then_12(trees):
    p = plan(facts(trees))
    assert p.majors == (13, 12)
    assert p.candidates == (trees["w13"], trees["tk13"], "libcupti.so.13",
                            trees["w12"], trees["tk12"], "libcupti.so.12")


def test_a_loaded_cuda_12_runtime_puts_its_own_cupti_first(trees):
    p = plan(facts(trees, runtime=trees["rt12"], driver="580.159.04", driver_cuda=13000))
    assert p.majors == (12, 13)
    # beside the runtime (the wheels' sibling folder) first; it is the same file
    # as the wheel's, so it is listed once
    assert p.candidates[:3] == (trees["w12"], trees["tk12"], "libcupti.so.12")
    assert "runtime loaded" in p.why_order


def test_a_cuda_11_runtime_decides_nothing(trees, tmp_path):
    old = touch(tmp_path / "cuda-11.8/lib64/libcudart.so.11.0")
    p = plan(facts(trees, runtime=old, torch_cuda="11.8", driver="580.159.04", driver_cuda=13000))
    assert p.majors == (13, 12) and not any(".so.11" in c for c in p.candidates)


def test_torch_cuda_12_build_decides_before_the_driver(trees):
    p = plan(facts(trees, torch_cuda="12.8", driver="580.159.04", driver_cuda=13000))
    assert p.majors == (12, 13) and "12.8" in p.why_order


def test_the_one_installed_wheel_decides_when_nothing_else_does(tmp_path):
    w12 = touch(tmp_path / "site/nvidia/cuda_cupti/lib/libcupti.so.12")
    p = plan(Facts(search_paths=(str(tmp_path / "site"),)))
    assert p.majors == (12, 13)
    assert p.candidates == (w12, "libcupti.so.12", "libcupti.so.13")


def test_a_cuda_12_driver_leaves_cupti_13_out_and_says_why(trees):
    p = plan(facts(trees, driver="570.86.15", driver_cuda=12080))
    assert p.majors == (12, 13)
    assert not any(".so.13" in c for c in p.candidates)
    assert p.left_out == (("libcupti.so.13", "CUPTI 13 needs a driver of CUDA 13 (580 or newer); "
                           "driver 570.86.15 runs CUDA 12.8"),)


def test_a_cuda_13_0_driver_keeps_cupti_13(trees):
    p = plan(facts(trees, driver="580.65.06", driver_cuda=13000))
    assert p.majors == (13, 12) and p.left_out == ()
    assert p.candidates[0] == trees["w13"]


@pytest.mark.parametrize("driver, cuda", [("580.65.06", 13000), ("580.159.04", 13000),
                                          ("580.64.99", 12090), ("575.51.03", 12090),
                                          ("535.54.03", 12020), ("535.54.02", 12010),
                                          ("525.60.13", 12000), ("470.82.01", 11000),
                                          (None, None), ("garbage", None)])
def test_driver_versions_map_to_the_cuda_they_run(driver, cuda):
    # NVIDIA's table of minimum drivers: 13.0 needs 580.65.06, 12.2 535.54.03, 12.0 525.60.13
    assert _cupti_paths.driver_cuda_of(driver) == cuda


def test_maps_parsing_finds_the_loaded_cupti_and_runtime():
    maps = textwrap.dedent("""\
        7f00-7f01 r--p 00000000 08:01 1 /usr/lib/libc.so.6
        7f02-7f03 r-xp 00000000 08:01 2 /site/nvidia/cuda_runtime/lib/libcudart.so.12
        7f04-7f05 r-xp 00000000 08:01 3 /site/nvidia/cuda_cupti/lib/libcupti.so.12
        7f06-7f07 rw-p 00000000 00:00 0
        7f08-7f09 r-xp 00000000 08:01 4 /opt/with space/libcudart.so
        """)
    assert _cupti_paths._mapped(maps) == ("/site/nvidia/cuda_cupti/lib/libcupti.so.12",
                                          "/site/nvidia/cuda_runtime/lib/libcudart.so.12")


def test_torch_cuda_is_read_without_importing_torch(tmp_path, monkeypatch):
    pkg = tmp_path / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (pkg / "version.py").write_text("__version__ = '2.9.0+cu128'\ncuda: Optional[str] = '12.8'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert _cupti_paths._torch_cuda() == "12.8"
    assert "torch" not in sys.modules


# -- the C loader on fake CUPTI libraries -------------------------------------
FAKE_CUPTI = r"""
#include <stdint.h>
#define F(name) int name(void) { return 999; }
F(cuptiGetTimestamp) F(cuptiActivityRegisterCallbacks) F(cuptiActivityEnable)
F(cuptiActivityDisable) F(cuptiActivityFlushAll) F(cuptiActivityGetNextRecord)
F(cuptiActivityGetNumDroppedRecords) F(cuptiActivitySetAttribute) F(cuptiSubscribe)
F(cuptiUnsubscribe) F(cuptiEnableCallback) F(cuptiEnableDomain)
int cuptiGetResultString(int status, const char **text) { (void)status; *text = "fake"; return 0; }
int cuptiGetVersion(uint32_t *v) { *v = FAKE_VERSION; return 0; }
"""


@pytest.fixture(scope="module")
def fakes(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("no gcc to build fake CUPTIs")
    root = tmp_path_factory.mktemp("fake_cupti")
    src = root / "fake.c"
    src.write_text(FAKE_CUPTI)
    out = {}
    for name, soname, version in (("v12", "libcupti.so.12", 28), ("v13", "libcupti.so.13", 130001),
                                  ("v120", "libcupti.so.12", 18), ("v118", "libcupti.so.11", 17),
                                  ("old", "libcupti.so.11", 15)):
        path = root / name / soname
        path.parent.mkdir()
        subprocess.run(["gcc", "-shared", "-fPIC", f"-DFAKE_VERSION={version}",
                        f"-Wl,-soname,{soname}", "-o", str(path), str(src)], check=True)
        out[name] = str(path)
    broken = root / "broken" / "libcupti.so.13"
    broken.parent.mkdir()
    broken.write_bytes(b"\x7fELF but not really a library" * 4)
    out["broken"] = str(broken)
    return out


def load_in_child(candidates, preload=None):
    """Runs _core.cupti_load in a fresh process (a load is once per process)."""
    code = textwrap.dedent(f"""
        import ctypes, json, os
        if {preload!r}:
            ctypes.CDLL({preload!r}, mode=os.RTLD_NOW | ctypes.RTLD_GLOBAL)
        from loopscope import _core
        print(json.dumps(_core.cupti_load({list(candidates)!r})))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "LD_LIBRARY_PATH": ""})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_loader_takes_the_first_usable_candidate(fakes):
    got = load_in_child([fakes["v12"], fakes["v13"]])
    assert got["ok"] and got["path"] == fakes["v12"] and got["version"] == 28
    assert got["major"] == 12 and got["how"] == "candidate 1 of 2"
    got = load_in_child([fakes["v13"], fakes["v12"]])
    assert got["path"] == fakes["v13"] and got["major"] == 13


def test_the_copy_already_in_the_process_wins_and_no_second_is_loaded(fakes):
    # torch cu13 loaded its CUPTI; the plan would have preferred the 12 one
    got = load_in_child([fakes["v12"]], preload=fakes["v13"])
    assert got["ok"] and got["path"] == fakes["v13"]
    assert got["how"] == "already loaded in this process"


def test_a_broken_file_and_a_too_old_cupti_are_passed_over_and_named(fakes):
    got = load_in_child([fakes["broken"], fakes["old"], fakes["v12"]])
    assert got["ok"] and got["path"] == fakes["v12"] and got["how"] == "candidate 3 of 3"
    got = load_in_child([fakes["broken"], fakes["old"]])
    assert not got["ok"] and got["path"] is None
    assert fakes["broken"] in got["error"] and fakes["old"] in got["error"]
    assert "older than CUDA 12.0" in got["error"]


def test_cuda_12_0s_api_18_is_the_oldest_taken(fakes):
    # CUPTI_API_VERSION is 18 in CUDA 12.0's cupti_version.h (12.0.146); 17 is older
    got = load_in_child([fakes["v118"], fakes["v120"]])
    assert got["ok"] and got["path"] == fakes["v120"] and got["major"] == 12
    assert load_in_child([fakes["v118"]])["error"].endswith(
        "CUPTI API version 17 is older than CUDA 12.0's (18)")


def test_a_mapped_cupti_loopscope_cannot_use_is_never_doubled(fakes):
    got = load_in_child([fakes["v12"]], preload=fakes["old"])
    assert not got["ok"]
    assert "will not load a second one" in got["error"] and fakes["old"] in got["error"]


def test_no_candidate_says_what_to_install(fakes):
    got = load_in_child([])
    assert not got["ok"] and "nvidia-cuda-cupti-cu12" in got["error"]


# -- one build reads CUPTI 12.0-12.9 and 13 records ------------------------------
FIELDS = {  # record kind -> the fields ls_activity.c reads
    "Kernel": ["kind", "name", "start", "end", "deviceId", "streamId", "correlationId",
               "graphId", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ",
               "registersPerThread", "staticSharedMemory", "dynamicSharedMemory"],
    "Memcpy": ["kind", "copyKind", "srcKind", "dstKind", "bytes", "start", "end", "deviceId",
               "streamId", "correlationId", "graphId"],
    "Memset": ["kind", "bytes", "start", "end", "deviceId", "streamId", "correlationId",
               "graphId"],
    "Synchronization": ["kind", "type", "start", "end", "streamId", "correlationId"],
    "GraphTrace": ["kind", "start", "end", "deviceId", "streamId", "correlationId", "graphId"],
    "API": ["kind", "cbid", "start", "end", "correlationId", "threadId"],
}
READ_AS = {"Kernel": "CUpti_ActivityKernel9", "Memcpy": "CUpti_ActivityMemcpy5",
           "Memset": "CUpti_ActivityMemset3", "Synchronization": "CUpti_ActivitySynchronization2",
           "GraphTrace": "CUpti_ActivityGraphTrace2", "API": "CUpti_ActivityAPI"}


def header_sets():
    if not WHEELS:
        return []
    return sorted(p for p in Path(WHEELS).glob("*/nvidia/*/include") if (p / "cupti.h").exists())


def emitted(include: Path, kind: str) -> str:
    """The record struct a CUPTI of these headers writes: the newest version
    its main header (not the deprecated one) defines."""
    if kind == "API":
        return "CUpti_ActivityAPI"
    text = (include / "cupti_activity.h").read_text()
    found = re.findall(rf"\}}\s*(CUpti_Activity{kind}(\d*))\s*;", text)
    assert found, (include, kind)
    return max(found, key=lambda m: int(m[1] or 1))[0]


def offsets(include: Path, structs: dict[str, str], tmp: Path) -> dict[str, dict[str, int]]:
    crt = [p.parent.parent for p in Path(WHEELS).glob("*/nvidia/*/include/crt/host_defines.h")]
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <cupti.h>",
             "int main(void) {"]
    for kind, struct in structs.items():
        for field in FIELDS[kind]:
            lines.append(f'printf("{kind} {field} %zu\\n", offsetof({struct}, {field}));')
    lines.append("return 0; }")
    src = tmp / "offsets.c"
    src.write_text("\n".join(lines))
    exe = tmp / f"offsets_{abs(hash(str(include)))}"
    # the CUDA 12 runtime headers (cuda.h) sit in a sibling wheel folder
    incs = [include] + sorted(include.parent.parent.glob("*/include")) + crt
    subprocess.run(["gcc", *[f"-I{p}" for p in incs], "-o", str(exe), str(src)], check=True)
    out: dict[str, dict[str, int]] = {}
    for line in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n"):
        if line:
            kind, field, at = line.split()
            out.setdefault(kind, {})[field] = int(at)
    return out


@NEED_WHEELS
@NEED_GCC
def test_every_field_read_sits_at_the_same_offset_in_cupti_12_and_13(tmp_path):
    sets = header_sets()
    versions = {re.search(r"CUPTI_API_VERSION (\d+)", (p / "cupti_version.h").read_text()).group(1)
                for p in sets}
    assert {"18", "24", "28"} <= versions and any(len(v) == 6 for v in versions), versions
    build = next(p for p in sets if len(re.search(r"CUPTI_API_VERSION (\d+)",
                                                  (p / "cupti_version.h").read_text()).group(1)) == 6)
    read = offsets(build, READ_AS, tmp_path)
    for include in sets:
        written = offsets(include, {k: emitted(include, k) for k in FIELDS}, tmp_path)
        assert written == read, include


@NEED_WHEELS
@NEED_GCC
def test_callback_ids_have_the_same_values_in_cupti_12_and_13(tmp_path):
    names = re.findall(r"X\((cu[A-Za-z0-9_]+),", (ROOT / "csrc/common/ls_cbids.c").read_text())
    assert len(names) > 50
    values = {}
    for include in header_sets():
        found = {}
        for header in ("cupti_runtime_cbid.h", "cupti_driver_cbid.h"):
            for name, value in re.findall(r"CUPTI_(?:RUNTIME|DRIVER)_TRACE_CBID_(\w+)\s*=\s*(\d+)",
                                          (include / header).read_text()):
                found[name] = int(value)
        values[include] = {n: found.get(n) for n in names}
    newest = max(values, key=lambda p: len([v for v in values[p].values() if v is not None]))
    for include, table in values.items():
        for name, value in table.items():
            # an id the older CUPTI lacks (cuCtxSynchronize_v2 came in 13) never fires there
            assert value is None or value == values[newest][name], (include, name)


@NEED_WHEELS
def test_doctor_on_a_cpu_machine_with_the_cuda_12_cupti_wheel(tmp_path):
    site = next(Path(WHEELS).glob("*12.9*"), None)
    assert site is not None and (site / "nvidia/cuda_cupti/lib/libcupti.so.12").exists()
    if Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this machine has a driver: the no-driver case is not shown here")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "loopscope", "doctor", "--no-torch", "--json", "-"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    d = json.loads(done.stdout)
    assert d["cupti"]["path"] == str(site / "nvidia/cuda_cupti/lib/libcupti.so.12")
    assert d["cupti"]["version"] == 28 and d["cupti"]["cuda"] == "12.9"
    assert d["cupti"]["pm_sampling"] is True
    assert d["driver"]["version"] is None
    assert any("no NVIDIA GPU driver" in p for p in d["problems"])
    text = subprocess.run([sys.executable, "-m", "loopscope", "doctor", "--no-torch"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert text.returncode == 1
    assert "libcupti.so.12 (API 28, CUDA 12.9" in text.stdout and "driver:      none" in text.stdout


@NEED_WHEELS
def test_doctor_as_a_process_on_a_cuda_12_runtime_names_the_cupti_beside_it(tmp_path):
    site = next(Path(WHEELS).glob("*12.9*"))
    runtime = site / "nvidia/cuda_runtime/lib/libcudart.so.12"
    done = subprocess.run([sys.executable, "-m", "loopscope", "doctor", "--no-torch", "--runtime",
                           str(runtime), "--json", "-"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)  # no PYTHONPATH: found beside the runtime
    d = json.loads(done.stdout)
    assert d["runtime"]["loaded"] == str(runtime)
    assert d["cupti"]["path"] == str(site / "nvidia/cuda_cupti/lib/libcupti.so.12")
    assert d["cupti"]["order"].startswith("the CUDA runtime loaded in this process")


def test_doctor_names_a_runtime_it_cannot_load(tmp_path):
    done = subprocess.run([sys.executable, "-m", "loopscope", "doctor", "--runtime",
                           str(tmp_path / "nothing.so")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("loopscope doctor: error: --runtime ") and "nothing.so" in done.stderr


@NEED_WHEELS
@pytest.mark.parametrize("cuda, api, pm", [("12.0", 18, False), ("12.6", 24, True)])
def test_a_real_cupti_before_12_6_traces_and_says_sm_dram_need_12_6(tmp_path, cuda, api, pm):
    # NVIDIA's own libcupti.so.12 of CUDA 12.0 (no PM sampling API) and 12.6 (the first with it)
    site = Path(WHEELS) / f"cu12-{cuda}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "loopscope", "doctor", "--no-torch", "--json", "-"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    d = json.loads(done.stdout)
    assert d["cupti"]["path"] == str(site / "nvidia/cuda_cupti/lib/libcupti.so.12")
    assert (d["cupti"]["version"], d["cupti"]["cuda"]) == (api, cuda)
    assert d["cupti"]["pm_sampling"] is pm
    said = [p for p in d["problems"] if p.startswith("SM and DRAM need CUPTI 12.6 or later")]
    assert len(said) == (0 if pm else 1)
    if not pm:
        assert "cuptiPmSamplingEnable" in said[0] and "nvidia-cuda-cupti-cu12>=12.6" in said[0]


@pytest.mark.parametrize("options, planned", [
    ({"trace": False, "syncs": False, "metrics": False}, False),  # a host-only profile
    ({"trace": False, "syncs": True, "metrics": False}, True),
    ({"trace": False, "syncs": False, "metrics": True}, True),
    ({"trace": True, "syncs": False, "metrics": False}, True),
])
def test_only_a_profile_that_may_load_cupti_plans_where_to_find_it(monkeypatch, options, planned):
    """Where CUPTI may be found is planned at each start (/proc/self/maps,
    torch's version.py: ~2-5 ms on an H200's host until CUPTI is loaded),
    and only for a profile that may load it: a host-only watch starts a
    light profile every block."""
    import loopscope
    from loopscope import _profile
    calls = []
    monkeypatch.setattr(_profile._cupti_paths, "candidates", lambda: calls.append(1) or ())
    # no other profiler in this process, whatever tests ran before
    monkeypatch.setattr(_profile, "_other_profiler", lambda: None)
    monkeypatch.setattr(_profile._session, "cupti_unusable", lambda: None)
    with loopscope.profile(**options):
        pass
    assert bool(calls) is planned
