"""``counter``: int64 overflow is located and skipped."""

from __future__ import annotations

import pytest

import datapipe as dp


def test_counter_overflow_is_located_and_skipped():
    it = iter(dp.Dataset.counter(120, 3, dtype="int8").take(5))
    assert [int(next(it)) for _ in range(3)] == [120, 123, 126]
    with pytest.raises(
        dp.PipelineError, match="counter at element 3: OverflowError: the count does not fit int8"
    ):
        next(it)
    with pytest.raises(TypeError, match="counter: dtype must be an integer dtype, got float32"):
        dp.Dataset.counter(dtype="float32")
    assert dp.counter is dp.Dataset.counter and dp.random is dp.Dataset.random
