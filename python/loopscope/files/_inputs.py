"""Files loopscope reads or writes, checked before they are opened, and JSON
read with bounds: the one place every entry point (analyze, load, compare,
diff, baselines, recordings, run --json, export, save) goes through.

A path is checked with os.stat before anything opens it: a folder, a FIFO,
a device, a socket, a symlink loop or a path too long is refused with a
TraceError naming the path and what it is (opening a FIFO would block
forever).  Files are opened with O_NONBLOCK and checked again on the open
descriptor, so a FIFO swapped in after the check cannot block either.

JSON files (saved summaries, recordings, ranks files) are inflated in chunks with a cap
on the decompressed text (MAX_JSON_MB, LOOPSCOPE_MAX_JSON_MB to change it):
a small .json.gz that inflates to gigabytes stops at the cap with a
TraceError naming the file, the offset and the cap.  JSON nested deeper
than the parser follows, and memory that runs out while parsing, end in a
TraceError too: never a RecursionError or MemoryError.

The other bounds, for the trace readers: a Kineto trace's or a gzip
Nsight Systems export's decompressed content (MAX_TRACE_GB,
LOOPSCOPE_MAX_TRACE_GB; checked by _kineto's producer thread and
_nsys.read_gzip), one Kineto event and one name (ls_kineto.h:
_core.TRACE_MAX_UNIT, _core.TRACE_MAX_NAME); cut_name cuts a recorded name
as the C reader cuts one."""
from __future__ import annotations

import errno
import json
import os
import stat
import zlib
from pathlib import Path
from typing import Any, BinaryIO

from .. import _core

MAX_JSON_MB = 256  # default cap, MiB of decompressed JSON text per file
MAX_TRACE_GB = 64  # default cap, GiB of decompressed content per Kineto trace
CHUNK = 1 << 20  # bytes inflated (or read) at a time


class TraceError(ValueError):
    """A trace file loopscope cannot read: one line naming the file and the problem."""


def fail(path: str | os.PathLike[str], problem: str) -> TraceError:
    return TraceError(f"{path}: {problem}")


_KINDS = ((stat.S_ISDIR, "is a directory, not a file"),
          (stat.S_ISFIFO, "is a FIFO (named pipe), not a file: loopscope reads and writes "
                          "regular files only (a pipe could block forever)"),
          (stat.S_ISCHR, "is a character device, not a file"),
          (stat.S_ISBLK, "is a block device, not a file"),
          (stat.S_ISSOCK, "is a socket, not a file"))


def what_it_is(mode: int) -> str | None:
    """Why a file of this st_mode is no regular file, or None when it is."""
    if stat.S_ISREG(mode):
        return None
    return next((text for test, text in _KINDS if test(mode)), "is not a regular file")


def _stat_problem(error: OSError) -> str:
    if error.errno == errno.ENOENT:
        return "no such file"
    if error.errno == errno.ELOOP:
        return "is a symlink loop (too many levels of symbolic links)"
    if error.errno == errno.ENAMETOOLONG:
        return "the path is too long for this system"
    if error.errno == errno.ENOTDIR:
        return "a part of the path is not a folder"
    if error.errno == errno.EACCES:
        return "cannot be read (permission denied)"
    return f"cannot be read ({error.strerror or error})"


def input_problem(path: str | os.PathLike[str]) -> str | None:
    """Why `path` is not a readable regular file (what it is instead), or
    None when it is one."""
    try:
        st = os.stat(path)
    except (OSError, ValueError) as error:  # ValueError: a NUL in the path
        return (_stat_problem(error) if isinstance(error, OSError)
                else "the path holds a NUL character")
    problem = what_it_is(st.st_mode)
    if problem is None and not os.access(path, os.R_OK):
        problem = "cannot be read (permission denied)"
    return problem


def check_input(path: str | os.PathLike[str]) -> Path:
    """The path as a Path, or TraceError naming it and what it is when it
    is not a readable regular file."""
    problem = input_problem(path)
    if problem is not None:
        raise fail(path, problem)
    return Path(path)


def open_input(path: str | os.PathLike[str]) -> BinaryIO:
    """The checked file opened for reading in binary, without blocking on a
    FIFO that replaced it after the check; TraceError as check_input."""
    check_input(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise fail(path, _stat_problem(error)) from None
    problem = what_it_is(os.fstat(fd).st_mode)
    if problem is not None:
        os.close(fd)
        raise fail(path, problem)
    os.set_blocking(fd, True)  # a regular file: reads never block anyway
    return os.fdopen(fd, "rb")


def output_problem(path: str | os.PathLike[str]) -> str | None:
    """Why `path` cannot be written as an output file (checked before the
    work that produces it and before it is opened), or None."""
    text = os.fspath(path)
    if not text:
        return "an empty path"
    try:
        st = os.stat(text)
    except (FileNotFoundError, NotADirectoryError):  # the folder checks below say which
        st = None
    except (OSError, ValueError) as error:
        return (_stat_problem(error) if isinstance(error, OSError)
                else "the path holds a NUL character")
    if st is not None:
        problem = what_it_is(st.st_mode)
        if problem is not None:
            return "that is a folder" if stat.S_ISDIR(st.st_mode) else problem[3:]
        if not os.access(text, os.W_OK):
            return "the file exists and is not writable"
        return None
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        return (f"the folder {folder} does not exist" if not os.path.exists(folder)
                else f"{folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable"
    return None


def check_output(path: str | os.PathLike[str]) -> Path:
    """The path as a Path, or TraceError naming it and the problem."""
    problem = output_problem(path)
    if problem is not None:
        raise fail(path, f"cannot be written: {problem}")
    return Path(path)


def cut_name(name: str) -> str:
    """A name of at most _core.TRACE_MAX_NAME bytes of UTF-8: a longer one
    cut there (never in a character), ending with a note of its length, as
    the Kineto reader cuts (a recording's names go through here)."""
    cap = _core.TRACE_MAX_NAME
    if len(name) <= cap // 4:  # 4 bytes a character at most: short enough, not encoded
        return name
    raw = name.encode("utf-8", "surrogatepass")
    if len(raw) <= cap:
        return name
    return raw[:cap].decode("utf-8", "ignore") + f" [name cut: {len(raw)} bytes]"


def max_json_bytes() -> int:
    """The cap on a JSON file's decompressed text (LOOPSCOPE_MAX_JSON_MB)."""
    return _env_cap("LOOPSCOPE_MAX_JSON_MB", MAX_JSON_MB, 1 << 20)


def _env_cap(variable: str, default: float, unit: int) -> int:
    """A cap in bytes from `variable` (a number of units), the default when
    it is unset; TraceError naming the variable for a value that is no
    number above 0."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return int(default * unit)
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1 << 30:
        raise fail(variable, f"{text!r} is not a number above 0 (and below 2**30)")
    return int(value * unit)


def max_trace_bytes() -> int:
    """The cap on a Kineto trace's or gzip nsys export's decompressed
    content (LOOPSCOPE_MAX_TRACE_GB)."""
    return _env_cap("LOOPSCOPE_MAX_TRACE_GB", MAX_TRACE_GB, 1 << 30)


def trace_cap_error(path: str | os.PathLike[str], cap: int) -> TraceError:
    return fail(path, f"its content passes the cap of {cap:,} bytes ({cap / (1 << 30):g} GiB) "
                      f"at offset {cap:,} of the decompressed content: refused (a larger trace "
                      "can be read with LOOPSCOPE_MAX_TRACE_GB set higher)")


def _cap_error(path: str | os.PathLike[str], offset: int, cap: int) -> TraceError:
    return fail(path, f"its JSON text passes the cap of {cap:,} bytes ({cap / (1 << 20):g} MiB) "
                      f"at offset {offset:,} of the decompressed content: refused (a larger file "
                      "can be read with LOOPSCOPE_MAX_JSON_MB set higher)")


def read_text(path: str | os.PathLike[str], cap: int | None = None) -> bytes:
    """The file's content (gzip inflated), at most `cap` bytes (default
    max_json_bytes()); TraceError past the cap or for damaged gzip.  The
    text is kept as a list of chunks until it is whole (no growing buffer
    copied on the way: a bomb stops at about `cap` bytes of memory)."""
    cap = max_json_bytes() if cap is None else cap
    parts: list[bytes] = []
    size = 0
    with open_input(path) as f:
        try:
            head = f.read(2)
            if head != b"\x1f\x8b":
                if os.fstat(f.fileno()).st_size > cap:  # plain: known before a byte is kept
                    raise _cap_error(path, cap, cap)
                parts.append(head)
                size = len(head)
                while True:
                    chunk = f.read(CHUNK)
                    if not chunk:
                        return b"".join(parts)
                    size += len(chunk)
                    if size > cap:  # the file grew since its size was read
                        raise _cap_error(path, cap, cap)
                    parts.append(chunk)
            d = zlib.decompressobj(wbits=31)
            raw = head
            while True:
                while raw:
                    chunk = d.decompress(raw, min(CHUNK, cap + 1 - size))
                    size += len(chunk)
                    if size > cap:
                        raise _cap_error(path, cap, cap)
                    parts.append(chunk)
                    if d.unconsumed_tail:
                        raw = d.unconsumed_tail
                    elif d.eof and d.unused_data:  # concatenated gzip members
                        raw = d.unused_data
                        d = zlib.decompressobj(wbits=31)
                    else:
                        raw = b""
                raw = f.read(CHUNK)
                if not raw:
                    if not d.eof:
                        raise fail(path, "the gzip stream ends early: the file is truncated")
                    return b"".join(parts)
        except zlib.error as error:
            raise fail(path, f"the gzip data is damaged ({error})") from None
        except OSError as error:
            raise fail(path, f"cannot be read ({error.strerror or error})") from None
        except MemoryError:
            parts.clear()
            raise fail(path, f"ran out of memory at offset {size:,} of its decompressed "
                             "content") from None


def parse_json(path: str | os.PathLike[str], text: bytes, not_json: str = "is not valid JSON") -> Any:
    """json.loads of a file's text; TraceError (naming the file) for text
    that is no JSON (`not_json` says what the file then is), nested deeper
    than the parser follows, or too large for the memory left."""
    try:
        return json.loads(text)
    except RecursionError:
        raise fail(path, "its JSON is nested too deeply to read (deeper than Python's "
                         "parser follows)") from None
    except MemoryError:
        raise fail(path, f"ran out of memory parsing its {len(text):,} bytes of JSON") from None
    except ValueError as error:
        raise fail(path, f"{not_json} ({error})") from None


def read_json(path: str | os.PathLike[str]) -> Any:
    """The JSON value of a (gzip or plain) file, read with the bounds above."""
    return parse_json(path, read_text(path))
