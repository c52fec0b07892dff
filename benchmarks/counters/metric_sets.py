"""Records, per chip, which of loopscope's PM metrics CUPTI knows and how many
passes each set of them needs (CUPTI's profiler host API: the same calls
loopscope makes), into a JSON file that tests/analysis/test_metric_choice.py
reads as its oracle (tests/data/chips/metric_sets.json).

Run on a GPU machine (CUPTI's host API needs a driver); the chips are the GPU's
own (device:0, with its counter availability image) and any chip name CUPTI
supports, which is asked without one (the chip's whole counter set).

    python benchmarks/counters/metric_sets.py --out tests/data/chips/metric_sets.json
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHIPS = ["device:0", "GA100", "GA102", "AD102", "GH100", "GB100", "GB202"]


def metric_names() -> list[str]:
    """The CUPTI names of csrc/common/ls_metrics.h, in its table order."""
    text = (ROOT / "csrc/common/ls_metrics.h").read_text()
    return re.findall(r'X\(LS_M_\w+,\s*"\w+",\s*"([^"]+)"', text.replace("\\\n", " "))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the JSON file to write")
    parser.add_argument("--chips", nargs="*", default=CHIPS, help=f"default: {' '.join(CHIPS)}")
    parser.add_argument("--cuda", default=os.environ.get("CUDA_HOME", "/usr/local/cuda"),
                        help="the CUDA toolkit to build and run the probe with")
    args = parser.parse_args(argv)
    cuda = Path(args.cuda)
    lib = next((p for p in (cuda / "extras/CUPTI/lib64", cuda / "lib64")
                if any(p.glob("libcupti.so*"))), cuda / "lib64")
    exe = Path(tempfile.mkdtemp()) / "metric_sets"
    subprocess.run(["g++", "-O1", "-o", str(exe), str(Path(__file__).with_suffix(".cpp")),
                    f"-I{cuda}/include", f"-I{cuda}/extras/CUPTI/include", f"-L{lib}", "-lcupti",
                    f"-L{cuda}/lib64/stubs", "-lcuda",
                    f"-Wl,-rpath,{lib}"], check=True)
    names = metric_names()
    env = dict(os.environ, LD_LIBRARY_PATH=f"{lib}:{os.environ.get('LD_LIBRARY_PATH', '')}")
    done = subprocess.run([str(exe), *args.chips, "--", *names], capture_output=True, text=True,
                          env=env, timeout=540)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or done.stderr:
        print(f"the probe exited {done.returncode}: {done.stderr.strip()}", file=sys.stderr)
    if not lines:
        return 1
    head, chips = lines[0], lines[1:]
    for chip in chips:
        chip["source"] = ("CUPTI's profiler host API with device %s's counter availability image"
                          % chip["spec"][7:] if chip["spec"].startswith("device:") else
                          "CUPTI's profiler host API, chip name only (the chip's whole counter set)")
        print(f"{chip['spec']:10} {chip['chip']:7} known {sum(chip['known'])}/{len(names)}, "
              f"{sum(1 for v in chip['passes'].values() if v == 1)} single-pass sets of "
              f"{len(chip['passes'])}, {chip['seconds']} s")
    Path(args.out).write_text(json.dumps({"metrics": names, **head, "chips": chips}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
