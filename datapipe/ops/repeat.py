"""``repeat``: iterate the input ``count`` times (``tf.data.Dataset.repeat``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from datapipe._iterator import OpIterator
from datapipe._random_access import get_grouped
from datapipe._validate import check_int
from datapipe.dataset_ops import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset, UnaryDataset


class RepeatDataset(UnaryDataset):
    """The input repeated ``count`` times; ``None`` or -1 repeats forever.

    Each repetition is a new epoch of the input: random ops inside reshuffle/redraw (when
    ``reshuffle_each_iteration``), reproducibly from the seed. Finite repeats of a random
    access input keep random access.

    Example:
        >>> import datapipe as dp
        >>> [int(x) for x in dp.range(3).repeat(2)]
        [0, 1, 2, 0, 1, 2]
        >>> [int(x) for x in dp.range(3).repeat().take(7)]  # forever, cut by take
        [0, 1, 2, 0, 1, 2, 0]
    """

    _name = "repeat"
    commutes_with_shard = True
    keeps_random_access = True
    repeats_input = True

    def __init__(self, input_ds: Dataset, count: int | None = None):
        super().__init__(input_ds)
        self._count = (
            -1
            if count is None
            else check_int(
                "repeat", "count", count, minimum=0, special=(-1,), what=">= 0, or -1/None for ever"
            )
        )

    def cardinality(self) -> int:
        n = self._inputs[0].cardinality()
        if self._count == 0 or n == 0:
            return 0
        if self._count == -1:
            return UNKNOWN_CARDINALITY if n == UNKNOWN_CARDINALITY else INFINITE_CARDINALITY
        if n in (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY):
            return n
        return n * self._count

    def _random_access_breaker(self) -> str | None:
        if self._count == -1:
            return self._name
        return self._inputs[0]._random_access_breaker()

    def _make_random_access(self, ctx):
        return _RepeatAccess(self._inputs[0]._make_random_access(ctx), self._count)

    def _make_iterator(self, ctx, epoch):
        return RepeatIterator(self._inputs[0], ctx, epoch, self._count)


class _RepeatAccess:
    def __init__(self, inner: Any, count: int):
        self.inner, self.count, self.n = inner, count, len(inner)

    def __len__(self) -> int:
        return self.n * self.count

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        return get_grouped(
            indices,
            lambda i: divmod(i, self.n),  # (repetition, index within it)
            lambda rep, run: self.inner.get_many(run, (*epoch, rep)),
        )


class ChainIterator(OpIterator):
    """Reads a sequence of inputs one after another, building each one's iterator
    (``_build``) only when it is first read, so a pipeline that stops early never builds
    the later ones. ``pos`` counts the inputs read to their end; the state names it
    ``pos_key``."""

    pos_key = "pos"

    def __init__(self, ctx: Any, epoch: tuple):
        super().__init__()
        self.ctx, self.epoch = ctx, epoch
        self.pos = 0
        self.inner: OpIterator | None = None

    def _build(self) -> OpIterator:
        """The iterator of input number ``self.pos``."""
        raise NotImplementedError

    def _open(self) -> OpIterator:
        if self.inner is None:
            self.inner = self._build()
            self.inputs = [self.inner]
        return self.inner

    def _close_inner(self) -> None:
        if self.inner is not None:
            self.inner.close()
        self.inner, self.inputs = None, []

    def _advance(self) -> None:
        """The current input has ended: close it and move on to the next."""
        self._close_inner()
        self.pos += 1

    def get_state(self) -> dict:
        inner = None if self.inner is None else self.inner.get_state()
        return {self.pos_key: self.pos, "input": inner}

    def set_state(self, state: dict) -> None:
        self._close_inner()
        self.pos = int(state[self.pos_key])
        if state["input"] is not None:
            self._open().set_state(state["input"])

    def close(self) -> None:
        from datapipe.parallel.processes import close_parked

        if self.inner is not None:
            self.inner.close()
        self.closed = True
        close_parked(self.ctx)  # processes an ended input left for a next one


class RepeatIterator(ChainIterator):
    """Rebuilds the input's iterator for each repetition, with epoch ``(*epoch, rep)``."""

    op_name = "repeat"
    pos_key = "rep"  # the repetition being read

    def __init__(self, node: Dataset, ctx: Any, epoch: tuple, count: int):
        super().__init__(ctx, epoch)
        self.node, self.count = node, count
        self._empty_reps = 0

    def _build(self) -> OpIterator:
        return self.ctx.make(self.node, (*self.epoch, self.pos))

    def _advance(self) -> None:
        """An epoch ended: its parallel stages' worker processes wait for the next epoch's
        stages to take them back (they start once per iterator, not once per epoch)."""
        from datapipe.parallel.processes import epoch_boundary

        with epoch_boundary(self.ctx):
            super()._advance()

    def next_chunk(self, n: int) -> list:
        while self.count == -1 or self.pos < self.count:
            got = self._open().next_chunk(n)
            if got:
                self._empty_reps = 0
                return got
            self._advance()
            self._empty_reps += 1
            if self._empty_reps > 1:  # an empty input repeated forever would spin
                return []
        return []
