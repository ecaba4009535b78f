"""``padded_batch``: padding to the batch maximum or given shapes, nested structures,
strings and torch, errors, resume and random access (tf.data's documented semantics)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from harness import assert_resumes, consume_with_errors, values

import datapipe as dp
from datapipe import TensorSpec
from datapipe.errors import BatchShapeError


def ragged(n: int = 4):
    return dp.range(1, n + 1).map(lambda k: np.full(k, k))


def test_padded_batch_pads_to_batch_max() -> None:
    assert values(ragged().padded_batch(3)) == [[[1, 0, 0], [2, 2, 0], [3, 3, 3]], [[4, 4, 4, 4]]]
    assert values(ragged().padded_batch(2, drop_remainder=True, padding_values=-1)) == [
        [[1, -1], [2, 2]],
        [[3, 3, 3, -1], [4, 4, 4, 4]],
    ]


def test_padded_batch_explicit_shapes_and_specs() -> None:
    out = values(ragged(3).padded_batch(3, padded_shapes=[5]))
    assert out == [[[1, 0, 0, 0, 0], [2, 2, 0, 0, 0], [3, 3, 3, 0, 0]]]
    assert ragged().padded_batch(2, padded_shapes=[6]).element_spec == TensorSpec(
        (None, 6), np.int64
    )
    spec = ragged().padded_batch(2, padded_shapes=[None], drop_remainder=True).element_spec
    assert spec == TensorSpec((2, None), np.int64)
    fixed = dp.from_tensor_slices(np.zeros((4, 3), np.float32))
    assert fixed.padded_batch(2).element_spec == TensorSpec((None, 3), np.float32)
    assert fixed.padded_batch(2, padded_shapes=[-1]).element_spec == TensorSpec(
        (None, None), np.float32
    )
    img = dp.range(1, 3).map(lambda k: np.ones((k, 2 * k), np.uint8))
    b = next(iter(img.padded_batch(2, padded_shapes=(None, 5))))
    assert b.shape == (2, 2, 5) and b.dtype == np.uint8
    assert b[0].tolist() == [[1, 1, 0, 0, 0], [0, 0, 0, 0, 0]]
    assert ragged().padded_batch(3).cardinality() == 2
    assert ragged().padded_batch(3, drop_remainder=True).cardinality() == 1


def test_padded_batch_nested_structures_and_values() -> None:
    t = dp.from_tensor_slices((np.array([1, 2]), np.array([3, 4]))).map(
        lambda a, b: (np.full(a, a), np.full(b, b))
    )
    assert values(t.padded_batch(2, padding_values=-1)) == [
        ([[1, -1], [2, 2]], [[3, 3, 3, -1], [4, 4, 4, 4]])
    ]
    out = values(t.padded_batch(2, padded_shapes=([3], [None]), padding_values=(7, 8)))
    assert out == [([[1, 7, 7], [2, 2, 7]], [[3, 3, 3, 8], [4, 4, 4, 4]])]
    d = dp.range(1, 3).map(lambda k: {"ids": np.arange(k), "label": k})
    b = values(d.padded_batch(2, padded_shapes={"ids": [4], "label": []}))[0]
    assert b == {"ids": [[0, 0, 0, 0], [0, 1, 0, 0]], "label": [1, 2]}


def test_padded_batch_strings_and_torch() -> None:
    s = dp.from_tensor_slices(np.array(["a", "bb", "c"], dtype=object))
    out = values(s.map(lambda x: np.array(list(x), dtype=object)).padded_batch(3))
    assert out == [[["a", ""], ["b", "b"], ["c", ""]]]
    by = dp.range(1, 3).map(lambda k: np.array([b"x"] * int(k), dtype=object))
    assert values(by.padded_batch(2)) == [[[b"x", b""], [b"x", b"x"]]]
    tt = dp.range(1, 3).map(lambda k: torch.full((int(k), 2), int(k), dtype=torch.int32))
    batch = next(iter(tt.padded_batch(2, padding_values=9)))
    assert isinstance(batch, torch.Tensor) and batch.dtype == torch.int32
    assert batch.tolist() == [[[1, 1], [9, 9]], [[2, 2], [2, 2]]]


def test_padded_batch_errors() -> None:
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        ragged().padded_batch(0)
    with pytest.raises(
        ValueError, match=r"padded shape \(2, 2\) is not compatible .* \(component element: rank 2,"
    ):
        ragged().padded_batch(2, padded_shapes=[2, 2])
    with pytest.raises(
        ValueError,
        match=r"padded shape \(2,\) is not compatible with the corresponding input component "
        r"shape \(3,\) \(component element: smaller",
    ):
        dp.from_tensor_slices(np.zeros((4, 3))).padded_batch(2, padded_shapes=[2])
    with pytest.raises(ValueError, match="padding values must be scalars"):
        ragged().padded_batch(2, padding_values=np.zeros(2))
    with pytest.raises(ValueError, match="must match the element structure"):
        dp.from_tensor_slices((np.zeros((2, 1)), np.zeros((2, 1)))).padded_batch(
            2, padded_shapes=[[1]]
        )
    # An element larger than its padded shape: the good batch first, then the error naming
    # the element and the component, then the batches after it.
    ds = dp.from_tensor_slices(np.array([1, 2, 3, 1, 2, 1])).map(lambda k: np.ones(k, np.int8))
    out, errors = consume_with_errors(ds.padded_batch(2, padded_shapes=[2]))
    assert out == [[[1, 0], [1, 1]], [[1, 1], [1, 0]]]
    assert len(errors) == 1
    assert (
        "padded_batch: element 2 has shape (3,) in component element, larger than the "
        "padded shape (2,)" in errors[0]
    )
    rank = dp.range(2).map(lambda k: np.zeros((1,) * (int(k) + 1)))
    with pytest.raises(BatchShapeError, match="element 1 has rank 2 in component element but"):
        list(rank.padded_batch(2))


def test_padded_batch_resume_and_random_access() -> None:
    assert_resumes(ragged(7).padded_batch(3))
    ds = ragged(7).padded_batch(2, padded_shapes=[8])
    assert ds._random_access_breaker() is None
    assert values(ds.shard(2, 1)) == [values(ds)[1], values(ds)[3]]


def test_padded_shape_smaller_than_a_size_seen_in_the_first_element() -> None:
    # Issue 23: the first element (5 long) is longer than the padded shape, but every
    # element that reaches the batch fits: the pipeline builds, and pads them.
    ds = dp.range(1, 6).map(lambda x: np.arange(6 - int(x))).filter(lambda x: len(x) < 4)
    out = values(ds.padded_batch(2, padded_shapes=[3]))
    assert out == [[[0, 1, 2], [0, 1, 0]], [[0, 0, 0]]]
    # ... and an element that does not fit fails where it is batched, naming it.
    with pytest.raises(BatchShapeError, match=r"element 0 has shape \(5,\)"):
        next(iter(dp.range(1, 6).map(lambda x: np.arange(6 - int(x))).padded_batch(2, [3])))


def test_padding_values_none_for_a_sub_structure_and_malformed_shapes() -> None:
    ds = dp.range(1, 3).map(
        lambda x: (np.full(int(x), x), {"s": np.array(["a"] * int(x), dtype=object)})
    )
    ((nums, strs),) = values(ds.padded_batch(2, padding_values=(-1, None)))
    assert nums == [[1, -1], [2, 2]] and strs == {"s": [["a", ""], ["a", "a"]]}
    with pytest.raises(TypeError, match="must be a 1-D sequence of integers"):
        dp.range(2).map(lambda x: np.arange(3)).padded_batch(2, padded_shapes=[1.5])
    with pytest.raises(ValueError, match="must be a 1-D sequence of integers .* shape was"):
        dp.range(2).map(lambda x: np.arange(3)).padded_batch(2, padded_shapes=[[1], [2]])
