"""tf.data's ``repeat`` kernel tests (``kernel_tests/repeat_test.py``), against datapipe."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp
from datapipe.errors import RandomAccessError

from ._support import VERIFY_FNS, assert_produces, assert_same, verify_checkpoint

COMPONENTS = (np.array(1), np.array([1, 2, 3]), np.array(37.0))


@pytest.mark.parametrize("count", [0, 3, 7])
def test_finite_repeat(count):
    """kernel_tests/repeat_test.py::RepeatTest.testFiniteRepeat."""
    ds = dp.from_tensors(COMPONENTS).repeat(count)
    assert [s.shape for s in ds.element_spec] == [c.shape for c in COMPONENTS]
    assert_produces(ds, [COMPONENTS] * count)


def test_infinite_repeat():
    """kernel_tests/repeat_test.py::RepeatTest.testInfiniteRepeat."""
    ds = dp.from_tensors(COMPONENTS).repeat(-1)
    assert [s.shape for s in ds.element_spec] == [c.shape for c in COMPONENTS]
    assert ds.cardinality() == dp.INFINITE_CARDINALITY
    it = iter(ds)
    for _ in range(17):
        assert_same(next(it), COMPONENTS)


def test_repeat_repeat():
    """kernel_tests/repeat_test.py::RepeatTest.testRepeatRepeat."""
    inner_count, outer_count = 7, 14
    ds = dp.from_tensors(COMPONENTS).repeat(inner_count).repeat(outer_count)
    assert [s.shape for s in ds.element_spec] == [c.shape for c in COMPONENTS]
    assert_produces(ds, [COMPONENTS] * (inner_count * outer_count))


def _repeat_dataset(num_elements, num_epochs, num_outputs=None):
    ds = dp.range(num_elements).repeat(num_epochs)
    if num_outputs:
        ds = dp.zip((ds, dp.range(num_outputs)))
    return ds


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize(
    "num_elements,num_epochs,zipped,num_outputs",
    [(10, 10, None, 100), (10, 0, None, 0), (10, -1, 100, 100), (0, -1, None, 0)],
    ids=["testFiniteRepeat", "testEmptyRepeat", "testInfiniteRepeat", "testInfiniteEmptyRepeat"],
)
def test_checkpoint(verify_fn, num_elements, num_epochs, zipped, num_outputs):
    """kernel_tests/repeat_test.py::RepeatDatasetCheckpointTest.testFiniteRepeat,
    testEmptyRepeat, testInfiniteRepeat, testInfiniteEmptyRepeat (one case each)."""
    verify_checkpoint(
        lambda: _repeat_dataset(num_elements, num_epochs, zipped), num_outputs, verify_fn
    )


@pytest.mark.parametrize("index", [6, 7])
def test_random_access_invalid_index(index):
    """kernel_tests/repeat_test.py::RepeatRandomAccessTest.testInvalidIndex (index -1 is
    the last element here, D-TF-1)."""
    ds = dp.from_tensor_slices([1, 2, 3]).repeat(2)
    with pytest.raises(IndexError):
        ds[index]
    assert ds[-1] == 3  # D-TF-1


@pytest.mark.parametrize("index", [-1, 0])
def test_random_access_empty_dataset(index):
    """kernel_tests/repeat_test.py::RepeatRandomAccessTest.testEmptyDataset."""
    with pytest.raises(IndexError):
        dp.from_tensor_slices([]).repeat(2)[index]


@pytest.mark.parametrize("count", [0, 3, 8])
@pytest.mark.parametrize("elements", [0, 5, 10])
def test_random_access_finite_repeat(elements, count):
    """kernel_tests/repeat_test.py::RepeatRandomAccessTest.testFiniteRepeat."""
    ds = dp.range(elements).repeat(count)
    expected = np.tile(np.arange(0, elements, 1, dtype=np.int64), count)
    assert len(ds) == elements * count
    for i in range(elements * count):
        assert ds[i] == expected[i]


@pytest.mark.parametrize("count_2", [3, 4, 5])
@pytest.mark.parametrize("count_1", [0, 1, 2])
@pytest.mark.parametrize("elements", [0, 3, 5])
def test_random_access_repeat_repeat(elements, count_1, count_2):
    """kernel_tests/repeat_test.py::RepeatRandomAccessTest.testRepeatRepeat."""
    ds = dp.range(elements).repeat(count_1).repeat(count_2)
    expected = np.tile(np.arange(0, elements, 1, dtype=np.int64), count_1 * count_2)
    assert [int(x) for x in ds[:]] == expected.tolist()


@pytest.mark.parametrize("count", [None, -1])
@pytest.mark.parametrize("elements", [3, 5])
def test_random_access_infinite_repeat(elements, count):
    """kernel_tests/repeat_test.py::RepeatRandomAccessTest.testInfiniteRepeat (count -2,
    also infinite in tf.data, is refused at build: D-TF-2)."""
    ds = dp.range(elements).repeat(count=count)
    with pytest.raises(RandomAccessError, match="lost random access at op 'repeat'"):
        ds[0]
    with pytest.raises(ValueError, match="repeat: count must be"):
        dp.range(elements).repeat(count=-2)


@pytest.mark.parametrize("reshuffle_each_iteration", [True, False])
@pytest.mark.parametrize("seed", [None, 19])
@pytest.mark.parametrize("repetitions", [1, 27])
def test_global_shuffle(repetitions, seed, reshuffle_each_iteration):
    """kernel_tests/repeat_test.py::RepeatGlobalShuffleTest.testRepeat."""
    ds = dp.range(41).repeat(repetitions).prefetch(buffer_size=dp.AUTOTUNE)
    ds = ds.global_shuffle(seed=seed, reshuffle_each_iteration=reshuffle_each_iteration)
    expected = list(range(41)) * repetitions
    output = [int(x) for x in ds]
    assert sorted(output) == sorted(expected)
    assert output != expected
    per_iteration = [output[i : i + 41] for i in range(0, len(output), 41)]
    for i in range(1, repetitions):
        assert per_iteration[i] != list(range(41))
        assert per_iteration[i] != per_iteration[i - 1]


@pytest.mark.parametrize("repetitions", [None, 0])
def test_global_shuffle_invalid_dataset(repetitions):
    """kernel_tests/repeat_test.py::RepeatGlobalShuffleTest.testInvalidDataset: an
    infinite repeat has no random access to shuffle. ``repeat(0)`` is an empty dataset
    with random access here, which shuffles to nothing (tf.data refuses it too: D-TF-3)."""
    ds = dp.range(10).repeat(repetitions).prefetch(buffer_size=dp.AUTOTUNE)
    if repetitions is None:
        with pytest.raises(RandomAccessError, match="lost random access at op 'repeat'"):
            ds.global_shuffle()
    else:
        assert list(ds.global_shuffle()) == []


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("reshuffle_each_iteration", [True, False])
@pytest.mark.parametrize("repetitions", [1, 27])
def test_global_shuffle_checkpoint(verify_fn, repetitions, reshuffle_each_iteration):
    """kernel_tests/repeat_test.py::RepeatGlobalShuffleCheckpointTest.testRepeat."""

    def build():
        ds = dp.range(41).repeat(repetitions).prefetch(buffer_size=dp.AUTOTUNE)
        return ds.global_shuffle(seed=42, reshuffle_each_iteration=reshuffle_each_iteration)

    verify_checkpoint(build, 41 * repetitions, verify_fn, unordered=reshuffle_each_iteration)
