"""tf.data's ``shard`` kernel tests (``kernel_tests/shard_test.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint


@pytest.mark.parametrize(
    "n,num_shards,index,expected",
    [
        (10, 5, 2, [2, 7]),
        (10, 5, 0, [0, 5]),
        (1, 5, 2, []),
        (10, 7, 5, [5]),
        (10, 5, 4, [4, 9]),
        (10, 4, 3, [3, 7]),
        (10, 20, 5, [5]),
    ],
    ids=[
        "testSimpleCase",
        "testOffsetZero",
        "testIteratorEndsBeforeFirstElem",
        "testLargerWorkerPool",
        "testIndexEqualsNumShards",
        "testIndexEqualsNumShards2",
        "testNumShardsLargerThanDataset",
    ],
)
def test_shard(n, num_shards, index, expected):
    """kernel_tests/shard_test.py::ShardTest.testSimpleCase, testOffsetZero,
    testIteratorEndsBeforeFirstElem, testLargerWorkerPool, testIndexEqualsNumShards,
    testIndexEqualsNumShards2, testNumShardsLargerThanDataset (one case each)."""
    assert_produces(dp.range(n).shard(num_shards, index), [np.int64(v) for v in expected])


def test_nested_data():
    """kernel_tests/shard_test.py::ShardTest.testNestedData."""
    ds = dp.zip((dp.range(10), dp.range(10, 0, -1))).shard(5, 2)
    assert_produces(ds, [(np.int64(2), np.int64(8)), (np.int64(7), np.int64(3))])


@pytest.mark.parametrize(
    "num_shards,index,match",
    [(5, 7, "index must be in"), (5, -3, "index must be in"), (-3, 1, "num_shards must be >= 1"),
     (0, 1, "num_shards must be >= 1")],
    ids=["testOffsetGreaterNumShards", "testNegativeOffset", "testNegativeNumShards",
         "testZeroNumShards"],
)  # fmt: skip
def test_invalid(num_shards, index, match):
    """kernel_tests/shard_test.py::ShardTest.testOffsetGreaterNumShards, testNegativeOffset,
    testNegativeNumShards, testZeroNumShards (one case each; raised when built)."""
    with pytest.raises(ValueError, match=f"shard: {match}"):
        dp.range(10).shard(num_shards, index)


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize(
    "elems,num_shards,index", [(e, n, i) for e in (10, 100) for n in (2, 5) for i in (0, 1)]
)
def test_checkpoint(verify_fn, elems, num_shards, index):
    """kernel_tests/shard_test.py::ShardCheckpointTest.test."""
    verify_checkpoint(
        lambda: dp.range(elems).shard(num_shards, index), elems // num_shards, verify_fn
    )


@pytest.mark.parametrize("index", [2, 3, 4])
def test_random_access_invalid_index(index):
    """kernel_tests/shard_test.py::ShardRandomAccessTest.testInvalidIndex (index -1 is the
    last element here, D-TF-1)."""
    ds = dp.range(4).shard(num_shards=2, index=0)
    with pytest.raises(IndexError):
        ds[index]
    assert ds[-1] == 2  # D-TF-1


def test_random_access_empty_dataset():
    """kernel_tests/shard_test.py::ShardRandomAccessTest.testEmptyDataset."""
    with pytest.raises(IndexError):
        dp.from_tensor_slices([]).shard(num_shards=2, index=1)[0]


def test_random_access_num_shards_and_index_less_than_num_elements():
    """kernel_tests/shard_test.py::ShardRandomAccessTest.testNumShardsAndIndexLessThanNumElements."""
    ds = dp.range(10).shard(5, 0)
    assert (ds[0], ds[1]) == (0, 5)
    with pytest.raises(IndexError):
        ds[2]


def test_random_access_num_shards_greater_than_num_elements_index_less():
    """kernel_tests/shard_test.py::ShardRandomAccessTest.testNumShardsGreaterThanNumElementsIndexLess."""
    ds = dp.range(7).shard(8, 3)
    assert ds[0] == 3
    with pytest.raises(IndexError):
        ds[1]


def test_random_access_num_shards_and_index_greater_than_num_elements():
    """kernel_tests/shard_test.py::ShardRandomAccessTest.testNumShardsAndIndexGreaterThanNumElements."""
    with pytest.raises(IndexError):
        dp.range(13).shard(23, 21)[0]


@pytest.mark.parametrize("index", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("num_shards", [5, 7, 10])
@pytest.mark.parametrize("elements", [0, 10, 50])
def test_random_access_multiple_combinations(elements, num_shards, index):
    """kernel_tests/shard_test.py::ShardRandomAccessTest.testMultipleCombinations."""
    ds = dp.range(elements).shard(num_shards=num_shards, index=index)
    n = ds.cardinality()
    assert n == len(range(index, elements, num_shards))
    for i in range(n):
        assert ds[i] == range(elements)[index + num_shards * i]
    with pytest.raises(IndexError):
        ds[n]


GS_CASES = [
    (n, i, s, r)
    for n in (1, 3, 5)
    for i in (0, 1, 2, 4)
    if i < n
    for s in (None, 42)
    for r in (True, False)
]


@pytest.mark.parametrize("num_shards,shard_index,seed,reshuffle_each_iteration", GS_CASES)
def test_global_shuffle(num_shards, shard_index, seed, reshuffle_each_iteration):
    """kernel_tests/shard_test.py::ShardGlobalShuffleTest.testShard (upstream returns early
    for shard_index >= num_shards: those cases are left out)."""
    ds = dp.range(100).shard(num_shards, shard_index).prefetch(buffer_size=dp.AUTOTUNE)
    ds = ds.global_shuffle(seed=seed, reshuffle_each_iteration=reshuffle_each_iteration)
    expected = list(range(shard_index, 100, num_shards))
    output = [int(x) for x in ds]
    assert sorted(output) == expected
    assert output != expected


GS_CKPT = [(n, i, r) for n in (1, 3) for i in (0, 1, 2) if i < n for r in (True, False)]


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("num_shards,shard_index,reshuffle_each_iteration", GS_CKPT)
def test_global_shuffle_checkpoint(verify_fn, num_shards, shard_index, reshuffle_each_iteration):
    """kernel_tests/shard_test.py::ShardGlobalShuffleCheckpointTest.testShard."""

    def build():
        ds = dp.range(10).shard(num_shards, shard_index).prefetch(buffer_size=dp.AUTOTUNE)
        return ds.global_shuffle(seed=42, reshuffle_each_iteration=reshuffle_each_iteration)

    verify_checkpoint(
        build,
        len(range(shard_index, 10, num_shards)),
        verify_fn,
        unordered=reshuffle_each_iteration,
    )
