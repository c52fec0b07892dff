"""loopscope.compare(before, after), `loopscope diff A B`, and the pytest
baseline (@pytest.mark.loopscope(baseline=..., max_regression_pct=...)).

The two sides are synthetic loops whose figures are known from their
records (tests/synthetic_loop.py: 3 steps x 2 kernels of 10 us, 5 us apart
inside a step, step_gap_ns between steps), so every delta expected here is
worked out from those numbers."""
from __future__ import annotations

import functools
import itertools
import json
import os
import sys
from pathlib import Path

import pytest

import loopscope
from loopscope import _testhooks
from machine import driver_present
from loopscope.__main__ import main
from loopscope.surfaces._compare import CompareError, compare, format_compare, load_summary, regressions

from synthetic_loop import KERNEL_NS, run_loop

HERE = Path(__file__).resolve().parents[1]  # tests/: the shared helpers and data
US = 1_000


def here() -> int:
    return sys._getframe(1).f_lineno


def c_callable(calls):
    return functools.partial(next, map(_testhooks._inject_calls, itertools.repeat(calls)))


wait = c_callable([("cudaStreamSynchronize", 20 * US)])


def loop(step_gap_ns=80_000, syncs=0, other_sync=False, kernels=2):
    """The synthetic loop; `syncs` waits at one line in each step; other_sync
    adds one wait at another line in step 0."""
    lines = {}
    with loopscope.profile() as prof:
        run_loop(prof, steps=3, kernels=kernels, step_gap_ns=step_gap_ns)
        for _ in range(syncs):
            lines["same"] = here() + 1
            wait()
        if other_sync:
            lines["other"] = here() + 1
            wait()
    return prof, lines


def test_figures_and_steps_before_and_after(test_clock):
    before, _ = loop(step_gap_ns=80_000)
    after, _ = loop(step_gap_ns=1_000)
    r = compare(before, after)
    assert (r["before"]["label"], r["after"]["label"]) == ("before", "after")
    # gaps: 5, 80, 5, 80, 5 us before; 5, 1, 5, 1, 5 after
    severe, idle = r["figures"]["severe_gaps"], r["figures"]["idle_ms"]
    assert (severe["before"], severe["after"], severe["delta"], severe["better"]) == (2, 0, -2,
                                                                                     True)
    assert (idle["before"], idle["after"]) == (175 * US / 1e6, 17 * US / 1e6)
    assert idle["delta_pct"] == round(100 * (17 - 175) / 175, 2)
    busy = r["figures"]["gpu_busy_pct"]
    assert (busy["before"], busy["after"]) == (round(100 * 60 / 235, 2), round(100 * 60 / 77, 2))
    assert busy["better"] is True  # higher busy is better
    assert r["figures"]["kernels"]["delta"] == 0 and r["figures"]["kernels"]["better"] is None
    assert r["figures"]["syncs"] == {"before": None, "after": None, "delta": None,
                                     "delta_pct": None, "better": None}  # not watched
    assert [s["index"] for s in r["steps"]] == [0, 1, 2]
    assert [s["gpu_ms"]["delta"] for s in r["steps"]] == [0, 0, 0]
    assert r["before"]["verdict"] == "CPU_LAUNCH_BOUND"
    text = format_compare(r)
    assert "verdict: CPU_LAUNCH_BOUND -> " + r["after"]["verdict"] in text
    assert f"{'severe gaps':<26} {'2':>12} {'0':>12} {'-100.0%':>12}  better" in text


def test_sync_sites_added_removed_and_changed(test_clock):
    before, lines_b = loop(syncs=1)
    after, lines_a = loop(syncs=2, other_sync=True)
    r = compare(before.summary(), after.summary())
    syncs = r["syncs"]
    assert [(s["line"], s["count"]) for s in syncs["added"]] == [(lines_a["other"], 1)]
    assert syncs["removed"] == []
    assert [(s["line"], s["count_before"], s["count"]) for s in syncs["changed"]] == [
        (lines_a["same"], 1, 2)]
    assert r["figures"]["syncs"]["before"] == 1 and r["figures"]["syncs"]["after"] == 3
    back = compare(after.summary(), before.summary())["syncs"]
    assert [s["line"] for s in back["removed"]] == [lines_a["other"]]
    text = format_compare(r)
    assert "sync sites: 1 added, 0 removed, 1 changed" in text


def test_kernels_whose_time_changed_most(test_clock):
    before, _ = loop(kernels=2)
    after, _ = loop(kernels=3)  # a third kernel (gemm_2) in each step
    r = compare(before, after)
    by_name = {k["name"]: k for k in r["kernels"]}
    assert by_name["gemm_2"] == {"name": "gemm_2", "before_ms": 0.0, "after_ms": 3 * KERNEL_NS / 1e6,
                                 "count_before": 0, "count_after": 3,
                                 "delta_ms": 3 * KERNEL_NS / 1e6}
    assert by_name["gemm_0"]["delta_ms"] == 0.0
    assert r["kernels"][0]["name"] == "gemm_2"  # the largest change first


def test_inputs_paths_profiles_and_bad_ones(test_clock, tmp_path):
    before, _ = loop()
    after, _ = loop(step_gap_ns=1_000)
    saved = tmp_path / "before.json"
    saved.write_text(json.dumps(before.summary()))
    recording = tmp_path / "after.loopscope.json.gz"
    after.save_recording(recording)
    r = compare(str(saved), recording)
    assert r["before"]["label"] == str(saved) and r["after"]["label"] == str(recording)
    assert r["figures"]["severe_gaps"]["before"] == 2 and r["figures"]["severe_gaps"]["after"] == 0
    with pytest.raises(CompareError, match="neither a loopscope summary nor a trace .*"
                                           "no \"traceEvents\" list"):
        (tmp_path / "x.json").write_text('{"foo": 1}')
        load_summary(tmp_path / "x.json")
    (tmp_path / "empty.json").write_text('{"traceEvents": []}')  # a trace, with nothing in it
    assert "no GPU operations" in load_summary(tmp_path / "empty.json")["gpu_error"]
    with pytest.raises(CompareError, match="cannot read"):
        load_summary(tmp_path / "missing.json")
    with pytest.raises(TypeError, match="before must be a summary dict, a finished loopscope "
                                        "Profile or a file path, got int"):
        compare(3, after)


def test_files_go_through_loopscope_analyze_when_it_exists(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(loopscope, "analyze", lambda path: seen.append(path) or {
        "diagnosis": {"verdict": "BALANCED"}, "steps": []}, raising=False)
    trace = tmp_path / "trace.json"
    trace.write_text('{"traceEvents": []}')
    assert load_summary(trace)["diagnosis"]["verdict"] == "BALANCED"
    assert seen == [trace]


def test_regressions_against_the_allowed_percentage():
    def summary(loop_ms, syncs, idle_ms=1.0, severe=0):
        return {"loop": {"ms": loop_ms}, "gaps": {"idle_ms": idle_ms, "severe": severe},
                "syncs": {"count": syncs, "blocked_ms": 0.0, "sites": []}, "steps": [],
                "diagnosis": {"verdict": "BALANCED"}}

    base = summary(10.0, 0)
    assert regressions(compare(base, summary(11.0, 0)), 10).failed == []  # exactly +10%
    failed = regressions(compare(base, summary(11.01, 0)), 10).failed
    assert failed == ["loop_ms: loop time 10.0 ms -> 11.0 ms (+10.1%)"]
    assert regressions(compare(base, summary(10.0, 1)), 10).failed == [
        "syncs: host-device syncs 0 -> 1"]  # a sync added: no percentage to compare
    tiny = summary(0.05, 0)
    assert regressions(compare(tiny, summary(0.059, 0)), 10).failed == []  # below 0.01 ms
    # a figure measured on one side only cannot be compared: it fails, never passes
    check = regressions(compare({"steps": [], "diagnosis": {"verdict": "UNKNOWN"}},
                                summary(1.0, 0)), 10)
    assert "loop_ms: loop time measured after only (None -> 1.0), so it cannot be compared" \
        in check.failed and check.checked == []
    # measured on neither side: not checked; nothing checked at all: failed
    bare = {"steps": [], "diagnosis": {"verdict": "UNKNOWN"}}
    check = regressions(compare(bare, bare), 10)
    assert "loop_ms (loop time)" in check.unavailable
    assert check.failed == ["no figure was measured on both sides: nothing was compared"]


# -- the command line ---------------------------------------------------------------

def test_diff_command(test_clock, tmp_path, capsys):
    before, _ = loop()
    after, _ = loop(step_gap_ns=1_000)
    worse, _ = loop(step_gap_ns=300_000)
    paths = {}
    for name, prof in (("before", before), ("after", after), ("worse", worse)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(prof.summary()))
    assert main(["diff", str(paths["before"]), str(paths["after"])]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"loopscope diff: {paths['before']} -> {paths['after']}\n")
    out_json = tmp_path / "diff.json"
    assert main(["diff", "--max-regression-pct", "10", "--json", str(out_json),
                 str(paths["before"]), str(paths["worse"])]) == 1
    err = capsys.readouterr().err
    assert "REGRESSED idle_ms: GPU idle time" in err
    data = json.loads(out_json.read_text())
    assert data["regressions"]["failed"] and data["figures"]["severe_gaps"]["after"] == 2
    assert main(["diff", "--max-regression-pct", "10", str(paths["before"]),
                 str(paths["after"])]) == 0
    assert "no figure regressed by more than 10%" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main(["diff", str(paths["before"]), str(tmp_path / "missing.json")])
    assert exit_.value.code == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["diff", "--max-regression-pct", "-1", str(paths["before"]), str(paths["after"])])
    assert "must be a number >= 0" in capsys.readouterr().err


def test_python_m_loopscope_diff_help():
    import subprocess

    result = subprocess.run([sys.executable, "-m", "loopscope", "diff", "--help"],
                            capture_output=True, text=True, env=dict(os.environ))
    assert result.returncode == 0 and "--max-regression-pct" in result.stdout


# -- the pytest baseline ------------------------------------------------------------

pytest_plugins = ["pytester"]

BASELINE_TESTS = '''
import os
import pytest
from synthetic_loop import run_loop

GAP = int(os.environ.get("LOOP_GAP_NS", "80000"))


@pytest.mark.loopscope(baseline="baselines/loop.json", max_regression_pct=10)
def test_loop(loopscope_profile, test_clock):
    run_loop(loopscope_profile, step_gap_ns=GAP)
'''


def test_pytest_baseline_written_checked_and_failed(pytester, monkeypatch):
    from test_pytest_plugin import CONFTEST, plugin_args

    python_dir = str(Path(loopscope.__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", python_dir + os.pathsep + os.environ.get("PYTHONPATH", ""))
    pytester.makepyfile(synthetic_loop=(HERE / "synthetic_loop.py").read_text())
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_base=BASELINE_TESTS)

    def run(*args):
        return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", *args)

    missing = run()
    missing.assert_outcomes(failed=1)
    missing.stdout.fnmatch_lines(["*the baseline *baselines/loop.json does not exist; run "
                                  "pytest with --loopscope-update-baseline*"])
    written = run("--loopscope-update-baseline")
    written.assert_outcomes(passed=1)
    written.stdout.fnmatch_lines(["loopscope: 1 test profiled, 0 failed, 0 skipped; 1 baseline "
                                  "written"])
    baseline = json.loads((pytester.path / "baselines" / "loop.json").read_text())
    assert baseline["gaps"]["severe"] == 2
    run().assert_outcomes(passed=1)  # the same loop: nothing regressed
    monkeypatch.setenv("LOOP_GAP_NS", "200000")
    worse = run()
    worse.assert_outcomes(failed=1)
    # idle 5+200+5+200+5 us against 5+80+5+80+5
    worse.stdout.fnmatch_lines([
        "loopscope: 1 figure regressed by more than 10% against the baseline "
        "baselines/loop.json",
        f"  REGRESSED idle_ms: GPU idle time 0.175 ms -> 0.415 ms "
        f"(+{100 * (415 - 175) / 175:.1f}%)",
    ])


def test_baseline_marker_usage_errors(pytester, monkeypatch):
    from test_pytest_plugin import CONFTEST, plugin_args

    python_dir = str(Path(loopscope.__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", python_dir + os.pathsep + os.environ.get("PYTHONPATH", ""))
    pytester.makeconftest(CONFTEST)
    for marker, message in (("max_regression_pct=5", "max_regression_pct needs baseline="),
                            ("baseline='b.json', max_regression_pct=-1",
                             "max_regression_pct must be a number >= 0"),
                            ("baseline=3", "baseline must be a file path")):
        pytester.makepyfile(test_bad=f'''
import pytest

@pytest.mark.loopscope({marker})
def test_x(loopscope_profile):
    pass
''')
        result = pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"*{message}*"])


def test_kernels_match_by_demangled_name_whatever_the_source():
    """A recording keeps mangled names, a torch.profiler trace demangled ones
    (issue 24 item 5): one kernel, not one removed and one added."""
    mangled = "_ZN2at6native12_GLOBAL__N_128vectorized_layer_norm_kernelIffEEviT0_PKT_S6_S6_PS3_S7_PS4_"
    # as a torch.profiler trace writes it
    written = ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>"
               "(int, float, float const*, float const*, float const*, float*, float*, float*)")

    def side(name, ms, count):
        return {"steps": [], "diagnosis": {"verdict": "UNKNOWN"},
                "top_kernels": [{"name": name, "total_ms": ms, "count": count}]}

    r = compare(side(mangled, 0.039, 3), side(written, 0.581, 3))
    assert [(k["before_ms"], k["after_ms"], k["delta_ms"]) for k in r["kernels"]] == [
        (0.039, 0.581, 0.542)]
    assert r["kernels"][0]["name"] == written
    nested_old = "void f<a<int> >(int)"
    r = compare(side("void f<a<int>>(int)", 1.0, 1), side(nested_old, 2.0, 1))
    assert [(k["before_ms"], k["after_ms"]) for k in r["kernels"]] == [(1.0, 2.0)]


# -- steps: paired by name, none dropped without a word (issue 28, item 6) ----------
def _steps_summary(names, host_ms=1.0, verdict="CPU_LAUNCH_BOUND"):
    return {"diagnosis": {"verdict": "CPU_LAUNCH_BOUND"},
            "steps": [{"index": i, "name": name, "host_ms": host_ms, "gpu_ms": 0.5, "kernels": 4,
                       "syncs": 0, "verdict": verdict} for i, name in enumerate(names)]}


def test_ten_steps_against_five_pair_by_name_and_list_the_five_left_over():
    before = _steps_summary([f"Step_{i}" for i in range(10)], host_ms=2.0)
    after = _steps_summary([f"Step_{i}" for i in range(5)], host_ms=1.0)
    r = compare(before, after)
    assert r["step_pairing"] == {"by": "name", "only_before": [f"Step_{i}" for i in range(5, 10)],
                                 "only_after": []}
    assert [(s["index"], s["name"]) for s in r["steps"]] == [(i, f"Step_{i}") for i in range(5)]
    text = format_compare(r)
    assert "steps: 10 before, 5 after, 5 paired by name" in text
    assert "  only before (5): Step_5, Step_6, Step_7, Step_8, Step_9" in text


def test_steps_in_another_order_pair_by_name_not_by_index():
    before = _steps_summary(["warm", "Step_0", "Step_1"])
    after = _steps_summary(["Step_0", "Step_1"])
    after["steps"][1]["host_ms"] = 3.0  # Step_1 got slower: 1.0 -> 3.0
    r = compare(before, after)
    assert [(s["index"], s["after_index"], s["name"]) for s in r["steps"]] == [
        (1, 0, "Step_0"), (2, 1, "Step_1")]
    assert [s["host_ms"]["delta"] for s in r["steps"]] == [0.0, 2.0]
    assert r["step_pairing"]["only_before"] == ["warm"]


def test_steps_with_other_names_pair_by_index_and_say_so():
    before = _steps_summary(["a0", "a1", "a2"])
    after = _steps_summary(["b0", "b1"], host_ms=2.0)
    r = compare(before, after)
    assert r["step_pairing"] == {"by": "index", "only_before": ["a2"], "only_after": []}
    text = format_compare(r)
    assert "steps: 3 before, 2 after, 2 paired by index (their names differ)" in text
    assert "a0/b0" in text
    # names repeated on one side cannot pair by name either
    r = compare(_steps_summary(["s", "s"]), _steps_summary(["s", "s"]))
    assert r["step_pairing"]["by"] == "index"


def test_a_step_verdict_that_went_away_prints_as_none():
    before = _steps_summary(["Step_0"])
    after = _steps_summary(["Step_0"], verdict=None)
    text = format_compare(compare(before, after))
    row = [line for line in text.splitlines() if "Step_0" in line and "->" in line]
    assert row and row[0].endswith("  CPU_LAUNCH_BOUND -> (none)"), text
    assert "None" not in text


@pytest.mark.parametrize("extra, tail", [(24, ""), (25, " and 1 more")])
def test_up_to_24_left_over_names_are_listed_then_a_count(extra, tail):
    before = _steps_summary([f"Step_{i}" for i in range(5 + extra)])
    after = _steps_summary([f"Step_{i}" for i in range(5)])
    line = next(x for x in format_compare(compare(before, after)).splitlines()
                if x.startswith("  only before"))
    first_24 = ", ".join(f"Step_{i}" for i in range(5, 5 + 24))
    assert line == f"  only before ({extra}): {first_24}{tail}"


GPU_OR_CPU_TESTS = '''
import os
import pytest
from synthetic_loop import run_loop


@pytest.mark.real_tracing  # the profile's own start: on a CPU runner it finds no driver
@pytest.mark.loopscope(baseline="baselines/loop.json", max_regression_pct=10)
def test_loop(loopscope_profile, test_clock):
    if os.environ.get("LOOP_ON") == "gpu":  # the GPU machine the baseline was written on
        run_loop(loopscope_profile)
'''


@pytest.mark.skipif(driver_present(), reason="an NVIDIA driver is present: this machine "
                    "measures the figures, it is no CPU-only runner")
def test_a_gpu_baseline_checked_on_a_cpu_runner_skips_with_the_reason(pytester, monkeypatch):
    """Issue 41, item 5: nothing regressed, nothing could be measured here."""
    from test_pytest_plugin import CONFTEST, plugin_args
    from machine import NO_DRIVER_REASON

    python_dir = str(Path(loopscope.__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", python_dir + os.pathsep + os.environ.get("PYTHONPATH", ""))
    pytester.makepyfile(synthetic_loop=(HERE / "synthetic_loop.py").read_text())
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_base=GPU_OR_CPU_TESTS)

    def run(*args):
        return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", "-rs",
                                             *args)

    monkeypatch.setenv("LOOP_ON", "gpu")
    run("--loopscope-update-baseline").assert_outcomes(passed=1)
    baseline = json.loads((pytester.path / "baselines" / "loop.json").read_text())
    assert baseline["gaps"]["severe"] == 2  # measured there (the synthetic loop's 2 x 80 us)
    monkeypatch.setenv("LOOP_ON", "cpu")
    here = run()
    here.assert_outcomes(skipped=1)
    here.stdout.fnmatch_lines([f"*loopscope baseline not checked: not measured: loop_ms, idle_ms, "
                               f"severe_gaps, syncs, sync_blocked_ms here ({NO_DRIVER_REASON})"])
    assert "REGRESSED" not in here.stdout.str()


def test_diff_that_compared_nothing_still_fails():
    from loopscope.surfaces._compare import regressions

    nothing = {name: {"before": None, "after": None, "delta_pct": None}
               for name in ("loop_ms", "idle_ms", "severe_gaps", "syncs", "sync_blocked_ms")}
    out = regressions({"figures": nothing}, 10)
    assert out.failed == ["no figure was measured on both sides: nothing was compared"]
    # this run said why it measured nothing: not measured, not failed
    here = {"gpu_error": "no GPU", "syncs_error": "no GPU either"}
    out = regressions({"figures": nothing}, 10, here=here)
    assert out.failed == []
    assert out.unavailable == ["loop_ms, idle_ms, severe_gaps here (no GPU)",
                               "syncs, sync_blocked_ms here (no GPU either)"]
