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

from loopscope.figures._verdicts import VERDICTS
from loopscope.files import _recording
from loopscope.readers import _replay
from loopscope.views import _html, _pictures

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER = next((path for path in map(shutil.which, BROWSERS) if path), None)

pytestmark = [
    pytest.mark.skipif(BROWSER is None, reason="no Chromium on this machine (Debian: apt-get "
                       "install chromium; .ci/run installs it where apt-get works)"),
    pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                       reason="needs matplotlib (the test extra) for the pictures"),
]

# Run in the page once it has loaded: what the browser made of the view, and
# where it laid each heading and picture out.
CHECKS = """<script>
window.addEventListener("load", () => {
  const out = document.createElement("pre");
  out.id = "checks";
  try {
    const view = document.querySelector("div.loopscope");
    const heads = [...view.querySelectorAll("h4")];
    const steps = heads.find(h => h.textContent.startsWith("Steps ("));
    let table = null;
    for (let el = steps ? steps.nextElementSibling : null; el && !table;
         el = el.nextElementSibling)
      table = el.tagName === "TABLE" ? el : el.querySelector("table");
    const box = e => { const r = e.getBoundingClientRect();
                       return [r.left, r.right, r.top, r.bottom]; };
    // each picture with the heading it follows (document order)
    let heading = null;
    const figures = [];
    for (const el of view.querySelectorAll("h4, img")) {
      if (el.tagName === "H4") { heading = el; continue; }
      figures.push({heading: heading ? heading.textContent : null,
                    heading_box: heading ? box(heading) : null, alt: el.alt, box: box(el),
                    complete: el.complete, natural: [el.naturalWidth, el.naturalHeight]});
    }
    out.textContent = JSON.stringify({
      verdict: view.querySelector('div[style*="font-size:18px"]').textContent,
      headings: heads.map(h => h.textContent),
      heading_boxes: heads.map(box),
      step_rows: table ? [...table.rows].map(r => [...r.cells].map(c => c.textContent)) : [],
      figures: figures,
      // a table wider than its box would hide its right part in a scroll box
      tables_cut: [...view.querySelectorAll("table")].filter(
          t => t.parentElement.scrollWidth > t.parentElement.clientWidth + 1).length,
      window_width: window.innerWidth,
      page_width: document.documentElement.scrollWidth,
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


def write_page(folder: Path, name: str, view: str) -> Path:
    path = folder / f"{name}.html"
    path.write_text('<!doctype html><html><head><meta charset="utf-8"><title>loopscope</title>'
                    "</head><body>" + view + CHECKS + "</body></html>", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def page(demo, tmp_path_factory) -> Path:
    return write_page(tmp_path_factory.mktemp("browser"), "view", demo[1])


def chromium(page: Path, *args: str) -> subprocess.CompletedProcess:
    profile = page.parent / "chromium-profile"  # its own, never the user's
    result = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--user-data-dir={profile}", "--virtual-time-budget=10000", *args, page.as_uri()],
        capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def seen_in(page: Path, *args: str) -> dict:
    dom = chromium(page, "--dump-dom", *args).stdout
    found = re.search(r'<pre id="checks">(.*?)</pre>', dom, re.S)
    assert found, "the page's check script did not run: " + dom[-500:]
    seen = json.loads(html.unescape(found.group(1)))
    assert "error" not in seen, seen
    return seen


def test_the_browser_shows_the_verdict_the_steps_and_the_pictures(demo, page):
    summary, view = demo
    seen = seen_in(page)
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
    assert len(seen["figures"]) == view.count("<img") >= 2
    for f in seen["figures"]:
        (width, height), (left, right, top, bottom) = f["natural"], f["box"]
        assert f["complete"] and width > 200 and height > 100 and bottom - top > 50


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
    assert share(VERDICTS["CPU_LAUNCH_BOUND"].colour) > 0.0005
    assert float((rgb < 250).any(axis=2).mean()) > 0.1  # far from a white page


# -- at a narrow and a wide window ----------------------------------------------

@pytest.fixture(scope="module")
def views(tmp_path_factory):
    """The pages of the profile's view and of its summary's (which draws the
    profile's time line too), the profile kept alive for the latter."""
    data = _recording.bundled_demo()
    if data is None:
        pytest.skip("no bundled demo recording in this checkout")
    prof = _replay.replay(data)
    folder = tmp_path_factory.mktemp("widths")
    return prof, {"profile": write_page(folder, "profile", prof._repr_html_()),
                  "summary": write_page(folder, "summary", prof.summary()._repr_html_())}


def belongs(heading: str | None, alt: str) -> bool:
    """Whether a picture (by its alt text) is the one its heading names."""
    zoom = re.fullmatch(r"Zoom: (the slowest|a typical) step \((.*)\)", heading or "")
    if zoom:
        role = "slowest" if zoom.group(1) == "the slowest" else "typical"
        return alt.startswith(f"Zoom on the {role} step {zoom.group(2)}:")
    return {"Gap histogram": alt.startswith("Gap histogram"),
            "Time line": "time line of the whole run" in alt.lower(),
            "Per step": alt.startswith("Per step:")}.get(heading or "", False)


@pytest.mark.parametrize("width", [900, 1400])
@pytest.mark.parametrize("which", ["profile", "summary"])
def test_nothing_is_cut_off_and_each_heading_sits_above_its_own_figure(views, which, width):
    _, pages = views
    seen = seen_in(pages[which], f"--window-size={width},4000")
    assert seen["window_width"] == width
    assert seen["page_width"] <= width  # nothing wider than the window
    assert seen["tables_cut"] == 0      # no table hides a part in a scroll box
    figures = seen["figures"]
    assert [f["heading"] for f in figures] == ["Gap histogram", "Time line",
                                               figures[2]["heading"], figures[3]["heading"],
                                               "Per step"]
    for f in figures:
        (natural, _), (left, right, top, bottom) = f["natural"], f["box"]
        assert f["complete"] and 0 <= left and right <= width, (which, width, f["alt"])
        assert right - left <= natural + 0.5           # never drawn wider than made
        if width >= 1400:
            assert right - left == pytest.approx(natural, abs=0.5)  # room: full size
        assert belongs(f["heading"], f["alt"]), (f["heading"], f["alt"])
        assert f["heading_box"][3] <= top              # the heading above its figure
    # each figure ends before the next heading begins
    tops = sorted(b[2] for b in seen["heading_boxes"])
    for f in figures:
        later = [t for t in tops if t > f["heading_box"][2]]
        assert not later or f["box"][3] <= min(later)
    if width == 900:  # the 1,000 px wide pictures shrank to the page
        assert any(f["natural"][0] > 900 for f in figures)
        assert all(f["box"][1] - f["box"][0] < 900 for f in figures)


def test_a_screenshot_at_900_px_keeps_the_pictures_right_edges(views):
    """The per-step chart's right axis (its % labels) is inside a 900 px
    window: the picture was scaled, not cut."""
    from matplotlib import image

    _, pages = views
    shot = pages["profile"].parent / "narrow.png"
    chromium(pages["profile"], "--window-size=900,4000", f"--screenshot={shot}")
    rgb = (image.imread(shot)[:, :, :3] * 255).round().astype(int)
    assert rgb.shape[1] == 900
    busy = (abs(rgb - [int(_pictures.BUSY[i:i + 2], 16) for i in (1, 3, 5)]) <= 8).all(axis=2)
    columns = busy.any(axis=0).nonzero()[0]
    assert columns.size and columns.max() < 900 - 20   # blue bars end before the page edge


# -- kernel names break between their parts only (issue 41, item 8) -------------

# Run in the page once it has loaded: each kernel name of the Worst gaps
# table, where the browser broke its lines (the characters on either side of
# each break, read from the characters' boxes) and whether its box cut it.
NAMES = """<script>
window.addEventListener("load", () => {
  const out = document.createElement("pre");
  out.id = "names";
  const heading = [...document.querySelectorAll("h4")].find(h => h.textContent === "Worst gaps");
  const table = heading.nextElementSibling.querySelector("table");
  const names = [...table.querySelectorAll("div[title]")].map(div => {
    const walker = document.createTreeWalker(div, NodeFilter.SHOW_TEXT);
    const breaks = [];
    let top = null, last = null;
    for (let t = walker.nextNode(); t; t = walker.nextNode()) {
      for (let i = 0; i < t.data.length; i++) {
        const r = document.createRange();
        r.setStart(t, i); r.setEnd(t, i + 1);
        const box = r.getClientRects()[0];
        if (!box) continue;
        if (top !== null && box.top > top + 2) breaks.push([last, t.data[i]]);
        top = box.top; last = t.data[i];
      }
    }
    return {text: div.textContent, title: div.title, breaks: breaks,
            cut: div.scrollWidth > div.clientWidth + 1};
  });
  const box = table.parentElement;
  out.textContent = JSON.stringify({names: names, width: window.innerWidth,
                                    table_cut: box.scrollWidth > box.clientWidth + 1});
  document.body.appendChild(out);
});
</script>"""


@pytest.mark.parametrize("width", [900, 1400])
def test_kernel_names_break_between_their_parts_only(demo, tmp_path, width):
    from loopscope.figures._names import demangled_name, kernel_name

    summary, view = demo
    page = tmp_path / "names.html"
    page.write_text('<!doctype html><html><head><meta charset="utf-8"></head><body>' + view
                    + NAMES + "</body></html>", encoding="utf-8")
    dom = chromium(page, "--dump-dom", f"--window-size={width},3000").stdout
    found = re.search(r'<pre id="names">(.*?)</pre>', dom, re.S)
    assert found, "the page's script did not run: " + dom[-500:]
    seen = json.loads(html.unescape(found.group(1)))
    assert seen["width"] == width and not seen["table_cut"]
    worst = summary["gaps"]["worst"][:_html.MAX_WORST_GAPS]
    want = [(kernel_name(g[k]), demangled_name(g[k])) for g in worst for k in ("after", "before")]
    assert [(n["text"], n["title"]) for n in seen["names"]] == want
    for n in seen["names"]:  # a line ends after `::` or `,`, or the next begins with `<` or `(`
        for before, after in n["breaks"]:
            assert before in ":," or after in "<(", (width, n["text"], before, after)
    breaks = sum(len(n["breaks"]) for n in seen["names"])
    cut = [n["text"] for n in seen["names"] if n["cut"]]
    if width == 900:
        # the demo's at::native:: names wrap between parts; a part wider than
        # its box (the nvjet GEMMs' 51 characters) ends in an ellipsis there
        assert breaks > 0
        assert cut and all("::" not in name for name in cut)
    else:  # room for every name whole, on one line
        assert (breaks, cut) == (0, [])
