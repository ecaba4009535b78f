"""tf.data's ``group_by_window`` kernel tests (``kernel_tests/group_by_window_test.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp
from datapipe.errors import PipelineError

from ._support import assert_produces, verify_checkpoint

RNG = np.random.default_rng(5)  # upstream draws np.random.randint: any values will do


def _as_string(v, n):
    """``tf.fill([n], tf.strings.as_string(v))``."""
    return np.array([str(int(v))] * n, dtype=object)


def _dynamic_pad(bucket, window):
    return dp.zip((dp.from_tensors(bucket), window.padded_batch(32, ([], [None], [3]))))


def _map_fn(v):
    return v, np.full([int(v)], v), _as_string(v, 3)


def test_single_bucket():
    """kernel_tests/group_by_window_test.py::GroupByWindowTest.testSingleBucket."""
    ds = dp.from_tensor_slices(np.arange(32)).map(_map_fn)
    ds = ds.group_by_window(lambda x, y, z: 0, lambda k, bucket: _dynamic_pad(k, bucket), 32)
    which_bucket, values = next(iter(ds))
    assert which_bucket == 0
    expected_unk_int64 = np.zeros((32, 31)).astype(np.int64)
    for i in range(32):
        expected_unk_int64[i, :i] = i
    np.testing.assert_array_equal(values[0], np.arange(32, dtype=np.int64))
    np.testing.assert_array_equal(values[1], expected_unk_int64)
    np.testing.assert_array_equal(
        values[2].astype(str), np.vstack(3 * [np.arange(32).astype(str)]).T
    )


def test_even_odd_buckets():
    """kernel_tests/group_by_window_test.py::GroupByWindowTest.testEvenOddBuckets."""
    ds = dp.from_tensor_slices(np.arange(64)).map(_map_fn)
    ds = ds.group_by_window(
        lambda x, y, z: np.int64(x % 2), lambda k, bucket: _dynamic_pad(k, bucket), 32
    )
    it = iter(ds)
    (even_bucket, even), (odd_bucket, odd) = next(it), next(it)
    assert len(even) == len(odd) == 3
    assert (even_bucket, odd_bucket) == (0, 1)
    for first, (bucket, values) in ((0, (even_bucket, even)), (1, (odd_bucket, odd))):
        assert bucket == first
        expected_unk_int64 = np.zeros((32, 31 * 2 + first)).astype(np.int64)
        for i in range(32):
            expected_unk_int64[i, : 2 * i + first] = 2 * i + first
        np.testing.assert_array_equal(values[0], np.arange(first, 64 + first, 2, dtype=np.int64))
        np.testing.assert_array_equal(values[1], expected_unk_int64)
        expected_vec3 = np.vstack(3 * [np.arange(first, 64 + first, 2).astype(str)]).T
        np.testing.assert_array_equal(values[2].astype(str), expected_vec3)


def test_even_odd_buckets_filter_out_all_odd():
    """kernel_tests/group_by_window_test.py::GroupByWindowTest.testEvenOddBucketsFilterOutAllOdd."""

    def map_fn(v):
        return {"x": v, "y": np.full([int(v)], v), "z": _as_string(v, 3)}

    def dynamic_pad_fn(bucket, window):
        padded = window.padded_batch(32, {"x": [], "y": [None], "z": [3]})
        return dp.zip((dp.from_tensors(bucket), padded))

    ds = dp.from_tensor_slices(np.arange(128)).map(map_fn).filter(lambda d: d["x"] % 2 == 0)
    ds = ds.group_by_window(lambda d: np.int64(d["x"] % 2), dynamic_pad_fn, 32)
    it = iter(ds)
    (b0, even0), (b1, even1) = next(it), next(it)
    assert (b0, b1) == (0, 0)
    np.testing.assert_array_equal(even0["x"], np.arange(0, 64, 2, dtype=np.int64))
    np.testing.assert_array_equal(even1["x"], np.arange(64, 128, 2, dtype=np.int64))


def test_dynamic_window_size():
    """kernel_tests/group_by_window_test.py::GroupByWindowTest.testDynamicWindowSize."""
    window_sizes = np.array([5, 10], dtype=np.int64)
    ds = dp.from_tensor_slices(np.arange(100).astype(np.int64)).group_by_window(
        key_func=lambda x: x % 2,
        reduce_func=lambda _, xs: xs.batch(20),
        window_size=None,
        window_size_func=lambda key: window_sizes[key],
    )
    batches = 0
    for result in ds:
        is_even, is_odd = all(x % 2 == 0 for x in result), all(x % 2 == 1 for x in result)
        assert is_even or is_odd
        assert result.shape[0] == (5 if is_even else 10)
        batches += 1
    assert batches == 15


def test_simple():
    """kernel_tests/group_by_window_test.py::GroupByWindowTest.testSimple."""
    components = RNG.integers(100, size=(200,)).astype(np.int64)
    ds = dp.from_tensor_slices(components).map(lambda x: x * x)
    ds = ds.group_by_window(lambda x: x % 2, lambda _, xs: xs.batch(4), 4)
    counts = []
    for result in ds:
        assert all(x % 2 == 0 for x in result) or all(x % 2 == 1 for x in result)
        counts.append(result.shape[0])
    assert sum(counts) == len(components)
    num_full_batches = len([c for c in counts if c == 4])
    assert num_full_batches >= 24
    assert all(c == 4 for c in counts[:num_full_batches])


def test_immediate_output():
    """kernel_tests/group_by_window_test.py::GroupByWindowTest.testImmediateOutput."""
    components = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 0, 0, 2, 2, 0, 0], dtype=np.int64)
    ds = dp.from_tensor_slices(components).repeat(-1)
    ds = ds.group_by_window(lambda x: x % 3, lambda _, xs: xs.batch(4), 4)
    it = iter(ds)
    for _ in range(3):
        for v in (0, 1, 2, 0):
            assert next(it).tolist() == [v] * 4


def test_small_groups():
    """kernel_tests/group_by_window_test.py::GroupByWindowTest.testSmallGroups."""
    components = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0], dtype=np.int64)
    ds = dp.from_tensor_slices(components)
    ds = ds.group_by_window(lambda x: x % 2, lambda _, xs: xs.batch(4), 4)
    assert_produces(ds, [np.array(v) for v in ([0, 0, 0, 0], [1, 1, 1, 1], [0, 0, 0], [1])])


def test_empty():
    """kernel_tests/group_by_window_test.py::GroupByWindowTest.testEmpty (refused when the
    pipeline is built: D-TF-15)."""
    with pytest.raises(ValueError, match="group_by_window: window_size must be >= 1, got 0"):
        dp.range(4).group_by_window(lambda _: 0, lambda _, xs: xs, window_size=0)


def test_reduce_func_error():
    """kernel_tests/group_by_window_test.py::GroupByWindowTest.testReduceFuncError: a
    negative padded shape in the reduce function fails when a window is reduced."""
    components = RNG.integers(100, size=(200,)).astype(np.int64)

    def reduce_func(_, xs):
        return xs.padded_batch(4, padded_shapes=([], np.array([5], np.int64) * -1))

    ds = dp.from_tensor_slices(components).map(lambda x: (x, np.array([x * x])))
    ds = ds.group_by_window(lambda x, _: x % 2, reduce_func, 32)
    with pytest.raises(PipelineError, match="group_by_window at element .* is negative"):
        next(iter(ds))


def test_consume_window_dataset_more_than_once():
    """kernel_tests/group_by_window_test.py::GroupByWindowTest.testConsumeWindowDatasetMoreThanOnce."""
    components = RNG.integers(50, size=(200,)).astype(np.int64)

    def reduce_func(key, window):
        tight = window.padded_batch(4, padded_shapes=[None])
        multiple_of_10 = window.padded_batch(4, padded_shapes=np.array([(key + 1) * 10]))
        return dp.zip((tight, multiple_of_10))

    ds = dp.from_tensor_slices(components).map(lambda x: np.full([int(x)], x))
    ds = ds.group_by_window(lambda x: np.int64(np.shape(x)[0] // 10), reduce_func, 4)
    counts = []
    for tight, multiple_of_10 in ds:
        assert multiple_of_10.shape[1] % 10 == 0
        np.testing.assert_array_equal(tight, multiple_of_10[:, : tight.shape[1]])
        counts.append(tight.shape[0])
    assert sum(counts) == len(components)


def test_short_circuit():
    """kernel_tests/group_by_window_test.py::GroupByWindowTest.testShortCircuit."""
    ds = dp.range(10).group_by_window(lambda x: x, lambda _, window: window.batch(1), 1)
    assert_produces(ds, [np.array([i]) for i in range(10)])


def test_group_by_window_with_autotune():
    """kernel_tests/group_by_window_test.py::GroupByWindowTest.testGroupByWindowWithAutotune."""
    ds = dp.range(1000).group_by_window(
        lambda x: x // 10, lambda key, window: dp.from_tensors(key), 4
    )
    ds = ds.map(lambda x: x + 1, num_parallel_calls=-1)
    assert next(iter(ds)) == 1


def test_group_by_window_cardinality():
    """kernel_tests/group_by_window_test.py::GroupByWindowTest.testGroupByWindowCardinality."""
    ds = (
        dp.range(1)
        .repeat()
        .group_by_window(lambda x: x % 2, lambda key, window: dp.from_tensors(key), 4)
    )
    assert ds.cardinality() == dp.INFINITE_CARDINALITY


@pytest.mark.parametrize(
    "verify_fn",
    ["verify_unused_iterator", "verify_multiple_breaks", "verify_reset_restored_iterator"],
)
def test_checkpoint(verify_fn):
    """kernel_tests/group_by_window_test.py::GroupByWindowCheckpointTest.test (its three
    verify calls, on the first 12 outputs of an infinite input)."""
    components = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 0, 0, 2, 2, 0, 0], dtype=np.int64)

    def build():
        ds = dp.from_tensor_slices(components).repeat(-1)
        return ds.group_by_window(lambda x: x % 3, lambda _, xs: xs.batch(4), 4)

    verify_checkpoint(build, 12, verify_fn, verify_exhausted=False)
