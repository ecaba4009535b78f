"""``ArrowGather``: rows of a many-chunk Arrow table by index, equal to ``Table.take``
(plain pyarrow: runs without Hugging Face ``datasets``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from datapipe.io._arrow_gather import ArrowGather, is_dense
from datapipe.io.huggingface import read_column


def chunked_table() -> pa.Table:
    """Chunks of 5, 0, 7 and 4 rows; one column of each kind the gather handles."""
    parts = []
    start = 0
    for size in (5, 0, 7, 4):
        x = np.arange(start, start + size)
        parts.append(
            pa.table(
                {
                    "i": pa.array(x, pa.int64()),
                    "v": pa.FixedSizeListArray.from_arrays(
                        pa.array(np.repeat(x, 3).astype(np.float32) / 2), 3
                    ),
                    "s": pa.array([f"s{k}" for k in x], pa.string()),
                    "l": pa.array([list(range(k % 3)) for k in x], pa.list_(pa.int32())),
                    "n": pa.array([None if k % 4 == 1 else float(k) for k in x], pa.float64()),
                }
            )
        )
        start += size
    return pa.concat_tables(parts)


def expected(table: pa.Table, rows) -> list:
    taken = table.take(pa.array(np.asarray(rows, dtype=np.int64)))
    return [read_column(taken.column(n), n, True) for n in table.column_names]


def read(arr, name):
    return read_column(arr, name, True)


@pytest.mark.parametrize(
    "rows",
    [
        [3],
        [0, 1, 2, 3, 4],  # one chunk, contiguous
        [6, 7, 8],  # one chunk (the third), contiguous
        [8, 6, 11],  # one chunk, not contiguous
        [3, 4, 5, 6],  # contiguous across chunks
        [15, 0, 9, 4, 12, 0, 15],  # every chunk, repeats
        list(np.random.default_rng(0).permutation(16)),
    ],
)
def test_gather_equals_arrow_take(rows):
    table = chunked_table()
    assert [c.num_chunks for c in table.columns] == [4] * 5
    got = ArrowGather(table, read).gather(np.asarray(rows, dtype=np.int64))
    for g, want, name in zip(got, expected(table, rows), table.column_names):
        assert g.dtype == want.dtype, name
        assert g.shape == want.shape, name
        if name == "l":
            assert [a.tolist() for a in g] == [a.tolist() for a in want]
        else:
            np.testing.assert_array_equal(g, want, err_msg=name)


def test_a_run_inside_one_chunk_is_a_view_of_the_arrow_buffer():
    table = chunked_table()
    i, v = ArrowGather(table, read).gather(np.arange(7, 10))[:2]
    chunk = table.column("i").chunk(2)  # rows 5..11
    assert i.__array_interface__["data"][0] == chunk.buffers()[1].address + 2 * 8
    assert not i.flags.writeable and not v.flags.writeable
    assert v.shape == (3, 3) and v[0].tolist() == [3.5, 3.5, 3.5]


def test_empty_gather_and_types():
    table = chunked_table()
    got = ArrowGather(table, read).gather(np.zeros(0, dtype=np.int64))
    assert [len(c) for c in got] == [0] * 5
    assert [c.dtype for c in got][:3] == [np.int64, np.float32, np.dtype(object)]
    assert is_dense(pa.list_(pa.int8(), 4)) and is_dense(pa.float32())
    assert not is_dense(pa.string()) and not is_dense(pa.list_(pa.int8()))
    assert not is_dense(pa.bool_()) and not is_dense(pa.float16())
