"""tf.data's ``shuffle`` kernel tests (``kernel_tests/shuffle_test.py``), against datapipe."""

from __future__ import annotations

import collections
import functools
import pickle

import numpy as np
import pytest

import datapipe as dp
from datapipe.errors import PipelineError

from ._support import VERIFY_FNS, as_value, verify_checkpoint

COMPONENTS = (np.array([1, 2, 3, 4]), np.array([5, 6, 7, 8]), np.array([9.0, 10.0, 11.0, 12.0]))


def _as_list(ds):
    return [tuple(as_value(c).tolist() for c in x) for x in ds]


def test_basic():
    """kernel_tests/shuffle_test.py::ShuffleTest.testBasic."""

    def dataset_fn(count=5, buffer_size=None, seed=0):
        repeat_dataset = dp.from_tensor_slices(COMPONENTS).repeat(count)
        if buffer_size:
            shuffle_dataset = repeat_dataset.shuffle(buffer_size, seed)
            assert [s.shape for s in shuffle_dataset.element_spec] == [
                c.shape[1:] for c in COMPONENTS
            ]
            return shuffle_dataset
        return repeat_dataset

    unshuffled = _as_list(dataset_fn())
    assert len(unshuffled) == 20
    shuffled = _as_list(dataset_fn(buffer_size=100, seed=37))
    assert sorted(unshuffled) == sorted(shuffled)
    assert shuffled == _as_list(dataset_fn(buffer_size=100, seed=37))  # same seed
    different = _as_list(dataset_fn(buffer_size=100, seed=137))
    assert shuffled != different and sorted(shuffled) == sorted(different)
    small_buffer = _as_list(dataset_fn(buffer_size=2, seed=37))
    assert sorted(unshuffled) == sorted(small_buffer)
    assert _as_list(dataset_fn(count=0, buffer_size=100, seed=37)) == []


def test_seed_zero():
    """kernel_tests/shuffle_test.py::ShuffleTest.testSeedZero: a Python and a numpy
    (tensor) zero seed give the same order."""
    a = [int(x) for x in dp.range(10).shuffle(10, seed=0)]
    b = [int(x) for x in dp.range(10).shuffle(10, seed=np.int64(0))]
    assert a == b and sorted(a) == list(range(10))


def test_default_arguments():
    """kernel_tests/shuffle_test.py::ShuffleTest.testDefaultArguments."""
    it = iter(dp.from_tensor_slices([0, 1, 2, 3, 4]).shuffle(5).repeat())
    counts = collections.Counter(int(next(it)) for _ in range(50))
    assert counts == {i: 10 for i in range(5)}


@pytest.mark.parametrize(
    "graph_seed,op_seed", [(38, None), (None, 42), (38, 42)], ids=["graph", "op", "both"]
)
@pytest.mark.parametrize("reshuffle", [True, False])
def test_shuffle_seed(reshuffle, graph_seed, op_seed):
    """kernel_tests/shuffle_test.py::ShuffleTest.testShuffleSeed: with a global seed
    (``Options.seed``, tf's graph seed), an op seed or both, two separately built
    pipelines give the same 30 elements."""
    results = []
    for _ in range(2):
        ds = dp.range(10).shuffle(10, seed=op_seed, reshuffle_each_iteration=reshuffle).repeat(3)
        if graph_seed is not None:
            ds = ds.with_options(dp.Options(seed=graph_seed))
        results.append([int(x) for x in ds])
    assert len(results[0]) == 30
    assert results[0] == results[1]


@pytest.mark.parametrize("seed", [None, 42])
@pytest.mark.parametrize("reshuffle", [True, False])
def test_reshuffle_repeat_epochs(reshuffle, seed):
    """kernel_tests/shuffle_test.py::ShuffleTest.testReshuffleRepeatEpochs."""
    ds = dp.range(10).shuffle(10, seed=seed, reshuffle_each_iteration=reshuffle).repeat(2)
    out = [int(x) for x in ds]
    assert (out[:10] == out[10:]) == (not reshuffle)


@pytest.mark.parametrize("seed", [None, 42])
@pytest.mark.parametrize("reshuffle", [True, False])
def test_reshuffle_iteration_epochs(reshuffle, seed):
    """kernel_tests/shuffle_test.py::ShuffleTest.testReshuffleIterationEpochs: two
    iterations of one dataset: the same order exactly when it does not reshuffle, with a
    seed or without."""
    ds = dp.range(10).shuffle(10, seed=seed, reshuffle_each_iteration=reshuffle)
    first_epoch = [int(x) for x in ds]
    second_epoch = [int(x) for x in ds]
    assert (first_epoch == second_epoch) == (not reshuffle)


def test_shuffle_v2_resource_capture():
    """kernel_tests/shuffle_test.py::ShuffleTest.testShuffleV2ResourceCapture."""
    ids = dp.range(10).shuffle(1)

    def interleave_fn(dataset, _):
        return dataset

    ds = dp.range(1).interleave(functools.partial(interleave_fn, ids))
    assert [int(x) for x in ds] == list(range(10))


@pytest.mark.parametrize("seed", [None, 42])
@pytest.mark.parametrize("reshuffle", [True, False])
def test_reshuffle_separate_transformations(reshuffle, seed):
    """kernel_tests/shuffle_test.py::ShuffleTest.testReshuffleSeparateTransformations:
    two shuffle ops over one dataset give different orders exactly when unseeded."""
    ds = dp.range(10)
    first = [int(x) for x in ds.shuffle(10, seed=seed, reshuffle_each_iteration=reshuffle)]
    second = [int(x) for x in ds.shuffle(10, seed=seed, reshuffle_each_iteration=reshuffle)]
    assert (first != second) == (seed is None)


def test_empty_dataset():
    """kernel_tests/shuffle_test.py::ShuffleTest.testEmptyDataset: the only element fails
    (an assertion in the map); the cache completes empty, so the repeat then ends."""

    def map_fn(x):
        assert x == 0, "assert_equal"
        return x

    ds = dp.from_tensors(1).map(map_fn).cache().shuffle(buffer_size=10).repeat()
    it = iter(ds)
    with pytest.raises(PipelineError, match="AssertionError: assert_equal"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
@pytest.mark.parametrize("buffer_size", [1, 3, 5, 8, 10])
@pytest.mark.parametrize("reshuffle_each_iteration", [True, False])
def test_checkpoint(verify_fn, reshuffle_each_iteration, buffer_size):
    """kernel_tests/shuffle_test.py::ShuffleCheckpointTest.test."""

    def build():
        ds = dp.range(5).shuffle(
            buffer_size, seed=55, reshuffle_each_iteration=reshuffle_each_iteration
        )
        return ds.repeat(2)

    verify_checkpoint(build, 10, verify_fn)


@pytest.mark.parametrize("buffer_size", [1, 3, 5, 8, 10])
@pytest.mark.parametrize("reshuffle_each_iteration", [True, False])
def test_checkpoint_multiple_iterators(reshuffle_each_iteration, buffer_size):
    """kernel_tests/shuffle_test.py::ShuffleCheckpointTest.testMultipleIterators: two
    iterators of one unseeded dataset, saved at the start; restored, each gives again
    what it gave."""
    ds = (
        dp.range(5)
        .shuffle(buffer_size, seed=None, reshuffle_each_iteration=reshuffle_each_iteration)
        .repeat(2)
    )
    iterators = [iter(ds), iter(ds)]
    saved = [pickle.loads(pickle.dumps(it.get_state())) for it in iterators]
    expected = [[int(x) for x in it] for it in iterators]
    restored = [iter(ds), iter(ds)]
    for it, state in zip(restored, saved):
        it.set_state(state)
    assert [[int(x) for x in it] for it in restored] == expected
    assert all(sorted(e) == sorted(list(range(5)) * 2) for e in expected)
