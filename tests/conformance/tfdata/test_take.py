"""tf.data's ``take`` kernel tests (``kernel_tests/take_test.py``), against datapipe."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp

from ._support import (
    VERIFY_FNS,
    assert_globally_shuffled,
    assert_produces,
    shuffled_after,
    verify_checkpoint,
)


@pytest.mark.parametrize("count", [-1, 0, 4, 10, 25])
def test_basic(count):
    """kernel_tests/take_test.py::TakeTest.testBasic."""
    components = (np.arange(10),)
    ds = dp.from_tensor_slices(components).take(count)
    assert [s.shape for s in ds.element_spec] == [c.shape[1:] for c in components]
    num_output = min(count, 10) if count != -1 else 10
    assert_produces(ds, [tuple(components[0][i : i + 1]) for i in range(num_output)])


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("count,num_outputs", [(50, 50), (200, 100), (100, 100), (-1, 100), (0, 0)])
def test_checkpoint(verify_fn, count, num_outputs):
    """kernel_tests/take_test.py::TakeDatasetCheckpointTest.test."""
    verify_checkpoint(lambda: dp.range(100).take(count), num_outputs, verify_fn)


@pytest.mark.parametrize("index", [3, 4])
def test_random_access_invalid_index(index):
    """kernel_tests/take_test.py::TakeRandomAccessTest.testInvalidIndex.

    Index -1 is the last element here (D-TF-1), so it is tested as such."""
    ds = dp.range(10).take(3)
    with pytest.raises(IndexError):
        ds[index]
    assert ds[-1] == 2  # D-TF-1: negative indices count from the end


@pytest.mark.parametrize("index", [-2, 0, 1])
def test_random_access_empty_dataset(index):
    """kernel_tests/take_test.py::TakeRandomAccessTest.testEmptyDataset."""
    ds = dp.from_tensor_slices([]).take(5)
    with pytest.raises(IndexError):
        ds[index]


@pytest.mark.parametrize("count", [-1, 0, 4, 10, 25])
def test_random_access_basic(count):
    """kernel_tests/take_test.py::TakeRandomAccessTest.testBasic."""
    ds = dp.range(10).take(count)
    num_output = min(count, 10) if count != -1 else 10
    for i in range(num_output):
        assert ds[i] == i
    with pytest.raises(IndexError):
        ds[num_output]


@pytest.mark.parametrize("reshuffle_each_iteration", [True, False])
@pytest.mark.parametrize("seed", [None, 42])
@pytest.mark.parametrize("repetitions", [1, 2])
@pytest.mark.parametrize("count", [20, 200])
def test_global_shuffle(count, repetitions, seed, reshuffle_each_iteration):
    """kernel_tests/take_test.py::TakeGlobalShuffleTest.test."""
    ds = shuffled_after(dp.range(100).take(count), repetitions, seed, reshuffle_each_iteration)
    assert_globally_shuffled(ds, list(range(0, min(count, 100))) * repetitions)


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("reshuffle_each_iteration", [True, False])
@pytest.mark.parametrize("repetitions", [1, 2])
@pytest.mark.parametrize("count", [2, 20])
def test_global_shuffle_checkpoint(verify_fn, count, repetitions, reshuffle_each_iteration):
    """kernel_tests/take_test.py::TakeGlobalShuffleCheckpointTest.test."""

    def build():
        return shuffled_after(dp.range(10).take(count), repetitions, 42, reshuffle_each_iteration)

    verify_checkpoint(
        build, min(count, 10) * repetitions, verify_fn, unordered=reshuffle_each_iteration
    )
