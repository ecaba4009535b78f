"""``save``/``load``: nested round trips, variable shapes, torch and compression,
checkpoints and units, a half-written or failed save never read."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest
import torch

import datapipe as dp
from datapipe.io import load_dataset, save_dataset


def _nested(n=5):
    return dp.from_tensor_slices(
        {
            "img": np.arange(n * 6, dtype=np.uint8).reshape(n, 2, 3),
            "y": np.arange(n, dtype=np.int64),
            "name": np.array([f"n{i}" for i in range(n)], dtype=object),
            "pair": (np.linspace(0, 1, n).astype(np.float32), np.arange(n) % 2 == 0),
        }
    )


def _same(a, b):
    assert type(a) is type(b), (a, b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, tuple):
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b)
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


def test_save_load_round_trip_nested(tmp_path):
    ds = _nested()
    p = str(tmp_path / "saved")
    ds.save(p)
    assert sorted(os.listdir(p)) == ["_COMPLETE", "data.arrow", "spec.json"]
    loaded = dp.Dataset.load(p)
    assert loaded.element_spec == ds.element_spec and loaded.cardinality() == 5
    for a, b in zip(ds, loaded, strict=True):
        _same(a, b)
    # the data file is plain Arrow IPC
    t = pa.ipc.open_file(os.path.join(p, "data.arrow")).read_all()
    assert t.num_rows == 5


def test_save_variable_shapes_torch_and_compression(tmp_path):
    ds = dp.range(1, 2500).map(lambda i: np.arange(i % 7, dtype=np.float64).reshape(1, -1))
    p = str(tmp_path / "var")
    save_dataset(ds, p, compression="zstd")
    got = list(load_dataset(p))
    assert len(got) == 2499 and len(load_dataset(p).files) == 3  # record batches of 1024
    assert [g.shape for g in got[:8]] == [(1, k) for k in (1, 2, 3, 4, 5, 6, 0, 1)]
    for a, b in zip(ds, got, strict=True):
        _same(a, b)
    tds = dp.from_tensor_slices(torch.arange(12, dtype=torch.int16).reshape(4, 3))
    save_dataset(tds, str(tmp_path / "t"))
    out = list(load_dataset(str(tmp_path / "t")))
    assert load_dataset(str(tmp_path / "t")).element_spec == tds.element_spec
    for a, b in zip(tds, out, strict=True):
        _same(a, b)
    with pytest.raises(ValueError, match="compression must be None, 'zstd' or 'lz4'"):
        save_dataset(tds, str(tmp_path / "g"), compression="GZIP")


def test_load_checkpoint_and_units(tmp_path):
    p = str(tmp_path / "big")
    dp.range(3000).save(p)
    ds = load_dataset(p)
    assert len(ds.files) == 3 and ds.cardinality() == 3000
    assert ds.with_files(ds.files[1:2]).cardinality() == 1024
    assert [int(x) for x in ds.with_files(ds.files[2:])][:2] == [2048, 2049]
    it = iter(ds)
    head = [int(next(it)) for _ in range(1500)]
    state = it.get_state()
    it2 = iter(ds)
    it2.set_state(state)
    assert head + [int(x) for x in it2] == list(range(3000))


def test_half_written_is_never_read(tmp_path):
    p = str(tmp_path / "s")
    dp.range(10).save(p)
    os.remove(os.path.join(p, "_COMPLETE"))
    with pytest.raises(dp.FileReadError, match="not a complete saved dataset") as info:
        load_dataset(p)
    assert info.value.path == p
    with pytest.raises(FileNotFoundError, match="no saved dataset"):
        load_dataset(str(tmp_path / "none"))


def test_failing_save_leaves_nothing(tmp_path):
    def boom(x):
        if x == 1500:
            raise RuntimeError("boom")
        return x

    p = str(tmp_path / "s")
    with pytest.raises(dp.PipelineError, match="boom"):
        dp.range(2000).map(boom).save(p)
    assert os.listdir(tmp_path) == []


def test_partial_pass_leaves_no_cache(tmp_path):
    p = str(tmp_path / "c")
    ds = dp.range(5000).cache(p)
    it = iter(ds)
    [next(it) for _ in range(2000)]
    it.close()
    assert os.listdir(tmp_path) == []  # temp directory removed, nothing complete
    assert [int(x) for x in ds.take(3)] == [0, 1, 2]
    assert os.listdir(tmp_path) == []  # take stopped early: still no cache
    assert len(list(ds)) == 5000 and os.listdir(tmp_path) == ["c"]
    assert [int(x) for x in ds][-2:] == [4998, 4999]
