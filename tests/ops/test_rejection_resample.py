"""``rejection_resample``: argument checks and errors, reproducible from its seed."""

from __future__ import annotations

import numpy as np
import pytest

import datapipe as dp


def test_rejection_resample_arguments_and_errors():
    ds = dp.from_tensor_slices(np.array([0, 1, 2, 1]))
    with pytest.raises(
        ValueError, match=r"target_dist must be finite, non-negative and not all zero"
    ):
        ds.rejection_resample(lambda y: y, [0.5, -0.5])
    with pytest.raises(ValueError, match=r"initial_dist must be shape \(2,\) \(one per class\)"):
        ds.rejection_resample(lambda y: y, [0.5, 0.5], [1.0, 0.0, 0.0])
    with pytest.raises(TypeError, match="class_func must be callable"):
        ds.rejection_resample(3, [0.5, 0.5])
    out_of_range = ds.rejection_resample(lambda y: y, [0.5, 0.5], [0.5, 0.5], seed=0)
    it = iter(out_of_range)
    assert [(int(c), int(x)) for c, x in [next(it), next(it)]] == [(0, 0), (1, 1)]
    with pytest.raises(
        dp.PipelineError,
        match=r"rejection_resample at element 2: ValueError: class_func returned class 2, "
        r"outside \[0, 2\)",
    ):
        next(it)
    assert [(int(c), int(x)) for c, x in it] == [(1, 1)]


def test_rejection_resample_is_reproducible_from_its_seed():
    labels = np.arange(300) % 4
    make = lambda s: dp.from_tensor_slices(labels).rejection_resample(  # noqa: E731
        lambda y: y, [0.1, 0.2, 0.3, 0.4], seed=s
    )
    a = [int(x) for _, x in make(1)]
    assert a == [int(x) for _, x in make(1)] and a != [int(x) for _, x in make(2)]
    zero = dp.from_tensor_slices(labels).rejection_resample(lambda y: y, [0, 0, 1, 1], seed=3)
    assert {int(c) for c, _ in zero} == {2, 3}  # a target of 0: never kept
