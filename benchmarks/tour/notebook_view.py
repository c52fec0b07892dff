"""Writes the notebook view (HTML, and its pictures as PNG files) of the
demo loop, eager and CUDA graph, for the guide's tour (docs/tour.md).  GPU machine:

    python3 benchmarks/tour/notebook_view.py OUT_FOLDER
"""
import argparse
import base64
import re
from pathlib import Path

import torch

import loopscope
from loopscope.demo import build, eager_loop, graph_loop_factory

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("out", nargs="?", default=".", help="folder for the HTML and PNG files (default: .)")
out = Path(parser.parse_args().out)
out.mkdir(parents=True, exist_ok=True)
model, x = build()
graph_loop = graph_loop_factory(model, x)
for _ in range(3):
    eager_loop(model, x)
    graph_loop()
torch.cuda.synchronize()
for name, run in (("eager", lambda p: eager_loop(model, x, 10, p)),
                  ("graph", lambda p: (graph_loop(1), graph_loop(10, p)))):
    with loopscope.profile() as prof:
        run(prof)
    page = prof._repr_html_()
    (out / f"notebook_view_{name}.html").write_text(page)
    for i, data in enumerate(re.findall(r'base64,([^"]+)"', page)):
        (out / f"notebook_view_{name}_{i}.png").write_bytes(base64.b64decode(data))
    print(name, prof.summary()["diagnosis"]["verdict"], len(page), "bytes of HTML")
