"""tf.data's ``cache`` kernel tests (``kernel_tests/cache_test.py``): the file cache
(``cache(filename)``) and the memory cache (``cache()``)."""

from __future__ import annotations

import functools
import os
import pickle

import numpy as np
import pytest

import datapipe as dp

from ._support import assert_produces

COMPONENTS = (np.array([1, 2, 3, 4]), np.array([5, 6, 7, 8]), np.array([9.0, 10.0, 11.0, 12.0]))


@pytest.fixture
def cache_prefix(tmp_path):
    return str(tmp_path / "cache")


def _elements(it, n):
    return [tuple(int(c) if c.dtype.kind == "i" else float(c) for c in next(it)) for _ in range(n)]


def test_file_cache_dataset_passthrough(cache_prefix):
    """kernel_tests/cache_test.py::FileCacheTest.testCacheDatasetPassthrough."""

    def dataset_fn(count=5, filename=None):
        repeat_dataset = dp.from_tensor_slices(COMPONENTS).repeat(count)
        return repeat_dataset.cache(filename) if filename else repeat_dataset

    assert tuple(s.shape for s in dataset_fn().element_spec) == tuple(
        c.shape[1:] for c in COMPONENTS
    )
    it = iter(dataset_fn())
    elements = _elements(it, 20)
    with pytest.raises(StopIteration):
        next(it)
    it = iter(dataset_fn(filename=cache_prefix))
    cached = _elements(it, 20)
    with pytest.raises(StopIteration):
        next(it)
    assert cached == elements
    # An empty upstream: the elements come from the cache file.
    it = iter(dataset_fn(count=0, filename=cache_prefix))
    assert _elements(it, 20) == cached
    with pytest.raises(StopIteration):
        next(it)
    # An empty upstream and a missing cache file: the end at once.
    with pytest.raises(StopIteration):
        next(iter(dataset_fn(count=0, filename=cache_prefix + "nonsense")))


def test_file_cache_concurrent_writers(cache_prefix):
    """kernel_tests/cache_test.py::FileCacheTest.testConcurrentWriters: tf.data refuses a
    second writer (AlreadyExistsError); here both write their own temporary file and the
    first complete pass is the cache (D-TF-14)."""
    cache_dataset1 = dp.from_tensor_slices(COMPONENTS).cache(cache_prefix)
    cache_dataset2 = dp.from_tensor_slices(COMPONENTS).cache(cache_prefix)
    it1, it2 = iter(cache_dataset1), iter(cache_dataset2)
    assert _elements(it1, 1) == [(1, 5, 9.0)]
    assert _elements(it2, 1) == [(1, 5, 9.0)]  # D-TF-14: no AlreadyExistsError
    assert _elements(it1, 1) == [(2, 6, 10.0)]
    rest1, rest2 = list(it1), list(it2)
    assert len(rest1) == 2 and len(rest2) == 3
    assert len(list(dp.from_tensor_slices(COMPONENTS).repeat(0).cache(cache_prefix))) == 4


def test_file_cache_concurrent_readers(cache_prefix):
    """kernel_tests/cache_test.py::FileCacheTest.testConcurrentReaders."""
    cache_dataset1 = dp.from_tensor_slices(COMPONENTS).cache(cache_prefix)
    cache_dataset2 = dp.from_tensor_slices(COMPONENTS).cache(cache_prefix)
    it1 = iter(cache_dataset1)
    elements = _elements(it1, 4)
    with pytest.raises(StopIteration):
        next(it1)
    it1, it2 = iter(cache_dataset1), iter(cache_dataset2)
    itr1, itr2 = [], []
    itr2 += _elements(it2, 1)
    itr1 += _elements(it1, 1)
    itr2 += _elements(it2, 1)
    itr1 += _elements(it1, 1)
    itr1 += _elements(it1, 1)  # intentionally reversing the order
    itr2 += _elements(it2, 1)
    itr1 += _elements(it1, 1)
    itr2 += _elements(it2, 1)
    with pytest.raises(StopIteration):
        next(it2)
    with pytest.raises(StopIteration):
        next(it1)
    assert itr1 == elements and itr2 == elements


def test_file_cache_reading_past_end_of_sequence(cache_prefix):
    """kernel_tests/cache_test.py::FileCacheTest.testReadingPastEndOfSequence."""
    ds = dp.range(10).cache(cache_prefix).map(lambda a: a).batch(4).repeat(2)
    assert_produces(ds, [np.array(b) for b in [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]] * 2])


def test_file_cache_cleaning_up_cache_files(cache_prefix):
    """kernel_tests/cache_test.py::FileCacheTest.testCleaningUpCacheFiles: iterators
    dropped after 0, 3, 10, 12 and 15 steps leave no half-written cache behind."""
    for i in [0, 3, 10, 12, 15]:
        it = iter(dp.range(10).cache(cache_prefix))
        for _ in range(i):
            try:
                next(it)
            except StopIteration:
                break
        it.close()
        leftovers = [f for f in os.listdir(os.path.dirname(cache_prefix)) if f != "cache"]
        assert leftovers == []
    assert [int(x) for x in dp.range(0).cache(cache_prefix)] == list(range(10))


def test_memory_cache_dataset_passthrough():
    """kernel_tests/cache_test.py::MemoryCacheTest.testCacheDatasetPassthrough (a Python
    value captured by the function in place of the TF variable)."""
    repeat_count = [10]
    ds = dp.range(3).flat_map(lambda x: dp.from_tensors(x).repeat(repeat_count[0]))
    cached_next, uncached_next = iter(ds.cache().repeat(2)), iter(ds.repeat(2))
    for i in range(3):
        for _ in range(10):
            assert next(cached_next) == i
            assert next(uncached_next) == i
    repeat_count[0] = 0
    with pytest.raises(StopIteration):
        next(uncached_next)
    for i in range(3):
        for _ in range(10):
            assert next(cached_next) == i
    with pytest.raises(StopIteration):
        next(cached_next)


def test_memory_cache_empty_cache_reading():
    """kernel_tests/cache_test.py::MemoryCacheTest.testEmptyCacheReading."""
    assert_produces(dp.from_tensor_slices(COMPONENTS).repeat(0).cache(), [])


def test_memory_cache_concurrent_readers():
    """kernel_tests/cache_test.py::MemoryCacheTest.testConcurrentReaders."""
    d1 = dp.range(5).cache().map(lambda x: x + 1)
    d2 = dp.range(5).cache().map(lambda x: x + 6)
    get_next1 = iter(d1)
    assert [next(get_next1) for _ in range(3)] == [1, 2, 3]
    get_next2 = iter(d2)
    assert [next(get_next2) for _ in range(2)] == [6, 7]
    assert next(get_next1) == 4
    assert [next(get_next2), next(get_next1)] == [8, 5]
    assert [next(get_next2) for _ in range(2)] == [9, 10]
    with pytest.raises(StopIteration):
        next(get_next2)
    with pytest.raises(StopIteration):
        next(get_next1)


def test_memory_cache_take_repeat():
    """kernel_tests/cache_test.py::MemoryCacheTest.testCacheTakeRepeat."""
    ds = dp.range(10).cache().take(5).repeat(2)
    assert_produces(ds, [np.int64(v) for v in [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]])


def test_memory_cache_repeat_epochs():
    """kernel_tests/cache_test.py::MemoryCacheTest.testCacheRepeatEpochs: the map runs
    once per element in the first epoch, not at all in the second. It may run up to a
    chunk ahead of the consumer (D-TF-8)."""
    counter = [0]

    def increment_fn(x):
        counter[0] += 1
        return x

    it = iter(dp.range(10).map(increment_fn).cache().repeat(2))
    for i in range(10):
        assert i <= counter[0] <= 10  # D-TF-8
        assert next(it) == i
    for i in range(10):
        assert next(it) == i
        assert counter[0] == 10
    with pytest.raises(StopIteration):
        next(it)


def test_memory_cache_iteration_epochs():
    """kernel_tests/cache_test.py::MemoryCacheTest.testCacheIterationEpochs (up to a chunk
    ahead in the first epoch: D-TF-8)."""
    counter = [0]

    def increment_fn(x):
        counter[0] += 1
        return x

    ds = dp.range(10).map(increment_fn).cache()
    for i, elem in enumerate(ds):
        assert elem == i
        assert i + 1 <= counter[0] <= 10  # D-TF-8
    assert counter[0] == 10
    for i, elem in enumerate(ds):
        assert counter[0] == 10
        assert elem == i


def test_memory_cache_v2_resource_capture():
    """kernel_tests/cache_test.py::MemoryCacheTest.testCacheV2ResourceCapture."""
    ids = dp.range(10).cache()
    ds = dp.range(1).interleave(functools.partial(lambda dataset, _: dataset, ids))
    assert [int(x) for x in ds] == list(range(10))


def test_memory_cache_v2_concurrent_iterators():
    """kernel_tests/cache_test.py::MemoryCacheTest.testCacheV2ConcurrentIterators."""
    ds = dp.range(10).cache()
    it1, it2 = iter(ds), iter(ds)
    for i in range(10):
        assert next(it1) == i
        assert next(it2) == i


def test_memory_cache_known_cardinality():
    """kernel_tests/cache_test.py::MemoryCacheTest.testCacheKnownCardinality: all ten
    elements read (the end not reached) complete the cache."""
    ds = dp.range(10).shuffle(10, reshuffle_each_iteration=True).cache()
    it = iter(ds)
    results = [next(it) for _ in range(10)]
    it = iter(ds)
    assert [next(it) for _ in range(10)] == results


def test_memory_cache_checkpoint_finished_cache():
    """kernel_tests/cache_test.py::MemoryCacheTest.testCheckpointFinishedCache."""
    it = iter(dp.range(10).cache())
    assert [int(next(it)) for _ in range(10)] == list(range(10))
    it.set_state(pickle.loads(pickle.dumps(it.get_state())))
    with pytest.raises(StopIteration):
        next(it)


class _Checkpoints:
    """``CheckpointTestBase.gen_outputs``: build the dataset afresh, restore the saved
    state (``ckpt_saved``), produce ``num_outputs`` elements, saving the state at the
    ``break_points`` and at the end (``save_checkpoint_at_end``)."""

    def __init__(self, ds_fn):
        self.ds_fn, self.saved = ds_fn, None

    def gen_outputs(self, break_points, num_outputs, ckpt_saved=False, save_at_end=True):
        it = iter(self.ds_fn())
        if ckpt_saved:
            it.set_state(pickle.loads(self.saved))
        out = []
        for k in range(num_outputs):
            if k in break_points:
                self.saved = pickle.dumps(it.get_state())
            out.append(int(next(it)))
        if save_at_end:
            self.saved = pickle.dumps(it.get_state())
        return out


@pytest.fixture(params=[True, False], ids=["memory", "file"])
def ckpt(request, tmp_path):
    filename = "" if request.param else str(tmp_path / "test")
    return _Checkpoints(lambda: dp.range(10).cache(filename).repeat(3)), request.param


EXPECTED = list(range(10)) * 3


def test_checkpoint_before_one_epoch(ckpt):
    """kernel_tests/cache_test.py::CacheCheckpointTest.testCheckpointBeforeOneEpoch."""
    c, _ = ckpt
    outputs = c.gen_outputs([], 5)
    assert outputs == list(range(5))
    outputs += c.gen_outputs([], 30 - 5, ckpt_saved=True)
    assert outputs == EXPECTED


def test_checkpoint_before_one_epoch_then_run_few_steps(ckpt):
    """kernel_tests/cache_test.py::CacheCheckpointTest.testCheckpointBeforeOneEpochThenRunFewSteps."""
    c, _ = ckpt
    assert c.gen_outputs([5], 8, save_at_end=False) == list(range(8))
    outputs = list(range(5)) + c.gen_outputs([], 30 - 5, ckpt_saved=True)
    assert outputs == EXPECTED


def test_checkpoint_after_one_epoch(ckpt):
    """kernel_tests/cache_test.py::CacheCheckpointTest.testCheckpointAfterOneEpoch."""
    c, _ = ckpt
    outputs = c.gen_outputs([], 15)
    assert outputs == list(range(10)) + list(range(5))
    outputs += c.gen_outputs([], 30 - 15, ckpt_saved=True)
    assert outputs == EXPECTED


def test_checkpoint_after_one_epoch_then_run_few_steps(ckpt):
    """kernel_tests/cache_test.py::CacheCheckpointTest.testCheckpointAfterOneEpochThenRunFewSteps."""
    c, _ = ckpt
    assert c.gen_outputs([15], 18, save_at_end=False) == list(range(10)) + list(range(8))
    outputs = list(range(10)) + list(range(5)) + c.gen_outputs([], 30 - 15, ckpt_saved=True)
    assert outputs == EXPECTED


def test_checkpoint_before_one_epoch_but_run_complete_epoch(ckpt):
    """kernel_tests/cache_test.py::CacheCheckpointTest.testCheckpointBeforeOneEpochButRunCompleteEpoch."""
    c, _ = ckpt
    assert c.gen_outputs([5], 13, save_at_end=False) == list(range(10)) + list(range(3))
    outputs = list(range(5)) + c.gen_outputs([], 30 - 5, ckpt_saved=True)
    assert outputs == EXPECTED


def test_checkpoint_unused_writer_iterator(ckpt):
    """kernel_tests/cache_test.py::CacheCheckpointTest.testCheckpointUnusedWriterIterator."""
    c, _ = ckpt
    assert c.gen_outputs([], 0) == []
    assert c.gen_outputs([], 30, ckpt_saved=True) == EXPECTED


def test_checkpoint_unused_midway_writer_iterator(ckpt):
    """kernel_tests/cache_test.py::CacheCheckpointTest.testCheckpointUnusedMidwayWriterIterator."""
    c, _ = ckpt
    outputs = c.gen_outputs([], 5)
    outputs += c.gen_outputs([], 0, ckpt_saved=True)
    assert outputs == list(range(5))
    outputs += c.gen_outputs([], 30 - 5, ckpt_saved=True)
    assert outputs == EXPECTED


def test_unused_checkpoint_error(ckpt):
    """kernel_tests/cache_test.py::CacheCheckpointTest.testUnusedCheckpointError: a new
    iterator that does not restore the state reads everything again. tf.data's file
    cache refuses it (AlreadyExistsError: a partial cache shard); here each pass writes
    its own temporary file (D-TF-14)."""
    c, _ = ckpt
    assert c.gen_outputs([], 5) == list(range(5))
    assert c.gen_outputs([], 30) == EXPECTED  # D-TF-14 for the file cache


def test_ignore_checkpoint_if_cache_written(ckpt):
    """kernel_tests/cache_test.py::CacheCheckpointTest.testIgnoreCheckpointIfCacheWritten."""
    c, _ = ckpt
    assert c.gen_outputs([], 15) == list(range(10)) + list(range(5))
    assert c.gen_outputs([], 30) == EXPECTED
