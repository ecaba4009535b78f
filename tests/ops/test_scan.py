"""``scan``: the running state, its spec, errors."""

from __future__ import annotations

import numpy as np
import pytest
from harness import assert_resumes, consume_with_errors, values

import datapipe as dp
from datapipe import TensorSpec
from datapipe.errors import PipelineError


def test_scan_running_state() -> None:
    ds = dp.range(5).scan(0, lambda s, x: (s + x, s + x))
    assert values(ds) == [0, 1, 3, 6, 10]
    assert ds.cardinality() == 5
    fib = dp.range(6).scan((0, 1), lambda s, _: ((s[1], s[0] + s[1]), s[0]))
    assert values(fib) == [0, 1, 1, 2, 3, 5]
    mean = dp.range(1, 5).scan(0.0, lambda s, x: (s + x, (s + x) / x))
    assert mean.element_spec == TensorSpec((), np.float64)
    # A tuple element arrives as one argument (tf.data's scan convention).
    pairs = dp.from_tensor_slices((np.arange(3), np.arange(3) * 10))
    assert values(pairs.scan(0, lambda s, ab: (s + 1, ab[1] + s))) == [0, 11, 22]
    assert_resumes(dp.range(12).scan(np.int64(0), lambda s, x: (s + x, s * 2)))


def test_scan_errors() -> None:
    with pytest.raises(PipelineError, match="scan at element 0: TypeError: scan_func must return"):
        list(dp.range(3).scan(0, lambda s, x: s + x))
    with pytest.raises(PipelineError, match="scan at element 0: TypeError: .*structure differs"):
        list(dp.range(3).scan((0, 0), lambda s, x: (s[0], x)))
    out, errors = consume_with_errors(dp.range(5).scan(0, lambda s, x: (s + 10 // (int(x) - 2), s)))
    assert out == [0, -5, -15, -5]  # state unchanged across the failing element
    assert errors == ["scan at element 2: ZeroDivisionError: integer division or modulo by zero"]
