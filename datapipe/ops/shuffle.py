"""``shuffle``: a buffer shuffle (``tf.data.Dataset.shuffle``)."""

from __future__ import annotations

import numpy as np

from datapipe._iterator import OpIterator
from datapipe._validate import check_bool, check_int, check_seed
from datapipe.dataset_ops import Dataset, UnaryDataset


class ShuffleDataset(UnaryDataset):
    """Randomly shuffles elements with a buffer of ``buffer_size`` elements.

    tf.data's algorithm: fill the buffer, then for each output pick a uniformly random
    buffer slot, emit it and put the next input element in its place; at the end drain the
    buffer in random order. ``buffer_size >= cardinality`` gives a uniform permutation.

    Args:
        buffer_size: elements held (>= 1). Holds references, never copies of elements.
        seed: op seed; default derives from ``Options.seed`` and the op's position.
        reshuffle_each_iteration: a new order for each epoch (each ``iter()`` of the same
            dataset object, each ``repeat`` pass); still reproducible from the seed.

    The iterator's state holds the buffer's elements, so a checkpoint taken mid-epoch
    resumes the exact same order.
    """

    _name = "shuffle"
    commutes_with_shard = True
    uses_randomness = True

    def __init__(
        self,
        input_ds: Dataset,
        buffer_size: int,
        seed: int | None = None,
        reshuffle_each_iteration: bool = True,
    ):
        super().__init__(input_ds)
        self._buffer_size = check_int("shuffle", "buffer_size", buffer_size, minimum=1)
        self._seed = check_seed("shuffle", seed)
        self._reshuffle = check_bool(
            "shuffle", "reshuffle_each_iteration", reshuffle_each_iteration
        )

    def _make_iterator(self, ctx, epoch):
        rng = ctx.rng(self, epoch if self._reshuffle else ())
        return ShuffleIterator(ctx.make(self._inputs[0], epoch), self._buffer_size, rng)


class ShuffleIterator(OpIterator):
    op_name = "shuffle"

    def __init__(self, inner: OpIterator, buffer_size: int, rng: np.random.Generator):
        super().__init__([inner])
        self.inner, self.size, self.rng = inner, buffer_size, rng
        self.buf: list = []
        self.input_done = False

    def _fill(self) -> None:
        while len(self.buf) < self.size and not self.input_done:
            got = self.inner.next_chunk(min(self.size - len(self.buf), 4096))
            if not got:
                self.input_done = True
            self.buf.extend(got)

    def next_chunk(self, n: int) -> list:
        self._fill()
        buf, out = self.buf, []
        if not self.input_done:
            new = self.inner.next_chunk(n)
            if not new:
                self.input_done = True
            picks = (self.rng.random(len(new)) * len(buf)).astype(np.int64)
            for i, x in zip(picks.tolist(), new):
                out.append(buf[i])
                buf[i] = x
        if self.input_done:
            k = min(n - len(out), len(buf))
            u = self.rng.random(k).tolist()
            for j in range(k):  # the buffer shrinks by one per pick
                i = int(u[j] * len(buf))
                out.append(buf[i])
                buf[i] = buf[-1]
                buf.pop()
        return out

    def get_state(self) -> dict:
        return {
            "buffer": list(self.buf),
            "input_done": self.input_done,
            "rng": self.rng.bit_generator.state,
            "input": self.inner.get_state(),
        }

    def set_state(self, state: dict) -> None:
        self.buf = list(state["buffer"])
        self.input_done = bool(state["input_done"])
        self.rng.bit_generator.state = state["rng"]
        self.inner.set_state(state["input"])
