"""``repeat``: iterate the input ``count`` times (``tf.data.Dataset.repeat``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from datapipe._iterator import OpIterator
from datapipe.dataset import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset


class RepeatDataset(Dataset):
    """The input repeated ``count`` times; ``None`` or -1 repeats forever.

    Each repetition is a new epoch of the input: random ops inside reshuffle/redraw (when
    ``reshuffle_each_iteration``), reproducibly from the seed. Finite repeats of a random
    access input keep random access.
    """

    _name = "repeat"

    def __init__(self, input_ds: Dataset, count: int | None = None):
        super().__init__(input_ds)
        self._count = -1 if count is None else int(count)
        if self._count < -1:
            raise ValueError(f"repeat: count must be >= -1 or None, got {count}")

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

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
        out: list = []
        run: list[int] = []
        run_rep = None
        for i in indices:  # group consecutive indices of one repetition into one call
            rep, j = divmod(int(i), self.n)
            if rep != run_rep and run:
                out.extend(self.inner.get_many(run, (*epoch, run_rep)))
                run = []
            run_rep = rep
            run.append(j)
        if run:
            out.extend(self.inner.get_many(run, (*epoch, run_rep)))
        return out


class RepeatIterator(OpIterator):
    """Rebuilds the input's iterator for each repetition, with epoch ``(*epoch, rep)``."""

    op_name = "repeat"

    def __init__(self, node: Dataset, ctx: Any, epoch: tuple, count: int):
        super().__init__()
        self.node, self.ctx, self.epoch, self.count = node, ctx, epoch, count
        self.rep = 0
        self.inner: OpIterator | None = None
        self._empty_reps = 0

    def _open(self) -> OpIterator:
        if self.inner is None:
            self.inner = self.ctx.make(self.node, (*self.epoch, self.rep))
            self.inputs = [self.inner]
        return self.inner

    def next_chunk(self, n: int) -> list:
        while self.count == -1 or self.rep < self.count:
            got = self._open().next_chunk(n)
            if got:
                self._empty_reps = 0
                return got
            self.inner.close()
            self.inner, self.inputs = None, []
            self.rep += 1
            self._empty_reps += 1
            if self._empty_reps > 1:  # an empty input repeated forever would spin
                return []
        return []

    def get_state(self) -> dict:
        inner = None if self.inner is None else self.inner.get_state()
        return {"rep": self.rep, "input": inner}

    def set_state(self, state: dict) -> None:
        if self.inner is not None:
            self.inner.close()
            self.inner, self.inputs = None, []
        self.rep = int(state["rep"])
        if state["input"] is not None:
            self._open().set_state(state["input"])

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()
        self.closed = True
