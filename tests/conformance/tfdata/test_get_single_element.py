"""tf.data's ``get_single_element`` kernel tests (``kernel_tests/get_single_element_test.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp

from ._support import assert_produces


@pytest.mark.parametrize(
    "skip,take,error_msg",
    [(0, 1, None), (5, 1, None), (10, 1, None), (100, 1, "the dataset was empty"),
     (0, 2, "the dataset had more than one element")],
)  # fmt: skip
def test_basic(skip, take, error_msg):
    """kernel_tests/get_single_element_test.py::GetSingleElementTest.testBasic (the sparse
    component as its dense [x] value)."""
    ds = dp.range(100).skip(skip).map(lambda x: (x * x, np.reshape(x, [1]))).take(take)
    if error_msg is None:
        dense_val, vector_val = ds.get_single_element()
        assert dense_val == skip * skip
        assert vector_val.tolist() == [skip]
    else:
        with pytest.raises(ValueError, match=f"get_single_element: {error_msg}"):
            ds.get_single_element()


def test_window():
    """kernel_tests/get_single_element_test.py::GetSingleElementTest.testWindow."""

    def flat_map_func(ds):
        return dp.from_tensors(ds.batch(2).get_single_element())

    ds = dp.range(10).window(2).flat_map(flat_map_func)
    assert_produces(ds, [np.array([i, i + 1]) for i in range(0, 10, 2)])


def test_side_effect():
    """kernel_tests/get_single_element_test.py::GetSingleElementTest.testSideEffect: the
    function runs exactly once (a Python counter in place of the TF variable)."""
    counter = [0]

    def increment_fn(x):
        counter[0] += 1
        return x

    assert dp.range(1).map(increment_fn).get_single_element() == 0
    assert counter[0] == 1


def test_automatic_control_dependencies():
    """kernel_tests/get_single_element_test.py::GetSingleElementTest.testAutomaticControlDependencies:
    two calls run in program order: (1 + 1) * 2 == 4."""
    counter = [1]

    def increment_fn(x):
        counter[0] += 1
        return x

    def multiply_fn(x):
        counter[0] *= 2
        return x

    dp.range(1).map(increment_fn).get_single_element()
    dp.range(1).map(multiply_fn).get_single_element()
    assert counter[0] == 4
