"""Memory figures of this process, for the benchmarks that print them
(imported by path: the benchmarks run as scripts from the repo root)."""
from __future__ import annotations

import resource
from pathlib import Path


def rss_mb(field: str = "VmRSS") -> float:
    """VmRSS (now) or VmHWM (peak) of this process, MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> bool:
    """Starts a new peak RSS (Linux: clear_refs 5); False where it cannot."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False
