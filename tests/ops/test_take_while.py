"""``take_while``: stops at the first false predicate; errors and resume."""

from __future__ import annotations

import numpy as np
import pytest
from harness import assert_resumes, consume_with_errors, values

import datapipe as dp
from datapipe import TensorSpec
from datapipe.errors import PipelineError


def test_take_while() -> None:
    ds = dp.range(10).take_while(lambda x: x * x < 20)
    assert values(ds) == [0, 1, 2, 3, 4]
    assert ds.cardinality() == dp.UNKNOWN_CARDINALITY
    assert ds.element_spec == TensorSpec((), np.int64)
    assert values(dp.range(5).take_while(lambda x: x > 0)) == []
    assert values(dp.range(3).take_while(lambda x: True)) == [0, 1, 2]
    # Stops at the first False even when later elements would pass.
    assert values(dp.from_tensor_slices([1, 2, 9, 1]).take_while(lambda x: x < 5)) == [1, 2]
    assert values(dp.range(10).repeat().take_while(lambda x: x < 4)) == [0, 1, 2, 3]
    assert_resumes(dp.range(40).take_while(lambda x: x < 23))
    with pytest.raises(PipelineError, match="take_while at element 0: TypeError: .*scalar boolean"):
        list(dp.range(3).take_while(lambda x: x))
    out, errors = consume_with_errors(dp.range(6).take_while(lambda x: 10 // (int(x) - 1) < 100))
    assert out == [0, 2, 3, 4, 5]
    assert errors[0].startswith("take_while at element 1: ZeroDivisionError")
