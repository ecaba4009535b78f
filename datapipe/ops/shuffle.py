"""``shuffle``: a buffer shuffle (``tf.data.Dataset.shuffle``)."""

from __future__ import annotations

import numpy as np

from datapipe._identity import chunk_ids, has_identity, sharded_below, tracked
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

    Example:
        >>> import datapipe as dp
        >>> ds = dp.range(5).shuffle(5, seed=0)
        >>> [int(x) for x in ds]
        [3, 1, 0, 2, 4]
        >>> sorted(int(x) for x in ds)  # a permutation: every element once
        [0, 1, 2, 3, 4]
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
        inner = ctx.make(self._inputs[0], epoch)
        if not tracked(ctx):  # no stage draws above: no identities to carry
            return ShuffleIterator(inner, self._buffer_size, rng, False, carry=False)
        global_stream = not sharded_below(self._inputs[0])
        return ShuffleIterator(inner, self._buffer_size, rng, global_stream)


class ShuffleIterator(OpIterator):
    """tf.data's buffer shuffle. Where its input's elements have identities
    (``datapipe._identity``: a source index, one carried from below, or a position in a
    stream that nothing below shards), the buffer keeps each element's identity beside it
    and ``last_ids`` gives those of the chunk delivered: a map above keys its draws by the
    element's pre-shuffle identity, the same on every worker layout."""

    op_name = "shuffle"

    def __init__(self, inner: OpIterator, buffer_size: int, rng: np.random.Generator,
                 global_stream: bool = False, carry: bool = True):  # fmt: skip
        super().__init__([inner])
        self.inner, self.size, self.rng = inner, buffer_size, rng
        self.buf: list = []
        self.input_done = False
        self.global_stream = global_stream
        # identities beside the buffer (None: the input gives none), input elements taken
        carry = carry and has_identity(inner, global_stream)
        self.ids: list | None = [] if carry else None
        self.taken = 0
        self._last: list | None = None

    def _read(self, n: int) -> tuple[list, list | None]:
        """The input's next chunk and its identities (None once the input gives none)."""
        got = self.inner.next_chunk(n)
        new_ids = None
        if self.ids is not None:
            ids = chunk_ids(self.inner, self.taken, len(got), self.global_stream)
            if ids is None:
                self.ids = None  # never a wrong identity: none from here on
            else:
                new_ids = ids.tolist()
        self.taken += len(got)
        return got, new_ids

    def _fill(self) -> None:
        while len(self.buf) < self.size and not self.input_done:
            got, new_ids = self._read(min(self.size - len(self.buf), 4096))
            if not got:
                self.input_done = True
            self.buf.extend(got)
            if self.ids is not None:
                self.ids.extend(new_ids or ())

    def next_chunk(self, n: int) -> list:
        self._last = None
        self._fill()
        buf, out, out_ids = self.buf, [], []
        if not self.input_done:
            new, new_ids = self._read(n)
            if not new:
                self.input_done = True
            picks = (self.rng.random(len(new)) * len(buf)).astype(np.int64).tolist()
            ids = self.ids
            if ids is None:
                for i, x in zip(picks, new):
                    out.append(buf[i])
                    buf[i] = x
            else:  # each identity moves with its element
                assert new_ids is not None
                for i, x, d in zip(picks, new, new_ids):
                    out.append(buf[i])
                    out_ids.append(ids[i])
                    buf[i], ids[i] = x, d
        if self.input_done:
            k = min(n - len(out), len(buf))
            u = self.rng.random(k).tolist()
            ids = self.ids
            if ids is None:  # two loops: no identity check per element where none is carried
                for j in range(k):  # the buffer shrinks by one per pick
                    i = int(u[j] * len(buf))
                    out.append(buf[i])
                    buf[i] = buf[-1]
                    buf.pop()
            else:
                for j in range(k):
                    i = int(u[j] * len(buf))
                    out.append(buf[i])
                    out_ids.append(ids[i])
                    buf[i], ids[i] = buf[-1], ids[-1]
                    buf.pop()
                    ids.pop()
        if self.ids is not None:
            self._last = out_ids
        return out

    def carries_ids(self) -> bool:
        return self.ids is not None

    def last_ids(self) -> np.ndarray | None:
        return None if self._last is None else np.asarray(self._last, dtype=np.int64)

    def get_state(self) -> dict:
        state = {
            "buffer": list(self.buf),
            "input_done": self.input_done,
            "rng": self.rng.bit_generator.state,
            "input": self.inner.get_state(),
        }
        if self.ids is not None:
            state["ids"], state["taken"] = list(self.ids), self.taken
        return state

    def set_state(self, state: dict) -> None:
        self.buf = list(state["buffer"])
        self.input_done = bool(state["input_done"])
        self.rng.bit_generator.state = state["rng"]
        self.inner.set_state(state["input"])
        if "ids" in state and self.ids is not None:
            self.ids, self.taken = [int(i) for i in state["ids"]], int(state["taken"])
        else:  # a state without identities (or an input without them): none carried
            self.ids = None
