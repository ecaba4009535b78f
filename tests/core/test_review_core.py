"""Review of the core graph: defects found by using it as a tf.data user would."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import datapipe as dp


def ints(it) -> list[int]:
    return [int(x) for x in it]


@pytest.mark.parametrize(
    "build",
    [
        lambda: dp.range(40).global_shuffle(),
        lambda: dp.range(40).random_map(lambda x, rng: int(rng.integers(10**6))),
        lambda: dp.range(40).shuffle(8).repeat(2),
    ],
    ids=["global_shuffle", "random_map", "shuffle"],
)
def test_resume_without_a_seed_continues_the_same_stream(build):
    # No Options(seed): the global seed is fresh entropy per iter(), so the state must carry
    # it, or a resumed global_shuffle draws another permutation (duplicates, lost elements).
    it = iter(build())
    [next(it) for _ in range(7)]
    state = copy.deepcopy(it.get_state())
    rest = ints(it)
    resumed = iter(build())
    resumed.set_state(state)
    assert ints(resumed) == rest


def test_resumed_global_shuffle_without_seed_is_a_permutation():
    it = iter(dp.range(30).global_shuffle())
    head = ints(next(it) for _ in range(11))
    resumed = iter(dp.range(30).global_shuffle())
    resumed.set_state(copy.deepcopy(it.get_state()))
    assert sorted(head + ints(resumed)) == list(range(30))
