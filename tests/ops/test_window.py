"""``window``: tf.data's windows (size, shift, stride, drop_remainder), structures, specs."""

from __future__ import annotations

import numpy as np
import pytest
from harness import assert_resumes, values

import datapipe as dp
from datapipe import TensorSpec
from datapipe._spec import DatasetSpec


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((3,), [[0, 1, 2], [3, 4, 5], [6]]),
        ((3, 2), [[0, 1, 2], [2, 3, 4], [4, 5, 6], [6]]),
        ((3, 2, 2), [[0, 2, 4], [2, 4, 6], [4, 6], [6]]),
        ((3, 4), [[0, 1, 2], [4, 5, 6]]),
        ((3, None, 1, True), [[0, 1, 2], [3, 4, 5]]),
        ((3, 2, 1, True), [[0, 1, 2], [2, 3, 4], [4, 5, 6]]),
        ((3, 2, 2, True), [[0, 2, 4], [2, 4, 6]]),
        ((3, 4, 1, True), [[0, 1, 2], [4, 5, 6]]),
        ((8, 1, 1, True), []),
    ],
)
def test_window_matches_tf_data(args, expected) -> None:
    ds = dp.range(7).window(*args)
    assert values(ds) == expected
    assert ds.cardinality() == len(expected)
    streamed = dp.range(7).filter(lambda x: x >= 0).window(*args)
    assert values(streamed) == expected
    assert streamed.cardinality() == dp.UNKNOWN_CARDINALITY
    assert values(dp.range(7).window(*args).shard(1, 0)) == expected  # random access path
    assert_resumes(streamed)


def test_window_structure_spec_and_flat_map() -> None:
    ds = dp.range(7).window(3)
    w = next(iter(ds))
    assert isinstance(w, dp.Dataset) and w.element_spec == TensorSpec((), np.int64)
    assert ds.element_spec == DatasetSpec(TensorSpec((), np.int64))
    assert values(ds.flat_map(lambda w: w.batch(3))) == [[0, 1, 2], [3, 4, 5], [6]]
    pairs = dp.from_tensor_slices((np.arange(5), np.arange(5) * 10)).window(2)
    a, b = next(iter(pairs))
    assert values(a) == [0, 1] and values(b) == [0, 10]
    assert values(pairs.flat_map(lambda x, y: y.batch(2))) == [[0, 10], [20, 30], [40]]
    d = dp.from_tensor_slices({"k": np.arange(4)}).window(3, shift=1, drop_remainder=True)
    assert [values(w["k"]) for w in d] == [[0, 1, 2], [1, 2, 3]]
    assert dp.range(3).repeat().window(2).cardinality() == dp.INFINITE_CARDINALITY
    for bad in [dict(size=0), dict(size=2, shift=0), dict(size=2, stride=0)]:
        with pytest.raises(ValueError, match="window: .* must be >= 1"):
            dp.range(3).window(**bad)
