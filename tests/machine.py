"""What the machine running the tests has, for tests whose expectations
hold only without a GPU (CI) or only with one."""
from __future__ import annotations

import ctypes

# What loopscope says on a machine without the driver (csrc/session/ls_session.c):
# the gpu_error, syncs_error and metrics_error of every profile there.
NO_DRIVER_REASON = "no NVIDIA GPU driver on this machine (libcuda.so.1 cannot be opened)"


def driver_present() -> bool:
    """True when the NVIDIA driver library can be opened here."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True
