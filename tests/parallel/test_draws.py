"""datapipe._draws: what a function running in a map / random_map stage sees of the
element it computes (its position, the stage's key), on every executor: inline,
sequential, worker threads, worker processes, random access; through a shard below the
stage; across a resume; and nothing of it outside a stage or after a nested stage.
"""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp
from datapipe import _draws

EXECUTORS = {
    "sequential": {},
    "1 thread": {"num_parallel_calls": 1},
    "3 threads": {"num_parallel_calls": 3},
    "AUTOTUNE": {"num_parallel_calls": dp.AUTOTUNE},
    "2 processes": {"num_parallel_calls": 2, "executor": "process"},
}


def _position(x):
    return _draws.position()


def _two_draws(x):
    """What two layers (seeds 11 and None) and a second draw of the first would draw."""
    a, b, c = _draws.element_draw(11), _draws.element_draw(None), _draws.element_draw(11)
    return [a, b, c]


@pytest.mark.parametrize("args", EXECUTORS.values(), ids=EXECUTORS)
def test_a_function_in_map_sees_its_elements_position(args):
    assert list(dp.range(40).map(_position, **args)) == list(range(40))
    # a shard below the stage: the position in the source, as random_map keys it
    assert list(dp.range(40).shard(3, 1).map(_position, **args)) == list(range(1, 40, 3))
    # random_map passes the same position to the layers its function calls
    got = list(dp.range(12).random_map(lambda x, rng: _draws.position(), seed=1, **args))
    assert got == list(range(12))


def test_random_access_sees_the_requested_position():
    ds = dp.range(30).map(_position)
    assert [ds[i] for i in (7, 0, 29)] == [7, 0, 29]
    assert [ds.random_map(lambda x, rng: _draws.position(), seed=2)[i] for i in (4, 9)] == [4, 9]


def test_nothing_outside_a_stage_and_a_nested_stage_restores_the_outer_one():
    assert _draws.position() is None and _draws.element_draw(3) is None

    def outer(x):
        inner = list(dp.range(2).map(_position))  # a pipeline run inside the function
        return inner, _draws.position()

    assert list(dp.range(3).map(outer)) == [([0, 1], i) for i in range(3)]
    assert _draws.position() is None


@pytest.mark.parametrize("args", EXECUTORS.values(), ids=EXECUTORS)
def test_element_draws_are_a_function_of_seed_stage_and_position(args):
    options = dp.Options()
    options.seed = 4
    want = list(dp.range(16).with_options(options).map(_two_draws))
    got = list(dp.range(16).with_options(options).map(_two_draws, **args))
    assert got == want
    first, unseeded, second = zip(*want)
    assert [n for _, n in first] == [0] * 16 and [n for _, n in second] == [1] * 16
    assert [bits for bits, _ in second] == [bits for bits, _ in first]  # one stream
    assert [n for _, n in unseeded] == [0] * 16
    keys = {bits for bits, _ in first} | {bits for bits, _ in unseeded}
    assert len(keys) == 32  # per position, per seed
    assert all(0 <= bits < 2**64 for bits in keys)


def test_the_stage_key_follows_the_seed_rules():
    def draws(ds):
        return [d[0] for d in ds.map(_two_draws)]

    unseeded = draws(dp.range(8))
    assert [d[1] for d in dp.range(8).map(_two_draws)] == [None] * 8  # torch's generator
    assert draws(dp.range(8)) == unseeded  # no entropy: a seeded layer is reproducible
    options = dp.Options()
    options.seed = 1
    seeded = draws(dp.range(8).with_options(options))
    options.seed = 2
    assert seeded != draws(dp.range(8).with_options(options)) != unseeded
    # two maps of one pipeline draw from two keys
    two = dp.range(8).map(_two_draws).map(lambda a, b, c: (a, _draws.element_draw(11)))
    assert all(a != b for a, b in two)


RESUMED = {
    "sequential": {},
    "2 threads": {"num_parallel_calls": 2, "executor": "thread"},
    "2 processes": {"num_parallel_calls": 2, "executor": "process"},
}


@pytest.mark.parametrize("args", RESUMED.values(), ids=RESUMED)
def test_a_resumed_stage_draws_as_the_uninterrupted_one(args):
    def pipeline():
        return dp.range(60).shuffle(60, seed=3).map(_two_draws, **args)

    whole = list(pipeline())
    it = iter(pipeline())
    head = [next(it) for _ in range(23)]
    state = it.state_dict()
    it.close()
    again = iter(pipeline())
    again.load_state_dict(state)
    assert head + list(again) == whole


def test_element_rng_keeps_random_maps_stream():
    key = np.array([5, 6], dtype=np.uint64)
    ref = np.random.Generator(
        np.random.Philox(key=key, counter=np.array([0, 0, 9, 0], dtype=np.uint64))
    ).random(4)
    _draws.element_draw(1)  # nothing: outside a stage, and a separate Philox anyway
    assert np.array_equal(_draws.element_rng(key, 9).random(4), ref)
