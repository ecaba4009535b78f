"""``ragged_batch``: components, torch nested tensors, unbatching, random access, arrays
held as objects."""

from __future__ import annotations

import numpy as np
import torch

import datapipe as dp


def lengths_ds(lengths):
    arr = np.array(lengths, dtype=np.int64)
    return dp.from_tensor_slices(arr).map(lambda n: np.arange(1, n + 1))


def test_ragged_batch_components_and_torch_nested_tensors():
    ds = lengths_ds([0, 2, 3, 1]).map(lambda s: (s, np.float32(len(s)), f"w{len(s)}"))
    rows, n, words = next(iter(ds.ragged_batch(3)))
    assert rows.dtype == object and rows.shape == (3,)
    assert [r.tolist() for r in rows] == [[], [1, 2], [1, 2, 3]]
    assert n.tolist() == [0.0, 2.0, 3.0] and n.dtype == np.float32
    assert words.tolist() == ["w0", "w2", "w3"]
    assert ds.ragged_batch(3, drop_remainder=True).element_spec == (
        dp.TensorSpec((3,), object),
        dp.TensorSpec((3,), np.float32),
        dp.TensorSpec((3,), object),
    )
    nt, n_t, words_t = next(iter(ds.ragged_batch(3).to_torch()))
    assert nt.is_nested and nt.layout == torch.jagged and nt.dtype == torch.int64
    assert [t.tolist() for t in nt.unbind()] == [[], [1, 2], [1, 2, 3]]
    assert torch.nested.to_padded_tensor(nt, -1).tolist() == [[-1, -1, -1], [1, 2, -1], [1, 2, 3]]
    assert n_t.dtype == torch.float32 and words_t.tolist() == ["w0", "w2", "w3"]
    # Rows that differ beyond their first dimension: the strided layout.
    images = dp.range(1, 3).map(lambda k: np.zeros((k, k + 1), np.float32)).ragged_batch(2)
    nested = next(iter(images.to_torch()))
    assert nested.is_nested and nested.layout == torch.strided
    assert [tuple(t.shape) for t in nested.unbind()] == [(1, 2), (2, 3)]


def test_ragged_batch_unbatches_and_keeps_random_access():
    ds = lengths_ds([3, 1, 4, 1, 5]).ragged_batch(2)
    assert [x.tolist() for x in ds.unbatch()] == [
        [1, 2, 3],
        [1],
        [1, 2, 3, 4],
        [1],
        [1, 2, 3, 4, 5],
    ]
    assert len(ds) == 3 and [r.tolist() for r in ds[-1]] == [[1, 2, 3, 4, 5]]
    assert [[r.tolist() for r in b] for b in ds.rebatch(3)] == [
        [[1, 2, 3], [1], [1, 2, 3, 4]],
        [[1], [1, 2, 3, 4, 5]],
    ]


def test_ragged_batch_of_arrays_held_as_objects():
    held = np.empty(3, dtype=object)
    for i in range(3):
        held[i] = np.arange(i + 1, dtype=np.int32)
    batch = next(iter(dp.from_tensor_slices(held).ragged_batch(3)))
    assert batch.dtype == object and [r.tolist() for r in batch] == [[0], [0, 1], [0, 1, 2]]
    words = next(iter(dp.from_tensor_slices(np.array(["a", "bb"], dtype=object)).ragged_batch(2)))
    assert words.tolist() == ["a", "bb"]  # scalars of an object component are stacked
