"""tf.data's ``counter`` kernel tests (``kernel_tests/counter_test.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp


@pytest.mark.parametrize("start,step,expected_output", [(3, 4, [3, 7, 11]), (0, -1, [0, -1, -2])])
def test_counter(start, step, expected_output):
    """kernel_tests/counter_test.py::CounterTest.testCounter."""
    ds = dp.counter(start, step)
    assert ds.element_spec == dp.TensorSpec((), np.int64)
    assert ds.cardinality() == dp.INFINITE_CARDINALITY
    it = iter(ds)
    out = [next(it) for _ in expected_output]
    assert out == expected_output and all(x.dtype == np.int64 for x in out)
