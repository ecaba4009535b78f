"""``from_tensors``: one element; arrays, tensors and nesting kept; repeat and random access."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from harness import assert_resumes, values

import datapipe as dp
from datapipe import TensorSpec


def test_from_tensors_is_one_element():
    ds = dp.from_tensors(([[1, 2], [3, 4]], 7))
    assert values(ds) == [([[1, 2], [3, 4]], 7)]
    assert ds.element_spec == (TensorSpec((2, 2), "int64"), TensorSpec((), "int64"))
    assert ds.cardinality() == 1 and len(ds) == 1
    image, label = next(iter(ds))
    assert isinstance(image, np.ndarray) and isinstance(label, np.int64)


def test_from_tensors_keeps_arrays_tensors_and_nesting():
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = torch.ones(3, dtype=torch.int32)
    ds = dp.from_tensors({"a": arr, "b": (t, "text")})
    (x,) = list(ds)
    # numpy: a read-only view of the array; torch: the tensor (D-TF-28)
    assert type(x["a"]) is np.ndarray and np.shares_memory(x["a"], arr)
    assert not x["a"].flags.writeable and arr.flags.writeable
    assert isinstance(x["b"][0], torch.Tensor) and x["b"][0].dtype == torch.int32
    assert x["b"][0].tolist() == [1, 1, 1] and x["b"][0] is t and x["b"][1] == "text"
    spec = ds.element_spec
    assert spec["a"] == TensorSpec((2, 3), "float32")
    assert spec["b"][0] == TensorSpec((3,), torch.int32)
    assert spec["b"][1] == TensorSpec((), np.dtype(object))


def test_from_tensors_repeat_and_random_access():
    ds = dp.from_tensors(np.array([5, 6])).repeat(3)
    assert values(ds) == [[5, 6]] * 3
    assert ds._random_access_breaker() is None
    assert values(ds.global_shuffle(seed=0)) == [[5, 6]] * 3
    assert_resumes(ds)


def _add_one_in_place(x):
    x += 1
    return x


def test_from_tensors_hands_out_read_only_arrays():
    array = np.zeros(2)
    element = next(iter(dp.from_tensors(array)))
    assert not element.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        _add_one_in_place(element)
    # a map's function gets a writable copy (issue 35 item 6): the array stays as it was
    for _ in range(2):
        assert [x.tolist() for x in dp.from_tensors(array).map(_add_one_in_place)] == [[1, 1]]
    assert array.tolist() == [0.0, 0.0]
