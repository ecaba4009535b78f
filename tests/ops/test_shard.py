"""``shard``: elements, cardinality, argument errors, random access, resume."""

from __future__ import annotations

import pytest
from harness import assert_resumes, consume_with_errors, values

import datapipe as dp


def test_shard_elements_and_cardinality() -> None:
    assert [values(dp.range(10).shard(3, i)) for i in range(3)] == [
        [0, 3, 6, 9],
        [1, 4, 7],
        [2, 5, 8],
    ]
    assert [dp.range(10).shard(3, i).cardinality() for i in range(3)] == [4, 3, 3]
    assert dp.range(3).repeat().shard(2, 1).cardinality() == dp.INFINITE_CARDINALITY
    streamed = dp.range(10).filter(lambda x: True)
    assert [values(streamed.shard(3, i)) for i in range(3)] == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert values(streamed.shard(20, 7)) == [7]
    assert values(streamed.shard(20, 12)) == []
    assert values(dp.range(10).repeat().shard(4, 1).take(4)) == [1, 5, 9, 3]


def test_shard_errors_name_both_numbers() -> None:
    with pytest.raises(
        ValueError,
        match=r"shard: index must be in \[0, num_shards\), got index=3 "
        "with num_shards=3",
    ):
        dp.range(5).shard(3, 3)
    with pytest.raises(ValueError, match="got index=-1 with num_shards=2"):
        dp.range(5).shard(2, -1)
    with pytest.raises(ValueError, match="shard: num_shards must be >= 1, got 0"):
        dp.range(5).shard(0, 0)


def test_shard_random_access_computes_only_its_elements() -> None:
    seen: list[int] = []
    ds = dp.range(12).map(lambda x: seen.append(int(x)) or x * 2).shard(4, 1)
    assert ds._random_access_breaker() is None
    assert values(ds) == [2, 10, 18]
    assert seen == [1, 5, 9] or seen[1:] == [1, 5, 9]  # (map may infer its spec from element 0)


def test_shard_random_access_error_delivers_good_elements_and_moves_on() -> None:
    ds = dp.range(10).map(lambda x: 10 // (int(x) - 3)).shard(2, 1)  # inputs 1, 3, 5, 7, 9
    out, errors = consume_with_errors(ds)
    assert out == [-5, 5, 2, 1]
    assert errors == ["map at element 3: ZeroDivisionError: integer division or modulo by zero"]


def test_shard_resume() -> None:
    assert_resumes(dp.range(23).filter(lambda x: True).shard(4, 2))
    assert_resumes(dp.range(23).shard(4, 3))
