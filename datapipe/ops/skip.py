"""``skip``: drop the first ``count`` elements (``tf.data.Dataset.skip``)."""

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


class SkipDataset(RandomAccessUnaryDataset):
    """All but the first ``count`` elements; ``count=-1`` skips everything. On a random
    access chain the skipped elements are never computed (a skip above ``map`` /
    ``random_map`` moves below them at ``iter()``).

    Example:
        >>> import datapipe as dp
        >>> [int(x) for x in dp.range(10).skip(7)]
        [7, 8, 9]
        >>> dp.range(10).skip(7).cardinality()
        3
    """

    _name = "skip"
    selects_indices = True

    def __init__(self, input_ds: Dataset, count: int):
        super().__init__(input_ds)
        self._count = check_int(
            "skip", "count", count, minimum=0, special=(-1,), what=">= 0, or -1 for all"
        )

    def cardinality(self) -> int:
        n = self._inputs[0].cardinality()
        if n in (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY):
            return 0 if (self._count == -1 and n == UNKNOWN_CARDINALITY) else n
        return 0 if self._count == -1 else max(0, n - self._count)

    def _make_random_access(self, ctx):
        return _SkipAccess(self._inputs[0]._make_random_access(ctx), self._count)

    def _make_iterator(self, ctx, epoch):
        inp = self._inputs[0]
        if inp._random_access_breaker() is None:
            # Read from the first kept index (the push-down rewrite has moved the skip below
            # element-wise ops, which keep running as iterators).
            return self._ra_iterator(ctx, epoch)
        return SkipIterator(ctx.make(inp, epoch), self._count)


class _SkipAccess:
    def __init__(self, inner: Any, count: int):
        self.inner = inner
        self.offset = len(inner) if count == -1 else min(count, len(inner))
        stride, offset = getattr(inner, "index_base", (1, 0))
        self.index_base = (stride, offset + stride * self.offset)  # for random_map's keys

    def __len__(self) -> int:
        return len(self.inner) - self.offset

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        o = self.offset
        if isinstance(indices, range):
            shifted: Sequence[int] = range(indices.start + o, indices.stop + o, indices.step)
        else:
            shifted = [i + o for i in indices]
        return self.inner.get_many(shifted, epoch)


class SkipIterator(OpIterator):
    op_name = "skip"

    def __init__(self, inner: OpIterator, count: int):
        super().__init__([inner])
        self.inner, self.count, self.skipped = inner, count, 0

    def next_chunk(self, n: int) -> list:
        while self.count == -1 or self.skipped < self.count:
            want = 1024 if self.count == -1 else min(1024, self.count - self.skipped)
            try:
                got = self.inner.next_chunk(want)
            except Exception:
                # A failing element keeps its position (datapipe._positions): one of the
                # skipped ones is not part of the output (as when skip reads by index).
                self.skipped += 1
                if self.count == -1:
                    raise
                continue
            if not got:
                return []
            self.skipped += len(got)
        return self.inner.next_chunk(n)

    def index_base(self) -> tuple[int, int] | None:
        base = self.inner.index_base()
        if base is None or self.count == -1:
            return None
        stride, offset = base
        return (stride, offset + stride * self.count)

    def get_state(self) -> dict:
        return {"skipped": self.skipped, "input": self.inner.get_state()}

    def set_state(self, state: dict) -> None:
        self.skipped = int(state["skipped"])
        self.inner.set_state(state["input"])
