"""Random access: datasets that know their length and can fetch element i directly.

Sources such as arrays, ``range`` and file lists can; ops such as ``map``, ``shard``,
``take``, ``skip``, finite ``repeat``, ``batch``, ``zip`` and ``global_shuffle`` keep the
ability (Grain's map-style datasets). Streaming ops (buffer ``shuffle``, ``filter``,
``interleave``, generators) lose it. ``global_shuffle`` relies on it, and a source iterator
over it needs only an integer of state.
"""

from __future__ import annotations

from collections.abc import Sequence

from datapipe._iterator import OpIterator


class RandomAccess:
    """Length plus fetch-by-index for one ``iter()`` (seeds are already resolved).

    ``get_many(indices, epoch)`` returns the elements at ``indices`` (a ``range`` for the
    contiguous fast path, or a list of ints) in that order; ``epoch`` is the tuple that
    random ops mix into their seeds.
    """

    def __len__(self) -> int:
        raise NotImplementedError

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        raise NotImplementedError


class RandomAccessIterator(OpIterator):
    """Reads a ``RandomAccess`` in index order; state is one integer."""

    def __init__(self, ra: RandomAccess, epoch: tuple, op_name: str):
        super().__init__()
        self.ra, self.epoch, self.op_name = ra, epoch, op_name
        self.index = 0
        self.length = len(ra)

    def next_chunk(self, n: int) -> list:
        stop = min(self.index + n, self.length)
        if stop <= self.index:
            return []
        out = self.ra.get_many(range(self.index, stop), self.epoch)
        self.index = stop
        return out

    def get_state(self) -> dict:
        return {"index": self.index}

    def set_state(self, state: dict) -> None:
        self.index = int(state["index"])
