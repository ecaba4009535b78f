"""``concatenate``: elements, cardinality, merged shapes, incompatible specs, resume."""

from __future__ import annotations

import numpy as np
import pytest
from harness import assert_resumes, values

import datapipe as dp
from datapipe import INFINITE_CARDINALITY as INF
from datapipe import UNKNOWN_CARDINALITY as UNK
from datapipe import TensorSpec
from datapipe.errors import RandomAccessError


def unknown_len(ds):
    return ds.filter(lambda x: True)


def test_concatenate_elements_and_cardinality():
    ds = dp.range(3).concatenate(dp.range(10, 12))
    assert values(ds) == [0, 1, 2, 10, 11]
    assert ds.cardinality() == 5
    assert dp.range(3).concatenate(dp.range(2).repeat()).cardinality() == INF
    assert unknown_len(dp.range(3)).concatenate(dp.range(2)).cardinality() == UNK
    assert unknown_len(dp.range(3)).concatenate(dp.range(2).repeat()).cardinality() == INF


def test_concatenate_merges_shapes():
    a = dp.from_tensor_slices((np.zeros((2, 4, 3), np.float32), np.zeros(2, np.int64)))
    b = dp.from_tensor_slices((np.ones((3, 5, 3), np.float32), np.ones(3, np.int64)))
    ds = a.concatenate(b)
    assert ds.element_spec == (TensorSpec((None, 3), "float32"), TensorSpec((), "int64"))
    assert [x.shape for x, _ in ds] == [(4, 3)] * 2 + [(5, 3)] * 3
    c = dp.from_tensor_slices(np.zeros((2, 4)))
    d = dp.from_tensor_slices(np.zeros((2, 4, 1)))
    assert c.concatenate(d).element_spec == TensorSpec(None, "float64")


def test_concatenate_incompatible_specs_name_both():
    with pytest.raises(TypeError) as info:
        dp.range(3).concatenate(dp.range(3, dtype="float32"))
    msg = str(info.value)
    assert "concatenate: incompatible" in msg
    assert "TensorSpec(shape=(), dtype=int64)" in msg
    assert "TensorSpec(shape=(), dtype=float32)" in msg
    with pytest.raises(TypeError, match=r"(?s)dtype=int64\).*vs\..*\(TensorSpec"):
        dp.range(3).concatenate(dp.zip(dp.range(3), dp.range(3)))


def test_concatenate_resume_random_access_and_laziness():
    ds = dp.range(4).concatenate(dp.range(100, 103).map(lambda x: x + 1))
    assert_resumes(ds)
    assert ds._random_access_breaker() is None
    assert sorted(values(ds.global_shuffle(seed=2))) == values(ds)
    calls = []

    def gen():
        calls.append(1)
        yield 99

    lazy = dp.range(3).concatenate(dp.from_generator(gen, TensorSpec((), "int64")))
    assert values(lazy.take(3)) == [0, 1, 2] and calls == []
    assert values(lazy) == [0, 1, 2, 99] and calls == [1]
    assert_resumes(lazy)
    with pytest.raises(RandomAccessError, match="'from_generator'"):
        lazy.global_shuffle()
