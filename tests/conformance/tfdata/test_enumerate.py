"""tf.data's ``enumerate`` kernel tests (``kernel_tests/enumerate_test.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint


def test_enumerate():
    """kernel_tests/enumerate_test.py::EnumerateTest.testEnumerate."""
    components = (["a", "b"], [1, 2], [37.0, 38])
    ds = dp.from_tensor_slices(components).enumerate(np.int64(20))
    assert ds.element_spec[0] == dp.TensorSpec((), np.int64)
    assert [s.shape for s in ds.element_spec[1]] == [()] * 3
    assert_produces(ds, [(np.int64(20), (b"a", 1, 37.0)), (np.int64(21), (b"b", 2, 38.0))])


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint(verify_fn):
    """kernel_tests/enumerate_test.py::EnumerateCheckpointTest.test."""
    verify_checkpoint(lambda: dp.range(2, 10).enumerate(), 10 - 2, verify_fn)
