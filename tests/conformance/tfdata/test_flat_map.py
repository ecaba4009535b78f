"""tf.data's ``flat_map`` kernel tests (``kernel_tests/flat_map_test.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint


def test_flat_map_dataset():
    """kernel_tests/flat_map_test.py::FlatMapTest.testFlatMapDataset."""
    repeats = [1, 2, 3, 4, 5, 0, 1]
    ds = dp.from_tensor_slices(np.array(repeats, dtype=np.int64)).flat_map(
        lambda x: dp.from_tensors([x]).repeat(x)
    )
    expected = []
    for i in repeats:
        expected.extend([np.array([i])] * i)
    assert_produces(ds, expected)


NESTED = [[1, 2], [3, 4], [5, 0], [1, 7]]


def _nested():
    return dp.from_tensor_slices(np.array(NESTED, dtype=np.int64)).flat_map(
        lambda x: dp.from_tensor_slices(x).flat_map(lambda y: dp.from_tensors(y).repeat(y))
    )


def test_nested_flat_map_dataset():
    """kernel_tests/flat_map_test.py::FlatMapTest.testNestedFlatMapDataset."""
    assert_produces(_nested(), [np.int64(i) for row in NESTED for i in row for _ in range(i)])


def test_shared_resource_nested_flat_map_dataset():
    """kernel_tests/flat_map_test.py::FlatMapTest.testSharedResourceNestedFlatMapDataset:
    two consumers (two sessions on one iterator upstream) taking turns at random on one
    iterator see the expected sequence, three times over (a new iterator each time)."""
    rng = np.random.default_rng(7)
    ds = _nested()
    for _ in range(3):
        iterators = [iter(ds)] * 2  # the same iterator, read by either consumer
        for row in NESTED:
            for i in row:
                for _ in range(i):
                    assert next(iterators[rng.integers(2)]) == i
        with pytest.raises(StopIteration):
            next(iterators[rng.integers(2)])


def test_map_dict():
    """kernel_tests/flat_map_test.py::FlatMapTest.testMapDict."""
    ds = dp.range(10).map(lambda x: {"foo": x * 2, "bar": x**2})
    ds = ds.flat_map(lambda d: dp.from_tensors(d["foo"]).repeat(d["bar"]))
    assert_produces(ds, [np.int64(i * 2) for i in range(10) for _ in range(i**2)])


def test_sparse_as_dense():
    """kernel_tests/flat_map_test.py::FlatMapTest.testSparse (the sparse value made dense,
    as the flat_map function does first)."""

    def map_fn(i):
        dense = np.zeros((2, 2), np.int64)
        dense[0, 0], dense[1, 1] = i, -i
        return dense

    ds = dp.range(10).map(map_fn).flat_map(dp.from_tensor_slices)
    expected = [np.array([i, 0] if j % 2 == 0 else [0, -i]) for i in range(10) for j in range(2)]
    assert_produces(ds, expected)


def test_tensor_array_as_list():
    """kernel_tests/flat_map_test.py::FlatMapTest.testTensorArray (the TensorArray's
    values as an array, which the flat_map function stacks and slices)."""
    ds = dp.range(10).map(lambda i: np.arange(int(i), dtype=np.int32))
    ds = ds.flat_map(dp.from_tensor_slices)
    assert_produces(ds, [np.int32(j) for i in range(10) for j in range(i)])


def test_ragged_as_dense():
    """kernel_tests/flat_map_test.py::FlatMapTest.testRagged (rows of the dense tensor the
    flat_map function converts the ragged one to)."""
    ds = dp.range(10).map(lambda i: i * np.array([[1], [-1]])).flat_map(dp.from_tensor_slices)
    expected = [np.array(v) for i in range(10) for v in ([i], [-i])]
    assert_produces(ds, expected)


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint_core(verify_fn):
    """kernel_tests/flat_map_test.py::FlatMapCheckpointTest.testCore."""
    build = lambda: dp.range(0, 0 + 5 * 5, 5).flat_map(lambda x: dp.range(x, x + 5))  # noqa: E731
    verify_checkpoint(build, 25, verify_fn)
    assert [int(x) for x in build()] == list(range(25))


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint_map_then_flat_map(verify_fn):
    """kernel_tests/flat_map_test.py::FlatMapCheckpointTest.testMapThenFlatMap."""

    def build():
        return dp.range(5).flat_map(lambda _: dp.range(100).map(lambda y: 10 * np.int32(y)))

    verify_checkpoint(build, 500, verify_fn)


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint_capture_defun_in_map_fn(verify_fn):
    """kernel_tests/flat_map_test.py::FlatMapCheckpointTest.testCaptureDefunInMapFn (the
    Defun as a plain function)."""

    def defun_fn(x):
        return np.int32(1000) + np.int32(x)

    def build():
        return dp.range(100).flat_map(lambda x: dp.from_tensor_slices([defun_fn(x)]))

    verify_checkpoint(build, 100, verify_fn)
    assert [int(x) for x in build()] == [1000 + i for i in range(100)]


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint_sparse_core(verify_fn):
    """kernel_tests/flat_map_test.py::FlatMapCheckpointTest.testSparseCore (dense values)."""

    def build():
        ds = dp.range(10).map(lambda i: np.array([[i, 0], [0, -i]]))
        return ds.flat_map(dp.from_tensor_slices)

    verify_checkpoint(build, 20, verify_fn)
