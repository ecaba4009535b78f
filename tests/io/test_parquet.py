"""Parquet: rows, batches, projection and units; directories and checkpoints; values and
dtypes round-trip exactly (also through Arrow IPC); bad files name themselves."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import datapipe as dp
from datapipe.io import (
    NullValueError,
    ParquetDataset,
    SchemaMismatchError,
    from_arrow_ipc,
    from_parquet,
)


def _table(n=10, offset=0):
    x = np.arange(offset, offset + n, dtype=np.int64)
    feats = (np.arange(n * 3, dtype=np.float32) + offset).reshape(n, 3)
    return pa.table(
        {
            "x": x,
            "f": pa.FixedSizeListArray.from_arrays(pa.array(feats.ravel()), 3),
            "s": [f"s{i}" for i in x],
        }
    )


def test_parquet_rows_batches_projection_units(tmp_path):
    p = str(tmp_path / "t.parquet")
    pq.write_table(_table(10), p, row_group_size=4)
    ds = ParquetDataset(p)
    assert ds.files == ((p, 0), (p, 1), (p, 2)) and ds.cardinality() == 10
    assert ds.element_spec == {
        "x": dp.TensorSpec((), "int64"),
        "f": dp.TensorSpec((3,), "float32"),
        "s": dp.TensorSpec((), object),
    }
    rows = list(ds)
    assert len(rows) == 10 and list(rows[5]) == ["x", "f", "s"]
    assert type(rows[5]["x"]) is np.int64 and rows[5]["x"] == 5
    np.testing.assert_array_equal(rows[5]["f"], np.float32([15, 16, 17]))
    assert rows[5]["s"] == "s5"
    batches = list(from_parquet(p, columns=["f", "x"], batch_size=3))
    assert [list(b) for b in batches] == [["f", "x"]] * 4
    assert [b["x"].tolist() for b in batches] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert batches[1]["f"].shape == (3, 3) and batches[1]["f"].dtype == np.float32
    assert from_parquet(p, batch_size=3).cardinality() == 4
    part = ds.with_files([(p, 2), (p, 0)])
    assert [int(r["x"]) for r in part] == [8, 9, 0, 1, 2, 3] and part.cardinality() == 6


def test_parquet_directory_and_checkpoint(tmp_path):
    d = tmp_path / "dir"
    d.mkdir()
    for i in range(3):
        pq.write_table(_table(5, offset=10 * i), str(d / f"part{i}.parquet"), row_group_size=2)
    (d / "_SUCCESS").write_text("")
    for bs in (None, 4):
        ds = ParquetDataset(str(d), batch_size=bs)
        assert len(ds.files) == 9
        full = list(ds)
        flat = lambda xs: [  # noqa: E731
            int(v) for e in xs for v in np.atleast_1d(e["x"])
        ]
        assert flat(full) == [10 * i + j for i in range(3) for j in range(5)]
        for cut in range(len(full) + 1):
            it = iter(ds)
            head = [next(it) for _ in range(cut)]
            st_ = it.get_state()
            it2 = iter(ds)
            it2.set_state(st_)
            assert flat(head + list(it2)) == flat(full)


def test_parquet_schema_mismatch_names_file_and_column(tmp_path):
    a, b, c = (str(tmp_path / f"{n}.parquet") for n in "abc")
    pq.write_table(pa.table({"x": [1, 2], "y": [1.0, 2.0]}), a)
    pq.write_table(pa.table({"x": [3]}), b)
    pq.write_table(pa.table({"x": [3.5], "y": [1.0]}), c)
    with pytest.raises(SchemaMismatchError) as info:
        ParquetDataset([a, b])
    assert info.value.path == b and "column 'y' is missing" in str(info.value)
    with pytest.raises(SchemaMismatchError) as info:
        ParquetDataset([a, c])
    msg = str(info.value)
    assert info.value.path == c and "column 'x' has type double" in msg and "int64" in msg
    # projecting away the mismatching column makes the files compatible
    assert [float(r["y"]) for r in ParquetDataset([a, c], columns=["y"])] == [1.0, 2.0, 1.0]
    with pytest.raises(SchemaMismatchError, match="column 'z' is missing") as info:
        ParquetDataset(a, columns=["z"])
    assert info.value.path == a


def test_parquet_nulls_rejected_naming_file_and_column(tmp_path):
    p = str(tmp_path / "n.parquet")
    pq.write_table(pa.table({"x": [1, 2, 3, 4], "y": [1.0, None, 2.0, 3.0]}), p, row_group_size=2)
    assert [int(r["x"]) for r in ParquetDataset(p, columns=["x"])] == [1, 2, 3, 4]
    it = iter(ParquetDataset(p))
    with pytest.raises(dp.PipelineError) as info:
        next(it)
    assert info.value.path == p and isinstance(info.value.cause, NullValueError)
    assert "column 'y' holds 1 null value(s)" in str(info.value)


def test_parquet_not_parquet_and_missing(tmp_path):
    p = tmp_path / "x.parquet"
    p.write_bytes(b"not parquet at all")
    with pytest.raises(dp.FileReadError, match="not a readable Parquet file") as info:
        ParquetDataset(str(p))
    assert info.value.path == str(p)
    with pytest.raises(FileNotFoundError, match="no such file"):
        ParquetDataset(str(tmp_path / "missing.parquet"))


_TYPES = {
    "int8": (pa.int8(), st.integers(-128, 127)),
    "int64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "uint16": (pa.uint16(), st.integers(0, 2**16 - 1)),
    "uint64": (pa.uint64(), st.integers(0, 2**64 - 1)),
    "float32": (pa.float32(), st.floats(width=32, allow_nan=False)),
    "float64": (pa.float64(), st.floats(allow_nan=False)),
    "bool": (pa.bool_(), st.booleans()),
    "string": (pa.string(), st.text(max_size=5)),
    "binary": (pa.binary(), st.binary(max_size=5)),
}


@st.composite
def tables(draw):
    n = draw(st.integers(1, 12))
    names = draw(st.lists(st.sampled_from(sorted(_TYPES)), min_size=1, max_size=4, unique=True))
    cols = {}
    for name in names:
        typ, values = _TYPES[name]
        cols[name] = pa.array(draw(st.lists(values, min_size=n, max_size=n)), typ)
    if draw(st.booleans()):
        flat = draw(st.lists(st.integers(-50, 50), min_size=2 * n, max_size=2 * n))
        cols["fixed"] = pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.int32()), 2)
    return pa.table(cols), draw(st.integers(1, 5))


@settings(max_examples=40, deadline=None)
@given(tables())
def test_property_round_trip_parquet_ipc(tmp_path_factory, table_and_rg):
    table, rg = table_and_rg
    d = tmp_path_factory.mktemp("rt")
    pq.write_table(table, str(d / "t.parquet"), row_group_size=rg)
    feather.write_feather(table, str(d / "t.arrow"), chunksize=rg)
    for make in (ParquetDataset, from_arrow_ipc):
        path = str(d / ("t.parquet" if make is ParquetDataset else "t.arrow"))
        rows = list(make(path))
        batches = list(make(path, batch_size=3))
        assert len(rows) == table.num_rows
        for name in table.column_names:
            col = table.column(name)
            if name in ("string", "binary"):
                dtype = np.dtype(object)
            elif name == "fixed":
                dtype = np.dtype(np.int32)
            else:
                dtype = np.dtype(col.type.to_pandas_dtype())
            want = np.array(col.to_pylist(), dtype=dtype)
            got = np.concatenate([b[name] for b in batches])
            assert got.dtype == dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
            for r, w in zip(rows, want):
                if name == "fixed":
                    assert r[name].dtype == dtype and r[name].tolist() == w.tolist()
                elif name in ("string", "binary"):
                    assert type(r[name]) is type(w) and r[name] == w
                else:
                    assert type(r[name]) is dtype.type and r[name] == w
