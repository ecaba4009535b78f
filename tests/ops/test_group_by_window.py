"""``group_by_window``: argument checks and errors, what the reduce function sees, threads
of windows stopped."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp


def test_group_by_window_arguments_and_errors():
    ds = dp.range(6)
    with pytest.raises(ValueError, match="give exactly one of window_size and window_size_func"):
        ds.group_by_window(lambda x: x, lambda k, w: w)
    with pytest.raises(ValueError, match="give exactly one of window_size and window_size_func"):
        ds.group_by_window(lambda x: x, lambda k, w: w, 2, lambda k: 2)
    with pytest.raises(TypeError, match="group_by_window: reduce_func must be callable"):
        ds.group_by_window(lambda x: x, None, 2)
    not_a_dataset = ds.group_by_window(lambda x: x % 2, lambda k, w: [1], 2)
    with pytest.raises(dp.PipelineError, match="reduce_func must return a Dataset, got list"):
        list(not_a_dataset)
    float_key = ds.group_by_window(lambda x: x / 2, lambda k, w: w, 2)
    with pytest.raises(
        dp.PipelineError,
        match="group_by_window at element 0: TypeError: key_func must return a scalar integer",
    ):
        list(float_key)


def test_group_by_window_reduce_sees_key_and_whole_window():
    ds = dp.zip(dp.range(10), dp.range(10).map(lambda x: x * 10)).group_by_window(
        lambda a, b: a % 3,
        lambda key, w: dp.from_tensors(
            (key, np.int64(w.cardinality()), w.map(lambda a, b: b).reduce(0, lambda s, x: s + x))
        ),
        window_size=3,
    )
    got = [(int(k), int(n), int(s)) for k, n, s in ds]
    assert got == [(0, 3, 90), (1, 3, 120), (2, 3, 150), (0, 1, 90)]


def test_group_by_window_stops_the_threads_of_its_windows(threads):
    def slow_double(x):
        return x * 2

    ds = dp.range(400).group_by_window(
        lambda x: x % 2,
        lambda k, w: w.map(slow_double, num_parallel_calls=2).prefetch(2),
        window_size=50,
    )
    it = iter(ds)
    assert [int(next(it)) for _ in range(3)] == [0, 4, 8]
    assert threads.names()  # the open window's map and prefetch run on threads
    it.close()
    assert threads.settle() == []
    assert sorted(int(x) for x in ds) == [2 * i for i in range(400)]
    assert threads.settle() == []
