"""``to_torch``: numpy components become torch tensors, sharing memory where possible."""

from __future__ import annotations

from typing import Any

import numpy as np

from datapipe import _structure as nest
from datapipe._spec import TensorSpec, is_torch
from datapipe.dataset_ops import Dataset, RandomAccessUnaryDataset
from datapipe.ops.map import MapAccess, MapIterator


def _torch_dtype(np_dtype: np.dtype) -> Any:
    import torch

    try:
        return torch.from_numpy(np.zeros((), np_dtype)).dtype
    except TypeError:
        return None  # strings, objects: left as numpy


def leaf_to_torch(x: Any) -> Any:
    """``torch.from_numpy`` (no copy) for numeric numpy arrays and scalars; a ragged
    component (``ragged_batch``: a 1-D object array of numeric arrays) becomes a nested
    tensor; other values (tensors, strings, objects) are returned unchanged."""
    import torch

    if is_torch(x):
        return x
    if isinstance(x, np.ndarray) and x.dtype == object and x.ndim == 1:
        from datapipe.ops.ragged_batch import ragged_to_torch

        return ragged_to_torch(x)
    if isinstance(x, np.generic):
        x = np.asarray(x)
    if isinstance(x, np.ndarray) and x.dtype.kind in "biufc":
        if not x.flags.writeable:  # torch warns on read-only memory; a copy is the safe way
            x = x.copy()
        return torch.from_numpy(x)
    return x


def element_to_torch(element: Any) -> Any:
    return nest.map_structure(leaf_to_torch, element)


class ToTorchDataset(RandomAccessUnaryDataset):
    """Elements with every numeric numpy component converted to a ``torch.Tensor``.

    Uses ``torch.from_numpy``, which shares memory with the numpy array (no copy); numpy
    scalars become 0-d tensors; read-only arrays are copied (torch requires writable
    memory); a ragged component (``ragged_batch``: a 1-D object array of numeric arrays of
    one rank and dtype) becomes a ``torch`` nested tensor (its ``element_spec`` stays
    ``object``); other string/object components stay numpy. Keeps random access.

    ``to_torch(device=...)`` is ``prefetch_to_device(device)``: the same conversion, with
    the tensors copied to ``device`` ahead of the consumer.

    Example:
        >>> import datapipe as dp, numpy as np
        >>> ds = dp.from_tensor_slices((np.ones((4, 2)), np.arange(4))).batch(4).to_torch()
        >>> x, y = next(iter(ds))
        >>> x.dtype, tuple(x.shape), y
        (torch.float64, (4, 2), tensor([0, 1, 2, 3]))
    """

    _name = "to_torch"
    elementwise = True
    commutes_with_shard = True

    def __init__(self, input_ds: Dataset):
        super().__init__(input_ds)

    @property
    def element_spec(self) -> Any:
        def conv(s: TensorSpec) -> TensorSpec:
            if isinstance(s.dtype, np.dtype):
                td = _torch_dtype(s.dtype)
                if td is not None:
                    return TensorSpec(s.shape, td)
            return s

        return nest.map_structure(conv, self._inputs[0].element_spec)

    def _make_random_access(self, ctx):
        inner = self._inputs[0]._make_random_access(ctx)
        return MapAccess(inner, element_to_torch, self._name, unpack=False)

    def _make_iterator(self, ctx, epoch):
        return MapIterator(
            ctx.make(self._inputs[0], epoch), element_to_torch, self._name, unpack=False
        )
