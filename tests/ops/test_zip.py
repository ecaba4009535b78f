"""``zip``: forms (tuple, dict, nested), specs, cardinality rules, errors, resume, random access."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from harness import assert_resumes, py, values
from hypothesis import given, settings
from hypothesis import strategies as st

import datapipe as dp
from datapipe import INFINITE_CARDINALITY as INF
from datapipe import UNKNOWN_CARDINALITY as UNK
from datapipe import TensorSpec
from datapipe.errors import RandomAccessError


def unknown_len(ds):
    return ds.filter(lambda x: True)


def test_zip_forms():
    a, b, c = dp.range(3), dp.range(10, 15), dp.range(20, 24)
    assert values(dp.zip(a, b)) == [(0, 10), (1, 11), (2, 12)]
    assert values(dp.zip((a, b))) == values(dp.zip(a, b))
    assert values(dp.zip({"x": a, "y": b})) == [{"x": i, "y": 10 + i} for i in range(3)]
    assert values(dp.zip((a, b), c)) == [((i, 10 + i), 20 + i) for i in range(3)]
    assert values(dp.zip(a)) == [0, 1, 2]  # a single dataset: its own elements (tf.data)
    Pair = collections.namedtuple("Pair", "p q")
    out = list(dp.zip(Pair(a, b)))
    assert type(out[0]) is Pair and py(out) == [(0, 10), (1, 11), (2, 12)]


def test_zip_spec_and_arrays():
    imgs = np.arange(24, dtype=np.uint8).reshape(4, 2, 3)
    ds = dp.zip({"img": dp.from_tensor_slices(imgs), "i": dp.range(4)})
    assert ds.element_spec == {"img": TensorSpec((2, 3), "uint8"), "i": TensorSpec((), "int64")}
    assert py(list(ds)[2]["img"]) == imgs[2].tolist()


@pytest.mark.parametrize(
    "cards, expected",
    [
        ([3, 5], 3),
        ([5, INF], 5),
        ([INF, INF], INF),
        ([0, INF], 0),
        ([3, UNK], UNK),
        ([INF, UNK], UNK),
    ],
)
def test_zip_cardinality_rules(cards, expected):
    def make(n):
        if n == INF:
            return dp.range(2).repeat()
        if n == UNK:
            return unknown_len(dp.range(4))
        return dp.range(n)

    ds = dp.zip(tuple(make(n) for n in cards))
    assert ds.cardinality() == expected
    if expected >= 0:
        assert len(values(ds)) == expected


def test_zip_errors():
    with pytest.raises(TypeError, match="Python list.*use a tuple"):
        dp.zip([dp.range(2), dp.range(2)])
    with pytest.raises(TypeError, match=r"component \[1\] must be a Dataset, got int"):
        dp.zip(dp.range(2), 5)
    with pytest.raises(TypeError, match="at least one dataset"):
        dp.zip(())


def test_zip_resume_and_random_access():
    ds = dp.zip(dp.range(6), dp.range(10, 20).map(lambda x: x * 2))
    assert_resumes(ds)
    assert ds._random_access_breaker() is None
    shuffled = values(ds.global_shuffle(seed=1))
    assert sorted(shuffled) == values(ds)
    assert all(b == 2 * (10 + a) for a, b in shuffled)  # components stay aligned
    streamed = dp.zip(dp.range(6), unknown_len(dp.range(6)))
    assert_resumes(streamed)
    with pytest.raises(RandomAccessError, match="at op 'filter'"):
        streamed.global_shuffle()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 12), st.just(INF)), min_size=1, max_size=4))
def test_zip_cardinality_property(sizes):
    inputs = tuple(dp.range(7).repeat() if n == INF else dp.range(n) for n in sizes)
    ds = dp.zip(inputs)
    finite = [n for n in sizes if n != INF]
    assert ds.cardinality() == (min(finite) if finite else INF)
    if finite:
        assert len(list(ds)) == min(finite)
