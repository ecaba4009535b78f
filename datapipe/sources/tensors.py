"""``from_tensors``: a dataset of exactly one element (``tf.data.Dataset.from_tensors``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe import _structure as nest
from datapipe._batching import as_numpy
from datapipe._spec import is_dataset, is_torch, spec_of
from datapipe.dataset_ops import Dataset


def as_leaf(x: Any) -> Any:
    """One leaf of a value given as a tensor (``from_tensors``, ``scan``'s state): arrays,
    tensors and Datasets are kept as they are (no copy); strings stay Python strings;
    other values (lists, Python numbers) become numpy, 0-d ones numpy scalars like
    ``range``'s (tf.data converts them to tensors)."""
    if is_torch(x) or is_dataset(x) or isinstance(x, (np.ndarray, np.generic, str, bytes)):
        return x  # a Dataset too: an element that is a dataset (tf.data's DatasetSpec)
    arr = as_numpy(x)
    return arr[()] if arr.ndim == 0 else arr


class TensorsDataset(Dataset):
    """One element: ``tensors`` itself (``tf.data.Dataset.from_tensors``).

    Args:
        tensors: an array, tensor, list, scalar, string, or a nested tuple/namedtuple/dict
            of them. numpy arrays and torch tensors are kept without copying (a later change
            to them shows in the element), lists and Python numbers become numpy (0-d
            values become numpy scalars). The element's numpy arrays are read-only views
            (tf.data's elements are immutable: an in-place op in ``map`` fails at once,
            where it would change the next epoch's element); its torch tensors are handed
            out as they are (torch has no read-only tensors, D-TF-28).

    Unlike ``from_tensor_slices`` nothing is sliced: a ``[3, 2]`` array gives one element
    of shape ``[3, 2]``. Cardinality 1; keeps random access.

    Example:
        >>> import datapipe as dp
        >>> ds = dp.from_tensors(([1, 2, 3], 7))
        >>> [(a.tolist(), int(b)) for a, b in ds]
        [([1, 2, 3], 7)]
        >>> ds.element_spec
        (TensorSpec(shape=(3,), dtype=int64), TensorSpec(shape=(), dtype=int64))
    """

    _name = "from_tensors"
    keeps_random_access = True

    def __init__(self, tensors: Any):
        super().__init__()
        self._element = nest.map_structure(as_leaf, tensors)
        self._spec = spec_of(self._element)

    @property
    def element_spec(self) -> Any:
        return self._spec

    def cardinality(self) -> int:
        return 1

    def _make_random_access(self, ctx):
        return _OneAccess(self._element)

    def _make_iterator(self, ctx, epoch):
        return self._ra_iterator(ctx, epoch)


class _OneAccess:
    def __init__(self, element: Any):
        self.element = element

    def __len__(self) -> int:
        return 1

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        out = []
        for i in indices:
            if int(i) != 0:
                raise IndexError(f"from_tensors: index {int(i)} out of range for 1 element")
            # numpy arrays as read-only views (a new view per read: cheap)
            out.append(nest.read_only(self.element))
        return out
