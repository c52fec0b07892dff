"""What installing loopscope asks of a user (issue 28, item 10): the test
extra leaves their torch alone (CI pins its own before README's command),
the licence pyproject names is shipped, the release wheels are configured
for cibuildwheel, and CI builds, checks and smoke-tests a wheel."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11+")

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")
README_TEST_COMMAND = ('(command -v nvidia-smi >/dev/null || pip install torch --index-url '
                       'https://download.pytorch.org/whl/cpu) && LOOPSCOPE_TEST_HOOKS=1 pip install '
                       '".[test]" && python -m pytest tests')


def requirement_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower()


def test_the_test_extra_asks_for_torch_without_a_pin():
    extra = PYPROJECT["project"]["optional-dependencies"]["test"]
    torch = [r for r in extra if requirement_name(r) == "torch"]
    assert torch == ["torch"], torch  # any version: a user's CUDA build is kept


def test_ci_installs_its_torch_before_readmes_test_command():
    pin = CI.index('pip install -q "torch==2.13.0"')
    assert README_TEST_COMMAND in README
    assert pin < CI.index(README_TEST_COMMAND)


def test_the_licence_is_shipped_and_named_by_its_spdx_id():
    project = PYPROJECT["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text  # the whole text, not a header
    setuptools = [r for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools")]
    assert setuptools == ["setuptools>=77"]  # the first to read an SPDX license string


def test_cibuildwheel_builds_manylinux_wheels_for_cpython_3_10_to_3_13():
    cibw = PYPROJECT["tool"]["cibuildwheel"]
    assert cibw["build"] == ["cp310-*", "cp311-*", "cp312-*", "cp313-*"]
    assert "*-musllinux_*" in cibw["skip"]
    linux = cibw["linux"]
    assert linux["archs"] == ["x86_64", "aarch64"]
    assert linux["manylinux-x86_64-image"] == linux["manylinux-aarch64-image"] == "manylinux_2_28"
    tests = " && ".join(cibw["test-command"])
    assert "import loopscope" in tests and "loopscope demo" in tests


def test_ci_builds_checks_and_installs_a_wheel_in_a_fresh_environment():
    steps = ["python -m build --wheel", "auditwheel show", "auditwheel repair",
             "cibuildwheel --print-build-identifiers", 'python3 -m venv "$wheel_tree/venv"',
             '"$wheel_tree/venv/bin/loopscope" demo']
    where = [CI.find(step) for step in steps]
    assert -1 not in where, dict(zip(steps, where))
    assert where == sorted(where)  # in this order


def test_readme_says_what_a_source_build_needs():
    assert "needs a C and C++ compiler" in README


def test_the_wheel_lists_every_folder_of_the_package():
    """pyproject names the packages by hand: a folder of python/loopscope
    holding modules (a floor, see test_import_graph.py) or the bundled data
    that it left out would be missing from the wheel, with the tests green
    in the source tree."""
    package = ROOT / "python" / "loopscope"
    folders = {".".join(("loopscope",) + p.relative_to(package).parts)
               for p in [package, *package.rglob("*")]
               if p.is_dir() and p.name != "__pycache__"
               and any(f.suffix in (".py", ".gz") for f in p.iterdir())}
    assert {"loopscope", "loopscope.data", "loopscope.views", "loopscope.readers"} <= folders
    assert sorted(PYPROJECT["tool"]["setuptools"]["packages"]) == sorted(folders)


# The C test hooks (issue 29): every build that runs the suite is a test build
# (LOOPSCOPE_TEST_HOOKS=1), the release wheel is not, and CI checks that its
# _core has none of them.
def test_every_ci_build_that_runs_the_tests_has_the_test_hooks():
    assert CI.count(README_TEST_COMMAND) == 1  # README's command, as README has it
    builds = [line for line in CI.splitlines()
              if "LOOPSCOPE_SANITIZE=1 " in line or "LOOPSCOPE_COVERAGE=1 " in line]
    assert len(builds) == 2, builds
    assert all("LOOPSCOPE_TEST_HOOKS=1 " in line for line in builds), builds
    assert "export LOOPSCOPE_TEST_HOOKS" not in CI  # the wheel below is built without


def test_the_release_wheel_is_built_without_the_test_hooks_and_ci_checks_it():
    wheel = [line for line in CI.splitlines() if "python -m build --wheel" in line]
    assert len(wheel) == 1 and "LOOPSCOPE_TEST_HOOKS" not in wheel[0], wheel
    smoke = CI[CI.index('"$wheel_tree/venv/bin/python" - <<\'PY\''):]
    smoke = smoke[:smoke.index("\nPY\n")]
    assert 'not hasattr(core, "_inject_calls")' in smoke and "import loopscope._testhooks" in smoke
    assert "LOOPSCOPE_TEST_HOOKS" not in str(PYPROJECT["tool"]["cibuildwheel"])


def test_the_mutation_runner_builds_the_test_hooks():
    runner = (ROOT / "tests" / "mutation" / "run_mutants.py").read_text(encoding="utf-8")
    assert 'env["LOOPSCOPE_TEST_HOOKS"] = "1"' in runner


# Issue 41, item 4: README's test command pulled a CUDA torch (~3 GB) onto a CPU
# machine.  It installs the CPU build first where there is no nvidia-smi.
def run_readme_command(tmp_path: Path, gpu: bool) -> list[str]:
    """README's test command in a shell whose pip and python are fakes that
    write their arguments down (and nvidia-smi, when `gpu`): the pip calls."""
    import os
    import subprocess

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    for tool in ("pip", "python") + (("nvidia-smi",) if gpu else ()):
        fake = bin_dir / tool
        fake.write_text(f'#!/bin/sh\necho "{tool} $*" >> "{log}"\n')
        fake.chmod(0o755)
    done = subprocess.run(["/bin/sh", "-c", README_TEST_COMMAND], cwd=tmp_path,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [line for line in log.read_text().splitlines() if not line.startswith("nvidia")]


@pytest.mark.parametrize("gpu", [False, True], ids=["cpu-machine", "gpu-machine"])
def test_readmes_test_command_installs_the_cpu_torch_first_without_a_gpu(tmp_path, gpu):
    if not Path("/bin/sh").exists():
        pytest.skip("no /bin/sh here")
    calls = run_readme_command(tmp_path, gpu)
    cpu_torch = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
    assert calls == ([] if gpu else [cpu_torch]) + [
        'pip install .[test]', "python -m pytest tests"]


def test_readme_holds_two_set_up_commands_and_ci_runs_the_test_one():
    set_up = README.split("<!-- --8<-- [start:set-up] -->")[1].split("<!-- --8<-- [end:set-up]")[0]
    commands = [line.strip() for line in set_up.splitlines() if line.startswith("    ")]
    assert commands == ["pip install . && python -m loopscope demo   # or `loopscope demo`; "
                        "--graph: CUDA graph replay; --layers: per-layer ranges",
                        README_TEST_COMMAND]
    assert CI.count(README_TEST_COMMAND) == 1
