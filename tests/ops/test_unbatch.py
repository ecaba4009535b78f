"""``unbatch``: elements, spec, cardinality, errors, resume and random access."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from harness import assert_resumes, values

import datapipe as dp
from datapipe import TensorSpec
from datapipe.errors import PipelineError


def test_unbatch_elements_spec_cardinality() -> None:
    assert values(dp.range(7).batch(3).unbatch()) == list(range(7))
    m = np.arange(12).reshape(3, 2, 2)
    ds = dp.from_tensor_slices(m).unbatch()
    assert values(ds) == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11]]
    assert ds.element_spec == TensorSpec((2,), np.int64)
    assert ds.cardinality() == 6  # static batch dim 2, 3 batches (tf.data)
    assert dp.range(10).batch(3, drop_remainder=True).unbatch().cardinality() == 9
    assert dp.range(10).batch(3).unbatch().cardinality() == dp.UNKNOWN_CARDINALITY
    assert dp.range(3).batch(2).repeat().unbatch().cardinality() == dp.INFINITE_CARDINALITY
    d = dp.from_tensor_slices({"a": np.arange(4), "b": np.arange(8).reshape(4, 2)}).batch(3)
    assert values(d.unbatch())[3] == {"a": 3, "b": [6, 7]}
    tt = list(
        dp.from_tensors_like_batches()
        if False
        else dp.from_tensor_slices(torch.ones(2, 3, 4)).unbatch()
    )
    assert len(tt) == 6 and isinstance(tt[0], torch.Tensor) and tt[0].shape == (4,)


def test_unbatch_errors() -> None:
    with pytest.raises(ValueError, match="unbatch: cannot unbatch a scalar component"):
        dp.range(3).unbatch()
    bad = dp.range(2).map(lambda x: (np.zeros(2), np.zeros(3)))
    with pytest.raises(
        PipelineError, match=r"unbatch at element 0: .*different batch sizes \[2, 3\]"
    ):
        list(bad.unbatch())


def test_unbatch_resume_and_random_access() -> None:
    assert_resumes(dp.range(11).batch(4).unbatch())
    static = dp.range(12).batch(3, drop_remainder=True).unbatch()
    assert static._random_access_breaker() is None
    assert values(static.shard(5, 2)) == [2, 7]  # through unbatch's random access
    assert dp.range(12).batch(5).unbatch()._random_access_breaker() == "unbatch"


def test_sizes_seen_in_one_element_are_not_static() -> None:
    # A map's spec is inferred from its first element: its size 1 is only seen (SeenDim),
    # so unbatch may not derive a cardinality from it (it did: 3 instead of 6).
    ds = dp.range(1, 4).map(lambda n: np.arange(int(n))).unbatch()
    assert ds.cardinality() == dp.UNKNOWN_CARDINALITY
    assert values(ds) == [0, 0, 1, 0, 1, 2]
    known = dp.range(6).batch(2, drop_remainder=True).map(lambda b: b * 2).batch(3).unbatch()
    assert known.element_spec.shape == (2,)  # the batch dim under map is still only seen
    assert known.cardinality() == dp.UNKNOWN_CARDINALITY
    exact = dp.range(6).batch(2, drop_remainder=True).unbatch()
    assert exact.cardinality() == 6  # a declared batch dimension stays a fact
