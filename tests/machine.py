"""What the machine running the tests has, for tests whose expectations
hold only without a GPU (CI) or only with one."""
from __future__ import annotations

import ctypes


def driver_present() -> bool:
    """True when the NVIDIA driver library can be opened here."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True
