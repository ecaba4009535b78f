"""tf.data's ``take_while`` kernel tests (``kernel_tests/take_while_test.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint


@pytest.mark.parametrize("num_elements,window_size", [(14, 2), (15, 2), (100, 3)])
def test_take_while_dataset(num_elements, window_size):
    """kernel_tests/take_while_test.py::TakeWhileTest.testTakeWhileDataset."""
    ds = dp.range(num_elements).batch(window_size)
    ds = ds.take_while(lambda elem: np.shape(elem)[0] > (window_size - 1))
    ds = ds.flat_map(dp.from_tensor_slices)
    expected = int(num_elements / window_size) * window_size
    assert_produces(ds, [np.int64(i) for i in range(expected)])


@pytest.mark.parametrize(
    "num_elements,upper_bound", [(10, 2), (16, 7), (100, 99), (100, 101), (0, 1)]
)
def test_take_while_dataset_range(num_elements, upper_bound):
    """kernel_tests/take_while_test.py::TakeWhileTest.testTakeWhileDatasetRange."""
    ds = dp.range(num_elements).take_while(lambda x: x < upper_bound)
    assert_produces(ds, [np.int64(i) for i in range(min(num_elements, upper_bound))])


def test_take_while_dataset_string():
    """kernel_tests/take_while_test.py::TakeWhileTest.testTakeWhileDatasetString."""
    string = ["this", "is", "the", "test", "for", "strings"]
    ds = dp.from_tensor_slices(string).take_while(lambda x: np.not_equal(x, "test"))
    assert_produces(ds, [b"this", b"is", b"the"])


@pytest.mark.parametrize("size,index", [(5, 3), (10, 0), (100, 5), (8, 7)])
def test_take_while_dataset_short_circuit(size, index):
    """kernel_tests/take_while_test.py::TakeWhileTest.testTakewhileDatasetShortCircuit."""
    boolean_array = [True] * size
    boolean_array[index] = False
    ds = dp.from_tensor_slices(boolean_array).take_while(lambda data_elem: data_elem)
    assert_produces(ds, [np.bool_(True)] * index)


def test_take_while_dataset_with_repeat():
    """kernel_tests/take_while_test.py::TakeWhileTest.testTakeWhileDatasetWithRepeat."""
    ds = dp.range(10).take_while(lambda x: x < 2).repeat(5)
    assert_produces(ds, [np.int64(v) for v in np.tile([0, 1], 5)])


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("num_elements,upper_bound", [(10, 10), (10, 23), (23, 10), (23, 23)])
def test_checkpoint(verify_fn, num_elements, upper_bound):
    """kernel_tests/take_while_test.py::TakeWhileCheckpointTest.test."""
    verify_checkpoint(
        lambda: dp.range(num_elements).take_while(lambda x: x < upper_bound),
        min(num_elements, upper_bound),
        verify_fn,
    )
