"""``ragged_batch``: batch elements whose shapes differ, without padding
(``tf.data.Dataset.ragged_batch``)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe import _structure as nest
from datapipe._batching import _check_structures, stack_leaf
from datapipe._spec import TensorSpec, UnknownSpec, is_torch
from datapipe._validate import check_bool, check_int
from datapipe.dataset_ops import Dataset
from datapipe.ops.batch import BatchAccess, BatchIterator, batched_cardinality


def ragged_rows(values: list) -> np.ndarray:
    """A ragged component: a 1-D numpy object array whose item ``i`` is ``values[i]``
    (each kept as it is: a numpy array or a torch tensor, no copy)."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):  # one by one: equal shapes must not broadcast into 2-D
        out[i] = v
    return out


def ragged_to_torch(x: np.ndarray) -> Any:
    """A ragged component (``ragged_rows``) whose rows are numeric arrays of one dtype and
    rank >= 1 as a ``torch`` nested tensor: ``layout=torch.jagged`` when the rows differ
    only in their first dimension (sequences), else the strided layout. Anything else
    (rows of strings, mixed ranks or dtypes) is returned unchanged."""
    import torch

    rows = list(x)
    if not rows:
        return x
    tensors = []
    for r in rows:
        if isinstance(r, np.ndarray) and r.dtype.kind in "biufc":
            r = torch.from_numpy(r if r.flags.writeable else r.copy())
        if not is_torch(r) or r.dim() == 0:
            return x
        tensors.append(r)
    if len({t.dim() for t in tensors}) != 1 or len({t.dtype for t in tensors}) != 1:
        return x
    if len({tuple(t.shape[1:]) for t in tensors}) == 1:
        return torch.nested.nested_tensor(tensors, layout=torch.jagged)
    with warnings.catch_warnings():  # torch calls its strided layout a prototype
        warnings.simplefilter("ignore", UserWarning)
        return torch.nested.nested_tensor(tensors)


def _rule(spec: Any) -> bool | None:
    """True: ragged; False: stacked; None: decided by the values (``_by_value``)."""
    if isinstance(spec, UnknownSpec) or not isinstance(spec, TensorSpec):
        return None
    if spec.shape != ():
        return True
    return None if getattr(spec.dtype, "kind", "") == "O" else False


def _by_value(column: Sequence) -> bool:
    return any(np.ndim(v) > 0 for v in column)


class RaggedBatchDataset(Dataset):
    """Batches of ``batch_size`` consecutive elements whose components may differ in shape
    (``tf.data.Dataset.ragged_batch``).

    What a ragged element is here (tf.data's is a ``tf.RaggedTensor``): each component of
    rank >= 1 becomes a **ragged component**, a 1-D numpy object array of length
    ``batch size`` whose item ``i`` is element ``i``'s array, unchanged (``list(c)`` is the
    list of arrays; ``c[i].shape`` may differ between rows). Rank-0 components (labels,
    strings) are stacked as ``batch`` stacks them; a rank-0 ``object`` component that holds
    arrays (``from_tensor_slices`` of an object array of arrays) is ragged.
    ``to_torch()`` turns a ragged component of numeric rows into a ``torch`` nested
    tensor: ``layout=torch.jagged`` for rows that differ only in their first dimension
    (``nt.unbind()`` gives the rows, ``torch.nested.to_padded_tensor(nt, 0)`` pads them),
    the strided layout otherwise.

    tf.data keeps a component whose static shape is fully defined dense; here element
    specs are often inferred from one element (functions are not traced), so the rule is
    by rank: batch fixed-shape components with ``batch`` (e.g. ``zip`` of
    ``images.batch(b)`` and ``tokens.ragged_batch(b)``). tf.data's ``row_splits_dtype`` is
    not taken: a list of arrays has no row splits.

    Args:
        batch_size: elements per batch (>= 1).
        drop_remainder: drop a final batch smaller than ``batch_size``.

    Raises:
        TypeError / ValueError: ``batch_size`` < 1 or not an integer, ``drop_remainder``
            not a bool.
        BatchShapeError (at iteration): elements of one batch nest differently, or the
            values of a rank-0 component differ in shape.

    ``element_spec``: ``TensorSpec((batch, ...), dtype)`` for stacked components and
    ``TensorSpec((batch,), object)`` for ragged ones (batch is ``batch_size`` with
    ``drop_remainder``, else None). Cardinality as ``batch``; keeps random access;
    ``unbatch()`` gives the elements back; ``rebatch`` regroups ragged batches.

    Example:
        >>> import datapipe as dp
        >>> import numpy as np
        >>> ds = dp.range(1, 4).map(lambda n: (np.arange(n), n)).ragged_batch(3)
        >>> rows, n = next(iter(ds))
        >>> [r.tolist() for r in rows], n.tolist()
        ([[0], [0, 1], [0, 1, 2]], [1, 2, 3])
        >>> nt = next(iter(ds.to_torch()))[0]
        >>> nt.is_nested, [t.tolist() for t in nt.unbind()]
        (True, [[0], [0, 1], [0, 1, 2]])
    """

    _name = "ragged_batch"
    commutes_with_shard = True
    keeps_random_access = True

    def __init__(self, input_ds: Dataset, batch_size: int, drop_remainder: bool = False):
        super().__init__(input_ds)
        self._batch_size = check_int("ragged_batch", "batch_size", batch_size, minimum=1)
        self._drop_remainder = check_bool("ragged_batch", "drop_remainder", drop_remainder)
        leaves = nest.flatten(input_ds.element_spec)
        # Known scalars are stacked; everything else (rank >= 1, unknown rank) is ragged; a
        # scalar object component (strings, or arrays held as objects) by its values.
        self._ragged = [_rule(s) for s in leaves]

    @property
    def element_spec(self) -> Any:
        dim = self._batch_size if self._drop_remainder else None

        def one(s: Any, ragged: bool | None) -> Any:  # None: by value, spec as stacked
            if isinstance(s, UnknownSpec):
                return s
            return TensorSpec((dim,), object) if ragged else TensorSpec((dim,), s.dtype)

        spec = self._inputs[0].element_spec
        leaves = [one(s, r) for s, r in zip(nest.flatten(spec), self._ragged)]
        return nest.pack_as(spec, leaves)

    def cardinality(self) -> int:
        return batched_cardinality(
            self._inputs[0].cardinality(), self._batch_size, self._drop_remainder
        )

    def make_batch(self, elements: list, start: int) -> Any:
        """One ragged batch of ``elements`` (input indices from ``start``)."""
        _check_structures(elements, self._name, start)
        first = elements[0]
        paths = [p for p, _ in nest.flatten_with_paths(first)]
        columns = list(zip(*[nest.flatten(e) for e in elements]))
        known: Sequence[bool | None] = self._ragged
        if len(columns) != len(self._ragged):  # an empty input's UnknownSpec: by value
            known = [None] * len(columns)
        ragged = [_by_value(c) if r is None else r for c, r in zip(columns, known)]
        leaves = [
            ragged_rows(list(c)) if r else stack_leaf(list(c), self._name, start, p)
            for c, r, p in zip(columns, ragged, paths)
        ]
        return nest.pack_as(first, leaves)

    def _make_random_access(self, ctx):
        return BatchAccess(
            self._inputs[0]._make_random_access(ctx),
            self._batch_size,
            self._drop_remainder,
            self.make_batch,
        )

    def _make_iterator(self, ctx, epoch):
        inner = ctx.make(self._inputs[0], epoch)
        return BatchIterator(
            inner, self._batch_size, self._drop_remainder, self.make_batch, op_name=self._name
        )
