"""``shard``: every ``num_shards``-th element from ``index`` (``tf.data.Dataset.shard``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe._identity import chunk_ids, has_identity, sharded_below
from datapipe._iterator import OpIterator
from datapipe._validate import check_int
from datapipe.dataset_ops import (
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Dataset,
    RandomAccessUnaryDataset,
)


class ShardDataset(RandomAccessUnaryDataset):
    """The input's elements ``index, index + num_shards, index + 2 * num_shards, ...``
    (``tf.data.Dataset.shard``).

    The shards ``0 .. num_shards - 1`` partition the input: every element is in exactly
    one of them. Cardinality (tf.data): ``n // num_shards + (index < n % num_shards)`` for
    a known ``n``; infinite and unknown stay so.

    On a random access input only the shard's own elements are ever computed (index
    arithmetic, and random access is kept; a shard above ``map``/``random_map`` moves below
    them at ``iter()``); on a streaming input the other shards' elements are pulled and
    dropped, as tf.data does.

    Auto-sharding: under a worker context (torchrun's ``RANK``/``WORLD_SIZE``, a
    ``torch.distributed`` process group, ``DataLoader`` workers or
    ``Options.distribute``) ``iter()`` shards a pipeline by itself (see
    ``datapipe.distribute``). An explicit ``shard()`` anywhere in a pipeline turns that off
    for the whole pipeline: this op is then the only sharding, so ``ds.shard(1, 0)`` reads
    everything on every worker (e.g. rank-0 evaluation of a full test set).

    Raises:
        ValueError: ``num_shards < 1`` or ``index`` outside ``[0, num_shards)`` (the
            message names both numbers).

    Example:
        >>> import datapipe as dp
        >>> [int(x) for x in dp.range(10).shard(3, 1)]
        [1, 4, 7]
    """

    _name = "shard"
    commutes_with_shard = True
    selects_indices = True

    def __init__(self, input_ds: Dataset, num_shards: int, index: int):
        super().__init__(input_ds)
        num_shards = check_int("shard", "num_shards", num_shards, minimum=1)
        index = check_int("shard", "index", index)
        if not 0 <= index < num_shards:
            raise ValueError(
                f"shard: index must be in [0, num_shards), got index={index} with "
                f"num_shards={num_shards}"
            )
        self._num_shards, self._index = num_shards, index

    def cardinality(self) -> int:
        n = self._inputs[0].cardinality()
        if n in (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY):
            return n
        k = self._num_shards
        return n // k + (1 if self._index < n % k else 0)

    def _make_random_access(self, ctx):
        return _ShardAccess(self._inputs[0]._make_random_access(ctx), self._num_shards, self._index)

    def _make_iterator(self, ctx, epoch):
        if self._inputs[0]._random_access_breaker() is None:
            return self._ra_iterator(ctx, epoch)  # only this shard's elements are built
        inner = ctx.make(self._inputs[0], epoch)
        global_stream = not sharded_below(self._inputs[0])
        return ShardIterator(inner, self._num_shards, self._index, global_stream)


class _ShardAccess:
    def __init__(self, inner: Any, num_shards: int, index: int):
        self.inner, self.k, self.index = inner, num_shards, index
        n = len(inner)
        self.n = n // num_shards + (1 if index < n % num_shards else 0)
        stride, offset = getattr(inner, "index_base", (1, 0))
        self.index_base = (stride * num_shards, offset + stride * index)

    def __len__(self) -> int:
        return self.n

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        k, o = self.k, self.index
        if isinstance(indices, range):
            mapped: Sequence[int] = range(
                indices.start * k + o, indices.stop * k + o, indices.step * k
            )
        else:
            mapped = [int(i) * k + o for i in indices]
        return self.inner.get_many(mapped, epoch)


class ShardIterator(OpIterator):
    """Pulls the input up to (never past) the last element it returns and keeps every
    ``num_shards``-th; ``position`` (input elements consumed) is the state.

    The identity of each element it keeps (``last_ids``, ``datapipe._identity``) is the
    one its input gives it (a source index, a shuffle's carried one), else its position in
    the input stream when nothing below shards it: its position in the unsharded stream,
    which no other shard has."""

    op_name = "shard"

    def __init__(self, inner: OpIterator, num_shards: int, index: int,
                 global_stream: bool = False):  # fmt: skip
        super().__init__([inner])
        self.inner, self.k, self.index = inner, num_shards, index
        self.position = 0
        self.done = False
        self.global_stream = global_stream
        self._ids = has_identity(inner, global_stream)
        self._last: np.ndarray | None = None

    def next_chunk(self, n: int) -> list:
        out: list = []
        self._last = None
        while not out and not self.done:
            # Input position of this shard's next element; ask for exactly the input up to
            # the n-th such element (in pieces, so a large num_shards never holds much).
            first = self.position + (self.index - self.position) % self.k
            if self.position <= self.index:
                first = self.index
            want = first + (n - 1) * self.k + 1 - self.position
            try:
                got = self.inner.next_chunk(min(want, 4096))
            except Exception:
                # A failing element keeps its position (datapipe._positions), so the shares
                # stay those of reading by index; another shard's failure is not ours.
                self.position += 1
                if first == self.position - 1:
                    raise
                continue
            if not got:
                self.done = True
                break
            out = got[first - self.position :: self.k]
            if self._ids:
                ids = chunk_ids(self.inner, self.position, len(got), self.global_stream)
                self._ids = ids is not None  # never a wrong identity: none from here on
                if ids is not None:
                    self._last = ids[first - self.position :: self.k]
            self.position += len(got)
        return out

    def carries_ids(self) -> bool:
        return self._ids and self.inner.index_base() is None

    def last_ids(self) -> np.ndarray | None:
        return self._last

    def index_base(self) -> tuple[int, int] | None:
        base = self.inner.index_base()
        if base is None:
            return None
        stride, offset = base
        return (stride * self.k, offset + stride * self.index)

    def get_state(self) -> dict:
        return {"position": self.position, "done": self.done, "input": self.inner.get_state()}

    def set_state(self, state: dict) -> None:
        self.position, self.done = int(state["position"]), bool(state["done"])
        self.inner.set_state(state["input"])
