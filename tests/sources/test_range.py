"""``range``: Python's ``range`` semantics, dtype, cardinality."""

from __future__ import annotations

import numpy as np
from harness import values

import datapipe as dp
from datapipe import TensorSpec


def test_range_matches_python_range() -> None:
    for args in [(5,), (2, 9), (10, 0, -3), (0, 10, 4), (3, 3)]:
        ds = dp.range(*args)
        assert values(ds) == list(range(*args))
        assert ds.cardinality() == len(range(*args))
    assert dp.range(3).element_spec == TensorSpec((), np.int64)
    assert list(dp.range(2, dtype="int32"))[0].dtype == np.int32
