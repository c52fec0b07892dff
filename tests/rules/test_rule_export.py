"""Trace export with several devices: each GPU is its own process in the
trace, with its own kernels and its own gaps (another device's work does not
fill a device's idle time).  Times in us from the profile start."""
from __future__ import annotations

import json

import loopscope
from loopscope import _testhooks

from fakes import kernel

US = 1_000


def per_device_gaps(kernels, t0, longer_than_ns):
    """(device, start us, length us) of each device's idle intervals."""
    out = []
    for device in sorted({k[2] for k in kernels}):
        end = None
        for start, stop, *_ in sorted(k for k in kernels if k[2] == device):
            if end is not None and start - end > longer_than_ns:
                out.append((device, (end - t0) / US, (start - end) / US))
            end = stop if end is None else max(end, stop)
    return out


def test_each_device_has_its_own_process_and_gaps(test_clock, tmp_path):
    t0 = test_clock.at(0)
    kernels = [kernel(t0 + 10 * US, t0 + 20 * US, 1, "a0", device=0),
               kernel(t0 + 60 * US, t0 + 70 * US, 2, "b0", device=0),
               kernel(t0 + 30 * US, t0 + 50 * US, 3, "a1", device=1)]  # inside device 0's gap
    with loopscope.profile() as prof:
        _testhooks._inject("kernel", kernels)
    data = json.loads(open(prof.export_trace(tmp_path / "t.json")).read())
    x = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert sorted((e["name"], e["pid"], e["ts"], e["dur"]) for e in x if e["cat"] == "kernel") == \
        sorted((k[5], 100 + k[2], (k[0] - t0) / US, (k[1] - k[0]) / US) for k in kernels)
    gaps = [(e["pid"] - 100, e["ts"], e["dur"]) for e in x if e["cat"] == "gap"]
    assert gaps == per_device_gaps(kernels, t0, 20 * US) == [(0, 20.0, 40.0)]
    names = {e["pid"]: e["args"]["name"] for e in data["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert (names[100], names[101]) == ("GPU 0", "GPU 1")
    s = prof.summary()
    assert [(d["id"], d["kernels"]) for d in s["gpu"]["devices"]] == [(0, 2), (1, 1)]
    assert s["gaps"]["count"] == len(per_device_gaps(kernels, t0, 0)) == 1
