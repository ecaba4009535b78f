"""tf.data's ``reduce`` kernel tests (``kernel_tests/reduce_test.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp


@pytest.mark.parametrize("i", range(10))
def test_sum(i):
    """kernel_tests/reduce_test.py::ReduceTest.testSum."""
    result = dp.range(1, i + 1).reduce(np.int64(0), lambda x, y: x + y)
    assert result == ((i + 1) * i) // 2 and result.dtype == np.int64


@pytest.mark.parametrize("i", range(10))
def test_sum_tuple(i):
    """kernel_tests/reduce_test.py::ReduceTest.testSumTuple."""
    ds = dp.range(1, i + 1)

    def reduce_fn(state, value):
        v1, v2 = value
        return state + v1 + v2

    assert dp.zip((ds, ds)).reduce(np.int64(0), reduce_fn) == (i + 1) * i


@pytest.mark.parametrize("i", range(10))
def test_sum_and_count(i):
    """kernel_tests/reduce_test.py::ReduceTest.testSumAndCount."""

    def reduce_fn(state, value):
        s, c = state
        return s + value, c + 1

    s, c = dp.range(1, i + 1).reduce((np.int64(0), np.int64(0)), reduce_fn)
    assert (s, c) == (((i + 1) * i) // 2, i)


@pytest.mark.parametrize("i", range(10))
def test_square_using_placeholder(i):
    """kernel_tests/reduce_test.py::ReduceTest.testSkipEagerSquareUsingPlaceholder (the
    placeholder is a value captured by the function)."""
    delta = np.int64(i)
    assert dp.range(1, i + 1).reduce(np.int64(0), lambda state, _: state + delta) == i * i


@pytest.mark.parametrize("i", range(10))
def test_nested(i):
    """kernel_tests/reduce_test.py::ReduceTest.testNested (the sparse part as a dense
    array)."""

    def reduce_fn(state, value):
        state["dense"] += value["dense"]
        state["sparse"] = value["sparse"]
        return state

    def map_fn(j):
        return {"dense": np.int64(j), "sparse": np.array([[j]], np.int64)}

    result = dp.range(1, i + 1).map(map_fn).reduce(map_fn(0), reduce_fn)
    assert result["dense"] == ((i + 1) * i) // 2
    assert result["sparse"].tolist() == [[i]]
