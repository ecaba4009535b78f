"""``global_shuffle``: the Feistel permutation over random access, reproducible and reshuffled
per epoch only when asked, a state of one integer, edge sizes, chains, the op that breaks
random access named, and a resume without a seed that stays a permutation."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from harness import assert_resumes, values
from hypothesis import given, settings
from hypothesis import strategies as st

import datapipe as dp
from datapipe.errors import RandomAccessError
from datapipe.ops.global_shuffle import FeistelPermutation


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 5000), st.integers(0, 2**63 - 1))
def test_feistel_is_a_bijection(n, seed):
    keys = np.random.SeedSequence(seed).generate_state(6, np.uint64)
    perm = FeistelPermutation(n, keys)(np.arange(n))
    assert perm.dtype == np.int64
    assert sorted(perm.tolist()) == list(range(n))


def test_feistel_positions_are_uniform():
    # Over many keys, every element lands at every position about equally often.
    n, trials = 10, 4000
    counts = np.zeros((n, n))
    for t in range(trials):
        keys = np.random.SeedSequence(t).generate_state(6, np.uint64)
        counts[np.arange(n), FeistelPermutation(n, keys)(np.arange(n))] += 1
    expected = trials / n
    assert np.abs(counts - expected).max() < 0.2 * expected  # ~6 standard deviations
    keys = np.random.SeedSequence(1).generate_state(6, np.uint64)
    big = FeistelPermutation(100_000, keys)(np.arange(100_000))
    assert abs(np.corrcoef(np.arange(100_000), big)[0, 1]) < 0.02


def test_global_shuffle_is_a_reproducible_permutation():
    ds = dp.range(1000).global_shuffle(seed=42)
    first = values(ds)
    assert sorted(first) == list(range(1000)) and first != list(range(1000))
    assert values(dp.range(1000).global_shuffle(seed=42)) == first  # same seed, same epoch
    assert values(dp.range(1000).global_shuffle(seed=43)) != first
    assert ds.cardinality() == 1000 and ds.element_spec == dp.TensorSpec((), "int64")
    glob = dp.range(100).global_shuffle().with_options(dp.Options(seed=3))
    assert values(glob) == values(dp.range(100).global_shuffle().with_options(dp.Options(seed=3)))


def test_global_shuffle_reshuffles_each_iteration_only_when_asked():
    ds = dp.range(200).global_shuffle(seed=1)
    a, b = values(ds), values(ds)
    assert a != b and sorted(a) == sorted(b) == list(range(200))
    fixed = dp.range(200).global_shuffle(seed=1, reshuffle_each_iteration=False)
    assert values(fixed) == values(fixed)
    two = values(ds.repeat(2))
    assert two[:200] != two[200:] and sorted(two[200:]) == list(range(200))
    two_fixed = values(fixed.repeat(2))
    assert two_fixed[:200] == two_fixed[200:]


def test_global_shuffle_state_is_one_integer_and_resumes():
    ds = dp.range(10**9).global_shuffle(seed=5).map(lambda x: x * 2)
    it = iter(ds)
    head = [int(next(it)) for _ in range(10)]
    assert len(set(head)) == 10 and all(0 <= x < 2 * 10**9 and x % 2 == 0 for x in head)
    state = it.get_state()
    # The pipeline's own state (below the outer iterator's read-ahead buffer) is a few
    # integers, nothing n-sized: map's count and global_shuffle's position.
    assert len(json.dumps(state["root"])) < 100
    assert json.loads(json.dumps(state["root"])) == state["root"]
    shuffle_state = state["root"]["input"]
    assert set(shuffle_state) == {"index"} and isinstance(shuffle_state["index"], int)
    nxt = [int(next(it)) for _ in range(5)]
    fresh = iter(ds)
    fresh.set_state(state)
    assert [int(next(fresh)) for _ in range(5)] == nxt
    assert_resumes(dp.range(40).global_shuffle(seed=2), range(0, 41, 3))


def test_global_shuffle_same_order_whatever_the_read_pattern():
    # Larger than the 4096-position block cache: reads straddle blocks differently.
    ds = dp.range(10_000).global_shuffle(seed=8, reshuffle_each_iteration=False)
    one_by_one = values(ds)
    assert sorted(one_by_one) == list(range(10_000))
    in_batches = [v for b in ds.batch(1000) for v in b.tolist()]
    assert in_batches == one_by_one
    nested = ds.global_shuffle(seed=2)  # the outer op reads the inner one out of order
    assert sorted(values(nested)) == list(range(10_000)) and values(nested) != one_by_one


def test_global_shuffle_edge_sizes():
    assert values(dp.range(0).global_shuffle(seed=1)) == []
    assert values(dp.range(1).global_shuffle(seed=1)) == [0]
    assert sorted(values(dp.range(2).global_shuffle(seed=1))) == [0, 1]


def _chains():
    """(name, chain without shuffle, chain with global_shuffle somewhere inside)."""
    f = lambda x: x * 10 + 1  # noqa: E731
    base = dp.range(24)
    return [
        ("map", base.map(f), base.global_shuffle(seed=1).map(f)),
        ("map-before", base.map(f), base.map(f).global_shuffle(seed=1)),
        ("take", base.take(10), base.take(10).global_shuffle(seed=1)),
        ("skip", base.skip(10), base.skip(10).global_shuffle(seed=1)),
        ("repeat", base.repeat(2), base.repeat(2).global_shuffle(seed=1)),
        ("zip", dp.zip(base, base.map(f)), dp.zip(base, base.map(f)).global_shuffle(seed=1)),
        ("shard", base.shard(3, 1), base.shard(3, 1).global_shuffle(seed=1)),
        ("concatenate", base.concatenate(base), base.concatenate(base).global_shuffle(seed=1)),
    ]


@pytest.mark.parametrize("name, plain, shuffled", _chains(), ids=[c[0] for c in _chains()])
def test_global_shuffle_over_random_access_chains(name, plain, shuffled):
    assert shuffled._random_access_breaker() is None
    out, ref = values(shuffled), values(plain)
    assert sorted(out) == sorted(ref) and len(out) == len(ref) == shuffled.cardinality()
    assert out != ref
    assert_resumes(shuffled, [0, 1, 5, len(ref)])


def test_ops_after_global_shuffle_keep_random_access():
    sh = dp.range(30).global_shuffle(seed=4)
    perm = values(sh)
    batched = sh.map(lambda x: x + 100).batch(4).skip(1).take(3)
    assert batched._random_access_breaker() is None
    assert values(batched) == [[p + 100 for p in perm[i : i + 4]] for i in (4, 8, 12)]
    sharded = sh.shard(2, 0)
    assert sharded._random_access_breaker() is None
    assert values(sharded) == perm[0::2]
    assert values(dp.zip(sh, dp.range(30))) == list(zip(perm, range(30)))
    twice = dp.range(30).global_shuffle(seed=4).repeat(2)
    assert twice._random_access_breaker() is None and len(values(twice)) == 60
    # A second global_shuffle over the first one is still a permutation.
    assert sorted(values(sh.global_shuffle(seed=9))) == list(range(30))


def test_global_shuffle_without_random_access_names_the_breaker():
    with pytest.raises(RandomAccessError) as info:
        dp.range(10).filter(lambda x: x > 2).map(lambda x: x).global_shuffle()
    assert str(info.value) == (
        "global_shuffle: the input lost random access at op 'filter'; use "
        "shuffle(buffer_size) or move global_shuffle before 'filter'"
    )
    assert isinstance(info.value, TypeError)
    with pytest.raises(RandomAccessError, match="at op 'shuffle'"):
        dp.range(10).shuffle(4).global_shuffle()
    with pytest.raises(RandomAccessError, match="at op 'repeat'"):
        dp.range(10).repeat().global_shuffle()


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 300), st.integers(0, 2**31), st.integers(1, 1000))
def test_shuffles_are_permutations_reproducible_from_the_seed(n, seed, buffer_size):
    for make in (
        lambda: dp.range(n).global_shuffle(seed=seed),
        lambda: dp.range(n).shuffle(buffer_size, seed=seed),
    ):
        a, b = values(make()), values(make())
        assert a == b and sorted(a) == list(range(n))


def test_resumed_global_shuffle_without_seed_is_a_permutation():
    it = iter(dp.range(30).global_shuffle())
    head = values(next(it) for _ in range(11))
    resumed = iter(dp.range(30).global_shuffle())
    resumed.set_state(copy.deepcopy(it.get_state()))
    assert sorted(head + values(resumed)) == list(range(30))
