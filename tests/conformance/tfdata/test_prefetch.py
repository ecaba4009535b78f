"""tf.data's ``prefetch`` kernel tests (``kernel_tests/prefetch_test.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp

from ._support import VERIFY_FNS, assert_produces, verify_checkpoint


@pytest.mark.parametrize("buffer_size", [-1, None, 0, 42])
def test_buffer_size(buffer_size):
    """kernel_tests/prefetch_test.py::PrefetchTest.testBufferSize (-1 is AUTOTUNE; None
    means AUTOTUNE too)."""
    assert_produces(
        dp.range(10).prefetch(buffer_size=buffer_size), [np.int64(i) for i in range(10)]
    )


@pytest.mark.parametrize("buffer_size", [-2, -42])
def test_invalid_buffer_size(buffer_size):
    """kernel_tests/prefetch_test.py::PrefetchTest.testInvalidBufferSize."""
    with pytest.raises(ValueError, match="prefetch: buffer_size must be >= 0 or AUTOTUNE"):
        dp.range(10).prefetch(buffer_size=buffer_size)


def test_prefetch_cancellation(threads):
    """kernel_tests/prefetch_test.py::PrefetchTest.testPrefetchCancellation: a prefetch
    whose function never returns does not hold the consumer: closing the iterator
    returns and its thread stops once the function gives up (here: a stop flag)."""
    stop = []

    def map_py_fn(x):
        while not stop:
            pass
        return x

    it = iter(dp.range(10).map(map_py_fn).prefetch(3))
    import threading

    consumer = threading.Thread(target=lambda: next(it, None), daemon=True)
    consumer.start()
    consumer.join(0.5)
    assert consumer.is_alive()  # waiting on the busy function
    stop.append(True)
    consumer.join(5.0)
    it.close()
    assert not consumer.is_alive()
    assert threads.settle(5.0) == []


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint(verify_fn):
    """kernel_tests/prefetch_test.py::PrefetchCheckpointTest.test."""
    verify_checkpoint(lambda: dp.range(100).prefetch(10), 100, verify_fn)


@pytest.mark.parametrize("index", [10, 11])
def test_random_access_invalid_index(index):
    """kernel_tests/prefetch_test.py::PrefetchRandomAccessTest.testInvalidIndex (index -1
    is the last element here, D-TF-1)."""
    ds = dp.range(10).prefetch(buffer_size=5)
    with pytest.raises(IndexError):
        ds[index]
    assert ds[-1] == 9  # D-TF-1


@pytest.mark.parametrize("index", [-2, 0, 1])
def test_random_access_empty_dataset(index):
    """kernel_tests/prefetch_test.py::PrefetchRandomAccessTest.testEmptyDataset."""
    with pytest.raises(IndexError):
        dp.from_tensor_slices([]).prefetch(buffer_size=5)[index]


@pytest.mark.parametrize("buffer_size", [0, 5, 10])
@pytest.mark.parametrize("elements", [10, 50, 100])
def test_random_access_multiple_combinations(elements, buffer_size):
    """kernel_tests/prefetch_test.py::PrefetchRandomAccessTest.testMultipleCombinations."""
    ds = dp.range(elements).prefetch(buffer_size=buffer_size)
    n = ds.cardinality()
    assert [int(ds[i]) for i in range(n)] == list(range(elements))
    with pytest.raises(IndexError):
        ds[n]
