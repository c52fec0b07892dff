"""Issue 14, condition 10: the summary is strict JSON always, and the trace
export takes any 32-bit device or stream id.

Counter values enter through the test hook (_testhooks._inject("sample", ...)),
as real PM samples enter the records.  Averages are running means, so
finite values never overflow; a figure derived from them that is still not
finite (a product or a ratio beyond a float) becomes None, counted in
summary["non_finite_note"]."""
from __future__ import annotations

import json
import math
import os
import sys

import pytest

import loopscope
from loopscope import _testhooks

BIG = sys.float_info.max  # 1.797e308
FIGURES = ["sm_active_pct", "dram_throughput_pct", "gr_active_pct", "sm_issue",
           "warp_occupancy_pct", "dram_read_gbps", "dram_write_gbps", "pcie_read_gbps",
           "pcie_write_gbps", "tensor_active_pct"]


def profile_of(kernels=(), samples=()):
    with loopscope.profile() as prof:
        with prof.step():
            if kernels:
                _testhooks._inject("kernel", kernels)
            if samples:
                _testhooks._inject("sample", samples)
    return prof


def strict(prof) -> dict:
    """The summary, checked to be strict JSON, and every view of it built."""
    summary = prof.summary()
    text = json.dumps(summary, allow_nan=False)
    assert json.loads(text) == json.loads(json.dumps(summary))
    assert prof.report()
    return summary


def test_huge_values_average_right_and_stay_finite(tmp_path):
    """Two samples of 1e308 and 5e307 (each 1 us, both inside the busy
    kernel): every figure's mean is their mean, computed here without
    overflow as a/2 + b/2."""
    a, b = 1e308, 5e307
    samples = [(1_000, 2_000, dict.fromkeys(FIGURES, a)), (2_000, 3_000, dict.fromkeys(FIGURES, b))]
    prof = profile_of(kernels=[(1_000, 3_000, 0, 7, 1, "k")], samples=samples)
    summary = strict(prof)
    mean = a / 2 + b / 2
    assert summary["sm"]["active_pct"] == round(mean, 2)
    assert summary["sm"]["active_busy_pct"] == round(mean, 2)
    assert summary["dram"]["read_gbps"] == round(mean, 3)
    # bytes = GB/s (bytes per ns) x 2000 ns: beyond a float, so None, and said
    assert summary["pcie"] == {"read_bytes": None, "write_bytes": None}
    assert summary["non_finite_note"] == (
        "2 figure(s) came out as a number that is not finite (inf or NaN, e.g. from counter "
        "values too large to scale) and are None")
    assert f"Note: {summary['non_finite_note']}" in prof.report().splitlines()
    prof.export_trace(tmp_path / "t.json")
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):  # matplotlib dies under CI's ASan
        assert "<table" in prof._repr_html_()


def test_largest_float_on_one_figure_only():
    prof = profile_of(kernels=[(1_000, 3_000, 0, 7, 1)],
                      samples=[(1_000, 3_000, {"sm_active_pct": BIG})])
    summary = strict(prof)
    assert summary["sm"]["active_pct"] == BIG
    assert summary["non_finite_note"] is None


def test_counters_only_scaling_beyond_a_float_is_none(test_clock):
    """No traced ops: busy figures are span figures x 100 / GR active.  A GR
    active of 1e-300 makes DRAM GB/s x 1e302 (> max float): None, said; the
    percentages are capped at 100 as before."""
    samples = [(1_000_000, 1_003_000, {"dram_read_gbps": 1e10, "gr_active_pct": 1e-300,
                                       "sm_active_pct": 50.0})]  # the whole profile
    summary = strict(profile_of(samples=samples))
    assert summary["dram"]["read_gbps"] == 1e10
    assert summary["dram"]["read_busy_gbps"] is None
    assert summary["sm"]["active_busy_pct"] == 100.0
    assert summary["non_finite_note"].startswith("1 figure(s) came out as a number that is not "
                                                  "finite")


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, -1.0])
def test_values_that_cannot_be_counters_are_refused_at_the_hook(value):
    with loopscope.profile():
        with pytest.raises(ValueError, match=r"sample record 0, sm_active_pct is .*: must be a "
                                             r"finite number >= 0"):
            _testhooks._inject("sample", [(1_000, 2_000, {"sm_active_pct": value})])


def test_a_normal_summary_has_no_note():
    summary = strict(profile_of(kernels=[(1_000, 2_000, 0, 7, 1)],
                                samples=[(1_000, 2_000, {"sm_active_pct": 40.0})]))
    assert summary["non_finite_note"] is None
    assert summary["sm"]["active_pct"] == 40.0


@pytest.mark.parametrize("device, stream", [(2**32 - 1, 7), (0, 2**32 - 1), (2**32 - 1, 2**32 - 1),
                                            (2**31, 0)])
def test_export_takes_any_32_bit_device_and_stream(tmp_path, device, stream):
    """pid/tid are small ints whatever the ids; the ids are in the names."""
    prof = profile_of(kernels=[(1_000, 2_000, device, stream, 1, "k"),
                               (5_000, 6_000, 3, 7, 2, "other")])
    strict(prof)
    data = json.loads(open(prof.export_trace(tmp_path / "t.json")).read())
    events = data["traceEvents"]
    for e in events:
        assert type(e["pid"]) is int and 0 < e["pid"] < 1000, e
        if "tid" in e:
            assert type(e["tid"]) is int and 0 <= e["tid"] < 1000, e
    names = {(e["name"], e["pid"], e.get("tid")): e["args"]["name"]
             for e in events if e["ph"] == "M"}
    (kernel,) = [e for e in events if e["ph"] == "X" and e["name"] == "k"]
    assert names[("process_name", kernel["pid"], None)].startswith(f"GPU {device}")
    assert names[("thread_name", kernel["pid"], kernel["tid"])] == f"stream {stream}"
    (other,) = [e for e in events if e["ph"] == "X" and e["name"] == "other"]
    assert names[("process_name", other["pid"], None)].startswith("GPU 3")
    assert (other["pid"] == kernel["pid"]) == (device == 3)
