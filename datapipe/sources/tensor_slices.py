"""``from_tensor_slices``: elements are the slices of arrays along their first dimension."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe import _structure as nest
from datapipe._batching import as_numpy
from datapipe._spec import TensorSpec, array_spec, is_torch
from datapipe.dataset_ops import Dataset


def _as_sliceable(path: str, x: Any) -> Any:
    if is_torch(x) or isinstance(x, np.ndarray):
        out = x
    else:
        try:
            out = as_numpy(x)
        except ValueError as e:  # numpy's "inhomogeneous shape" for ragged lists
            raise ValueError(
                f"from_tensor_slices: component {path} is ragged (its items have different "
                f"shapes: {e}); slice equal-shaped arrays, or use from_generator for ragged "
                "elements (and padded_batch to batch them)"
            ) from e
    if out.ndim == 0:
        raise ValueError(
            f"from_tensor_slices: component {path} is a scalar; every component "
            "needs a first dimension to slice along"
        )
    return out


def _slice_spec(x: Any) -> Any:
    """The spec of one slice of ``x`` (a ``DatasetSpec`` for an array of Datasets)."""
    if is_torch(x):
        return TensorSpec(tuple(x.shape[1:]), x.dtype)
    return array_spec(x, x.shape[1:])


class TensorSlicesDataset(Dataset):
    """Slices of ``tensors`` along dimension 0 (``tf.data.Dataset.from_tensor_slices``).

    Args:
        tensors: an array, tensor or list, or a nested tuple/namedtuple/dict of them. numpy
            arrays and torch tensors are kept without copying (a later change to them shows
            in the elements); elements of a numpy array are read-only views of it
            (tf.data's elements are immutable: an in-place op in ``map`` fails, naming
            the element, instead of writing into the source), those of a torch tensor are
            views (torch has no read-only tensors; D-TF-28); lists become numpy arrays
            (lists of strings: ``object`` arrays of ``str``/``bytes``, as NULs must survive;
            a list of Datasets: an ``object`` array of them, sliced into the datasets).

    Raises:
        ValueError: no component (``()``, ``{}``), a component is a scalar, or first
            dimensions disagree (the message names each component and its size).

    Elements keep their array type: numpy in, numpy out (0-d slices are numpy scalars);
    torch in, torch out. Keeps random access.

    Example:
        >>> import datapipe as dp, numpy as np
        >>> features, labels = np.arange(6).reshape(3, 2), np.array([0, 1, 0])
        >>> for x, y in dp.from_tensor_slices((features, labels)):
        ...     print(x, int(y))
        [0 1] 0
        [2 3] 1
        [4 5] 0
        >>> next(iter(dp.Dataset.from_tensor_slices({"x": [1.5, 2.5]})))
        {'x': np.float64(1.5)}
    """

    _name = "from_tensor_slices"
    keeps_random_access = True

    def __init__(self, tensors: Any):
        super().__init__()
        paths = nest.flatten_with_paths(tensors)
        if not nest.flatten(tensors):  # () or {}: nothing to slice (tf.data: ValueError)
            raise ValueError(
                f"from_tensor_slices: {tensors!r} has no components to slice; give at "
                "least one array"
            )
        leaves = [_as_sliceable(p, x) for p, x in paths]
        sizes = {p: int(x.shape[0]) for (p, _), x in zip(paths, leaves)}
        if len(set(sizes.values())) > 1:
            listing = ", ".join(f"{p}: {n}" for p, n in sizes.items())
            raise ValueError(
                f"from_tensor_slices: components have different first dimensions "
                f"({listing}); all must be equal"
            )
        self._structure = tensors
        self._leaves = leaves
        self._n = next(iter(sizes.values()))
        self._nested = nest.is_nested(tensors)
        self._spec = nest.pack_as(tensors, [_slice_spec(x) for x in leaves])

    @property
    def element_spec(self) -> Any:
        return self._spec

    def cardinality(self) -> int:
        return self._n

    def _make_random_access(self, ctx):
        return _SlicesAccess(self)

    def _make_iterator(self, ctx, epoch):
        return self._ra_iterator(ctx, epoch)


def _gather(leaf: Any, indices: Sequence[int]) -> Any:
    """The rows ``indices`` of ``leaf``: numpy rows as read-only views (of the source for
    a contiguous range, of the gathered copy for an index list), torch rows as views.

    tf.data's elements are immutable, and a writable view let an in-place op in ``map``
    (``x /= 255``) write into the user's array, so that the next epoch differed -- on the
    sequential and thread executors only (a worker process gets a copy). Read-only views
    make it fail at once, naming the element, at no cost; a copy per row would cost
    ~1 us (W3: 618k -> 362k rows/s), a copy per chunk would let a shuffle buffer keep
    whole chunks alive (W3: +220 MB). torch has no read-only tensors, and a clone per row
    costs ~6 us: torch rows stay views, as ``TensorDataset``'s (D-TF-28).
    """
    if isinstance(indices, range) and indices.step == 1:
        rows = leaf[indices.start : indices.stop]
    elif is_torch(leaf):
        import torch

        return leaf[torch.from_numpy(np.asarray(indices, dtype=np.int64))]
    else:
        rows = leaf[np.asarray(indices, dtype=np.int64)]
    if not is_torch(rows):
        rows.flags.writeable = False  # this view (or copy) only, not the source
    return rows


class _SlicesAccess:
    def __init__(self, ds: TensorSlicesDataset):
        self.ds = ds

    def __len__(self) -> int:
        return self.ds._n

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        ds = self.ds
        cols = [list(_gather(leaf, indices)) for leaf in ds._leaves]
        if not ds._nested:
            return cols[0]
        s = ds._structure
        if type(s) is tuple and all(not nest.is_nested(v) for v in s):
            return list(zip(*cols))  # flat plain tuple: the fast path
        return [nest.pack_as(s, list(vals)) for vals in zip(*cols)]
