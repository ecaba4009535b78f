"""tf.data's ``unique`` kernel tests (``kernel_tests/unique_test.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint

INT_CASES = [
    ([], []),
    ([1], [1]),
    ([1, 1, 1, 1, 1, 1, 1], [1]),
    ([1, 1, 1, 1, 0], [1, 0]),
    ([1, 2, 3, 4], [1, 2, 3, 4]),
    ([1, 2, 4, 3, 2, 1, 2, 3, 4], [1, 2, 4, 3]),
    ([[1], [1, 1], [1, 1, 1]], [[1], [1, 1], [1, 1, 1]]),
    ([[1, 1], [1, 1], [2, 2], [3, 3], [1, 1]], [[1, 1], [2, 2], [3, 3]]),
]
STRING_CASES = [
    ([], []),
    (["hello"], ["hello"]),
    (["hello", "hello", "hello"], ["hello"]),
    (["hello", "world"], ["hello", "world"]),
    (["foo", "bar", "baz", "baz", "bar", "foo"], ["foo", "bar", "baz"]),
]


def _simple(dtype, test_cases):
    """Upstream ``_testSimpleHelper``: one dataset whose generator reads the current case."""
    current = []
    ds = dp.from_generator(lambda: current, dp.TensorSpec(None, dtype)).unique()
    for test_case, expected in test_cases:
        current[:] = test_case
        assert_produces(ds, [np.array(e, dtype) for e in expected])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_simple_int(dtype):
    """kernel_tests/unique_test.py::UniqueTest.testSimpleInt."""
    _simple(dtype, INT_CASES)


def test_simple_string():
    """kernel_tests/unique_test.py::UniqueTest.testSimpleString."""
    _simple(object, STRING_CASES)


@pytest.mark.parametrize("dtype", [bool, np.double, np.complex64, np.float32, np.float64])
def test_unsupported_types(dtype):
    """kernel_tests/unique_test.py::UniqueTest.testUnsupportedTypes (qint16/qint32 are TF
    dtypes that numpy has not)."""
    with pytest.raises(TypeError, match="unique: elements must be integers or strings"):
        dp.from_generator(lambda: [], dp.TensorSpec(None, dtype)).unique()


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint(verify_fn):
    """kernel_tests/unique_test.py::UniqueCheckpointTest.test."""
    verify_checkpoint(lambda: dp.range(200).map(lambda x: x % 100).unique(), 100, verify_fn)
