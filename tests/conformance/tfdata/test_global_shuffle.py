"""tf.data's ``global_shuffle`` kernel tests
(``experimental/kernel_tests/global_shuffle_test.py``)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import datapipe as dp
from datapipe.errors import RandomAccessError

from ._support import VERIFY_FNS, verify_checkpoint


def _per_iteration(output, n):
    return [output[i : i + n] for i in range(0, len(output), n)]


@pytest.mark.parametrize("prefetch", [True, False])
@pytest.mark.parametrize("use_tensor_seed", [True, False])
@pytest.mark.parametrize("seed", [None, 42])
@pytest.mark.parametrize("dataset_range", [1, 100])
def test_range(dataset_range, seed, use_tensor_seed, prefetch):
    """experimental/kernel_tests/global_shuffle_test.py::GlobalShuffleTest.testRange (a
    tensor seed is a numpy int64 here)."""
    ds = dp.range(dataset_range)
    if prefetch:
        ds = ds.prefetch(buffer_size=dp.AUTOTUNE)
    seed = np.int64(seed) if seed and use_tensor_seed else seed
    output = [int(x) for x in ds.global_shuffle(seed=seed).repeat(3)]
    assert sorted(output) == sorted(list(range(dataset_range)) * 3)
    epochs = _per_iteration(output, dataset_range)
    assert all(sorted(e) == list(range(dataset_range)) for e in epochs)
    if dataset_range > 1:
        assert epochs[0] != epochs[1] and epochs[0] != epochs[2] and epochs[1] != epochs[2]


@pytest.mark.parametrize("seed", [None, 42])
@pytest.mark.parametrize("dataset_range", [1, 100])
def test_negative_range(dataset_range, seed):
    """experimental/kernel_tests/global_shuffle_test.py::GlobalShuffleTest.testNegativeRange."""
    values = list(range(dataset_range, -dataset_range, -1))
    output = [
        int(x)
        for x in dp.range(dataset_range, -dataset_range, -1).global_shuffle(seed=seed).repeat(3)
    ]
    assert sorted(output) == sorted(values * 3)
    epochs = _per_iteration(output, 2 * dataset_range)
    assert all(sorted(e) == sorted(values) for e in epochs)
    if dataset_range > 1:
        assert epochs[0] != epochs[1] and epochs[0] != epochs[2] and epochs[1] != epochs[2]


@pytest.mark.parametrize("seed", [None, 42])
@pytest.mark.parametrize("reshuffle", [True, False])
def test_reshuffle_repeat_epochs(reshuffle, seed):
    """experimental/kernel_tests/global_shuffle_test.py::GlobalShuffleTest.testReshuffleRepeatEpochs."""
    ds = dp.range(100).global_shuffle(seed=seed, reshuffle_each_iteration=reshuffle).repeat(2)
    output = [int(x) for x in ds]
    assert sorted(output) == sorted(list(range(100)) * 2)
    first, second = _per_iteration(output, 100)
    assert (first != second) == reshuffle


@pytest.mark.parametrize("seed", [None, 42])
@pytest.mark.parametrize("reshuffle", [True, False])
def test_reshuffle_iteration_epochs(reshuffle, seed):
    """experimental/kernel_tests/global_shuffle_test.py::GlobalShuffleTest.testReshuffleIterationEpochs
    (an unseeded pipeline too: one seed per pipeline object)."""
    ds = dp.range(100).global_shuffle(seed=seed, reshuffle_each_iteration=reshuffle)
    first, second = [int(x) for x in ds], [int(x) for x in ds]
    assert (first != second) == reshuffle
    assert [int(ds[i]) for i in range(100)] == first  # ds[i]: the first iteration's order


def test_empty_dataset():
    """experimental/kernel_tests/global_shuffle_test.py::GlobalShuffleTest.testEmptyDataset:
    tf.data refuses an empty input; here it shuffles to nothing (D-TF-3)."""
    assert list(dp.range(0).global_shuffle()) == []  # D-TF-3


def test_unsupported_dataset():
    """experimental/kernel_tests/global_shuffle_test.py::GlobalShuffleTest.testUnsupportedDataset."""
    with pytest.raises(RandomAccessError, match="lost random access at op 'shuffle'"):
        dp.range(100).shuffle(buffer_size=1).global_shuffle()


def _build(dataset_range, reshuffle_each_iteration, prefetch, seed, repeat=1):
    ds = dp.range(dataset_range)
    if prefetch:
        ds = ds.prefetch(buffer_size=dp.AUTOTUNE)
    ds = ds.global_shuffle(seed=seed, reshuffle_each_iteration=reshuffle_each_iteration)
    return ds.repeat(repeat) if repeat > 1 else ds


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("prefetch", [True, False])
@pytest.mark.parametrize("reshuffle_each_iteration", [True, False])
@pytest.mark.parametrize("dataset_range", [1, 10])
def test_checkpoint_range(verify_fn, dataset_range, reshuffle_each_iteration, prefetch):
    """experimental/kernel_tests/global_shuffle_test.py::GlobalShuffleCheckpointTest.testRange."""
    verify_checkpoint(
        lambda: _build(dataset_range, reshuffle_each_iteration, prefetch, 42),
        dataset_range,
        verify_fn,
        unordered=reshuffle_each_iteration,
    )


def _save(it):
    return pickle.dumps(it.get_state())


@pytest.mark.parametrize("prefetch", [True, False])
@pytest.mark.parametrize("reshuffle_each_iteration", [True, False])
@pytest.mark.parametrize("dataset_range", [6, 10])
def test_numpy_iterator_checkpoint_range(dataset_range, reshuffle_each_iteration, prefetch):
    """experimental/kernel_tests/global_shuffle_test.py::GlobalShuffleNumpyIteratorCheckpointTest.testRange:
    before each element, save; read it; restore the iterator itself; read it again."""
    it = _build(dataset_range, reshuffle_each_iteration, prefetch, 10).as_numpy_iterator()
    expected_elements = []
    for _ in range(dataset_range):
        checkpoint = _save(it)
        expected = int(next(it))
        it.set_state(pickle.loads(checkpoint))
        assert int(next(it)) == expected
        expected_elements.append(expected)
    assert sorted(expected_elements) == list(range(dataset_range))


@pytest.mark.parametrize("prefetch", [True, False])
@pytest.mark.parametrize("reshuffle_each_iteration", [True, False])
@pytest.mark.parametrize("dataset_range", [6, 10])
def test_numpy_iterator_checkpoint_range_and_repeat(
    dataset_range, reshuffle_each_iteration, prefetch
):
    """experimental/kernel_tests/global_shuffle_test.py::GlobalShuffleNumpyIteratorCheckpointTest.testRangeAndRepeat."""
    num_repeat = 3
    it = _build(
        dataset_range, reshuffle_each_iteration, prefetch, 10, num_repeat
    ).as_numpy_iterator()
    checkpoint = _save(it)
    first_pass = [int(next(it)) for _ in range(dataset_range * num_repeat)]
    it.set_state(pickle.loads(checkpoint))
    second_pass = []
    for _ in range(dataset_range * num_repeat):
        checkpoint = _save(it)
        expected = int(next(it))
        it.set_state(pickle.loads(checkpoint))
        assert int(next(it)) == expected
        second_pass.append(expected)
    assert sorted(second_pass) == sorted(list(range(dataset_range)) * num_repeat)
    assert first_pass == second_pass
