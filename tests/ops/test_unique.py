"""``unique``: ints and strings, the state (a sorted list of seen values), errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from harness import assert_resumes, values

import datapipe as dp
from datapipe._context import IterContext
from datapipe.errors import PipelineError


def test_unique_ints_and_strings() -> None:
    ds = dp.from_tensor_slices([1, 3, 1, 2, 3, 4, 4])
    assert values(ds.unique()) == [1, 3, 2, 4]
    assert ds.unique().cardinality() == dp.UNKNOWN_CARDINALITY
    words = dp.from_tensor_slices(np.array(["b", "a", "b", "c", "a"], dtype=object))
    assert values(words.unique()) == ["b", "a", "c"]
    raw = dp.from_tensor_slices(np.array([b"x", b"y", b"x"], dtype=object))
    assert values(raw.unique()) == [b"x", b"y"]
    assert values(dp.from_tensor_slices(torch.tensor([5, 5, 6])).unique()) == [5, 6]


def test_unique_state_is_sorted_seen_list_and_resumes() -> None:
    ds = dp.from_tensor_slices([5, 1, 5, 3, 1, 9, 3, 2]).unique()
    op = IterContext.for_graph(ds).make(ds, (0,))
    assert [int(x) for x in op.next_chunk(3)] == [5, 1]  # input 5, 1, 5
    assert op.get_state()["seen"] == [[1, 5]]
    assert [int(x) for x in op.next_chunk(3)] == [3, 9]  # input 3, 1, 9
    assert op.get_state()["seen"] == [[1, 3, 5, 9]]  # runs of equal size merged
    assert [int(x) for x in op.next_chunk(2)] == [2]  # input 3, 2
    assert op.get_state()["seen"] == [[1, 3, 5, 9], [2]]
    assert op.seen_sorted() == [1, 2, 3, 5, 9]
    assert_resumes(ds)


def test_unique_errors() -> None:
    with pytest.raises(TypeError, match="unique: elements must be integers or strings.*float"):
        dp.from_tensor_slices(np.zeros(3)).unique()
    # Arrays of any shape are compared whole (tf.data's unique_test: [1], [1, 1], ...).
    rows = np.array([[1, 1], [1, 1], [2, 2], [1, 2], [2, 2]], np.int64)
    assert values(dp.from_tensor_slices(rows).unique()) == [[1, 1], [2, 2], [1, 2]]
    with pytest.raises(TypeError, match="single components"):
        dp.from_tensor_slices((np.arange(2), np.arange(2))).unique()
    bad = dp.range(3).map(lambda x: x if x != 1 else np.zeros(2))
    with pytest.raises(PipelineError, match=r"unique at element 1: TypeError: .*dtype float64"):
        list(bad.unique())
