"""``Dataset.random``: without a seed, one sequence per dataset object (tf.data's: the op
draws its seed once), a new one per object; ``Options.seed`` fixes it across objects."""

from __future__ import annotations

import datapipe as dp


def test_random_without_seed_is_one_sequence_per_object_and_follows_options_seed():
    ds = dp.Dataset.random().take(20)
    first = [int(x) for x in ds]
    assert first == [int(x) for x in ds]  # rerandomize_each_iteration=None: every epoch
    assert first != [int(x) for x in dp.Dataset.random().take(20)]  # a new op object
    again = dp.Dataset.random(rerandomize_each_iteration=True).take(20)
    assert [int(x) for x in again] != [int(x) for x in again]
    seeded = dp.Dataset.random().take(20).with_options(dp.Options(seed=3))
    assert [int(x) for x in seeded] == [
        int(x) for x in dp.Dataset.random().take(20).with_options(dp.Options(seed=3))
    ]
