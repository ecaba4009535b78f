"""Issue 11: types inferred from a prefix must not silently change values.

- CSV column types come from the first block (1 MB): a bad number in a small file (inside
  that block) turned the whole column into strings while a large file raised. Both now
  raise naming the file, the row and the column; ``column_types`` states a type.
- ``map``'s element_spec comes from its first element: ``save`` / ``cache(filename)``
  wrote later elements in that dtype (0.5 -> 0) and shape. They now refuse a value that
  would change and store a spec covering every element.
- Parquet nulls in float columns: an opt-in reads them as NaN.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import datapipe as dp
from datapipe.io import FileReadError, NullValueError


def _csv(path, rows, bad_last):
    with open(path, "w") as f:
        f.write("a,b\n")
        f.writelines(f"{i},{i * 0.5}\n" for i in range(rows))
        if bad_last:
            f.write(f"{rows},x5\n")
    return str(path)


@pytest.mark.parametrize("rows", [10, 120_000], ids=["small", "large"])
def test_a_bad_number_fails_the_same_way_whatever_the_file_size(tmp_path, rows):
    path = _csv(tmp_path / "t.csv", rows, bad_last=True)
    with pytest.raises((FileReadError, dp.PipelineError)) as e:
        for _ in dp.from_csv(path):
            pass
    message = str(e.value)
    assert path in message
    assert f"column 'b', data row {rows + 1} " in message
    assert "'x5' is not a" in message and "column_types={'b': 'string'}" in message


@pytest.mark.parametrize("rows", [10, 120_000], ids=["small", "large"])
def test_column_types_reads_such_a_column_as_text(tmp_path, rows):
    path = _csv(tmp_path / "t.csv", rows, bad_last=True)
    ds = dp.from_csv(path, column_types={"b": "string"})
    assert ds.element_spec["b"] == dp.TensorSpec((), object)
    last = list(ds.skip(rows))
    assert [(int(r["a"]), r["b"]) for r in last] == [(rows, "x5")]


def test_column_types_fix_numeric_types_too(tmp_path):
    path = _csv(tmp_path / "t.csv", 3, bad_last=False)
    rows = list(dp.from_csv(path, column_types={"a": np.float32, "b": "float32"}))
    assert [r["a"].dtype for r in rows] == [np.float32] * 3
    assert [float(r["b"]) for r in rows] == [0.0, 0.5, 1.0]
    with pytest.raises(FileReadError, match=r"does not have: \['zz'\]"):
        dp.from_csv(path, column_types={"zz": "int64"})
    with pytest.raises(TypeError, match=r"column_types\['a'\] must be a pyarrow type"):
        dp.from_csv(path, column_types={"a": "no-such-type"})


def test_a_text_column_with_a_few_numbers_stays_text(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("title,year\nAlien,1979\n1917,2019\nHeat,1995\nUp,2009\n")
    rows = list(dp.from_csv(str(path)))
    assert [r["title"] for r in rows] == ["Alien", "1917", "Heat", "Up"]


def test_save_refuses_an_element_whose_dtype_differs_from_the_inferred_spec(tmp_path):
    ds = dp.from_tensor_slices(np.arange(4)).map(lambda x: 1 if x == 0 else 0.5)
    assert ds.element_spec == dp.TensorSpec((), np.int64)  # from the first element
    with pytest.raises(TypeError, match=r"dtype float64, which does not fit .*dtype=int64\)"):
        ds.save(os.path.join(tmp_path, "s"))
    assert os.listdir(tmp_path) == []  # nothing half-written left behind
    with pytest.raises(TypeError, match="without changing values"):
        list(ds.cache(os.path.join(tmp_path, "c")))


def test_save_and_cache_keep_variable_shapes(tmp_path):
    ds = dp.from_tensor_slices(np.arange(4)).map(lambda x: np.full(3 + int(x), x, np.float32))
    assert ds.element_spec == dp.TensorSpec((3,), np.float32)
    path = os.path.join(tmp_path, "s")
    ds.save(path)
    loaded = dp.Dataset.load(path)
    assert loaded.element_spec == dp.TensorSpec((None,), np.float32)
    assert [a.tolist() for a in loaded] == [[float(i)] * (3 + i) for i in range(4)]
    cached = ds.cache(os.path.join(tmp_path, "c"))
    first = [a.shape for a in cached]
    assert [a.shape for a in cached] == first == [(3,), (4,), (5,), (6,)]


def test_save_accepts_conversions_that_keep_values(tmp_path):
    ds = dp.from_tensor_slices(np.arange(3)).map(lambda x: np.int32(x) if x == 0 else int(x))
    path = os.path.join(tmp_path, "s")
    ds.save(path)
    assert [int(x) for x in dp.Dataset.load(path)] == [0, 1, 2]


def _nulls(tmp_path):
    p = str(tmp_path / "t.parquet")
    table = pa.table({"x": [1.0, None, 3.0], "n": [1, 2, 3], "k": [1, None, 3]})
    pq.write_table(table, p)
    return p


def test_parquet_float_nulls_raise_by_default_naming_the_row(tmp_path):
    p = _nulls(tmp_path)
    with pytest.raises(dp.PipelineError, match=r"column 'x' .*the first at row 1.*nulls_as_nan"):
        list(dp.ParquetDataset(p, columns=["x"]))


def test_parquet_float_nulls_as_nan_on_request(tmp_path):
    p = _nulls(tmp_path)
    xs = [float(r["x"]) for r in dp.ParquetDataset(p, columns=["x", "n"], nulls_as_nan=True)]
    assert xs[0] == 1.0 and np.isnan(xs[1]) and xs[2] == 3.0
    batch = next(iter(dp.from_parquet(p, columns=["x"], batch_size=3, nulls_as_nan=True)))
    assert np.isnan(batch["x"]).tolist() == [False, True, False]
    with pytest.raises(dp.PipelineError) as e:  # an int column's nulls still raise
        list(dp.ParquetDataset(p, columns=["k"], nulls_as_nan=True))
    assert isinstance(e.value.cause, NullValueError) and "'k'" in str(e.value)
    with pytest.raises(TypeError, match="parquet: nulls_as_nan must be True or False"):
        dp.ParquetDataset(p, nulls_as_nan="yes")
