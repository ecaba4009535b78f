"""tf.data's ``ignore_errors`` kernel tests (``kernel_tests/ignore_errors_test.py``)."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

import datapipe as dp

from ._support import VERIFY_FNS, assert_produces, tfrecord_frame, verify_checkpoint

COMPONENTS = np.array([1.0, 2.0, 3.0, np.nan, 5.0]).astype(np.float32)


def check_numerics(x, message="message"):
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{message} : Tensor had NaN values")
    return x


def test_map_ignore_error():
    """kernel_tests/ignore_errors_test.py::IgnoreErrorsTest.testMapIgnoreError."""
    ds = dp.from_tensor_slices(COMPONENTS).map(check_numerics).ignore_errors()
    assert_produces(ds, [np.float32(x) for x in [1.0, 2.0, 3.0, 5.0]])


def test_ignore_error_with_log_warning(caplog):
    """kernel_tests/ignore_errors_test.py::IgnoreErrorsTest.testIgnoreError_withLogWarning."""
    ds = dp.from_tensor_slices(COMPONENTS).map(check_numerics).ignore_errors(log_warning=True)
    with caplog.at_level(logging.WARNING):
        assert [float(x) for x in ds] == [1.0, 2.0, 3.0, 5.0]
    assert "Tensor had NaN values" in caplog.text


def test_parallel_map_ignore_error():
    """kernel_tests/ignore_errors_test.py::IgnoreErrorsTest.testParallelMapIgnoreError."""
    ds = dp.from_tensor_slices(COMPONENTS).map(check_numerics, num_parallel_calls=2)
    ds = ds.prefetch(2).ignore_errors()
    assert_produces(ds, [np.float32(x) for x in [1.0, 2.0, 3.0, 5.0]])


def test_read_file_ignore_error(tmp_path):
    """kernel_tests/ignore_errors_test.py::IgnoreErrorsTest.testReadFileIgnoreError."""
    filenames = [str(tmp_path / f"file_{i}.txt") for i in range(5)]
    for filename in filenames:
        with open(filename, "w") as f:
            f.write(filename)
    ds = dp.from_tensor_slices(filenames).map(dp.read_file, num_parallel_calls=2)
    ds = ds.prefetch(2).ignore_errors()
    assert_produces(ds, [f.encode() for f in filenames])
    os.remove(filenames[0])
    assert_produces(ds, [f.encode() for f in filenames[1:]])


def test_tfrecord_dataset_ignore_error(tmp_path):
    """kernel_tests/ignore_errors_test.py::IgnoreErrorsTest.testTFRecordDatasetIgnoreError:
    ten good records, then corrupted data, per file; the corrupt tail is skipped."""
    pytest.importorskip("google_crc32c")
    filenames = []
    for i in range(5):
        fn = tmp_path / f"tf_record.{i}.txt"
        fn.write_bytes(b"".join(tfrecord_frame(b"record") for _ in range(10)) + b"corrupted data")
        filenames.append(str(fn))
    ds = dp.TFRecordDataset(filenames).ignore_errors()
    assert_produces(ds, [b"record"] * 50)


def test_zip_ignore_error():
    """kernel_tests/ignore_errors_test.py::IgnoreErrorsTest.testZipIgnoreError."""
    a = dp.from_tensor_slices(np.float32([1.0, 2.0, 0.0, 4.0]))
    b = a.map(lambda x: check_numerics(np.float32(1.0) / x if x else np.float32(np.inf), "error"))
    ds = dp.zip((b, a)).ignore_errors()
    assert_produces(ds, [(np.float32(1.0 / x), np.float32(x)) for x in [1.0, 2.0, 4.0]])


def test_cardinality():
    """kernel_tests/ignore_errors_test.py::IgnoreErrorsTest.testCardinality."""
    assert dp.range(10).ignore_errors().cardinality() == dp.UNKNOWN_CARDINALITY


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint(verify_fn):
    """kernel_tests/ignore_errors_test.py::IgnoreErrorsCheckpointTest.test."""
    verify_checkpoint(
        lambda: dp.from_tensor_slices(COMPONENTS).map(check_numerics).ignore_errors(), 4, verify_fn
    )
