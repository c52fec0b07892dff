"""How names are shown (loopscope.figures._names): kernel names demangled by the C++
runtime and shortened, source files as tracebacks show them; and that the
report, the budget messages, the HTML and the trace export show them so
while the summary dicts keep the raw names.

Demangled texts are checked against c++filt (binutils) where it is
installed, and against texts read by hand from its output; the short forms
are written by hand from the rule in _names' doc."""
from __future__ import annotations

import copy
import functools
import importlib.util
import itertools
import json
import os
import shutil
import subprocess

import pytest

import loopscope
from loopscope import _core, _testhooks
from loopscope.files import _recording
from loopscope.readers import _replay
from loopscope.views import _html
from loopscope.figures._budgets import evaluate
from loopscope.figures._names import clip, demangled_name, display_path, kernel_name
from loopscope.views._report import format_report
from loopscope.figures._syncs import format_site

# The kernel names of the bundled demo recording (PyTorch, cuBLASLt, nvjet),
# with their short forms written by hand from c++filt's output.
LAYER_NORM = ("_ZN2at6native53_GLOBAL__N__21739cd4_20_layer_norm_kernel_cu_9c5ada8a28vectorized_"
              "layer_norm_kernelIN3c108BFloat16EfLb0EEEviT0_PKT_S8_S8_PS5_S9_PS6_")
GELU = ("_ZN2at6native29vectorized_elementwise_kernelILi8EZZZNS0_18GeluCUDAKernelImplERNS_18"
        "TensorIteratorBaseENS0_8GeluTypeEENKUlvE0_clEvENKUlvE2_clEvEUlN3c108BFloat16EE_St5"
        "arrayIPcLm2EEEEviT0_T1_")
SPLIT_K = ("_ZN8cublasLt19splitKreduce_kernelILi32ELi16Eif13__nv_bfloat16fS1_Lb0EfS1_S1_Lb1ELb1"
           "ELb0ELb0EEEvNS_18cublasSplitKParamsIT4_EEPKT2_PKT8_PT7_PT3_PKS3_SG_PKT9_S7_PSH_PvlPS3_"
           "PiSM_SM_SG_SG_SG_SG_SG_")
BUNDLED_SHORT = {
    LAYER_NORM: "at::native::vectorized_layer_norm_kernel<...>",
    SPLIT_K: "cublasLt::splitKreduce_kernel<...>",
    GELU: "at::native::vectorized_elementwise_kernel<...>",
    "nvjet_sm90_tst_48x64_64x15_4x1_v_bz_bias_TNN": "nvjet_sm90_tst_48x64_64x15_4x1_v_bz_bias_TNN",
}
LAYER_NORM_TEXT = ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, "
                   "float, false>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, "
                   "c10::BFloat16 const*, float*, float*, c10::BFloat16*)")


@pytest.fixture(scope="module")
def demo():
    """The bundled recording, replayed: its names and its summary."""
    data = _recording.bundled_demo()
    if data is None:
        pytest.skip("no bundled demo recording in this checkout")
    prof = _replay.replay(data)
    return data["names"], prof


def kernels_of(names: list[str]) -> list[str]:
    return [n for n in names if not n.startswith("Step_")]


def test_demangling_agrees_with_cxxfilt(demo):
    names = kernels_of(demo[0]) + ["_ZN2ns3fooIiEEvT_", "_ZNK2ns1C1fEv", "_Z3barPf"]
    assert demangled_name(LAYER_NORM) == _core.demangle(LAYER_NORM) == LAYER_NORM_TEXT
    cxxfilt = shutil.which("c++filt")
    if cxxfilt is None:
        pytest.skip("c++filt (binutils) is not installed: checked against the hand-read name only")
    expected = subprocess.run([cxxfilt], input="\n".join(names), capture_output=True, text=True,
                              check=True).stdout.splitlines()
    assert [demangled_name(n) for n in names] == expected


def test_short_names_of_the_bundled_recording(demo):
    kernels = kernels_of(demo[0])
    assert {LAYER_NORM, GELU, SPLIT_K}.issubset(kernels)
    for raw, short in BUNDLED_SHORT.items():
        assert kernel_name(raw) == short
    shown = {kernel_name(n) for n in kernels}
    assert shown == {"at::native::vectorized_layer_norm_kernel<...>",
                     "at::native::vectorized_elementwise_kernel<...>",
                     "cublasLt::splitKreduce_kernel<...>",
                     "nvjet_sm90_tst_48x64_64x15_4x1_v_bz_bias_TNN",
                     "nvjet_sm90_tst_32x64_64x16_4x1_v_bz_splitK_bias_TNN"}


@pytest.mark.parametrize("raw, short", [
    ("_ZN2ns3fooIiEEvT_", "ns::foo<...>"),                     # void ns::foo<int>(int)
    ("_Z3barPf", "bar"),                                        # bar(float*)
    ("_ZNK2ns1C1fEv", "ns::C::f"),                              # ns::C::f() const
    ("_ZN12_GLOBAL__N_13bazEv", "baz"),                         # (anonymous namespace)::baz()
    ("_ZN2nsltERKiS1_", "ns::operator<"),                      # ns::operator<(int const&, int const&)
    ("_ZN2ns1CIiEclEi", "ns::C<...>::operator()"),              # ns::C<int>::operator()(int)
    (SPLIT_K, "cublasLt::splitKreduce_kernel<...>"),
    # already demangled by another tool (a Kineto trace): shortened the same way
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
     "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
     "at::native::vectorized_elementwise_kernel<...>"),
    ("std::pair<int, int> ns::g<int>(int)", "ns::g<...>"),  # a return type that is a template
    # shown as they are: not mangled C++, or not demangleable
    ("triton_poi_fused_add_0", "triton_poi_fused_add_0"),
    ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pageable -> Device)"),
    ("_Zbroken", "_Zbroken"),
    ("_Z", "_Z"),
    ("", ""),
    (None, None),
])
def test_short_name_rule(raw, short):
    assert kernel_name(raw) == short


def test_the_c_demangler_refuses_what_is_not_a_mangled_name():
    assert _core.demangle("f") is None            # a bare type mangling: not taken ("float")
    assert _core.demangle("Step_0") is None
    assert _core.demangle("_Z3barPf\0x") is None   # an embedded NUL
    with pytest.raises(TypeError):
        _core.demangle(b"_Z3barPf")


def test_clip():
    assert clip("abcdef", 6) == "abcdef"
    assert clip("abcdefg", 6) == "abc..."
    assert clip("abcdefg", 2) == "..."


def test_paths_as_tracebacks_show_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert display_path("/usr/lib/python3/dist-packages/transformers/generation/utils.py") \
        == os.path.join("transformers", "generation", "utils.py")
    assert display_path("/home/u/.venv/lib/python3.11/site-packages/torch/nn/modules/module.py") \
        == os.path.join("torch", "nn", "modules", "module.py")
    # a virtual environment inside the working folder: still the package's path
    venv_file = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages" / "diffusers" / "x.py"
    assert display_path(str(venv_file)) == os.path.join("diffusers", "x.py")
    assert display_path(str(tmp_path / "pkg" / "denoise.py")) == os.path.join("pkg", "denoise.py")
    outside = os.path.join(os.path.dirname(str(tmp_path)), "elsewhere", "run.py")
    assert display_path(outside) == outside
    assert display_path(None) == "<no Python frame>"
    assert display_path("<stdin>") == "<stdin>"


def test_sync_sites_and_their_dicts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = "/opt/env/lib/python3.12/site-packages/transformers/generation/utils.py"
    site = {"file": path, "line": 383, "function": "generate", "code": "if unfinished.max() == 0:",
            "call": "unfinished.max() == 0", "kind": "bool", "count": 4, "blocked_ms": 0.5,
            "steps": [0, 1, 2, 3], "thread_id": 1, "apis": {}}
    assert format_site(site) == ("transformers/generation/utils.py:383 in generate(): "
                                 "unfinished.max() == 0  [bool] x4, blocked 0.500 ms, steps 0-3")
    assert site["file"] == path


def test_strict_mode_names_an_installed_library_as_a_traceback_does(tmp_path, monkeypatch):
    """A sync inside a library installed in site-packages: SyncError says
    mylib/generate.py:2, and keeps the full path in .file."""
    library = tmp_path / "env" / "lib" / "python3.12" / "site-packages" / "mylib" / "generate.py"
    library.parent.mkdir(parents=True)
    library.write_text("def generate(x):\n    return x.item()\n")
    spec = importlib.util.spec_from_file_location("mylib_generate", library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.chdir(tmp_path)
    # a fake tensor whose item() is C only (no Python frame of its own), as
    # torch's: an async copy, then the stream sync that waits for it
    calls = [("cudaMemcpyAsync", 2_000, 7), ("cudaStreamSynchronize", 1_000)]
    item = functools.partial(next, map(_testhooks._inject_calls, itertools.repeat(calls)))
    tensor = type("FakeTensor", (), {"item": item})()
    with pytest.raises(loopscope.SyncError) as info:
        with loopscope.no_sync():
            module.generate(tensor)
    assert str(info.value) == ("host-device sync inside loopscope.no_sync() at "
                               f"{os.path.join('mylib', 'generate.py')}:2 in generate(): x.item()  "
                               "[item] via cudaStreamSynchronize")
    assert info.value.file == str(library)


def test_report_budgets_html_and_trace_show_short_names(demo, tmp_path, monkeypatch):
    _names, prof = demo
    summary = prof.summary()
    worst = summary["gaps"]["worst"]
    assert {g["before"] for g in worst[:5]} == {
        "nvjet_sm90_tst_48x64_64x15_4x1_v_bz_bias_TNN", LAYER_NORM, GELU,
        next(n for n in kernels_of(_names) if "AUnaryFunctor" in n)}  # raw names in the dict
    report = format_report(summary)
    lines = report.splitlines()
    at = lines.index("Worst gaps:")
    assert [line.split(" before ")[1] for line in lines[at + 1: at + 6]] == [
        "nvjet_sm90_tst_48x64_64x15_4x1_v_bz_bias_TNN",
        "at::native::vectorized_layer_norm_kernel<...>",
        "at::native::vectorized_elementwise_kernel<...>",
        "at::native::vectorized_elementwise_kernel<...>",
        "at::native::vectorized_layer_norm_kernel<...>",
    ]
    assert "_Z" not in report
    message = evaluate(summary, {"max_severe_gaps": 0}).message()
    assert "stream 7, before at::native::vectorized_layer_norm_kernel<...>" in message
    assert "_Z" not in message
    # the HTML without its pictures: matplotlib is not needed here (and dies under
    # the ASan run of CI)
    monkeypatch.setattr(_html, "_matplotlib", lambda: None)
    page = _html.render(summary)
    # whole name on hover; breaks only between its parts (issue 41, item 8)
    assert (f'<div title="{LAYER_NORM_TEXT.replace("<", "&lt;").replace(">", "&gt;")}" '
            f'style="{_html._NAME_BOX}">'
            "at::<wbr>native::<wbr>vectorized_layer_norm_kernel<wbr>&lt;...&gt;</div>") in page
    events = json.loads(open(prof.export_trace(tmp_path / "t.json")).read())["traceEvents"]
    norms = [e for e in events if e.get("cat") == "kernel" and "layer_norm" in e["name"]]
    assert norms and {e["name"] for e in norms} == {"at::native::vectorized_layer_norm_kernel<...>"}
    assert norms[0]["args"]["signature"] == LAYER_NORM_TEXT
    assert norms[0]["args"]["mangled"] == LAYER_NORM
    nvjet = next(e for e in events if e.get("cat") == "kernel" and e["name"].startswith("nvjet"))
    assert "signature" not in nvjet["args"] and "mangled" not in nvjet["args"]


def test_a_long_name_is_clipped_in_one_line_outputs(demo):
    summary = copy.deepcopy(demo[1].summary())
    long_name = "triton_" + "x" * 100
    summary["gaps"]["worst"][0]["before"] = long_name
    summary["steps"][0]["name"] = "denoise_step_with_a_long_name_0"
    report = format_report(summary).splitlines()
    line = next(x for x in report if " before triton_" in x)
    assert line.endswith(" before " + long_name[:57] + "...")
    row = next(x for x in report if x.startswith("    0 "))
    assert row.startswith("    0 denoise_step_wi... ")  # 18 characters, the cut marked
