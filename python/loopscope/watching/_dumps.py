"""The dumps of `loopscope.watch()`: one folder per breach, written whole or
not at all, rate-limited and bounded on disk.

A dump is written into a hidden folder beside its final place and renamed
there once every file is in, so a reader never meets half a dump.  Limits:
at most `max_dumps` dumps and `max_bytes` bytes in all (a dump that would
pass the byte cap is removed again), and at least `min_interval_s` between
two breach dumps (a capture asked for by w.capture() or SIGUSR1 skips the
interval, not the caps).  A write that fails (a full disk, a read-only
folder) removes what it wrote; the watch says so once on stderr and goes
on.  Nothing here raises: every file goes through `_write_file`, which the
tests replace to fail as a full disk does."""
from __future__ import annotations

import os
import shutil
import sys
import time
from typing import Any, Callable

Writer = Callable[[str], Any]  # writes one file at the path given


def _write_file(path: str, writer: Writer) -> None:
    """Writes one file of a dump (the tests' hook for a failing disk)."""
    writer(path)


def say(message: str) -> None:
    """One line on stderr, as loopscope's notices are."""
    try:
        print(f"loopscope.watch: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # a closed stderr: nothing to tell it with
        pass


def folder_problem(folder: str) -> str | None:
    """Why `folder` can never hold dumps (it is a file), or None; a folder
    that is missing is made at the first dump, one not writable is said then."""
    try:
        if os.path.lexists(folder) and not os.path.isdir(folder):
            return "exists and is not a folder"
    except (OSError, ValueError) as error:
        return f"cannot be used ({error})"
    parent = os.path.dirname(os.path.abspath(folder))
    while not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return f"cannot be made: {parent} is not a folder"
    return None


class Dumps:
    """The dumps of one watch: where they go, what was written, the limits."""

    def __init__(self, folder: str, max_dumps: int, max_bytes: int, min_interval_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.folder = folder
        self.max_dumps = max_dumps
        self.max_bytes = max_bytes
        self.min_interval_s = min_interval_s
        self.clock = clock
        self.paths: list[str] = []
        self.bytes = 0
        self.last_at: float | None = None
        self.skipped = {"rate_limit": 0, "max_dumps": 0, "max_bytes": 0, "write_failed": 0}
        self.said: set[str] = set()

    def _say_once(self, key: str, message: str) -> None:
        if key not in self.said:
            self.said.add(key)
            say(message)

    def refusal(self, forced: bool) -> str | None:
        """Why no dump may be written now (a key of `skipped`), or None."""
        if len(self.paths) >= self.max_dumps:
            return "max_dumps"
        if self.bytes >= self.max_bytes:
            return "max_bytes"
        if not forced and self.last_at is not None and \
                self.clock() - self.last_at < self.min_interval_s:
            return "rate_limit"
        return None

    def skip(self, why: str) -> None:
        self.skipped[why] += 1
        if why == "max_dumps":
            self._say_once(why, f"{self.max_dumps} dumps written, the most this watch writes "
                                "(max_dumps); later breaches are counted, not dumped")
        elif why == "max_bytes":
            self._say_once(why, f"the dumps reached max_dump_mb ({self.max_bytes / 2**20:g} MiB); "
                                "later breaches are counted, not dumped")

    def write(self, name: str, files: list[tuple[str, Writer]]) -> str | None:
        """Writes the dump `name` (files: (file name, writer)); returns its
        folder, or None when it could not (said once, counted)."""
        final = os.path.join(self.folder, name)
        tmp = os.path.join(self.folder, f".{name}.tmp")
        self.last_at = self.clock()
        try:
            os.makedirs(tmp, exist_ok=True)
            for file_name, writer in files:
                _write_file(os.path.join(tmp, file_name), writer)
            size = _size(tmp)
            if self.bytes + size > self.max_bytes:
                shutil.rmtree(tmp, ignore_errors=True)
                self.skip("max_bytes")
                return None
            os.rename(tmp, final)
        except Exception as error:  # a full disk, a read-only folder, a writer's own failure
            shutil.rmtree(tmp, ignore_errors=True)
            self.skipped["write_failed"] += 1
            why = error.strerror if isinstance(error, OSError) and error.strerror else \
                f"{type(error).__name__}: {error}"
            self._say_once("write_failed", f"cannot write dumps to {self.folder}: {why}; the "
                                           "watch goes on, later breaches try again (said once)")
            return None
        self.bytes += size
        self.paths.append(final)
        return final


def _size(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
