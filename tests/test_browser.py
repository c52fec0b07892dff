"""The notebook view in a real browser: the HTML that a notebook shows for
the replayed bundled recording (`prof._repr_html_()`), opened in headless
Chromium.  The browser reports what it parsed and drew (the verdict, the
step table, each picture decoded with a size), and a screenshot of the page
must show the pictures' colours, not a blank page.

Chromium is Debian's package `chromium` (.ci/run installs it); where no
Chromium can be found the tests skip and say so."""
from __future__ import annotations

import html
import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from loopscope import _html, _pictures, _recording, _replay

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER = next((path for path in map(shutil.which, BROWSERS) if path), None)

pytestmark = [
    pytest.mark.skipif(BROWSER is None, reason="no Chromium on this machine (Debian: apt-get "
                       "install chromium; .ci/run installs it where apt-get works)"),
    pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                       reason="needs matplotlib (the test extra) for the pictures"),
]

# Run in the page once it has loaded: what the browser made of the view.
CHECKS = """<script>
window.addEventListener("load", () => {
  const out = document.createElement("pre");
  out.id = "checks";
  try {
    const view = document.querySelector("div.loopscope");
    const heads = [...view.querySelectorAll("h4")];
    const steps = heads.find(h => h.textContent.startsWith("Steps ("));
    let table = steps ? steps.nextElementSibling : null;
    while (table && table.tagName !== "TABLE") table = table.nextElementSibling;
    out.textContent = JSON.stringify({
      verdict: view.querySelector('div[style*="font-size:18px"]').textContent,
      headings: heads.map(h => h.textContent),
      step_rows: table ? [...table.rows].map(r => [...r.cells].map(c => c.textContent)) : [],
      images: [...view.querySelectorAll("img")].map(
          i => [i.complete, i.naturalWidth, i.naturalHeight, i.getBoundingClientRect().height]),
    });
  } catch (error) {
    out.textContent = JSON.stringify({error: String(error)});
  }
  document.body.appendChild(out);
});
</script>"""


@pytest.fixture(scope="module")
def demo():
    data = _recording.bundled_demo()
    if data is None:
        pytest.skip("no bundled demo recording in this checkout")
    prof = _replay.replay(data)
    return prof.summary(), prof._repr_html_()


@pytest.fixture(scope="module")
def page(demo, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("browser")
    path = folder / "view.html"
    path.write_text('<!doctype html><html><head><meta charset="utf-8"><title>loopscope</title>'
                    "</head><body>" + demo[1] + CHECKS + "</body></html>", encoding="utf-8")
    return path


def chromium(page: Path, *args: str) -> subprocess.CompletedProcess:
    profile = page.parent / "chromium-profile"  # its own, never the user's
    result = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--user-data-dir={profile}", "--virtual-time-budget=10000", *args, page.as_uri()],
        capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def test_the_browser_shows_the_verdict_the_steps_and_the_pictures(demo, page):
    summary, view = demo
    dom = chromium(page, "--dump-dom").stdout
    found = re.search(r'<pre id="checks">(.*?)</pre>', dom, re.S)
    assert found, "the page's check script did not run: " + dom[-500:]
    seen = json.loads(html.unescape(found.group(1)))
    assert "error" not in seen, seen
    assert seen["verdict"] == summary["diagnosis"]["verdict"].replace("_", " ")
    assert seen["headings"][:4] == [f"Steps ({len(summary['steps'])})", "Sync sites",
                                    "Worst gaps", "Gap histogram"]
    rows = seen["step_rows"]
    assert rows[0][:4] == ["step", "name", "host ms", "GPU ms"]
    assert [r[:2] for r in rows[1:]] == [[str(s["index"]), s["name"]] for s in summary["steps"]]
    assert [r[3] for r in rows[1:]] == [f"{s['gpu_ms']:.3f}" for s in summary["steps"]]
    assert [r[-1] for r in rows[1:]] == [s["verdict"] for s in summary["steps"]]
    # the time line, then a zoom on the slowest step by host time and on the median one
    steps = summary["steps"]
    slowest = max(steps, key=lambda s: s["host_ms"])
    typical = sorted(steps, key=lambda s: (s["host_ms"], s["index"]))[(len(steps) - 1) // 2]
    assert seen["headings"][4:] == ["Time line", f"Zoom: the slowest step ({slowest['name']})",
                                    f"Zoom: a typical step ({typical['name']})", "Per step"]
    # every picture decoded by the browser, with a size, and laid out on the page
    assert len(seen["images"]) == view.count("<img") >= 2
    for complete, width, height, shown in seen["images"]:
        assert complete and width > 200 and height > 100 and shown > 50


def test_a_screenshot_shows_the_pictures(page):
    from matplotlib import image

    shot = page.parent / "view.png"
    chromium(page, "--window-size=1150,2000", f"--screenshot={shot}")
    pixels = image.imread(shot)[:, :, :3]          # floats 0..1, rows x columns x RGB
    rgb = (pixels * 255).round().astype(int)
    height, width, _ = rgb.shape
    assert (width, height) == (1150, 2000)
    colours = {tuple(p) for p in rgb[::4, ::4].reshape(-1, 3)}
    assert len(colours) > 50, "a nearly blank page"

    def share(hex_colour: str) -> float:
        want = [int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]
        near = (abs(rgb - want) <= 8).all(axis=2)
        return float(near.mean())

    # the pictures' blue (GPU busy bars, histogram) and the verdict's colour are on the page
    assert share(_pictures.BUSY) > 0.01
    assert share(_html.VERDICT_COLOURS["CPU_LAUNCH_BOUND"]) > 0.0005
    assert float((rgb < 250).any(axis=2).mean()) > 0.1  # far from a white page
