"""tf.data's ``from_tensor_slices`` kernel tests (``kernel_tests/from_tensor_slices_test.py``)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import datapipe as dp

from ._support import VERIFY_FNS, assert_produces, assert_same, verify_checkpoint

COMPONENTS = (
    np.tile(np.array([[1], [2], [3], [4]]), 20),
    np.tile(np.array([[12], [13], [14], [15]]), 22),
    np.array([37.0, 38.0, 39.0, 40.0]),
)
UINT = (
    np.tile(np.array([[0], [1]], dtype=np.uint8), 2),
    np.tile(np.array([[2], [256]], dtype=np.uint16), 2),
    np.tile(np.array([[4], [65536]], dtype=np.uint32), 2),
    np.tile(np.array([[8], [4294967296]], dtype=np.uint64), 2),
)


def test_from_tensor_slices_empty_component():
    """kernel_tests/from_tensor_slices_test.py::FromTensorSlicesTest.testFromTensorSlicesEmptyComponent."""
    with pytest.raises(ValueError, match="from_tensor_slices: .* no components"):
        dp.from_tensor_slices(())


def test_from_tensor_slices():
    """kernel_tests/from_tensor_slices_test.py::FromTensorSlicesTest.testFromTensorSlices."""
    ds = dp.from_tensor_slices(COMPONENTS)
    assert [s.shape for s in ds.element_spec] == [c.shape[1:] for c in COMPONENTS]
    assert_produces(ds, [tuple(c[i] for c in COMPONENTS) for i in range(4)])


def test_from_tensor_slices_dataset():
    """kernel_tests/from_tensor_slices_test.py::FromTensorSlicesTest.testFromTensorSlicesDataset:
    a list of datasets is sliced into the datasets."""
    dss = [dp.range(10) for _ in range(10)]
    ds = dp.from_tensor_slices(dss)
    assert isinstance(ds.element_spec, dp.DatasetSpec)
    assert_produces(ds.flat_map(lambda x: x), [np.int64(i) for i in range(10)] * 10)


def test_from_tensor_slices_dataset_of_ordered_dict():
    """kernel_tests/from_tensor_slices_test.py::FromTensorSlicesTest.testFromTensorSlicesDatasetOfOrderedDict."""
    dss = [dp.range(10).map(lambda x: collections.OrderedDict([("x", x)])) for _ in range(10)]
    out = list(dp.from_tensor_slices(dss).flat_map(lambda x: x))
    assert all(isinstance(e, collections.OrderedDict) for e in out)
    assert_produces(
        dp.from_tensor_slices(dss).flat_map(lambda x: x),
        [collections.OrderedDict([("x", x)]) for x in list(range(10)) * 10],
    )


def test_from_tensor_slices_dataset_in_function():
    """kernel_tests/from_tensor_slices_test.py::FromTensorSlicesTest.testFromTensorSlicesDatasetInFunction."""
    dss = [dp.range(10) for _ in range(10)]
    ds = dp.from_tensors(dss).flat_map(dp.from_tensor_slices).flat_map(lambda x: x)
    assert_produces(ds, [np.int64(i) for i in range(10)] * 10)


def test_from_tensor_slices_with_dict():
    """kernel_tests/from_tensor_slices_test.py::FromTensorSlicesTest.testFromTensorSlicesWithDict
    (Python ints and floats are int64 and float64: D-TF-11)."""
    components = {"foo": [1, 2, 3], "bar": [[4.0], [5.0], [6.0]]}
    ds = dp.from_tensor_slices(components)
    assert ds.element_spec["foo"] == dp.TensorSpec((), np.int64)  # D-TF-11
    assert ds.element_spec["bar"] == dp.TensorSpec((1,), np.float64)  # D-TF-11
    assert_produces(
        ds, [{"foo": components["foo"][i], "bar": components["bar"][i]} for i in range(3)]
    )


def test_from_tensor_slices_with_uint_dtypes():
    """kernel_tests/from_tensor_slices_test.py::FromTensorSlicesTest.testFromTensorSlicesWithUintDtypes."""
    ds = dp.from_tensor_slices(UINT)
    assert tuple(s.dtype for s in ds.element_spec) == (np.uint8, np.uint16, np.uint32, np.uint64)
    assert_produces(ds, [tuple(c[i] for c in UINT) for i in range(2)])


def test_random_access_invalid_index():
    """kernel_tests/from_tensor_slices_test.py::FromTensorSlicesRandomAccessTest.testInvalidIndex
    (index -1 is the last element here, D-TF-1)."""
    ds = dp.from_tensor_slices([1, 2, 3])
    assert ds[-1] == 3  # D-TF-1
    with pytest.raises(IndexError):
        ds[3]


@pytest.mark.parametrize(
    "tensor",
    [[1, 2, 3], [[1, 2], [3, 4]]],
    ids=["testOneDimensionalArray", "testTwoDimensionalArray"],
)
def test_random_access_arrays(tensor):
    """kernel_tests/from_tensor_slices_test.py::FromTensorSlicesRandomAccessTest.testOneDimensionalArray,
    testTwoDimensionalArray (one case each)."""
    ds = dp.from_tensor_slices(tensor)
    for i in range(len(tensor)):
        assert_same(ds[i], np.array(tensor[i]))


def test_random_access_multiple_components():
    """kernel_tests/from_tensor_slices_test.py::FromTensorSlicesRandomAccessTest.testMultipleComponents."""
    ds = dp.from_tensor_slices(([1, 2], [3, 4], [5, 6]))
    assert ds[0] == (1, 3, 5)
    assert ds[1] == (2, 4, 6)


def test_random_access_dictionary():
    """kernel_tests/from_tensor_slices_test.py::FromTensorSlicesRandomAccessTest.testDictionary."""
    ds = dp.from_tensor_slices({"a": [1, 2], "b": [3, 4]})
    assert ds[0] == {"a": 1, "b": 3}
    assert ds[1] == {"a": 2, "b": 4}


def test_random_access_numpy():
    """kernel_tests/from_tensor_slices_test.py::FromTensorSlicesRandomAccessTest.testNumpy."""
    ds = dp.from_tensor_slices(UINT)
    for i in range(2):
        assert_same(ds[i], tuple(c[i] for c in UINT))


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint(verify_fn):
    """kernel_tests/from_tensor_slices_test.py::FromTensorSlicesCheckpointTest.test."""
    verify_checkpoint(lambda: dp.from_tensor_slices(COMPONENTS), 4, verify_fn)


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint_dict(verify_fn):
    """kernel_tests/from_tensor_slices_test.py::FromTensorSlicesCheckpointTest.testDict."""
    components = {"foo": [1, 2, 3], "bar": [[4.0], [5.0], [6.0]]}
    verify_checkpoint(lambda: dp.from_tensor_slices(components), 3, verify_fn)


@pytest.mark.parametrize("reshuffle_each_iteration", [True, False])
@pytest.mark.parametrize("seed", [None, 19])
@pytest.mark.parametrize("repetitions", [1, 3])
@pytest.mark.parametrize("dataset_range", [10, 100])
def test_global_shuffle(dataset_range, repetitions, seed, reshuffle_each_iteration):
    """kernel_tests/from_tensor_slices_test.py::FromTensorSlicesGlobalShuffleTest.testGlobalShuffleTensorSlicesDataset."""
    ds = dp.from_tensor_slices(list(range(dataset_range)))
    if repetitions > 1:
        ds = ds.repeat(repetitions)
    ds = ds.global_shuffle(seed=seed, reshuffle_each_iteration=reshuffle_each_iteration)
    output = [int(x) for x in ds]
    expected = list(range(dataset_range)) * repetitions
    assert sorted(output) == sorted(expected)
    assert output != expected
    assert ds.cardinality() == len(expected)


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("reshuffle_each_iteration", [True, False])
@pytest.mark.parametrize("repetitions", [1, 3])
def test_global_shuffle_checkpoint(verify_fn, repetitions, reshuffle_each_iteration):
    """kernel_tests/from_tensor_slices_test.py::FromTensorSlicesGlobalShuffleCheckpointTest.testGlobalShuffleTensorSlicesDataset."""

    def build():
        ds = dp.from_tensor_slices(list(range(10)))
        if repetitions > 1:
            ds = ds.repeat(repetitions)
        return ds.global_shuffle(seed=42, reshuffle_each_iteration=reshuffle_each_iteration)

    verify_checkpoint(build, 10 * repetitions, verify_fn, unordered=reshuffle_each_iteration)
