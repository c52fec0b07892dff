"""On the CUDA 12 stack: does a light profile (trace=False, which enables no
kernel-launch callback since eb6c9db) count one copy-back sync a step?  The
exit status says.  Also printed: whether each runtime launch of
libcudart.so.12 reaches the driver-API callbacks (light profiles counted
launches from those alone from 8d091c7 to eb6c9db; the check is
light_callbacks_probe.py's).  kstack.cu built against the CUDA 12.9 runtime
of NVIDIA's wheels, driven with ctypes, as cuda_stack.py does.

    bash benchmarks/stacks/build.sh 12 WHEELS /tmp/k12
    python benchmarks/stacks/launch_nesting.py --lib /tmp/k12
"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "probes"))

from cuda_stack import load  # noqa: E402
from light_callbacks_probe import nesting  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lib", required=True, help="build.sh 12's OUT_DIR")
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    k = load(12, args.lib)
    import loopscope

    assert k.setup(256 << 20, 1 << 22) == 0
    k.fmas(3, 200), k.copies(3), k.sync_all()  # warm-up
    print("CUDA runtime", k.runtime_version())
    with loopscope.profile(metrics=False) as prof:
        k.fmas(50, 200), k.copies(20), k.copy_back(), k.sync_all()
    found = nesting(prof.capture.apis())
    print(f"traced: {found}, ops {prof.capture.info()['ops']}")
    with loopscope.profile(trace=False, metrics=False) as light:
        for _ in range(args.steps):
            with light.step():
                k.fmas(5, 200)
                k.copy_back()  # a blocking cudaMemcpy: one sync a step
    s = light.summary()
    per_step = [x["syncs"] for x in s["steps"]]
    print(f"light: syncs {s['syncs']['count']}, per step {per_step}, error {s['syncs_error']}")
    print("CUPTI:", loopscope.doctor()["cupti"]["path"])
    return 0 if per_step == [1] * args.steps else 1


if __name__ == "__main__":
    sys.exit(main())
