"""``take``: the first ``count`` elements (``tf.data.Dataset.take``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from datapipe._iterator import OpIterator
from datapipe._validate import check_int
from datapipe.dataset_ops import (
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Dataset,
    RandomAccessUnaryDataset,
)


class TakeDataset(RandomAccessUnaryDataset):
    """At most ``count`` elements; ``count=-1`` takes all. Never asks its input for more
    elements than it still needs. Keeps random access.

    Example:
        >>> import datapipe as dp
        >>> [int(x) for x in dp.range(10).take(3)]
        [0, 1, 2]
        >>> dp.range(10).take(3).cardinality()
        3
    """

    _name = "take"

    def __init__(self, input_ds: Dataset, count: int):
        super().__init__(input_ds)
        self._count = check_int(
            "take", "count", count, minimum=0, special=(-1,), what=">= 0, or -1 for all"
        )

    def cardinality(self) -> int:
        n = self._inputs[0].cardinality()
        if self._count == -1:
            return n
        if n == INFINITE_CARDINALITY:
            return self._count
        if n == UNKNOWN_CARDINALITY:
            return UNKNOWN_CARDINALITY
        return min(n, self._count)

    def _make_random_access(self, ctx):
        return _TakeAccess(self._inputs[0]._make_random_access(ctx), self._count)

    def _make_iterator(self, ctx, epoch):
        return TakeIterator(ctx.make(self._inputs[0], epoch), self._count)


class _TakeAccess:
    def __init__(self, inner: Any, count: int):
        self.inner = inner
        self.n = len(inner) if count == -1 else min(count, len(inner))
        if hasattr(inner, "index_base"):  # the same indices: random_map keys on them
            self.index_base = inner.index_base

    def __len__(self) -> int:
        return self.n

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        return self.inner.get_many(indices, epoch)


class TakeIterator(OpIterator):
    op_name = "take"

    def __init__(self, inner: OpIterator, count: int):
        super().__init__([inner])
        self.inner, self.count, self.taken = inner, count, 0

    def next_chunk(self, n: int) -> list:
        if self.count != -1:
            n = min(n, self.count - self.taken)
            if n <= 0:
                return []
        try:
            out = self.inner.next_chunk(n)
        except Exception:
            # A failing element keeps its position (datapipe._positions), as it does when
            # take reads by index: take(n) is the first n positions, so take and skip
            # split a dataset the same way whichever elements fail.
            self.taken += 1
            raise
        self.taken += len(out)
        return out

    def index_base(self) -> tuple[int, int] | None:
        return self.inner.index_base()

    def get_state(self) -> dict:
        return {"taken": self.taken, "input": self.inner.get_state()}

    def set_state(self, state: dict) -> None:
        self.taken = int(state["taken"])
        self.inner.set_state(state["input"])
