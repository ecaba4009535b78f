"""tf.data's ``TextLineDataset`` kernel tests (``kernel_tests/text_line_dataset_test.py``).
Lines are ``str`` by default here (``encoding=None`` gives tf.data's ``bytes``: D-TF-21);
the comparisons accept both."""

from __future__ import annotations

import gzip
import os
import pathlib
import zlib

import pytest

import datapipe as dp

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint


def _line(f, line):
    return f"{f}: {line}".encode()


def _create_files(tmp_path, num_files, num_lines, crlf=False, compression_type=None):
    """Upstream ``_createFiles``: a newline after every line but the last of each file but
    the first."""
    filenames = []
    for i in range(num_files):
        fn = os.path.join(tmp_path, f"text_line.{i}.txt")
        filenames.append(fn)
        contents = []
        for j in range(num_lines):
            contents.append(_line(i, j))
            if j + 1 != num_lines or i == 0:
                contents.append(b"\r\n" if crlf else b"\n")
        data = b"".join(contents)
        if compression_type == "GZIP":
            with gzip.GzipFile(fn, "wb") as f:
                f.write(data)
        elif compression_type == "ZLIB":
            with open(fn, "wb") as f:
                f.write(zlib.compress(data))
        else:
            with open(fn, "wb") as f:
                f.write(data)
    return filenames


@pytest.mark.parametrize("compression_type", [None, "GZIP", "ZLIB"])
def test_text_line_dataset(tmp_path, compression_type):
    """kernel_tests/text_line_dataset_test.py::TextLineDatasetTest.testTextLineDataset."""
    files = _create_files(tmp_path, 2, 5, crlf=True, compression_type=compression_type)

    def dataset_fn(filenames, num_epochs, batch_size=None):
        ds = dp.TextLineDataset(filenames, compression_type=compression_type).repeat(num_epochs)
        return ds.batch(batch_size) if batch_size else ds

    first = [_line(0, i) for i in range(5)]
    second = [_line(1, i) for i in range(5)]
    assert_produces(dataset_fn([files[0]], 1), first)
    assert_produces(dataset_fn([files[1]], 1), second)
    assert_produces(dataset_fn(files, 1), first + second)
    assert_produces(dataset_fn(files, 10), (first + second) * 10)
    assert [list(b) for b in dataset_fn(files, 10, 5)] == [
        [x.decode() for x in first],
        [x.decode() for x in second],
    ] * 10
    assert list(dp.TextLineDataset(files, compression_type=compression_type, encoding=None)) == (
        first + second
    )  # D-TF-21: bytes as tf.data when asked


def test_text_line_dataset_parallel_read(tmp_path):
    """kernel_tests/text_line_dataset_test.py::TextLineDatasetTest.testTextLineDatasetParallelRead
    (the files given as a list repeated ten times, not a Dataset of them: D-TF-21)."""
    files = _create_files(tmp_path, 10, 10)
    ds = dp.TextLineDataset(files * 10, num_parallel_reads=4)
    expected = [_line(j, i) for j in range(10) for i in range(10)] * 10
    assert_produces(ds, expected, unordered=True)


def test_text_line_dataset_buffering(tmp_path):
    """kernel_tests/text_line_dataset_test.py::TextLineDatasetTest.testTextLineDatasetBuffering."""
    files = _create_files(tmp_path, 2, 5, crlf=True)
    assert_produces(
        dp.TextLineDataset(files, buffer_size=10), [_line(j, i) for j in range(2) for i in range(5)]
    )


def test_iterator_resource_cleanup(tmp_path):
    """kernel_tests/text_line_dataset_test.py::TextLineDatasetTest.testIteratorResourceCleanup:
    dropping partly read iterators closes their files."""
    psutil = pytest.importorskip("psutil")
    filename = str(tmp_path / "text.txt")
    with open(filename, "w") as f:
        for i in range(3):
            f.write(f"{i}\n")
    first = iter(dp.TextLineDataset(filename, encoding=None))
    assert next(first) == b"0"
    second = iter(dp.TextLineDataset(filename, encoding=None))
    assert next(second) == b"0"
    different = iter(dp.TextLineDataset(filename).repeat().batch(16))
    assert next(different).shape == (16,)
    del first, second, different
    assert filename not in [f.path for f in psutil.Process().open_files()]


def test_text_line_dataset_pathlib(tmp_path):
    """kernel_tests/text_line_dataset_test.py::TextLineDatasetTest.testTextLineDatasetPathlib."""
    files = [pathlib.Path(f) for f in _create_files(tmp_path, 1, 5)]
    assert_produces(dp.TextLineDataset(files), [_line(0, i) for i in range(5)], unordered=True)


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("compression_type", [None, "GZIP", "ZLIB"])
def test_checkpoint_text_line_core(tmp_path, verify_fn, compression_type):
    """kernel_tests/text_line_dataset_test.py::TextLineDatasetCheckpointTest.testTextLineCore
    (its loop over compression types as cases)."""
    files = _create_files(tmp_path, 5, 5, crlf=True, compression_type=compression_type)
    verify_checkpoint(
        lambda: dp.TextLineDataset(files, compression_type=compression_type, buffer_size=10),
        25,
        verify_fn,
    )
