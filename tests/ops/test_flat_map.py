"""``flat_map``: elements, spec, cardinality, errors, resume inside sub-datasets, seeds."""

from __future__ import annotations

import numpy as np
import pytest
from harness import assert_resumes, consume_with_errors, values

import datapipe as dp
from datapipe import TensorSpec
from datapipe.errors import PipelineError


def test_flat_map_elements_spec_cardinality() -> None:
    ds = dp.range(1, 4).flat_map(lambda n: dp.range(n).map(lambda x: x * 10 + n))
    assert values(ds) == [1, 2, 12, 3, 13, 23]
    assert ds.element_spec == TensorSpec((), np.int64)
    assert ds.cardinality() == dp.UNKNOWN_CARDINALITY
    assert values(dp.range(3).flat_map(lambda n: dp.range(0))) == []
    t = dp.from_tensor_slices((np.arange(2), np.arange(2) + 5))
    out = values(t.flat_map(lambda a, b: dp.from_tensor_slices(np.array([a, b]))))
    assert out == [0, 5, 1, 6]
    nested = dp.from_tensor_slices(np.arange(6).reshape(3, 2)).flat_map(dp.from_tensor_slices)
    assert values(nested) == [0, 1, 2, 3, 4, 5]


def test_flat_map_errors_name_op_and_index() -> None:
    with pytest.raises(PipelineError, match="flat_map at element 1: TypeError: map_func must "):
        list(dp.range(3).flat_map(lambda n: dp.range(n) if n != 1 else 5))
    out, errors = consume_with_errors(dp.range(4).flat_map(lambda n: dp.range(10 // (int(n) - 2))))
    assert out == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]  # n = 0, 1: 10 // -2, 10 // -1 -> empty
    assert errors == [
        "flat_map at element 2: ZeroDivisionError: integer division or modulo by zero"
    ]


def test_flat_map_resume_inside_sub_datasets() -> None:
    ds = dp.range(1, 5).flat_map(lambda n: dp.range(n).map(lambda x: x + 100 * n))
    assert_resumes(ds)


def test_flat_map_random_sub_datasets_are_seeded_per_element() -> None:
    ds = dp.range(4).flat_map(lambda n: dp.range(6).shuffle(6)).with_options(dp.Options(seed=3))
    a, b = values(ds), values(ds)
    perms = [a[i : i + 6] for i in range(0, 24, 6)]
    assert all(sorted(p) == list(range(6)) for p in perms)
    assert len({tuple(p) for p in perms}) > 1  # each input element gets its own draw
    assert len(a) == len(b) == 24
    assert_resumes(ds, cuts=[0, 5, 6, 13, 24])
