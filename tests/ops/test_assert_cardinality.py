"""``assert_cardinality``: known counts, random access, a sticky failure."""

from __future__ import annotations

import pytest

import datapipe as dp
from datapipe.errors import CardinalityError


def test_assert_cardinality_known_counts_random_access_and_sticky_failure():
    with pytest.raises(
        ValueError,
        match="assert_cardinality: the input is known to have 5 elements, but the asserted "
        "cardinality is 3 elements",
    ):
        dp.range(5).assert_cardinality(3)
    with pytest.raises(
        ValueError, match="the input is known to have an infinite number of elements"
    ):
        dp.range(5).repeat().assert_cardinality(3)
    ok = dp.range(5).map(lambda x: x * 2).assert_cardinality(5)
    assert len(ok) == 5 and int(ok[3]) == 6
    it = iter(dp.range(5).filter(lambda x: True).assert_cardinality(2))
    assert [int(next(it)) for _ in range(2)] == [0, 1]
    for _ in range(2):  # the assertion does not pass on a second try, nor past ignore_errors
        with pytest.raises(CardinalityError, match="but contained at least 3 elements"):
            next(it)
    with pytest.raises(CardinalityError):
        list(dp.range(5).filter(lambda x: True).assert_cardinality(2).ignore_errors())
