"""``PadDataset``: a worker's shard followed by padding elements (``uneven="pad"``).

Used by the auto-shard rewrite so that every worker yields the same number of elements:
a worker whose shard is short by ``count`` elements appends the first ``count`` elements of
``filler`` (its own shard again, cycled; or the unsharded input when its own shard is
empty), the way ``torch.utils.data.DistributedSampler`` pads by repeating indices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from datapipe._iterator import OpIterator
from datapipe.dataset import Dataset, all_inputs_random_access


class PadDataset(Dataset):
    """``main``'s elements, then ``count`` elements of ``filler`` (cycled from its start).

    Args:
        main: the stream to pad (finite).
        filler: where padding elements come from; must be non-empty when ``count > 0``.
        count: number of padding elements (>= 0).

    Raises:
        ValueError: ``count < 0``, or at iteration ``filler`` is empty while padding is due.

    Keeps random access when both inputs have it.

    Example:
        >>> import datapipe as dp
        >>> [int(x) for x in PadDataset(dp.range(3), dp.range(3), 4)]
        [0, 1, 2, 0, 1, 2, 0]
    """

    _name = "pad"

    def __init__(self, main: Dataset, filler: Dataset, count: int):
        super().__init__(main, filler)
        if int(count) < 0:
            raise ValueError(f"pad: count must be >= 0, got {count}")
        self._count = int(count)

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def cardinality(self) -> int:
        n = self._inputs[0].cardinality()
        return n + self._count if n >= 0 else n

    def _random_access_breaker(self) -> str | None:
        return all_inputs_random_access(self)

    def _make_random_access(self, ctx):
        main, filler = (d._make_random_access(ctx) for d in self._inputs)
        return _PadAccess(main, filler, self._count)

    def _make_iterator(self, ctx, epoch):
        return PadIterator(ctx.make(self._inputs[0], epoch), self._inputs[1], ctx, epoch, self)


def _empty_filler() -> ValueError:
    return ValueError("pad: the filler dataset is empty, so there is nothing to pad with")


class _PadAccess:
    def __init__(self, main: Any, filler: Any, count: int):
        self.main, self.filler, self.count = main, filler, count
        self.n_main = len(main)

    def __len__(self) -> int:
        return self.n_main + self.count

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        idx = [int(i) for i in indices]
        head = [i for i in idx if i < self.n_main]
        tail = [i - self.n_main for i in idx if i >= self.n_main]
        out = self.main.get_many(head, epoch) if head else []
        if tail:
            m = len(self.filler)
            if m == 0:
                raise _empty_filler()
            out += self.filler.get_many([j % m for j in tail], epoch)
        return out


class PadIterator(OpIterator):
    """Reads ``main`` to its end, then the filler (rebuilt from its start when it runs
    out) until ``count`` padding elements were delivered."""

    op_name = "pad"

    def __init__(self, main: OpIterator, filler: Dataset, ctx: Any, epoch: tuple, node: Any):
        super().__init__([main])
        self.main, self.filler_node, self.ctx, self.epoch = main, filler, ctx, epoch
        self.count = node._count
        self.main_done = False
        self.padded = 0
        self.filler: OpIterator | None = None

    def _open_filler(self) -> OpIterator:
        if self.filler is None:
            self.filler = self.ctx.make(self.filler_node, self.epoch)
            self.inputs = [self.main, self.filler]
        return self.filler

    def next_chunk(self, n: int) -> list:
        if not self.main_done:
            got = self.main.next_chunk(n)
            if got:
                return got
            self.main_done = True
        want = min(n, self.count - self.padded)
        if want <= 0:
            return []
        got = self._open_filler().next_chunk(want)
        if not got:  # the filler ran out: start it again (cycling)
            self.filler.close()
            self.filler = None
            got = self._open_filler().next_chunk(want)
            if not got:
                raise _empty_filler()
        self.padded += len(got)
        return got

    def get_state(self) -> dict:
        filler = None if self.filler is None else self.filler.get_state()
        return {
            "main_done": self.main_done,
            "padded": self.padded,
            "main": self.main.get_state(),
            "filler": filler,
        }

    def set_state(self, state: dict) -> None:
        self.main_done, self.padded = bool(state["main_done"]), int(state["padded"])
        self.main.set_state(state["main"])
        if self.filler is not None:
            self.filler.close()
            self.filler = None
        if state["filler"] is not None:
            self._open_filler().set_state(state["filler"])
