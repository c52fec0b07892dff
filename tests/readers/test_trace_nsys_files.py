"""The files a user has in hand after Nsight Systems: a report (.nsys-rep)
gets the command that exports it; a gzip-compressed SQLite export is read
as the export itself (issue 28, item 8)."""
from __future__ import annotations

import gzip
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import loopscope
from test_trace_nsys import seed_style_export


def test_a_gzip_compressed_export_gives_the_summary_of_the_export(tmp_path):
    ex = seed_style_export(tmp_path / "r.sqlite")
    ex.close()
    packed = tmp_path / "r.sqlite.gz"
    packed.write_bytes(gzip.compress(Path(ex.path).read_bytes()))
    plain, compressed = loopscope.analyze(ex.path), loopscope.analyze(packed)
    assert compressed["source"] == "nsys"
    for key in ("gaps", "syncs", "gpu", "steps", "ranges", "diagnosis"):
        assert compressed[key] == plain[key], key
    assert not list(Path(tmp_path).glob("loopscope-*"))


def test_a_gzip_compressed_export_that_is_not_one_is_named(tmp_path):
    packed = tmp_path / "shop.sqlite.gz"
    import sqlite3
    db = sqlite3.connect(tmp_path / "shop.sqlite")
    db.execute("CREATE TABLE items (name TEXT)")
    db.commit()
    db.close()
    packed.write_bytes(gzip.compress((tmp_path / "shop.sqlite").read_bytes()))
    with pytest.raises(loopscope.TraceError) as error:
        loopscope.analyze(packed)
    assert str(error.value).startswith(f"{packed}: is an SQLite database but not an Nsight "
                                       "Systems export")


def test_a_truncated_gzip_export_is_named(tmp_path):
    ex = seed_style_export(tmp_path / "r.sqlite")
    ex.close()
    packed = tmp_path / "r.sqlite.gz"
    data = gzip.compress(Path(ex.path).read_bytes())
    packed.write_bytes(data[:len(data) // 2])
    with pytest.raises(loopscope.TraceError, match=f"^{packed}: is a gzip-compressed SQLite "
                       "file that cannot be decompressed"):
        loopscope.analyze(packed)


@pytest.mark.parametrize("name", ["run 1.nsys-rep", "old.qdrep", "RUN.NSYS-REP"])
def test_an_nsight_systems_report_gets_the_export_command(tmp_path, name):
    report = tmp_path / name
    report.write_bytes(b"\x00\x01binary report of its own format" * 40)
    with pytest.raises(loopscope.TraceError) as error:
        loopscope.analyze(report)
    assert str(error.value) == (
        f"{report}: is an Nsight Systems report, which loopscope reads through its SQLite "
        f"export: run `nsys export --type sqlite {shlex.quote(str(report))}` first and give "
        "loopscope the .sqlite file it writes")


def test_the_command_line_says_it_in_one_line_with_status_2(tmp_path):
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"PK\x03\x04 not ours" * 10)
    result = subprocess.run([sys.executable, "-m", "loopscope", "analyze", str(report)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "nsys export --type sqlite" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("end", [0, None], ids=["ends-at-zero", "ends-one-ns-before"])
def test_a_name_of_another_type_is_refused_in_a_row_skipped_for_its_times(tmp_path, end):
    """Issue 28, item 11: the name of a row that cannot be used for its times
    is checked all the same (as its numbers are), so one wrong value is an
    error whichever row holds it."""
    ex = seed_style_export(tmp_path / "r.sqlite", steps=1)
    if end is None:  # NOT NULL in the schema: this row loses its end another way
        ex.db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 1 WHERE rowid = 1")
    else:
        ex.db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = ? WHERE rowid = 1", (end,))
    ex.db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 'gemm' WHERE rowid = 1")
    ex.close()
    with pytest.raises(loopscope.TraceError) as error:
        loopscope.analyze(ex.path)
    assert str(error.value) == (
        f"{ex.path}: table CUPTI_ACTIVITY_KIND_KERNEL column demangledName holds a text value "
        "('gemm') where an integer is expected: not an Nsight Systems export loopscope can read")
