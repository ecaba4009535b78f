"""``random_map``: reproducible per element (Philox keyed by index), the same with any
parallelism and in streaming or random access, redrawn per epoch, errors, resume."""

from __future__ import annotations

import numpy as np
import pytest
from harness import assert_resumes, values

import datapipe as dp
from datapipe.errors import PipelineError
from datapipe.ops.random_map import element_rng


def _noise(x, rng):
    return x, int(rng.integers(0, 2**31))


def test_random_map_is_reproducible_and_redraws_per_epoch():
    ds = dp.range(50).random_map(_noise, seed=7)
    a, b = values(ds), values(ds)  # two iterations: two epochs
    assert [x for x, _ in a] == list(range(50))
    assert a != b
    assert values(dp.range(50).random_map(_noise, seed=7)) == a
    assert values(dp.range(50).random_map(_noise, seed=8)) != a
    glob = dp.range(20).random_map(_noise).with_options(dp.Options(seed=1))
    assert values(glob) == values(dp.range(20).random_map(_noise).with_options(dp.Options(seed=1)))
    rep = values(dp.range(10).random_map(_noise, seed=7).repeat(2))
    assert [r for _, r in rep[:10]] != [r for _, r in rep[10:]]


@pytest.mark.parametrize("npc", [2, 4, dp.AUTOTUNE])
def test_random_map_same_results_with_any_parallelism(npc):
    ref = values(dp.range(3000).random_map(_noise, seed=3))
    par = values(dp.range(3000).random_map(_noise, seed=3, num_parallel_calls=npc))
    assert par == ref
    loose = dp.range(3000).random_map(_noise, seed=3, num_parallel_calls=npc, deterministic=False)
    assert sorted(values(loose)) == ref


def test_random_map_keys_by_index_in_streaming_and_random_access():
    streamed = dict(values(dp.range(40).random_map(_noise, seed=5)))
    shuffled = dp.range(40).random_map(_noise, seed=5).global_shuffle(seed=1)
    assert shuffled._random_access_breaker() is None
    assert dict(values(shuffled)) == streamed  # element i got the same draws either way
    # In the iterator world (after a filter) the index is the count consumed.
    after_filter = dp.range(80).filter(lambda x: x % 2 == 0).random_map(_noise, seed=5)
    draws = [r for _, r in values(after_filter)]
    assert draws == [streamed[i] for i in range(40)]


def test_random_map_generator_is_philox_keyed_by_index():
    key = np.array([12, 34], dtype=np.uint64)
    got = element_rng(key, 9).random(5)
    ref = np.random.Generator(np.random.Philox(key=key, counter=[0, 0, 9, 0])).random(5)
    np.testing.assert_array_equal(got, ref)
    assert not np.array_equal(element_rng(key, 10).random(5), ref)
    rngs = [element_rng(key, 9).random(3) for _ in range(2)]
    np.testing.assert_array_equal(rngs[0], rngs[1])  # re-keying starts the stream afresh


def test_random_map_unpacks_tuples_and_locates_errors():
    ds = dp.zip(dp.range(3), dp.range(10, 13)).random_map(lambda a, b, rng: a + b, seed=0)
    assert values(ds) == [10, 12, 14]

    def bad(x, rng):
        if x == 3:
            raise ValueError("no threes")
        return x

    it = iter(dp.range(6).random_map(bad, seed=0))
    assert [int(next(it)) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(PipelineError, match="random_map at element 3: ValueError: no threes"):
        next(it)
    with pytest.raises(TypeError, match="map_func must be callable"):
        dp.range(3).random_map(5)


def test_random_map_resume():
    ds = dp.range(30).random_map(_noise, seed=2)
    assert_resumes(ds, range(0, 31, 4))
    assert_resumes(dp.range(30).filter(lambda x: x % 3 > 0).random_map(_noise, seed=2), [0, 7, 20])
    assert_resumes(dp.range(300).random_map(_noise, seed=2, num_parallel_calls=2), [0, 33, 300])
    assert dp.range(30).random_map(_noise).cardinality() == 30
