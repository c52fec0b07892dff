"""Real GPU: a recording of a sampled loop, loaded and exported, has the
live export's counter tracks, no sync record from before the profile began
(the warm-up's own wait is left out by the finish), and every launch on the
loop's thread.  Marked gpu; skipped with a reason where no GPU is present."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch", reason="needs PyTorch")
if not torch.cuda.is_available():
    pytest.skip("needs an NVIDIA GPU visible to PyTorch", allow_module_level=True)

import loopscope  # noqa: E402

pytestmark = pytest.mark.gpu


def test_a_loaded_recording_exports_what_the_live_profile_did(tmp_path):
    x = torch.randn(512, 512, device="cuda")
    for _ in range(3):
        x = torch.tanh(x @ x)
    torch.cuda.synchronize()                     # a wait before the profile
    with loopscope.profile() as prof:
        for _ in range(5):
            with prof.step():
                for _ in range(20):
                    x = torch.tanh(x @ x)
    live = json.loads(open(prof.export_trace(tmp_path / "live.json")).read())
    loaded = loopscope.load(prof.save_recording(tmp_path / "rec.json.gz"))
    back = json.loads(open(loaded.export_trace(tmp_path / "back.json")).read())
    for data in (live, back):
        events = data["traceEvents"]
        assert min(e["ts"] for e in events if "ts" in e) >= 0
        names = [e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"]
        assert "unknown thread" not in names
    if prof.summary()["sm"] is not None:
        def series(data):
            return sorted((e["name"], e["ts"]) for e in data["traceEvents"] if e["ph"] == "C")
        assert series(live) and series(back) == series(live)
        assert "metrics=False" not in json.dumps(back["otherData"])
