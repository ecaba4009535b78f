"""tf.data's ``range`` kernel tests (``kernel_tests/range_test.py``), against datapipe."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp

from ._support import assert_produces


@pytest.mark.parametrize(
    "args",
    [(5,), (2, 5), (2, 10, 2), (2, 10, -1), (10, 2), (10, 2, 2), (10, 2, -1)],
    ids=[
        "testStop",
        "testStartStop",
        "testStartStopStep",
        "testNegativeStep",
        "testStopLessThanStart",
        "testStopLessThanStartWithPositiveStep",
        "testStopLessThanStartWithNegativeStep",
    ],
)
def test_range(args):
    """kernel_tests/range_test.py::RangeTest.testStop, testStartStop, testStartStopStep,
    testNegativeStep, testStopLessThanStart, testStopLessThanStartWithPositiveStep,
    testStopLessThanStartWithNegativeStep (one case each)."""
    ds = dp.range(*args)
    assert_produces(ds, [np.int64(i) for i in range(*args)])
    assert ds.cardinality() == len(range(*args))


def test_zero_step():
    """kernel_tests/range_test.py::RangeTest.testZeroStep."""
    with pytest.raises(ValueError, match="range: step must not be 0"):
        dp.range(2, 10, 0)


def test_output_type():
    """kernel_tests/range_test.py::RangeTest.testOutputType."""
    ds = dp.range(5, dtype=np.int32)
    assert_produces(ds, [np.int32(i) for i in range(5)])
    assert ds.element_spec == dp.TensorSpec((), np.int32)
