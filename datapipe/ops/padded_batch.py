"""``padded_batch``: batch elements of different shapes by padding them
(``tf.data.Dataset.padded_batch``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe import _structure as nest
from datapipe._batching import stack_leaf
from datapipe._spec import TensorSpec, is_torch
from datapipe._validate import check_bool, check_int
from datapipe.dataset import (
    Dataset,
)
from datapipe.errors import BatchShapeError
from datapipe.ops.batch import BatchIterator, batched_cardinality


def _is_shape(x: Any) -> bool:
    return x is None or isinstance(x, (list, tuple)) or hasattr(x, "as_list")


def _up_to(spec: Any, value: Any, what: str, leaf_ok: Any, op: str = "padded_batch") -> list:
    """``value`` aligned with ``nest.flatten(spec)``: ``value`` follows the element
    structure down to the components, where ``leaf_ok(v)`` values sit (tf.nest's
    ``map_structure_up_to``; a shape may itself be a tuple, so this can't use
    ``nest.flatten``). ``op`` names the op in errors."""
    if isinstance(spec, dict):
        if not isinstance(value, dict) or set(value) != set(spec):
            raise ValueError(f"{op}: {what} must have the keys {sorted(spec)}")
        return [v for k in sorted(spec) for v in _up_to(spec[k], value[k], what, leaf_ok, op)]
    if isinstance(spec, tuple):
        if not isinstance(value, tuple) or len(value) != len(spec) or leaf_ok(value):
            if isinstance(value, (tuple, list)) and len(value) == len(spec):
                return [w for s, v in zip(spec, value) for w in _up_to(s, v, what, leaf_ok, op)]
            raise ValueError(
                f"{op}: {what} must match the element structure "
                f"(a sequence of {len(spec)} entries), got {value!r}"
            )
        return [w for s, v in zip(spec, value) for w in _up_to(s, v, what, leaf_ok, op)]
    if not leaf_ok(value):
        raise ValueError(f"{op}: invalid entry {value!r} in {what}")
    return [value]


def _normalise_shape(shape: Any, spec: TensorSpec, path: str) -> tuple | None:
    """``None`` (pad every dimension to the batch maximum) or a tuple of int/None."""
    if shape is None:
        return None
    dims = list(shape.as_list()) if hasattr(shape, "as_list") else list(shape)
    dims = [None if d is None or int(d) == -1 else int(d) for d in dims]
    if any(d is not None and d < 0 for d in dims):
        raise ValueError(f"padded_batch: the padded shape {shape} of component {path} is negative")
    if spec.shape is not None:
        if len(dims) != len(spec.shape):
            raise ValueError(
                f"padded_batch: the padded shape {tuple(dims)} of component {path} has rank "
                f"{len(dims)} but the component has rank {len(spec.shape)} (shape {spec.shape})"
            )
        for d, s in zip(dims, spec.shape):
            if d is not None and s is not None and s > d:
                raise ValueError(
                    f"padded_batch: the padded shape {tuple(dims)} of component {path} is "
                    f"smaller than its shape {spec.shape}"
                )
    return tuple(dims)


class _Component:
    """How to pad one component: target dims (None = batch max) and the padding value."""

    def __init__(self, path: str, dims: tuple | None, value: Any):
        self.path, self.dims, self.value = path, dims, value

    def target(self, shapes: list, start: int, op: str) -> tuple:
        rank = len(shapes[0])
        for j, s in enumerate(shapes):
            if len(s) != rank:
                raise BatchShapeError(
                    f"{op}: element {start + j} has rank {len(s)} in component {self.path} "
                    f"but element {start} has rank {rank}; padding cannot change the rank"
                )
        dims = self.dims if self.dims is not None else (None,) * rank
        if len(dims) != rank:
            raise BatchShapeError(
                f"{op}: element {start} has rank {rank} in component {self.path}, but its "
                f"padded shape {dims} has rank {len(dims)}"
            )
        out = tuple(max(s[d] for s in shapes) if dims[d] is None else dims[d] for d in range(rank))
        for j, s in enumerate(shapes):
            if any(a > b for a, b in zip(s, out)):
                raise BatchShapeError(
                    f"{op}: element {start + j} has shape {s} in component {self.path}, "
                    f"larger than the padded shape {out}"
                )
        return out

    def pad(self, values: list, start: int, op: str) -> Any:
        shapes = [tuple(v.shape) if hasattr(v, "shape") else np.shape(v) for v in values]
        target = self.target(shapes, start, op)
        if all(s == target for s in shapes):
            return stack_leaf(values, op, start, self.path)
        region = [tuple(slice(0, d) for d in s) for s in shapes]
        v0 = values[0]
        if is_torch(v0):
            import torch

            padded = torch.full((len(values), *target), self._fill(v0), dtype=v0.dtype)
            for i, (v, r) in enumerate(zip(values, region)):
                at: tuple[int | slice, ...] = (i, *r)
                padded[at] = v
            return padded
        arrays = [np.asarray(v) for v in values]
        dtype = arrays[0].dtype
        if dtype.kind in "USO":
            dtype = np.dtype(object)
        out = np.full((len(values), *target), self._fill(arrays[0]), dtype=dtype)
        for i, (a, r) in enumerate(zip(arrays, region)):
            at = (i, *r)
            out[at] = a
        return out

    def _fill(self, first: Any) -> Any:
        if self.value is not None:
            v = self.value
            return v.item() if hasattr(v, "item") else v
        kind = first.dtype.kind if isinstance(first, np.ndarray) else None
        if kind in ("U",):
            return ""
        if kind in ("S", "O"):
            flat = first.reshape(-1)
            return "" if flat.size and isinstance(flat[0], str) else b""
        return 0


class PaddedBatchDataset(Dataset):
    """Batches of ``batch_size`` elements whose components are padded to a common shape
    (``tf.data.Dataset.padded_batch``).

    Args:
        batch_size: elements per batch (>= 1).
        padded_shapes: ``None`` (default): every dimension of every component is padded
            to the largest size in the batch. Otherwise a structure like the element's
            (a shape per component, e.g. ``[None, 5]``; a tuple/dict for nested
            elements): an int pads that dimension to exactly that size; ``None`` or -1
            pads it to the largest size in the batch.
        padding_values: the scalar to pad with, per component (a structure like the
            element's) or one scalar for all. Default 0 for numbers, ``""``/``b""`` for
            strings (tf.data).
        drop_remainder: drop a final batch smaller than ``batch_size``.

    Raises:
        ValueError: ``batch_size`` < 1, or ``padded_shapes``/``padding_values`` do not
            match the element structure or ranks, or a padded shape is smaller than the
            component's static shape.
        BatchShapeError (at iteration, as ``PipelineError``): an element is larger than
            its padded shape, or ranks differ; names the element's index and component.

    ``element_spec``: batch dimension ``batch_size`` with ``drop_remainder`` else None;
    each dimension is the padded size when given, ``None`` when padded to the batch
    maximum, and the input's static size when ``padded_shapes`` is None (as tf.data).
    Cardinality as ``batch``. Keeps random access.

    Example:
        >>> import datapipe as dp
        >>> import numpy as np
        >>> ds = dp.range(1, 4).map(lambda n: np.full(n, n))
        >>> [b.tolist() for b in ds.padded_batch(2)]
        [[[1, 0], [2, 2]], [[3, 3, 3]]]
        >>> [b.tolist() for b in ds.padded_batch(3, padded_shapes=[4], padding_values=-1)]
        [[[1, -1, -1, -1], [2, 2, -1, -1], [3, 3, 3, -1]]]
    """

    _name = "padded_batch"
    commutes_with_shard = True
    keeps_random_access = True

    def __init__(
        self,
        input_ds: Dataset,
        batch_size: int,
        padded_shapes: Any = None,
        padding_values: Any = None,
        drop_remainder: bool = False,
    ):
        super().__init__(input_ds)
        self._batch_size = check_int("padded_batch", "batch_size", batch_size, minimum=1)
        self._drop_remainder = check_bool("padded_batch", "drop_remainder", drop_remainder)
        spec = input_ds.element_spec
        paths = [p for p, _ in nest.flatten_with_paths(spec)]
        leaves = nest.flatten(spec)
        if padded_shapes is None:
            shapes: list = [None] * len(leaves)
        else:
            shapes = _up_to(spec, padded_shapes, "padded_shapes", _is_shape)
            shapes = [_normalise_shape(s, sp, p) for s, sp, p in zip(shapes, leaves, paths)]
        values = self._padding_values(spec, padding_values, len(leaves))
        self._components = [_Component(p, s, v) for p, s, v in zip(paths, shapes, values)]
        self._out_spec = self._make_spec(spec, leaves, shapes)

    @staticmethod
    def _padding_values(spec: Any, padding_values: Any, n: int) -> list:
        if padding_values is None or not nest.is_nested(padding_values):
            values = [padding_values] * n  # one scalar for every component (tf.data allows)
        else:
            values = _up_to(spec, padding_values, "padding_values", lambda v: True)
        for v in values:
            if v is not None and np.ndim(v) != 0:
                raise ValueError(f"padded_batch: padding values must be scalars, got {v!r}")
        return values

    def _make_spec(self, spec: Any, leaves: list, shapes: list) -> Any:
        dim = self._batch_size if self._drop_remainder else None
        out = []
        for s, shape in zip(leaves, shapes):
            inner = s.shape if shape is None else shape
            out.append(TensorSpec(None if inner is None else (dim, *inner), s.dtype))
        return nest.pack_as(spec, out)

    @property
    def element_spec(self) -> Any:
        return self._out_spec

    def cardinality(self) -> int:
        return batched_cardinality(
            self._inputs[0].cardinality(), self._batch_size, self._drop_remainder
        )

    def pad(self, elements: list, start: int) -> Any:
        """One padded batch of ``elements`` (input indices from ``start``)."""
        first = elements[0]
        if not nest.is_nested(first):
            return self._components[0].pad(elements, start, self._name)
        columns = list(zip(*[nest.flatten(e) for e in elements]))
        if len(columns) != len(self._components):
            raise BatchShapeError(
                f"padded_batch: elements from {start} do not match the element structure"
            )
        parts = [c.pad(list(col), start, self._name) for c, col in zip(self._components, columns)]
        return nest.pack_as(first, parts)

    def _make_random_access(self, ctx):
        return _PaddedBatchAccess(self, self._inputs[0]._make_random_access(ctx))

    def _make_iterator(self, ctx, epoch):
        inner = ctx.make(self._inputs[0], epoch)
        return BatchIterator(
            inner, self._batch_size, self._drop_remainder, self.pad, op_name=self._name
        )


class _PaddedBatchAccess:
    def __init__(self, node: PaddedBatchDataset, inner: Any):
        self.node, self.inner = node, inner
        n, b = len(inner), node._batch_size
        self.n = n // b if node._drop_remainder else -(-n // b)

    def __len__(self) -> int:
        return self.n

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        total, b = len(self.inner), self.node._batch_size
        out = []
        for i in indices:
            start = int(i) * b
            elems = self.inner.get_many(range(start, min(start + b, total)), epoch)
            out.append(self.node.pad(elems, start))
        return out
