"""CSV: column types from the first file, and errors naming file, row and column."""

from __future__ import annotations

import os

import numpy as np
import pyarrow.csv as pacsv
import pytest

import datapipe as dp
from datapipe.io import (
    SchemaMismatchError,
    from_csv,
)


def test_csv_types_from_first_file_and_errors(tmp_path):
    a, b, c = (tmp_path / f"{n}.csv" for n in "abc")
    a.write_text("x,name\n1.5,p\n2,q\n")
    b.write_text("x,name\n3,r\n")  # pyarrow alone would infer int64 here
    c.write_text("name\nonly\n")
    ds = from_csv([str(a), str(b)])
    rows = list(ds)
    assert [(type(r["x"]), float(r["x"]), r["name"]) for r in rows] == [
        (np.float64, 1.5, "p"),
        (np.float64, 2.0, "q"),
        (np.float64, 3.0, "r"),
    ]
    assert ds.files == (str(a), str(b)) and ds.cardinality() == dp.UNKNOWN_CARDINALITY
    batches = list(from_csv([str(a), str(b)], batch_size=2, columns=["x"]))
    assert [bt["x"].tolist() for bt in batches] == [[1.5, 2.0], [3.0]]
    with pytest.raises(dp.PipelineError) as info:
        list(from_csv([str(a), str(c)]))
    assert info.value.path == str(c) and "x" in str(info.value)
    assert isinstance(info.value.cause, SchemaMismatchError)
    d = tmp_path / "d.csv"
    d.write_text("x,name\nabc,z\n")
    with pytest.raises(dp.PipelineError, match="column 'x', data row 1 .*'abc' is not a double"):
        list(from_csv([str(a), str(d)]))
    with pytest.raises(dp.PipelineError) as info:
        list(from_csv([str(a), str(d)]))
    assert info.value.path == str(d)
    assert pacsv is not None and os.path.exists(str(a))


def test_csv_quoted_line_breaks_past_the_first_block(tmp_path):
    """A quoted value may hold a line break anywhere in the file (RFC 4180, tf.data's
    CsvDataset): pyarrow's default parse cuts its 1 MB blocks at any line break, and a
    value split that way failed the file (2 MB here) with "Expected 2 columns, got 1"."""
    p = tmp_path / "notes.csv"
    rows = [f'{i},"line one of {i}\nline two"' for i in range(60_000)]
    p.write_text("id,text\n" + "\n".join(rows) + "\n")
    assert p.stat().st_size > 2**20
    out = list(from_csv(str(p)))
    assert len(out) == 60_000
    assert out[-1] == {"id": 59_999, "text": "line one of 59999\nline two"}


def test_csv_header_that_is_not_text(tmp_path):
    """A file whose header is not UTF-8 (a compressed file, say) is a FileReadError naming
    it (a raw UnicodeDecodeError before)."""
    p = tmp_path / "packed.csv"
    p.write_bytes(b"\xff\xfe,x\n1,2\n")
    with pytest.raises(dp.FileReadError, match="cannot parse as CSV") as info:
        from_csv(str(p))
    assert info.value.path == str(p)
