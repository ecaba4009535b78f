"""``reduce``: errors, and the threads of the reduced pipeline stopped."""

from __future__ import annotations

import pytest

import datapipe as dp


def test_reduce_errors_and_threads(threads):
    with pytest.raises(
        dp.PipelineError,
        match=r"reduce at element 1: TypeError: reduce_func returned a state whose structure "
        "differs",
    ):
        dp.range(4).reduce((0, 0), lambda s, x: (s[0] + x, s[1]) if x < 1 else s[0])
    with pytest.raises(dp.PipelineError, match=r"reduce at element 2: ZeroDivisionError"):
        dp.range(4).reduce(0, lambda s, x: s + 1 // (int(x) - 2))
    with pytest.raises(TypeError, match="reduce: the dataset is infinite"):
        dp.range(3).repeat().reduce(0, lambda s, x: s)
    parallel = dp.range(200).map(lambda x: x * 2, num_parallel_calls=2).prefetch(4)
    assert int(parallel.reduce(0, lambda s, x: s + x)) == 39800
    with pytest.raises(dp.PipelineError):
        parallel.reduce(0, lambda s, x: s + 1 // (int(x) - 100))
    assert threads.settle() == []  # the reduce's pipeline threads are gone, error or not
    assert (
        int(parallel.take(3).get_single_element.__self__.batch(3).get_single_element().sum()) == 6
    )
    assert threads.settle() == []
