"""tf.data's ``skip`` kernel tests (``kernel_tests/skip_test.py``), against datapipe."""

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
    """kernel_tests/skip_test.py::SkipTest.testBasic."""
    components = (np.arange(10),)
    ds = dp.from_tensor_slices(components).skip(count)
    assert [s.shape for s in ds.element_spec] == [c.shape[1:] for c in components]
    start_range = min(count, 10) if count != -1 else 10
    assert_produces(ds, [tuple(components[0][i : i + 1]) for i in range(start_range, 10)])


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("count,num_outputs", [(50, 50), (200, 0), (100, 0), (-1, 0), (0, 100)])
def test_checkpoint(verify_fn, count, num_outputs):
    """kernel_tests/skip_test.py::SkipDatasetCheckpointTest.test."""
    verify_checkpoint(lambda: dp.range(100).skip(count), num_outputs, verify_fn)


@pytest.mark.parametrize("index", [2, 3])
def test_random_access_invalid_index(index):
    """kernel_tests/skip_test.py::SkipRandomAccessTest.testInvalidIndex.

    Index -1 is the last element here (D-TF-1), so it is tested as such."""
    ds = dp.range(10).skip(8)
    with pytest.raises(IndexError):
        ds[index]
    assert ds[-1] == 9  # D-TF-1


@pytest.mark.parametrize("index", [-1, 0])
def test_random_access_empty_dataset(index):
    """kernel_tests/skip_test.py::SkipRandomAccessTest.testEmptyDataset."""
    ds = dp.from_tensor_slices([]).skip(8)
    with pytest.raises(IndexError):
        ds[index]


def test_random_access_basic():
    """kernel_tests/skip_test.py::SkipRandomAccessTest.testBasic."""
    ds = dp.range(11).skip(3)
    for i in range(8):
        assert ds[i] == i + 3


@pytest.mark.parametrize("skip", [-2, -1])
def test_random_access_negative_skip(skip):
    """kernel_tests/skip_test.py::SkipRandomAccessTest.testNegativeSkip.

    ``skip(-1)`` skips everything as in tf.data; other negative counts are refused when
    the pipeline is built (D-TF-2)."""
    if skip == -1:
        with pytest.raises(IndexError):
            dp.range(11).skip(skip)[0]
    else:
        with pytest.raises(ValueError, match="skip: count must be >= 0, or -1"):
            dp.range(11).skip(skip)


@pytest.mark.parametrize("skip", [5, 8])
def test_random_access_skip_greater_than_num_elements(skip):
    """kernel_tests/skip_test.py::SkipRandomAccessTest.testSkipGreaterThanNumElements."""
    with pytest.raises(IndexError):
        dp.range(4).skip(skip)[0]


@pytest.mark.parametrize("skip", [-1, 0, 5, 15])
@pytest.mark.parametrize("elements", [0, 5, 10])
def test_random_access_multiple_combinations(elements, skip):
    """kernel_tests/skip_test.py::SkipRandomAccessTest.testMultipleCombinations."""
    ds = dp.range(elements).skip(skip)
    n = ds.cardinality()
    assert n == (0 if skip == -1 else max(0, elements - skip))
    for i in range(n):
        assert ds[i] == i + skip


@pytest.mark.parametrize("reshuffle_each_iteration", [True, False])
@pytest.mark.parametrize("seed", [None, 42])
@pytest.mark.parametrize("repetitions", [1, 2])
@pytest.mark.parametrize("count", [0, 2])
def test_global_shuffle(count, repetitions, seed, reshuffle_each_iteration):
    """kernel_tests/skip_test.py::SkipGlobalShuffleTest.testSkip."""
    ds = shuffled_after(dp.range(10).skip(count), repetitions, seed, reshuffle_each_iteration)
    assert_globally_shuffled(ds, list(range(count, 10)) * repetitions)


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("reshuffle_each_iteration", [True, False])
@pytest.mark.parametrize("repetitions", [1, 2])
@pytest.mark.parametrize("count", [0, 2])
def test_global_shuffle_checkpoint(verify_fn, count, repetitions, reshuffle_each_iteration):
    """kernel_tests/skip_test.py::SkipGlobalShuffleCheckpointTest.testSkip."""

    def build():
        return shuffled_after(dp.range(10).skip(count), repetitions, 42, reshuffle_each_iteration)

    verify_checkpoint(
        build, (10 - count) * repetitions, verify_fn, unordered=reshuffle_each_iteration
    )


@pytest.mark.parametrize("skip", [-2, -1])
def test_global_shuffle_negative_skip(skip):
    """kernel_tests/skip_test.py::SkipGlobalShuffleTest.testNegativeSkip.

    tf.data refuses to globally shuffle a negative skip; here ``skip(-1)`` is an empty
    dataset that shuffles to nothing and other negative counts fail at build (D-TF-2)."""
    if skip == -1:
        assert list(dp.range(10).skip(skip).global_shuffle()) == []
    else:
        with pytest.raises(ValueError, match="skip: count"):
            dp.range(10).skip(skip).global_shuffle()
