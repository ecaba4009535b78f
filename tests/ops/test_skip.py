"""``skip``: on a random-access chain the skipped elements are not computed; pushed below
``random_map`` it keeps the draws and resumes."""

from __future__ import annotations

import copy

from harness import values

import datapipe as dp


def test_skip_on_a_random_access_chain_does_not_compute_the_skipped_elements():
    # skip's docstring and docs/architecture.md: on a random-access chain the skipped elements are
    # never computed; before, skip streamed through all of them (10**12 here: a hang).
    calls: list[int] = []

    def f(x):
        calls.append(int(x))
        return x * 2

    assert values(dp.range(10**12).skip(10**12 - 3)) == [10**12 - 3, 10**12 - 2, 10**12 - 1]
    assert values(dp.range(100).map(f).skip(95)) == [190, 192, 194, 196, 198]
    shuffled = dp.range(10**12).global_shuffle(seed=1)
    assert values(shuffled.skip(10**12 - 2)) == values(shuffled.take(10**12).skip(10**12 - 2))
    assert calls == [95, 96, 97, 98, 99]


def test_skip_pushed_below_random_map_keeps_its_draws_and_resumes():
    def draw(x, rng):
        return int(rng.integers(10**6))

    opts = dp.Options(seed=5)
    whole = values(dp.range(50).random_map(draw).with_options(opts))
    ds = dp.range(50).random_map(draw).skip(20).with_options(opts)
    assert values(ds) == whole[20:]
    it = iter(dp.range(50).random_map(draw).skip(20).with_options(opts))
    [next(it) for _ in range(4)]
    state = copy.deepcopy(it.get_state())
    fresh = iter(dp.range(50).random_map(draw).skip(20).with_options(opts))
    fresh.set_state(state)
    assert values(fresh) == whole[24:]
