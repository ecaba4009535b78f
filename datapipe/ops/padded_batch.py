"""``padded_batch``: batch elements of different shapes by padding them
(``tf.data.Dataset.padded_batch``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from datapipe import _structure as nest
from datapipe._batching import stack_leaf
from datapipe._spec import NoneSpec, TensorSpec, is_torch, static_dim
from datapipe._validate import check_bool, check_int
from datapipe.dataset_ops import (
    Dataset,
)
from datapipe.errors import BatchShapeError, PipelineError
from datapipe.ops.batch import BatchAccess, BatchIterator, batched_cardinality


def _is_shape(x: Any) -> bool:
    """A value that can be one component's padded shape: None, a list or tuple of sizes,
    a ``TensorShape``-like (``as_list``), a 1-D array or tensor of sizes, or one int (a
    rank-1 shape, as ``tf.TensorShape(5)``)."""
    if x is None or isinstance(x, (list, tuple)) or hasattr(x, "as_list"):
        return True
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        return True
    return isinstance(x, np.ndarray) or is_torch(x)


def _up_to(
    spec: Any,
    value: Any,
    what: str,
    leaf_ok: Any,
    op: str = "padded_batch",
    none_fills: bool = False,
) -> list:
    """``value`` aligned with ``nest.flatten(spec)``: ``value`` follows the element
    structure down to the components, where ``leaf_ok(v)`` values sit (tf.nest's
    ``map_structure_up_to``; a shape may itself be a tuple, so this can't use
    ``nest.flatten``). ``op`` names the op in errors. ``none_fills``: a ``None`` in place
    of a sub-structure stands for ``None`` at each of its components (tf.data's "default
    padding" for that part of ``padding_values``)."""
    if none_fills and value is None:
        return [None] * len(nest.flatten(spec))
    if isinstance(spec, dict):
        if not isinstance(value, dict) or set(value) != set(spec):
            raise ValueError(f"{op}: {what} must have the keys {sorted(spec)}")
        return [
            v
            for k in sorted(spec)
            for v in _up_to(spec[k], value[k], what, leaf_ok, op, none_fills)
        ]
    if isinstance(spec, tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(spec):
            raise ValueError(
                f"{op}: {what} must match the element structure "
                f"(a sequence of {len(spec)} entries), got {value!r}"
            )
        return [w for s, v in zip(spec, value) for w in _up_to(s, v, what, leaf_ok, op, none_fills)]
    if not leaf_ok(value):
        raise ValueError(f"{op}: invalid entry {value!r} in {what}")
    return [value]


def _shape_dims(shape: Any, path: str, op: str) -> list:
    """One padded shape as a list of int/None (-1 is None), checked as tf.data checks it:
    a 1-D sequence of integers."""
    if hasattr(shape, "as_list"):
        shape = shape.as_list()
    if is_torch(shape):
        shape = shape.cpu().numpy()
    if isinstance(shape, (int, np.integer)):
        shape = [shape]  # one size: a rank-1 shape, as tf.TensorShape(5)
    dims = [
        -1 if d is None else d for d in (shape.tolist() if isinstance(shape, np.ndarray) else shape)
    ]
    arr = np.asarray(dims, dtype=object)
    if arr.ndim != 1:
        shape_of = np.shape(np.asarray(dims, dtype=object)) if arr.ndim else ()
        raise ValueError(
            f"{op}: the padded shape {shape!r} of component {path} must be a 1-D sequence of "
            f"integers (None or -1: the batch maximum), but its shape was {shape_of}"
        )
    for d in dims:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise TypeError(
                f"{op}: the padded shape {shape!r} of component {path} must be a 1-D sequence "
                f"of integers (None or -1: the batch maximum), but its element type was "
                f"{type(d).__name__}"
            )
    if any(int(d) < -1 for d in dims):
        raise ValueError(f"{op}: the padded shape {shape!r} of component {path} is negative")
    return [None if int(d) == -1 else int(d) for d in dims]


def _normalise_shape(shape: Any, spec: TensorSpec, path: str) -> tuple | None:
    """``None`` (pad every dimension to the batch maximum) or a tuple of int/None.

    The padded shape must have the component's rank and must not be smaller than a known
    size of it (tf.data's check). A size only seen in the first element (``SeenDim``, a
    spec inferred from an element) is no such fact: later elements may well be shorter
    (after a ``filter``), and the padding itself checks every element."""
    if shape is None:
        return None
    dims = _shape_dims(shape, path, "padded_batch")
    if spec.shape is not None:
        if len(dims) != len(spec.shape):
            raise ValueError(
                f"padded_batch: the padded shape {tuple(dims)} is not compatible with the "
                f"corresponding input component shape {spec.shape} (component {path}: rank "
                f"{len(dims)}, but the component has rank {len(spec.shape)})"
            )
        for d, s in zip(dims, spec.shape):
            known = static_dim(s)
            if d is not None and known is not None and known > d:
                raise ValueError(
                    f"padded_batch: the padded shape {tuple(dims)} is not compatible with the "
                    f"corresponding input component shape {spec.shape} (component {path}: "
                    "smaller than the component)"
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
        if all(v is None for v in values):
            return None  # a None component stays None (tf.data's NoneTensor)
        self._check_dense(values, start, op)
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

    def _check_dense(self, values: list, start: int, op: str) -> None:
        """A ragged component (an object array of rows, as ``ragged_batch`` makes) has no
        shape to pad to: tf.data refuses ``padded_batch`` of a ``RaggedTensor`` with a
        ``TypeError``; here it is found in the values, and raised for that element."""
        for j, v in enumerate(values):
            if isinstance(v, np.ndarray) and v.dtype == object and v.size:
                if any(isinstance(r, np.ndarray) or is_torch(r) for r in v.reshape(-1)):
                    raise PipelineError(
                        op,
                        start + j,
                        TypeError(
                            f"component {self.path} is ragged (an object array of arrays, as "
                            "ragged_batch makes); padded_batch pads dense components: "
                            "unbatch() it first, or pad its rows with padded_batch before "
                            "batching them"
                        ),
                    )

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
        else:  # None for a part of the structure: default padding there (tf.data)
            values = _up_to(spec, padding_values, "padding_values", lambda v: True, none_fills=True)
        for v in values:
            if v is not None and np.ndim(v) != 0:
                raise ValueError(f"padded_batch: padding values must be scalars, got {v!r}")
        return values

    def _make_spec(self, spec: Any, leaves: list, shapes: list) -> Any:
        dim = self._batch_size if self._drop_remainder else None
        out: list[TensorSpec] = []
        for s, shape in zip(leaves, shapes):
            if isinstance(s, NoneSpec):
                out.append(s)
                continue
            if shape is None:  # padded to the batch maximum: known only where s is
                inner = None if s.shape is None else tuple(static_dim(d) for d in s.shape)
            else:
                inner = shape
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
        return BatchAccess(
            self._inputs[0]._make_random_access(ctx),
            self._batch_size,
            self._drop_remainder,
            self.pad,
        )

    def _make_iterator(self, ctx, epoch):
        inner = ctx.make(self._inputs[0], epoch)
        return BatchIterator(
            inner, self._batch_size, self._drop_remainder, self.pad, op_name=self._name
        )
