"""``from_tensor_slices``: numpy and torch elements, nested structures, specs, byte strings
with trailing NULs, and errors naming the components."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch

import datapipe as dp
from datapipe import TensorSpec

Point = collections.namedtuple("Point", ["x", "y"])


def test_from_tensor_slices_numpy_keeps_type_and_spec() -> None:
    arr = np.arange(12, dtype=np.float32).reshape(4, 3)
    ds = dp.from_tensor_slices(arr)
    out = list(ds)
    assert len(out) == 4 and all(isinstance(x, np.ndarray) for x in out)
    np.testing.assert_array_equal(out[2], [6, 7, 8])
    assert out[0].dtype == np.float32
    assert ds.element_spec == TensorSpec((3,), np.float32)
    assert ds.cardinality() == 4
    assert np.shares_memory(out[1], arr)  # slices are views: no copy of the source


def test_from_tensor_slices_torch_in_torch_out() -> None:
    t = torch.arange(6).reshape(3, 2)
    out = list(dp.from_tensor_slices(t))
    assert all(isinstance(x, torch.Tensor) for x in out)
    assert out[2].tolist() == [4, 5]
    assert dp.from_tensor_slices(t).element_spec == TensorSpec((2,), torch.int64)


def test_from_tensor_slices_nested_structures() -> None:
    ds = dp.from_tensor_slices({"a": np.arange(3), "b": (np.ones((3, 2)), [7, 8, 9])})
    el = list(ds)[1]
    assert set(el) == {"a", "b"} and int(el["a"]) == 1 and int(el["b"][1]) == 8
    assert el["b"][0].shape == (2,)
    spec = ds.element_spec
    assert spec["a"] == TensorSpec((), np.int64) and spec["b"][0] == TensorSpec((2,), np.float64)
    pts = list(dp.from_tensor_slices(Point(np.arange(2), np.arange(2) * 10)))
    assert isinstance(pts[1], Point) and int(pts[1].y) == 10


def test_from_tensor_slices_mismatched_first_dims_names_components() -> None:
    with pytest.raises(ValueError, match=r"\['a'\]: 3.*\['b'\]: 4"):
        dp.from_tensor_slices({"a": np.zeros(3), "b": np.zeros(4)})
    with pytest.raises(ValueError, match="scalar"):
        dp.from_tensor_slices(np.float32(1))


def test_lists_of_strings_keep_trailing_nul_bytes():
    # numpy's fixed-width "S"/"U" arrays drop trailing NULs; tf.data keeps b"a\x00".
    raw = [b"a\x00", b"", b"xyz\x00\x00"]
    assert list(dp.from_tensor_slices(raw)) == raw
    assert type(next(iter(dp.from_tensor_slices(raw)))) is bytes
    assert list(dp.from_tensor_slices(["a\x00", "b"])) == ["a\x00", "b"]
    (one,) = list(dp.from_tensors(raw))
    assert one.dtype == object and one.tolist() == raw
    grid = next(iter(dp.from_tensor_slices([[b"p\x00", b"q"], [b"r", b"s"]])))
    assert grid.dtype == object and grid.tolist() == [b"p\x00", b"q"]
    assert dp.from_tensor_slices(raw).element_spec == dp.TensorSpec((), object)
