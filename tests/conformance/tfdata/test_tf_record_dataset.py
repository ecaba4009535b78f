"""tf.data's ``TFRecordDataset`` kernel tests (``kernel_tests/tf_record_dataset_test.py``,
files as ``kernel_tests/tf_record_test_base.py`` writes them: two files of seven records)."""

from __future__ import annotations

import gzip
import pathlib
import zlib

import pytest

import datapipe as dp

from ._support import (
    VERIFY_FNS,
    assert_produces,
    create_tf_record_files,
    tf_record,
    verify_checkpoint,
)

pytest.importorskip("google_crc32c")  # the TFRecord reader checks every record's CRC

NUM_FILES, NUM_RECORDS = 2, 7


@pytest.fixture
def filenames(tmp_path):
    return create_tf_record_files(tmp_path, NUM_FILES, NUM_RECORDS)


def _compressed(filenames, tmp_path, compression_type):
    if compression_type is None:
        return filenames
    out = []
    for i, fn in enumerate(filenames):
        data = pathlib.Path(fn).read_bytes()
        if compression_type == "ZLIB":
            zfn = tmp_path / f"tfrecord_{i}.z"
            zfn.write_bytes(zlib.compress(data))
        else:
            zfn = tmp_path / f"tfrecord_{i}.gz"
            with gzip.GzipFile(zfn, "wb") as gzf:
                gzf.write(data)
        out.append(str(zfn))
    return out


ALL = [tf_record(j, i) for j in range(NUM_FILES) for i in range(NUM_RECORDS)]


def test_constructor_errors_tensor_input():
    """kernel_tests/tf_record_dataset_test.py::TFRecordDatasetTest.testConstructorErrorsTensorInput."""
    for bad in ([1, 2, 3], object()):
        with pytest.raises(TypeError):
            dp.TFRecordDataset(bad)


def test_read_one_epoch(filenames):
    """kernel_tests/tf_record_dataset_test.py::TFRecordDatasetTest.testReadOneEpoch."""
    assert_produces(dp.TFRecordDataset(filenames[0]), [tf_record(0, i) for i in range(NUM_RECORDS)])
    assert_produces(dp.TFRecordDataset(filenames[1]), [tf_record(1, i) for i in range(NUM_RECORDS)])
    assert_produces(dp.TFRecordDataset(filenames), ALL)


def test_read_ten_epochs(filenames):
    """kernel_tests/tf_record_dataset_test.py::TFRecordDatasetTest.testReadTenEpochs."""
    assert_produces(dp.TFRecordDataset(filenames).repeat(10), ALL * 10)


def test_read_ten_epochs_of_batches(filenames):
    """kernel_tests/tf_record_dataset_test.py::TFRecordDatasetTest.testReadTenEpochsOfBatches."""
    ds = dp.TFRecordDataset(filenames).repeat(10).batch(NUM_RECORDS)
    expected = [[tf_record(j, i) for i in range(NUM_RECORDS)] for j in range(NUM_FILES)] * 10
    assert [list(b) for b in ds] == expected


@pytest.mark.parametrize(
    "compression_type", ["ZLIB", "GZIP"], ids=["testReadZlibFiles", "testReadGzipFiles"]
)
def test_read_compressed_files(filenames, tmp_path, compression_type):
    """kernel_tests/tf_record_dataset_test.py::TFRecordDatasetTest.testReadZlibFiles,
    testReadGzipFiles (one case each)."""
    files = _compressed(filenames, tmp_path, compression_type)
    assert_produces(dp.TFRecordDataset(files, compression_type), ALL)


def test_read_with_buffer(filenames):
    """kernel_tests/tf_record_dataset_test.py::TFRecordDatasetTest.testReadWithBuffer."""
    assert_produces(dp.TFRecordDataset(filenames, buffer_size=2**20), ALL)


def test_read_from_list_of_files(filenames):
    """kernel_tests/tf_record_dataset_test.py::TFRecordDatasetTest.testReadFromDatasetOfFiles
    (a list of the files: a Dataset of them is read with interleave, D-TF-21)."""
    assert_produces(dp.TFRecordDataset(list(filenames)), ALL)
    files = dp.from_tensor_slices(filenames)
    assert_produces(files.interleave(dp.TFRecordDataset, cycle_length=1), ALL)  # D-TF-21


def test_read_ten_epochs_from_files_in_parallel(filenames):
    """kernel_tests/tf_record_dataset_test.py::TFRecordDatasetTest.testReadTenEpochsFromDatasetOfFilesInParallel
    (the files listed ten times: D-TF-21)."""
    ds = dp.TFRecordDataset(filenames * 10, num_parallel_reads=4)
    assert_produces(ds, ALL * 10, unordered=True)


def test_pathlib(filenames):
    """kernel_tests/tf_record_dataset_test.py::TFRecordDatasetTest.testPathlib."""
    ds = dp.TFRecordDataset([pathlib.Path(filenames[0])])
    assert_produces(ds, [tf_record(0, i) for i in range(NUM_RECORDS)], unordered=True)


def _make(filenames, tmp_path, num_epochs, batch_size=1, compression_type=None):
    files = _compressed(filenames, tmp_path, compression_type)
    return dp.TFRecordDataset(files, compression_type).repeat(num_epochs).batch(batch_size)


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("batch_size", [1, 5])
def test_checkpoint_batch_size(filenames, tmp_path, verify_fn, batch_size):
    """kernel_tests/tf_record_dataset_test.py::TFRecordDatasetCheckpointTest.testBatchSize."""
    num_outputs = 5 * NUM_FILES * NUM_RECORDS // batch_size
    verify_checkpoint(
        lambda: _make(filenames, tmp_path, 5, batch_size=batch_size), num_outputs, verify_fn
    )


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("buffer_size", [0, 5])
def test_checkpoint_buffer_size(filenames, verify_fn, buffer_size):
    """kernel_tests/tf_record_dataset_test.py::TFRecordDatasetCheckpointTest.testBufferSize."""

    def build():
        return dp.TFRecordDataset(filenames, buffer_size=buffer_size).repeat(5).batch(1)

    verify_checkpoint(build, 5 * NUM_FILES * NUM_RECORDS, verify_fn)


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("compression_type", [None, "GZIP", "ZLIB"])
def test_checkpoint_compression_types(filenames, tmp_path, verify_fn, compression_type):
    """kernel_tests/tf_record_dataset_test.py::TFRecordDatasetCheckpointTest.testCompressionTypes."""
    verify_checkpoint(
        lambda: _make(filenames, tmp_path, 5, compression_type=compression_type),
        5 * NUM_FILES * NUM_RECORDS,
        verify_fn,
    )
