"""``filter``: elements, spec, cardinality, non-boolean predicates, errors, resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from harness import assert_resumes, consume_with_errors, values

import datapipe as dp
from datapipe import TensorSpec
from datapipe.errors import PipelineError


def test_filter_elements_spec_cardinality() -> None:
    ds = dp.range(10).filter(lambda x: x % 3 == 0)
    assert values(ds) == [0, 3, 6, 9]
    assert ds.element_spec == TensorSpec((), np.int64)
    assert ds.cardinality() == dp.UNKNOWN_CARDINALITY
    assert dp.range(5).repeat().filter(lambda x: x > 1).cardinality() == dp.UNKNOWN_CARDINALITY
    pairs = dp.from_tensor_slices((np.arange(4), np.arange(4) * 10)).filter(lambda a, b: b > 15)
    assert values(pairs) == [(2, 20), (3, 30)]
    assert values(dp.range(4).filter(lambda x: torch.tensor(bool(x % 2)))) == [1, 3]
    assert values(dp.range(4).filter(lambda x: np.array(x < 2))) == [0, 1]


def test_filter_rejects_non_boolean_predicate() -> None:
    with pytest.raises(PipelineError, match=r"filter at element 0: TypeError: .*scalar boolean"):
        list(dp.range(3).filter(lambda x: x % 2))
    with pytest.raises(PipelineError, match=r"shape \(2,\) and dtype bool"):
        list(dp.range(3).filter(lambda x: np.array([True, False])))
    with pytest.raises(TypeError, match="filter: predicate must be callable"):
        dp.range(3).filter(3)


def test_filter_error_delivers_good_elements_then_continues() -> None:
    ds = dp.range(8).filter(lambda x: 10 // (int(x) - 3) != 99)  # fails on element 3 only
    out, errors = consume_with_errors(ds)
    assert out == [0, 1, 2, 4, 5, 6, 7]
    assert len(errors) == 1 and errors[0].startswith("filter at element 3: ZeroDivisionError")


def test_filter_resume() -> None:
    assert_resumes(dp.range(20).filter(lambda x: x % 3 != 1))
    assert_resumes(dp.range(30).filter(lambda x: x > 25))
