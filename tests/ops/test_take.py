"""``take`` (with ``skip`` and ``repeat`` cardinalities): elements, cardinality, and no
element computed past what ``take`` needs."""

from __future__ import annotations

from harness import values

import datapipe as dp


def test_take_skip_repeat_elements_and_cardinality() -> None:
    assert values(dp.range(10).take(3)) == [0, 1, 2]
    assert values(dp.range(10).skip(7)) == [7, 8, 9]
    assert values(dp.range(3).repeat(2)) == [0, 1, 2, 0, 1, 2]
    assert dp.range(10).take(3).cardinality() == 3
    assert dp.range(10).skip(12).cardinality() == 0
    assert dp.range(3).repeat().cardinality() == dp.INFINITE_CARDINALITY
    assert dp.range(3).repeat().take(7).cardinality() == 7
    assert values(dp.range(3).repeat().take(7)) == [0, 1, 2, 0, 1, 2, 0]
    assert dp.range(3).repeat(0).cardinality() == 0 and list(dp.range(3).repeat(0)) == []
    assert values(dp.range(5).take(-1)) == [0, 1, 2, 3, 4]
    assert list(dp.range(5).skip(-1)) == []


def test_take_never_computes_past_what_it_needs() -> None:
    seen = []
    ds = dp.range(1000).map(lambda x: seen.append(int(x)) or x).take(3)
    assert values(ds) == [0, 1, 2]
    assert seen == [0, 1, 2]
