"""tf.data's ``batch`` kernel tests (``kernel_tests/batch_test.py``), against datapipe."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp
from datapipe.errors import BatchShapeError

from ._support import (
    VERIFY_FNS,
    assert_produces,
    check_determinism,
    sleep_first,
    verify_checkpoint,
)

COMPONENTS = (
    np.arange(7),
    np.array([[1, 2, 3]]) * np.arange(7)[:, np.newaxis],
    np.array(37.0) * np.arange(7),
)


@pytest.mark.parametrize("num_parallel_calls", [None, 1, 2, 4])
@pytest.mark.parametrize("drop_remainder", [True, False])
@pytest.mark.parametrize("batch_size", [14, 15])
@pytest.mark.parametrize("count", [0, 28])
def test_basic(count, batch_size, drop_remainder, num_parallel_calls):
    """kernel_tests/batch_test.py::BatchTest.testBasic."""
    ds = (
        dp.from_tensor_slices(COMPONENTS)
        .map(lambda x, y, z: (np.square(x), np.square(y), np.square(z)))
        .repeat(count)
        .batch(batch_size, drop_remainder, num_parallel_calls)
    )
    dim0 = batch_size if drop_remainder else None
    assert [s.shape for s in ds.element_spec] == [(dim0, *c.shape[1:]) for c in COMPONENTS]
    n = count * 7
    sizes = [batch_size] * (n // batch_size)
    if not drop_remainder and n % batch_size:
        sizes.append(n % batch_size)
    expected, start = [], 0
    for size in sizes:
        rows = [(start + j) % 7 for j in range(size)]
        expected.append(tuple(c[rows] ** 2 for c in COMPONENTS))
        start += size
    assert_produces(ds, expected)


def test_invalid_batch_size():
    """kernel_tests/batch_test.py::BatchTest.testInvalidBatchSize."""
    with pytest.raises(ValueError, match="batch: batch_size must be >= 1, got 0"):
        dp.range(10).batch(0)


def test_dataset():
    """kernel_tests/batch_test.py::BatchTest.testDataset: a batch of Dataset elements is
    a batch of datasets (an object array of them), which unbatch and flat_map undo."""
    ds = dp.range(10).map(lambda i: dp.from_tensors(i)).batch(5)
    ds = ds.map(lambda x: x)
    ds = ds.unbatch().flat_map(lambda x: x)
    assert_produces(ds, [np.int64(i) for i in range(10)])


def test_shape_error():
    """kernel_tests/batch_test.py::BatchTest.testShapeError."""

    def generator():
        yield [1.0, 2.0, 3.0]
        yield [4.0, 5.0, 6.0]
        yield [7.0, 8.0, 9.0, 10.0]

    ds = dp.from_generator(generator, output_signature=dp.TensorSpec([None], np.float32))
    with pytest.raises(
        BatchShapeError,
        match=r"batch: cannot stack element 2 of shape \(4,\) with element 0 of shape \(3,\)",
    ):
        next(iter(ds.batch(3)))


def test_none_component():
    """kernel_tests/batch_test.py::BatchTest.testNoneComponent."""
    ds = dp.range(10).map(lambda x: (x, None)).batch(10).map(lambda x, y: x)
    assert_produces(ds, [np.arange(10, dtype=np.int64)])


@pytest.mark.parametrize("global_determinism", [True, False])
@pytest.mark.parametrize("local_determinism", [None, True, False])
def test_determinism_configuration(local_determinism, global_determinism):
    """kernel_tests/batch_test.py::BatchTest.testDeterminismConfiguration."""
    expect = local_determinism or (local_determinism is None and global_determinism)
    elements = list(range(100))

    def dataset_fn(delay_ms):
        ds = dp.from_tensor_slices(elements).map(
            sleep_first(delay_ms), num_parallel_calls=2, deterministic=local_determinism
        )
        ds = ds.batch(6, num_parallel_calls=2, deterministic=local_determinism).unbatch()
        return ds.with_options(dp.Options(deterministic=global_determinism))

    check_determinism(dataset_fn, expect, elements)


def _checkpoint_dataset(multiplier=15.0, tensor_slice_len=2, batch_size=2):
    components = (
        np.arange(tensor_slice_len),
        np.array([[1, 2, 3]]) * np.arange(tensor_slice_len)[:, np.newaxis],
        np.array(multiplier) * np.arange(tensor_slice_len),
    )
    return dp.from_tensor_slices(components).batch(batch_size)


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint(verify_fn):
    """kernel_tests/batch_test.py::BatchCheckpointTest.test."""
    verify_checkpoint(lambda: _checkpoint_dataset(15.0, 8, 2), 8 // 2, verify_fn)


@pytest.mark.parametrize("index", [2, 3, 4])
def test_random_access_invalid_index(index):
    """kernel_tests/batch_test.py::BatchRandomAccessTest.testInvalidIndex (index -1 is the
    last batch here, D-TF-1)."""
    ds = dp.from_tensor_slices([1, 2, 3, 4]).batch(2)
    with pytest.raises(IndexError):
        ds[index]
    assert ds[-1].tolist() == [3, 4]  # D-TF-1


def test_random_access_empty_dataset():
    """kernel_tests/batch_test.py::BatchRandomAccessTest.testEmptyDataset."""
    with pytest.raises(IndexError):
        dp.from_tensor_slices([]).batch(2)[0]


@pytest.mark.parametrize("drop_remainder", [True, False])
@pytest.mark.parametrize("batch_size", [1, 3, 5, 7, 10, 20])
@pytest.mark.parametrize("count", [0, 10, 20, 30, 40, 50])
def test_random_access_basic(count, batch_size, drop_remainder):
    """kernel_tests/batch_test.py::BatchRandomAccessTest.testBasic."""
    ds = dp.from_tensor_slices(list(range(count))).batch(
        batch_size=batch_size, drop_remainder=drop_remainder
    )
    num_full_batches = count // batch_size
    for i in range(num_full_batches):
        expected = np.arange(i * batch_size, i * batch_size + batch_size, 1)
        np.testing.assert_array_equal(ds[i], expected)
    has_remainder = (not drop_remainder) and (count % batch_size != 0)
    if has_remainder:
        np.testing.assert_array_equal(
            ds[num_full_batches], np.arange(batch_size * num_full_batches, count, 1)
        )
    with pytest.raises(IndexError):
        ds[num_full_batches + (1 if has_remainder else 0)]


def test_random_access_batch_with_shuffle():
    """kernel_tests/batch_test.py::BatchRandomAccessTest.testRandomAccessBatchWithShuffle:
    the batches of a (global) shuffle agree with the shuffle's own random access, and the
    remainder is its last element. tf.data's literal order is its Philox stream's; the
    agreement is what is tested (with global_shuffle: a buffer shuffle has no random
    access here, D-TF-4)."""
    shuffled = dp.from_tensor_slices([1, 2, 3, 4, 5, 6, 7]).global_shuffle(seed=2)
    batched = shuffled.batch(2)
    batches = [batched[i].tolist() for i in range(4)]
    assert sorted(sum(batches, [])) == [1, 2, 3, 4, 5, 6, 7]
    assert [len(b) for b in batches] == [2, 2, 2, 1]
    for i in range(3):
        assert batches[i] == [shuffled[i * 2], shuffled[i * 2 + 1]]
    assert batches[3] == [shuffled[6]]
