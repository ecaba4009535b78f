"""``Dataset.random``: without a seed each iteration differs; ``Options.seed`` fixes it."""

from __future__ import annotations

import datapipe as dp


def test_random_without_seed_differs_per_iteration_and_follows_options_seed():
    ds = dp.Dataset.random().take(20)
    assert [int(x) for x in ds] != [int(x) for x in ds]
    seeded = dp.Dataset.random().take(20).with_options(dp.Options(seed=3))
    assert [int(x) for x in seeded] == [
        int(x) for x in dp.Dataset.random().take(20).with_options(dp.Options(seed=3))
    ]
