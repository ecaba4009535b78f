"""``unbatch``: split batched elements into their rows (``tf.data.Dataset.unbatch``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from datapipe import _structure as nest
from datapipe._batching import split
from datapipe._iterator import OpIterator
from datapipe._spec import NoneSpec, static_dim, unbatched_spec
from datapipe.dataset_ops import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset
from datapipe.errors import annotate


def static_batch_dim(spec: Any) -> int | None:
    """The leading dimension shared by every component of ``spec`` when it is known."""
    leaves = [s for s in nest.flatten(spec) if not isinstance(s, NoneSpec)]
    dims = {static_dim(s.shape[0]) if s.shape else None for s in leaves}
    if len(dims) == 1:
        return dims.pop()
    return None


class UnbatchDataset(Dataset):
    """Each element of the input (every component with the same leading dimension) becomes
    that many elements, its rows in order; the inverse of ``batch``.

    Raises:
        ValueError: at construction when a component of the input spec is a scalar, or
            the known batch dimensions of its components differ; at
            iteration (as ``PipelineError`` naming ``unbatch`` and the batch's index) when
            an element has a scalar component or components of different leading sizes.

    ``element_spec`` drops the leading dimension. ``cardinality()``, as in tf.data, is
    ``input cardinality * batch size`` when the batch dimension is static in the input's
    spec (e.g. after ``batch(..., drop_remainder=True)``), infinite for an infinite input,
    else unknown; exactly then random access is kept too.

    Example:
        >>> import datapipe as dp
        >>> [int(x) for x in dp.range(5).batch(2).unbatch()]
        [0, 1, 2, 3, 4]
    """

    _name = "unbatch"
    expands = True

    def __init__(self, input_ds: Dataset):
        super().__init__(input_ds)
        spec = input_ds.element_spec
        self._spec = unbatched_spec(spec, "unbatch")
        known = {
            p: static_dim(s.shape[0])
            for p, s in nest.flatten_with_paths(spec)
            if s.shape and not isinstance(s, NoneSpec) and static_dim(s.shape[0]) is not None
        }
        if len(set(known.values())) > 1:  # tf.data: a ValueError when the graph is built
            listing = ", ".join(f"{p}: {n}" for p, n in known.items())
            raise ValueError(
                f"unbatch: the components' batch dimensions differ ({listing}); every "
                "component needs the same leading size"
            )

    @property
    def element_spec(self) -> Any:
        return self._spec

    def _static_rows(self) -> int | None:
        return static_batch_dim(self._inputs[0].element_spec)

    def cardinality(self) -> int:
        n = self._inputs[0].cardinality()
        if n == 0:  # nothing to unbatch, whatever the (maybe unknown) batch shape
            return 0
        rows = self._static_rows()
        if n == INFINITE_CARDINALITY:
            return INFINITE_CARDINALITY if rows != 0 else 0
        if n == UNKNOWN_CARDINALITY or rows is None:
            return UNKNOWN_CARDINALITY
        return n * rows

    def _random_access_breaker(self) -> str | None:
        if self._static_rows() is None or self._inputs[0].cardinality() < 0:
            return self._name
        return self._inputs[0]._random_access_breaker()

    def _make_random_access(self, ctx):
        return _UnbatchAccess(self._inputs[0]._make_random_access(ctx), self._static_rows())

    def _make_iterator(self, ctx, epoch):
        return UnbatchIterator(ctx.make(self._inputs[0], epoch))


class _UnbatchAccess:
    def __init__(self, inner: Any, rows: int):
        self.inner, self.rows = inner, rows

    def __len__(self) -> int:
        return len(self.inner) * self.rows

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        wanted = sorted({int(i) // self.rows for i in indices})
        rows_of = {}
        for b, batch in zip(wanted, self.inner.get_many(wanted, epoch)):
            try:
                rows = split(batch, "unbatch")
            except ValueError as e:
                raise annotate("unbatch", b, e) from e
            if len(rows) != self.rows:
                raise annotate(
                    "unbatch",
                    b,
                    ValueError(
                        f"batch has {len(rows)} rows but the element_spec promises {self.rows}"
                    ),
                )
            rows_of[b] = rows
        return [rows_of[int(i) // self.rows][int(i) % self.rows] for i in indices]


class UnbatchIterator(OpIterator):
    """Reads one batch at a time; the rows not yet emitted are part of the state."""

    op_name = "unbatch"

    def __init__(self, inner: OpIterator):
        super().__init__([inner])
        self.inner = inner
        self.rows: list = []  # rows of the current batch
        self.pos = 0  # rows of it already emitted
        self.batches = 0  # batches read, for error indices

    def next_chunk(self, n: int) -> list:
        while self.pos >= len(self.rows):
            got = self.inner.next_chunk(1)
            if not got:
                return []
            self.batches += 1
            self.rows, self.pos = [], 0
            try:
                self.rows = split(got[0], "unbatch")
            except ValueError as e:
                raise annotate("unbatch", self.batches - 1, e) from e
        out = self.rows[self.pos : self.pos + n]
        self.pos += len(out)
        return out

    def get_state(self) -> dict:
        return {
            "rows": self.rows[self.pos :],
            "batches": self.batches,
            "input": self.inner.get_state(),
        }

    def set_state(self, state: dict) -> None:
        self.rows, self.pos = list(state["rows"]), 0
        self.batches = int(state["batches"])
        self.inner.set_state(state["input"])
