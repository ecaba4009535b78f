"""Issue 11: ``ignore_errors`` never spins on an input that cannot move past a failure, and
file sources name the file and move past a unit they cannot read; a stuck input is raised
through an outer ``ignore_errors``."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import datapipe as dp
from datapipe._iterator import OpIterator
from datapipe.dataset_ops import Dataset
from datapipe.io import FileReadError


class _StuckSource(Dataset):
    """Yields ``good`` elements, then raises on every call without moving (a broken op)."""

    _name = "stuck"

    def __init__(self, good):
        super().__init__()
        self.good, self.calls = good, 0

    @property
    def element_spec(self):
        return dp.TensorSpec((), np.int64)

    def _make_iterator(self, ctx, epoch):
        node = self

        class It(OpIterator):
            op_name = "stuck"

            def __init__(self):
                super().__init__()
                self.pos = 0

            def next_chunk(self, n):
                if self.pos < node.good:
                    self.pos += 1
                    return [np.int64(self.pos - 1)]
                node.calls += 1
                raise OSError("device not ready")

            def get_state(self):
                return {"pos": self.pos}

            def set_state(self, state):
                self.pos = state["pos"]

        return It()


def test_ignore_errors_stops_at_once_on_an_input_that_cannot_advance():
    src = _StuckSource(3)
    it = iter(src.ignore_errors())
    assert [int(next(it)) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(dp.InputStuckError, match="failed again without moving.*device not ready"):
        next(it)
    assert src.calls == 2  # not ~100,000 retries


def test_ignore_errors_still_skips_many_consecutive_failures_that_advance():
    def f(x):
        if x < 5000:
            raise ValueError("bad")
        return x

    it = iter(dp.range(5003).map(f).ignore_errors())
    assert [int(x) for x in it] == [5000, 5001, 5002]
    assert dp.ignored_count(it) == 5000


def _truncated_saved_dataset(tmp_path):
    path = os.path.join(tmp_path, "saved")
    dp.from_tensor_slices(np.arange(3000)).save(path)
    data = os.path.join(path, "data.arrow")
    with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) // 2)
    return path, data


def test_a_truncated_saved_dataset_names_its_file(tmp_path):
    path, data = _truncated_saved_dataset(tmp_path)
    with pytest.raises(FileReadError, match="cannot read the file of this saved dataset") as e:
        list(dp.Dataset.load(path))
    assert e.value.path == data
    assert data in str(e.value)


def test_ignore_errors_over_a_truncated_saved_dataset_ends(tmp_path):
    path, _ = _truncated_saved_dataset(tmp_path)
    it = iter(dp.Dataset.load(path).ignore_errors())
    assert list(it) == []
    assert dp.ignored_count(it) == 1  # one failure for the unreadable file, then the end


def test_a_corrupt_spec_json_names_the_directory(tmp_path):
    path = os.path.join(tmp_path, "saved")
    dp.range(3).save(path)
    with open(os.path.join(path, "spec.json"), "w") as f:
        f.write('{"format": "datapipe-arr')
    with pytest.raises(FileReadError, match="cannot read spec.json") as e:
        dp.Dataset.load(path)
    assert e.value.path == os.path.abspath(path)


def test_a_parquet_row_group_that_cannot_be_read_is_skipped(tmp_path):
    p = os.path.join(tmp_path, "t.parquet")
    pq.write_table(pa.table({"x": [1.0, 2.0, None, 4.0, 5.0, 6.0]}), p, row_group_size=2)
    it = iter(dp.ParquetDataset(p).ignore_errors())
    assert [float(r["x"]) for r in it] == [1.0, 2.0, 5.0, 6.0]
    assert dp.ignored_count(it) == 1
    it = iter(dp.ParquetDataset(p, batch_size=3).ignore_errors())
    assert [b["x"].tolist() for b in it] == [[1.0, 2.0, 5.0], [6.0]]
    assert dp.ignored_count(it) == 1


def test_a_text_file_that_vanished_is_skipped_and_named(tmp_path):
    files = []
    for name in "abc":
        files.append(os.path.join(tmp_path, f"{name}.txt"))
        with open(files[-1], "w") as f:
            f.write(f"{name}1\n{name}2\n")
    ds = dp.TextLineDataset(files)
    os.remove(files[1])
    with pytest.raises(dp.PipelineError) as e:
        list(ds)
    assert e.value.path == files[1]  # the missing file, not the one read before it
    it = iter(ds.ignore_errors())
    assert list(it) == ["a1", "a2", "c1", "c2"]
    assert dp.ignored_count(it) == 1


def test_a_line_that_does_not_decode_costs_only_that_line(tmp_path):
    p = os.path.join(tmp_path, "t.txt")
    with open(p, "wb") as f:
        f.write(b"one\ntwo\n\xff\xfe bad\nfour\nfive\n")
    it = iter(dp.TextLineDataset(p).ignore_errors())
    assert list(it) == ["one", "two", "four", "five"]
    assert dp.ignored_count(it) == 1
    with pytest.raises(dp.PipelineError, match="line 3 is not valid utf-8"):
        list(dp.TextLineDataset(p))


def test_a_failure_held_back_survives_a_checkpoint():
    # map delivers the good elements before a failure and raises it on the next call; a
    # checkpoint taken in between resumed past the failure silently (and shifted zip).
    def f(x):
        if x == 2:
            raise ValueError("two")
        return x

    ds = dp.from_tensor_slices(np.arange(5)).map(f)
    it = iter(ds)
    assert [int(next(it)) for _ in range(2)] == [0, 1]  # chunks of 1 then 2: 2 is pending
    fresh = iter(ds)
    fresh.set_state(it.get_state())
    with pytest.raises(dp.PipelineError, match="two"):
        next(fresh)
    assert [int(x) for x in fresh] == [3, 4]


def test_stuck_input_is_raised_through_an_outer_ignore_errors():
    src = _StuckSource(2)
    it = iter(src.ignore_errors().map(lambda x: x + 1).ignore_errors())
    assert [int(next(it)) for _ in range(2)] == [1, 2]
    with pytest.raises(dp.InputStuckError, match="device not ready"):
        next(it)
    assert src.calls == 2  # the outer ignore_errors did not retry the inner one's verdict
