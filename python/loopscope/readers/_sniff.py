"""What kind of file a trace is, told from its first bytes (never its name),
and the one error every trace reader raises.

Kinds: those registered (files/_formats; readers/_builtin: "kineto", "nsys",
"recording"), each told by its own sniff of the first bytes, decompressed
when gzip.  The name is read for one thing only: an Nsight Systems report
(.nsys-rep) gets the command that exports it.  A saved summary (or a list
of them) is refused first: it is no trace, though it is JSON."""
from __future__ import annotations

import gzip
import os
import shlex
import zlib
from pathlib import Path

from ..files import _formats
from ..files._inputs import TraceError, check_input, fail, open_input

__all__ = ["TraceError", "check_path", "content_start", "fail", "sniff"]

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"
HEAD_BYTES = 1 << 16
RECORDING_KEY = b'"format":"loopscope-recording"'
# Nsight Systems' own report files (a format of its own): only their SQLite export is read
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
SUMMARY_KEY = b'{"schema":'  # a saved summary dict (a Kineto trace has "schemaVersion")


def check_path(path: str | os.PathLike[str]) -> Path:
    """The path as a Path, or TraceError when it is not a readable file."""
    return check_input(path)


def _head(path: Path) -> tuple[bytes, bool]:
    """(the first bytes of the content, gzip or not), decompressed if gzip."""
    try:
        with open_input(path) as f:
            raw = f.read(HEAD_BYTES)
    except OSError as error:
        raise fail(path, f"cannot be read ({error.strerror or error})") from None
    if raw[:2] != GZIP_MAGIC:
        return raw, False
    try:
        d = zlib.decompressobj(wbits=31)
        return d.decompress(raw, HEAD_BYTES), True
    except zlib.error as error:
        raise fail(path, f"is gzip, but its data is damaged ({error})") from None


def content_start(head: bytes) -> bytes:
    """The first bytes less a byte order mark and leading white space."""
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")


def sniff(path: str | os.PathLike[str]) -> tuple[str, bool]:
    """(kind, gzip) of a trace file: the first registered format whose sniff
    claims its first bytes; TraceError for anything else."""
    p = check_path(path)
    head, gz = _head(p)
    if not head:
        raise fail(path, "is empty" if not gz else "is an empty gzip file")
    text = content_start(head)
    compact = bytes(b for b in text[:256] if b not in b" \t\r\n")
    if compact.startswith(b"[" + SUMMARY_KEY):  # never read as an empty trace
        raise fail(path, "holds a list of loopscope summaries (as `analyze --json` of several "
                         "files writes), not a trace: compare them with `loopscope diff`, one "
                         "summary a side")
    if compact.startswith(SUMMARY_KEY):
        raise fail(path, "is a loopscope summary (as `run --json` or `analyze --json` writes), "
                         "not a trace: compare it with `loopscope diff`")
    for fmt in _formats.registered():
        if fmt.sniff(head):
            return fmt.kind, gz
    if p.name.lower().endswith(REPORT_SUFFIXES):
        raise fail(path, "is an Nsight Systems report, which loopscope reads through its SQLite "
                         f"export: run `nsys export --type sqlite {shlex.quote(str(path))}` "
                         "first and give loopscope the .sqlite file it writes")
    if not text:
        raise fail(path, "holds only white space")
    if b"\x00" in head[:4096]:
        raise fail(path, "is not a trace: neither JSON (Kineto, loopscope) nor SQLite "
                         "(Nsight Systems) - a binary file; an .nsys-rep needs "
                         "`nsys export --type sqlite` first")
    raise fail(path, "is not a trace: it does not start like JSON (a Kineto trace or a loopscope "
                     "recording) or SQLite (an Nsight Systems export)")
