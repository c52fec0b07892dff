"""A screenshot of the notebook view of the bundled demo recording (what
`prof` shows as the last line of a notebook cell), taken in headless
Chromium, for the guide's tour (docs/tour.md).  No GPU needed:

    python benchmarks/tour/notebook_screenshot.py [OUT.png]      # default docs/notebook_view.png

The empty bottom of the page is cropped and the colours reduced to a
palette (Pillow, which matplotlib brings), so the file stays small."""
from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

from PIL import Image, ImageChops

from loopscope.files import _recording
from loopscope.readers import _replay

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WIDTH, HEIGHT = 1150, 2400


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", default="docs/notebook_view.png",
                        help="the PNG to write (default: docs/notebook_view.png)")
    out = Path(parser.parse_args().out)
    browser = next((p for p in map(shutil.which, BROWSERS) if p), None)
    if browser is None:
        raise SystemExit("no Chromium found (Debian: apt-get install chromium)")
    data = _recording.bundled_demo()
    if data is None:
        raise SystemExit("no bundled demo recording in this checkout")
    view = _replay.replay(data)._repr_html_()
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "view.html"
        page.write_text('<!doctype html><html><head><meta charset="utf-8"><title>loopscope'
                        "</title></head><body>" + view + "</body></html>", encoding="utf-8")
        shot = Path(folder) / "view.png"
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--user-data-dir={folder}/profile", f"--window-size={WIDTH},{HEIGHT}",
                        f"--screenshot={shot}", page.as_uri()], check=True, capture_output=True,
                       timeout=180)
        picture = Image.open(shot).convert("RGB")
    white = Image.new("RGB", picture.size, (255, 255, 255))
    box = ImageChops.difference(picture, white).getbbox()
    if box is None:
        raise SystemExit("the screenshot is blank")
    picture = picture.crop((0, 0, min(WIDTH, box[2] + 8), min(HEIGHT, box[3] + 8)))
    out.parent.mkdir(parents=True, exist_ok=True)
    picture.quantize(colors=256).save(out, optimize=True)
    print(f"{out}: {picture.size[0]}x{picture.size[1]}, {out.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
