"""``bucket_by_sequence_length``: batch elements of similar length together, padded per
bucket (``tf.data.Dataset.bucket_by_sequence_length``)."""

from __future__ import annotations

import bisect
import collections
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from datapipe import _structure as nest
from datapipe._batching import stack
from datapipe._functions import call, raise_pending
from datapipe._iterator import OpIterator
from datapipe._positions import error_from_state, error_to_state
from datapipe._spec import TensorSpec, UnknownSpec
from datapipe._validate import check_bool, check_int
from datapipe.dataset_ops import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset
from datapipe.errors import BatchShapeError, annotate
from datapipe.ops.group_by_window import as_key
from datapipe.ops.padded_batch import _Component, _is_shape, _shape_dims, _up_to

_OP = "bucket_by_sequence_length"


def _int_list(name: str, values: Any, minimum: int | None) -> list[int]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise TypeError(f"{_OP}: {name} must be a sequence of integers, got {values!r}")
    return [check_int(_OP, f"{name}[{i}]", v, minimum=minimum) for i, v in enumerate(values)]


def _dims(shape: Any, path: str) -> tuple | None:
    """A padded shape as a tuple of int/None (-1 means None), checked as padded_batch
    checks it (``ValueError`` for a shape that is not 1-D, ``TypeError`` for sizes that
    are not integers)."""
    return None if shape is None else tuple(_shape_dims(shape, path, _OP))


class BucketBySequenceLengthDataset(Dataset):
    """Batches of elements whose lengths fall in the same bucket, padded to a common shape
    (``tf.data.Dataset.bucket_by_sequence_length``).

    An element of length ``L = element_length_func(element)`` goes to bucket ``i`` with
    ``bucket_boundaries[i - 1] <= L < bucket_boundaries[i]`` (bucket 0: ``L <
    bucket_boundaries[0]``; the last bucket: ``L >= bucket_boundaries[-1]``). When a
    bucket holds ``bucket_batch_sizes[i]`` elements they are padded and delivered as one
    batch; when the input ends, the buckets that are not full are delivered (dropped with
    ``drop_remainder``) in ascending bucket order. That is tf.data's ``group_by_window``
    with ``padded_batch`` as the reduction, in one op.

    Args:
        element_length_func: element (unpacked when a plain tuple, as tf.data) -> its
            length, a scalar integer.
        bucket_boundaries: strictly increasing integers (upper length boundaries).
        bucket_batch_sizes: batch size per bucket, ``len(bucket_boundaries) + 1`` positive
            integers.
        padded_shapes: as ``padded_batch``: a shape per component (an int pads that
            dimension to exactly that size; None or -1 to the batch maximum). Default
            None: every dimension to the batch maximum.
        padding_values: as ``padded_batch`` (default 0, ``""`` / ``b""`` for strings).
        pad_to_bucket_boundary: pad to ``bucket_boundaries[i] - 1`` instead of the batch
            maximum: with ``padded_shapes`` the None dimensions, without it the leading
            (sequence) dimension of every component of rank >= 1 (tf.data pads every
            unknown dimension of its traced static shape; shapes here are inferred from
            one element, so the sequence axis is the rule). Every element must then have
            ``L < max(bucket_boundaries)``: one that does not fails when it is read
            (tf.data fails when its bucket is batched, losing that whole batch).
        no_padding: batch with ``batch`` (elements of one bucket must have equal shapes).
        drop_remainder: drop the buckets' final batches that are smaller than their size.

    Raises:
        TypeError / ValueError (when built): a function is not callable; boundaries not
            strictly increasing integers; ``len(bucket_batch_sizes) !=
            len(bucket_boundaries) + 1`` or a size < 1; a flag not a bool;
            ``padded_shapes`` / ``padding_values`` not matching the element structure;
            ``no_padding`` together with ``padded_shapes`` / ``padding_values`` /
            ``pad_to_bucket_boundary``; ``pad_to_bucket_boundary`` without boundaries.
        PipelineError (at iteration): ``element_length_func`` raised or returned no scalar
            integer; with ``pad_to_bucket_boundary`` an element with ``L >=
            max(bucket_boundaries)``. Names the op and the input element's index.
        BatchShapeError (at iteration): an element larger than its padded shape, or ranks
            that differ, in a batch; its message counts the elements within the batch, and
            a note lists the batch's input elements.

    ``element_spec``: the batch dimension is the size when ``drop_remainder`` and every
    size is equal, else None; a component's dimensions are the ``padded_shapes`` ints,
    else None for the leading dimension and the input's for the others (rank-0
    components stay scalars). ``cardinality()`` is unknown (infinite stays infinite). The
    iterator state holds the buckets' elements. No random access. Under a worker context
    DATA auto-sharding shards below it: each worker buckets its own elements.

    Example:
        >>> import datapipe as dp
        >>> import numpy as np
        >>> lengths = [1, 5, 2, 6, 3, 7, 1]
        >>> ds = dp.from_tensor_slices(np.array(lengths)).map(lambda n: np.full(n, n))
        >>> ds = ds.bucket_by_sequence_length(len, [4], [2, 2], padding_values=-1)
        >>> [b.tolist() for b in ds]
        [[[1, -1], [2, 2]], [[5, 5, 5, 5, 5, -1], [6, 6, 6, 6, 6, 6]], [[3, 3, 3], [1, -1, -1]], [[7, 7, 7, 7, 7, 7, 7]]]
    """  # noqa: E501

    _name = _OP
    commutes_with_shard = True

    def __init__(
        self,
        input_ds: Dataset,
        element_length_func: Callable,
        bucket_boundaries: Sequence[int],
        bucket_batch_sizes: Sequence[int],
        padded_shapes: Any = None,
        padding_values: Any = None,
        pad_to_bucket_boundary: bool = False,
        no_padding: bool = False,
        drop_remainder: bool = False,
    ):
        super().__init__(input_ds)
        if not callable(element_length_func):
            raise TypeError(
                f"{_OP}: element_length_func must be callable, got "
                f"{type(element_length_func).__name__}"
            )
        self._length_func = element_length_func
        self._boundaries = _int_list("bucket_boundaries", bucket_boundaries, None)
        if any(a >= b for a, b in zip(self._boundaries, self._boundaries[1:])):
            raise ValueError(
                f"{_OP}: bucket_boundaries must be strictly increasing, got {self._boundaries}"
            )
        self._sizes = _int_list("bucket_batch_sizes", bucket_batch_sizes, 1)
        if len(self._sizes) != len(self._boundaries) + 1:
            raise ValueError(
                f"{_OP}: len(bucket_batch_sizes) must equal len(bucket_boundaries) + 1, but "
                f"len(bucket_batch_sizes)={len(self._sizes)} and "
                f"len(bucket_boundaries)={len(self._boundaries)}"
            )
        self._to_boundary = check_bool(_OP, "pad_to_bucket_boundary", pad_to_bucket_boundary)
        self._no_padding = check_bool(_OP, "no_padding", no_padding)
        self._drop_remainder = check_bool(_OP, "drop_remainder", drop_remainder)
        if self._no_padding and (
            padded_shapes is not None or padding_values is not None or self._to_boundary
        ):
            raise ValueError(
                f"{_OP}: no_padding=True batches without padding; padded_shapes, "
                "padding_values and pad_to_bucket_boundary would be ignored"
            )
        if self._to_boundary and not self._boundaries:
            raise ValueError(f"{_OP}: pad_to_bucket_boundary=True needs bucket_boundaries")
        self._components = self._plan(input_ds.element_spec, padded_shapes, padding_values)

    def _plan(self, spec: Any, padded_shapes: Any, padding_values: Any) -> list[tuple]:
        """Per component: (path, padded dims or None, padding value)."""
        paths = [p for p, _ in nest.flatten_with_paths(spec)]
        if padded_shapes is None:
            shapes: list = [None] * len(paths)
        else:
            given = _up_to(spec, padded_shapes, "padded_shapes", _is_shape, _OP)
            shapes = [_dims(s, p) for s, p in zip(given, paths)]
        if padding_values is None or not nest.is_nested(padding_values):
            values = [padding_values] * len(paths)
        else:
            values = _up_to(spec, padding_values, "padding_values", lambda v: True, _OP, True)
        for v in values:
            if v is not None and np.ndim(v) != 0:
                raise ValueError(f"{_OP}: padding values must be scalars, got {v!r}")
        return list(zip(paths, shapes, values))

    @property
    def element_spec(self) -> Any:
        equal = len(set(self._sizes)) == 1
        dim = self._sizes[0] if self._drop_remainder and equal else None
        spec = self._inputs[0].element_spec
        leaves = []
        for s, (_, shape, _) in zip(nest.flatten(spec), self._components):
            if isinstance(s, UnknownSpec) or s.shape is None:
                leaves.append(s)
                continue
            if self._no_padding:
                inner = s.shape
            elif shape is not None:
                inner = shape
            else:
                inner = s.shape if not s.shape else (None, *s.shape[1:])
            leaves.append(TensorSpec((dim, *inner), s.dtype))
        return nest.pack_as(spec, leaves)

    def cardinality(self) -> int:
        n = self._inputs[0].cardinality()
        return INFINITE_CARDINALITY if n == INFINITE_CARDINALITY else UNKNOWN_CARDINALITY

    def bucket_of(self, x: Any) -> int:
        length = as_key(call(self._length_func, x), "element_length_func")
        bucket = bisect.bisect_right(self._boundaries, length)
        if self._to_boundary and bucket == len(self._boundaries):
            raise ValueError(
                "when pad_to_bucket_boundary=True, elements must have length < "
                f"max(bucket_boundaries) = {self._boundaries[-1]}; this one has length {length}"
            )
        return bucket

    def _pad_component(self, comp: tuple, bucket: int, values: list) -> Any:
        path, shape, value = comp
        if self._to_boundary:
            fill = self._boundaries[bucket] - 1
            if shape is not None:
                shape = tuple(fill if d is None else d for d in shape)
            else:
                rank = np.ndim(values[0])
                shape = (fill, *[None] * (rank - 1)) if rank else ()
        return _Component(path, shape, value).pad(values, 0, self._name)

    def make_batch(self, bucket: int, elements: list) -> Any:
        """One batch of a bucket's elements (positions in the batch name them)."""
        if self._no_padding:
            return stack(elements, self._name, 0)
        first = elements[0]
        if not nest.is_nested(first):
            return self._pad_component(self._components[0], bucket, elements)
        columns = list(zip(*[nest.flatten(e) for e in elements]))
        if len(columns) != len(self._components):
            raise BatchShapeError(f"{self._name}: the elements do not match the element structure")
        parts = [
            self._pad_component(c, bucket, list(col)) for c, col in zip(self._components, columns)
        ]
        return nest.pack_as(first, parts)

    def _make_iterator(self, ctx, epoch):
        return BucketIterator(self, ctx.make(self._inputs[0], epoch))


class BucketIterator(OpIterator):
    """Reads up to the largest bucket size of input elements at a time (``leftover`` holds
    those not yet bucketed) and delivers every batch that fills; the buckets' elements and
    input indices are part of the state."""

    op_name = _OP

    def __init__(self, node: BucketBySequenceLengthDataset, inner: OpIterator):
        super().__init__([inner])
        self.node, self.inner = node, inner
        k = len(node._sizes)
        self.buckets: list[list] = [[] for _ in range(k)]
        self.ids: list[list[int]] = [[] for _ in range(k)]  # input indices, for errors
        self.leftover: collections.deque = collections.deque()
        self.count = 0  # input elements read
        self.done = False
        self.pending: BaseException | None = None
        self.pull = max(node._sizes)

    def _add(self, x: Any) -> Any:
        """Bucket ``x``; the batch it completes, or None."""
        index, self.count = self.count, self.count + 1
        try:
            b = self.node.bucket_of(x)
        except Exception as e:  # noqa: BLE001 - located here
            raise annotate(self.op_name, index, e) from e
        self.buckets[b].append(x)
        self.ids[b].append(index)
        return self._flush(b) if len(self.buckets[b]) == self.node._sizes[b] else None

    def _flush(self, b: int) -> Any:
        elements, ids = self.buckets[b], self.ids[b]
        self.buckets[b], self.ids[b] = [], []
        try:
            return self.node.make_batch(b, elements)
        except Exception as e:  # noqa: BLE001 - located at the batch's elements
            raise annotate(self.op_name, ids[0], _in_batch(e, b, ids)) from e

    def _at_end(self, out: list, n: int) -> None:
        """Deliver (or drop) the buckets that are not full, lowest bucket first."""
        for b in range(len(self.buckets)):
            if len(out) >= n:
                return
            if self.buckets[b]:
                if self.node._drop_remainder:
                    self.buckets[b], self.ids[b] = [], []
                else:
                    out.append(self._flush(b))

    def next_chunk(self, n: int) -> list:
        raise_pending(self)
        out: list = []
        while len(out) < n:
            if not self.leftover:
                if out or self.done:
                    break  # never read ahead once a batch is ready
                self.leftover.extend(self.inner.next_chunk(self.pull))
                if not self.leftover:
                    self.done = True
                    break
            try:
                batch = self._add(self.leftover.popleft())
            except Exception as e:  # noqa: BLE001 - delivered after the good batches
                if not out:
                    raise
                self.pending = e
                return out
            if batch is not None:
                out.append(batch)
        if self.done and len(out) < n:
            self._at_end(out, n)
        return out

    def get_state(self) -> dict:
        return {
            "buckets": [list(b) for b in self.buckets],
            "ids": [list(i) for i in self.ids],
            "leftover": list(self.leftover),
            "count": self.count,
            "done": self.done,
            "pending_error": error_to_state(self.pending),
            "input": self.inner.get_state(),
        }

    def set_state(self, state: dict) -> None:
        self.buckets = [list(b) for b in state["buckets"]]
        self.ids = [[int(i) for i in ids] for ids in state["ids"]]
        self.leftover = collections.deque(state["leftover"])
        self.count, self.done = int(state["count"]), bool(state["done"])
        self.pending = error_from_state(state.get("pending_error"), self.op_name)
        self.inner.set_state(state["input"])


def _in_batch(e: BaseException, bucket: int, ids: list[int]) -> BaseException:
    """``e`` with the batch's input indices (its messages count elements in the batch)."""
    shown = ", ".join(map(str, ids[:8])) + (", ..." if len(ids) > 8 else "")
    if hasattr(e, "add_note"):
        e.add_note(f"(the batch of bucket {bucket}: input elements [{shown}], in this order)")
    return e
