"""tf.data's ``assert_cardinality`` kernel tests
(``experimental/kernel_tests/assert_cardinality_test.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp
from datapipe.errors import CardinalityError

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint


def test_correct_cardinality():
    """experimental/kernel_tests/assert_cardinality_test.py::AssertCardinalityTest.testCorrectCardinality."""
    ds = dp.range(10).filter(lambda x: True)
    assert ds.cardinality() == dp.UNKNOWN_CARDINALITY
    assert_produces(ds, [np.int64(i) for i in range(10)])
    ds = ds.assert_cardinality(10)
    assert ds.cardinality() == 10
    assert_produces(ds, [np.int64(i) for i in range(10)])


CASES = [
    (10, 20, "Input dataset was expected to contain 20 elements but contained only 10 elements."),
    (1, 20, "Input dataset was expected to contain 20 elements but contained only 1 element."),
    (10, dp.INFINITE_CARDINALITY, "Input dataset was expected to contain an infinite number of "
     "elements but contained only 10 elements."),
    (1, dp.INFINITE_CARDINALITY, "Input dataset was expected to contain an infinite number of "
     "elements but contained only 1 element."),
    (10, 5, "Input dataset was expected to contain 5 elements but contained at least 6 elements."),
    (10, 1, "Input dataset was expected to contain 1 element but contained at least 2 elements."),
]  # fmt: skip


@pytest.mark.parametrize("num_elements,asserted_cardinality,expected_error", CASES)
def test_incorrect_cardinality(num_elements, asserted_cardinality, expected_error):
    """experimental/kernel_tests/assert_cardinality_test.py::AssertCardinalityTest.testIncorrectCardinality:
    tf.data's messages, at iteration, for an input whose size is not known. An input of
    known size is refused when the pipeline is built (D-TF-15)."""
    ds = dp.range(num_elements).filter(lambda x: True).assert_cardinality(asserted_cardinality)
    with pytest.raises(CardinalityError) as info:
        for _ in ds:
            pass
    assert str(info.value).endswith(expected_error[0].lower() + expected_error[1:])
    with pytest.raises(ValueError, match="assert_cardinality: the input is known to have"):
        dp.range(num_elements).assert_cardinality(asserted_cardinality)  # D-TF-15


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint_cardinality(verify_fn):
    """experimental/kernel_tests/assert_cardinality_test.py::AssertCardinalityDatasetCheckpointTest.testCardinality."""
    verify_checkpoint(lambda: dp.range(200).assert_cardinality(200), 200, verify_fn)
