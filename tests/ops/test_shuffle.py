"""``shuffle`` (buffer): a reproducible permutation, reshuffling per epoch, the global
seed from ``Options``, references kept not copied."""

from __future__ import annotations

import numpy as np
from harness import values

import datapipe as dp


def test_shuffle_is_a_reproducible_permutation() -> None:
    a = values(dp.range(100).shuffle(10, seed=3))
    assert sorted(a) == list(range(100)) and a != list(range(100))
    assert a == values(dp.range(100).shuffle(10, seed=3))
    assert a != values(dp.range(100).shuffle(10, seed=4))


def test_shuffle_reshuffles_each_iteration_reproducibly() -> None:
    ds = dp.range(50).shuffle(50, seed=1)
    first, second = values(ds), values(ds)
    assert sorted(first) == sorted(second) == list(range(50)) and first != second
    again = dp.range(50).shuffle(50, seed=1)
    assert values(again) == first and values(again) == second
    fixed = dp.range(50).shuffle(50, seed=1, reshuffle_each_iteration=False)
    assert values(fixed) == values(fixed)
    rep = values(dp.range(20).shuffle(20, seed=2).repeat(2))
    assert rep[:20] != rep[20:] and sorted(rep[20:]) == list(range(20))


def test_global_seed_from_options_fixes_the_order() -> None:
    def run(seed):
        return values(dp.range(30).shuffle(30).with_options(dp.Options(seed=seed)))

    assert run(5) == run(5) and run(5) != run(6)


def test_shuffle_buffer_keeps_references_not_copies() -> None:
    src = np.arange(40, dtype=np.float64).reshape(10, 4)
    out = list(dp.from_tensor_slices(src).shuffle(4, seed=0))
    assert all(np.shares_memory(x, src) for x in out)


def test_unseeded_shuffle_without_reshuffle_keeps_its_order() -> None:
    # One rule for seeds: without any, each random op draws its entropy once, so
    # reshuffle_each_iteration=False repeats the order on every iter() (it drew a new one
    # per iter()), a pipeline built on top shuffles the same way, and another shuffle op
    # object draws another order.
    ds = dp.range(50).shuffle(50, reshuffle_each_iteration=False)
    first = values(ds)
    assert sorted(first) == list(range(50))
    assert values(ds) == first and values(ds.map(lambda x: x)) == first
    assert values(dp.range(50).shuffle(50, reshuffle_each_iteration=False)) != first
    g = dp.range(50).global_shuffle(reshuffle_each_iteration=False)
    assert values(g) == values(g) == [int(g[i]) for i in range(50)]
