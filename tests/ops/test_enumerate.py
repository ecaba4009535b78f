"""``enumerate``: (index, element) pairs from ``start``, spec, cardinality, resume."""

from __future__ import annotations

import numpy as np
from harness import assert_resumes, py, values

import datapipe as dp
from datapipe import TensorSpec


def test_enumerate() -> None:
    ds = dp.range(10, 13).enumerate(start=5)
    out = list(ds)
    assert [py(x) for x in out] == [(5, 10), (6, 11), (7, 12)]
    assert all(type(i) is np.int64 for i, _ in out)
    assert ds.element_spec == (TensorSpec((), np.int64), TensorSpec((), np.int64))
    assert ds.cardinality() == 3
    assert values(dp.range(3).enumerate().map(lambda i, x: i * 10 + x)) == [0, 11, 22]
    assert ds._random_access_breaker() is None
    assert values(dp.range(10).enumerate().shard(4, 3)) == [(3, 3), (7, 7)]
    streamed = dp.range(6).filter(lambda x: x % 2 == 1).enumerate()
    assert values(streamed) == [(0, 1), (1, 3), (2, 5)]
    assert_resumes(streamed)
