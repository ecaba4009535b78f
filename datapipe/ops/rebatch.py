"""``rebatch``: cut a stream of batches into batches of other sizes
(``tf.data.Dataset.rebatch``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe import _structure as nest
from datapipe._batching import batch_size_of
from datapipe._iterator import OpIterator
from datapipe._spec import NoneSpec, TensorSpec, UnknownSpec, is_torch, is_torch_dtype, static_dim
from datapipe._validate import check_bool, check_int
from datapipe.dataset_ops import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset, UnaryDataset
from datapipe.errors import annotate


def check_batch_sizes(op: str, batch_size: Any) -> tuple[int, ...]:
    """``batch_size`` (an integer >= 1, or a sequence of integers >= 0 of which one at
    least is positive: a 0 is an empty batch, as tf.data's empty splits) as a tuple."""
    if isinstance(batch_size, (list, tuple, np.ndarray)):
        sizes = tuple(check_int(op, "batch_size", b, minimum=0) for b in batch_size)
        if not any(sizes):
            raise ValueError(
                f"{op}: batch_size must hold at least one positive size, got {list(sizes)}"
            )
        return sizes
    return (check_int(op, "batch_size", batch_size, minimum=1),)


def _slice(x: Any, s: slice) -> Any:
    return None if x is None else x[s]  # a None component stays None (NoneSpec)


def _empty_like_spec(spec: Any) -> Any:
    """A batch of 0 rows of ``spec`` (its unknown sizes 0), for an empty split before any
    input batch was read."""

    def one(s: Any) -> Any:
        if isinstance(s, NoneSpec):
            return None
        dims = (0,) if s.shape is None else (0, *(static_dim(d) or 0 for d in s.shape[1:]))
        if is_torch_dtype(s.dtype):
            import torch

            return torch.zeros(dims, dtype=s.dtype)
        return np.zeros(dims, dtype=s.dtype)

    return nest.map_structure(one, spec)


def _concat(parts: list) -> Any:
    if len(parts) == 1 or parts[0] is None:
        return parts[0]
    if is_torch(parts[0]):
        import torch

        return torch.cat(parts)
    return np.concatenate(parts)


class RebatchDataset(UnaryDataset):
    """The rows of the input's batches, regrouped into batches of ``batch_size`` rows
    (``tf.data.Dataset.rebatch``): the same elements as ``unbatch().batch(batch_size)``,
    without splitting batches into rows (components are sliced and concatenated).

    Args:
        batch_size: rows per output batch (>= 1), or a sequence of sizes used in turn,
            cycling (``[2, 3]``: batches of 2, 3, 2, 3, ... rows), as tf.data; a 0 in the
            sequence is an empty batch (0 rows), delivered without reading the input.
        drop_remainder: drop a final batch smaller than its size.

    Raises:
        TypeError / ValueError: ``batch_size`` not a positive integer or a non-empty
            sequence of them, ``drop_remainder`` not a bool; a component of the input
            spec is a scalar (nothing to rebatch).
        PipelineError (at iteration): an input element has components of different
            leading sizes or a scalar component (names ``rebatch`` and the input element).

    Every component of an input element must have the same leading (batch) size; rows of
    several input batches are joined with ``numpy.concatenate`` / ``torch.cat`` (ragged
    components, object arrays, concatenate too); an output within one input batch is a
    slice (a view) of it. Input batches with 0 rows are passed over.

    ``element_spec``: the input's with the leading dimension ``batch_size`` when every
    size is equal and either ``drop_remainder`` or the input's batch dimension is known
    and a multiple of it (tf.data's rule), else None. ``cardinality()`` is unknown
    (infinite for an infinite input), as tf.data. The rows pulled but not yet delivered
    are part of the iterator state. No random access.

    Example:
        >>> import datapipe as dp
        >>> [b.tolist() for b in dp.range(10).batch(3).rebatch(4)]
        [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
        >>> [b.tolist() for b in dp.range(8).batch(4).rebatch([1, 3])]
        [[0], [1, 2, 3], [4], [5, 6, 7]]
    """

    _name = "rebatch"
    commutes_with_shard = True
    expands = True  # one input batch may become several output batches

    def __init__(self, input_ds: Dataset, batch_size: Any, drop_remainder: bool = False):
        super().__init__(input_ds)
        self._sizes = check_batch_sizes("rebatch", batch_size)
        self._drop_remainder = check_bool("rebatch", "drop_remainder", drop_remainder)
        for s in nest.flatten(input_ds.element_spec):
            if isinstance(s, (UnknownSpec, NoneSpec)):
                continue
            if s.shape is not None and len(s.shape) == 0:
                raise ValueError(
                    f"rebatch: the input has a scalar component {s}; every component needs a "
                    "leading batch dimension (batch the dataset first)"
                )

    @property
    def element_spec(self) -> Any:
        from datapipe.ops.unbatch import static_batch_dim

        spec = self._inputs[0].element_spec
        size = self._sizes[0] if len(set(self._sizes)) == 1 else None
        rows = static_batch_dim(spec)
        divides = rows is not None and rows > 0 and rows % size == 0 if size else False
        fixed = size is not None and (self._drop_remainder or divides)
        dim = size if fixed else None

        def one(s: Any) -> Any:
            if isinstance(s, (UnknownSpec, NoneSpec)) or s.shape is None:
                return s
            return TensorSpec((dim, *s.shape[1:]), s.dtype)

        return nest.map_structure(one, spec)

    def cardinality(self) -> int:
        n = self._inputs[0].cardinality()
        return INFINITE_CARDINALITY if n == INFINITE_CARDINALITY else UNKNOWN_CARDINALITY

    def _make_iterator(self, ctx, epoch):
        it = RebatchIterator(ctx.make(self._inputs[0], epoch), self._sizes, self._drop_remainder)
        it.empty = lambda: _empty_like_spec(self._inputs[0].element_spec)
        return it


class RebatchIterator(OpIterator):
    """Holds the rows pulled and not yet delivered as a list of batch slices
    (``pending``, part of the state), and reads one input batch at a time."""

    op_name = "rebatch"

    def __init__(self, inner: OpIterator, sizes: Sequence[int], drop_remainder: bool):
        super().__init__([inner])
        self.inner, self.sizes, self.drop = inner, tuple(sizes), drop_remainder
        self.pending: list = []  # batch slices, in order
        self.rows = 0  # rows in pending
        self.emitted = 0  # output batches delivered (picks the next size)
        self.batches = 0  # input batches read (error indices)
        self.done = False
        self.template: Any = None  # 0 rows of the last input batch (empty splits)
        self.empty: Any = None  # () -> 0 rows of the spec, before any input batch

    def _read(self) -> None:
        got = self.inner.next_chunk(1)
        if not got:
            self.done = True
            return
        self.batches += 1
        try:
            rows = batch_size_of(got[0], "rebatch")
        except ValueError as e:
            raise annotate("rebatch", self.batches - 1, e) from e
        self.template = nest.map_structure(lambda x: _slice(x, slice(0, 0)), got[0])
        if rows:
            self.pending.append(got[0])
            self.rows += rows

    def _take(self, k: int) -> Any:
        """The first ``k`` pending rows as one batch (an empty one for ``k == 0``)."""
        if k == 0:
            if self.pending:
                return nest.map_structure(lambda x: _slice(x, slice(0, 0)), self.pending[0])
            return self.template if self.template is not None else self.empty()
        parts, need = [], k
        while need:
            head = self.pending[0]
            rows = batch_size_of(head, "rebatch")
            if rows <= need:
                parts.append(self.pending.pop(0))
                need -= rows
            else:
                cut = slice(0, need), slice(need, None)
                parts.append(nest.map_structure(lambda x, s=cut[0]: _slice(x, s), head))
                self.pending[0] = nest.map_structure(lambda x, s=cut[1]: _slice(x, s), head)
                need = 0
        self.rows -= k
        if len(parts) == 1:
            return parts[0]
        leaves = [_concat(list(col)) for col in zip(*[nest.flatten(p) for p in parts])]
        return nest.pack_as(parts[0], leaves)

    def next_chunk(self, n: int) -> list:
        out: list = []
        while len(out) < n:
            size = self.sizes[self.emitted % len(self.sizes)]
            while self.rows < size and not self.done:
                self._read()
            if size == 0:  # an empty split: delivered without reading the input (tf.data)
                out.append(self._take(0))
            elif self.rows >= size:
                out.append(self._take(size))
            elif self.rows and not self.drop:
                out.append(self._take(self.rows))
            else:
                self.pending, self.rows = [], 0  # a dropped remainder
                break
            self.emitted += 1
        return out

    def get_state(self) -> dict:
        return {
            "pending": list(self.pending),
            "emitted": self.emitted,
            "batches": self.batches,
            "done": self.done,
            "input": self.inner.get_state(),
        }

    def set_state(self, state: dict) -> None:
        self.pending = list(state["pending"])
        self.rows = sum(batch_size_of(p, "rebatch") for p in self.pending)
        self.emitted, self.batches = int(state["emitted"]), int(state["batches"])
        self.done = bool(state["done"])
        self.inner.set_state(state["input"])
