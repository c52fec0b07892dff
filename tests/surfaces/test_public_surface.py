"""What a new user meets first: loopscope.profile's signature as help(), an
IDE and Jupyter show it, a misspelt option named with its right spelling,
compare() of a dict that is no summary, `--version`, and the comparison
text (loopscope.format_compare).  The HTML's public methods: test_html_files.py."""
from __future__ import annotations

import inspect
import os
import pydoc
import subprocess
import sys
from pathlib import Path

import pytest

import loopscope

HERE = Path(__file__).resolve().parents[1]  # tests/: the shared helpers and data
RECORDING = Path(loopscope.__file__).parent / "data" / "demo_recording.json.gz"
PROFILE_OPTIONS = ["trace", "syncs", "gap_thresholds_us", "step_name", "driver_api", "buffer_mb",
                   "max_buffer_mb", "warm_up", "metrics", "metrics_interval_us",
                   "metrics_buffer_mb", "metrics_decode_ms", "gather", "gather_timeout_s",
                   "steps", "graph_kernels"]


# -- loopscope.profile -----------------------------------------------------------
def test_profile_shows_every_option_with_its_type_and_default():
    parameters = inspect.signature(loopscope.profile).parameters
    assert list(parameters) == PROFILE_OPTIONS
    for name, p in parameters.items():
        assert p.kind is inspect.Parameter.KEYWORD_ONLY, name
        assert p.annotation is not inspect.Parameter.empty, name
        assert p.default is not inspect.Parameter.empty, name
    assert parameters["metrics_interval_us"].default is None  # automatic: 500 us, widened


def test_help_of_profile_names_and_documents_every_option():
    text = pydoc.render_doc(loopscope.profile, renderer=pydoc.plaintext)
    assert "**options" not in text
    assert "metrics_interval_us: 'float | None' = None" in text  # the signature line
    documented = loopscope.profile.__doc__ or ""
    assert documented in text.replace("\n |  ", "\n")  or documented.split("\n")[0] in text
    for name in PROFILE_OPTIONS:
        assert name in documented, name


@pytest.mark.parametrize("typo, right", [
    ("metrics_intervall_us", "metrics_interval_us"),
    ("gap_threshold_us", "gap_thresholds_us"),
    ("sync", "syncs"),
])
def test_a_misspelt_option_names_the_right_one(typo, right):
    with pytest.raises(TypeError) as error:
        loopscope.profile(**{typo: 5})
    assert str(error.value) == (f"loopscope.profile() got an unknown option {typo!r}; "
                                f"did you mean {right!r}?")


def test_an_option_like_none_lists_them_all():
    with pytest.raises(TypeError) as error:
        loopscope.profile(colour="red")
    assert str(error.value) == ("loopscope.profile() got an unknown option 'colour'; its "
                                "options: " + ", ".join(PROFILE_OPTIONS))


def test_profile_is_the_profile_class():
    with loopscope.profile(trace=False, syncs=False, metrics=False, gather=False) as prof:
        pass
    assert isinstance(prof, loopscope.Profile)
    assert prof.is_finished


# -- compare ----------------------------------------------------------------------
def test_compare_of_a_dict_that_is_no_summary_names_the_side_and_what_is_missing():
    after = loopscope.load(RECORDING).summary()
    with pytest.raises(loopscope.CompareError) as error:
        loopscope.compare({"x": 1}, after)
    message = str(error.value)
    assert message.startswith("compare: before is not a loopscope summary: no 'diagnosis' "
                              "and no 'steps' (its keys: 'x')")
    with pytest.raises(loopscope.CompareError, match="compare: after is not a loopscope "
                       "summary: no 'steps'"):
        loopscope.compare(after, {"diagnosis": {"verdict": "BALANCED"}})


def test_compare_error_is_a_value_error_exported_by_name():
    assert "CompareError" in loopscope.__all__
    assert issubclass(loopscope.CompareError, ValueError)


# -- --version -----------------------------------------------------------------------
def test_version_option_prints_the_package_version():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(loopscope.__file__).parents[1]),
                                         env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, "-m", "loopscope", "--version"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0
    assert result.stdout == f"loopscope {loopscope.__version__}\n"


def test_format_compare_is_public_and_is_what_diff_prints():
    before = loopscope.load(HERE / "data" / "kineto" / "demo_eager.json.gz").summary()
    after = loopscope.load(HERE / "data" / "kineto" / "demo_graph.json.gz").summary()
    text = loopscope.format_compare(loopscope.compare(before, after))
    assert "format_compare" in loopscope.__all__
    assert text.splitlines()[0] == "loopscope diff: before -> after"
    assert text.splitlines()[1] == (f"verdict: {before['diagnosis']['verdict']} -> "
                                    f"{after['diagnosis']['verdict']}")
