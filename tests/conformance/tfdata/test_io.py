"""tf.data's ``save`` / ``load`` kernel tests (``kernel_tests/io_test.py``). A saved
dataset here is one Arrow IPC file and its spec (D-TF-22)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_basic(tmp_path, compression):
    """kernel_tests/io_test.py::IOTest.testBasic (GZIP is zstd here, Arrow IPC's codec:
    D-TF-22)."""
    codec = {"GZIP": "zstd"}.get(compression, compression)  # D-TF-22
    path = str(tmp_path / "io_test")
    dp.range(42).save(path, compression=codec)
    assert_produces(dp.Dataset.load(path), [np.int64(i) for i in range(42)])
    if compression == "GZIP":
        with pytest.raises(ValueError, match="save: compression must be None, 'zstd' or 'lz4'"):
            dp.range(42).save(str(tmp_path / "gzip"), compression="GZIP")


def test_cardinality(tmp_path):
    """kernel_tests/io_test.py::IOTest.testCardinality."""
    path = str(tmp_path / "io_test")
    dp.range(42).save(path)
    assert dp.Dataset.load(path).cardinality() == 42


def test_element_spec_optional(tmp_path):
    """kernel_tests/io_test.py::IOTest.testElementSpecOptional: the spec is stored with the
    data (here it is never given to load)."""
    ds = dp.zip(
        (
            dp.range(42),
            dp.from_tensor_slices({"a": [1, 2], "b": [3, 4]}),
            dp.from_tensor_slices(([1, 2], [3, 4])),
        )
    )
    path = str(tmp_path / "io_test")
    ds.save(path)
    loaded = dp.Dataset.load(path)
    assert loaded.element_spec == ds.element_spec
    assert_produces(loaded, list(ds))


def test_repeat_and_prefetch(tmp_path):
    """kernel_tests/io_test.py::IOTest.testRepeatAndPrefetch."""
    path = str(tmp_path / "io_test")
    dp.from_tensor_slices(np.random.default_rng(0).random((16, 32))).save(path)
    ds = dp.Dataset.load(path).shuffle(buffer_size=16).batch(16).repeat().prefetch(1)
    it = iter(ds)
    for _ in range(30):
        assert next(it).shape == (16, 32)


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_load_checkpoint(tmp_path, verify_fn):
    """kernel_tests/io_test.py::LoadCheckpointTest.test."""
    path = str(tmp_path / "save")
    dp.range(42).save(path)
    verify_checkpoint(lambda: dp.Dataset.load(path), 42, verify_fn)
