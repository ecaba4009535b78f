"""Which part of the data each split of a service job holds, and which consumer reads it.

A *job* (one iteration of a pipeline that ends in ``distribute``) is cut into *splits*,
numbered ``0, 1, ...``. A split is read by one consumer at a time, on one worker, as one
iterator chain of the pipeline before ``distribute`` (``datapipe.service.worker``).

``"distributed_epoch"`` (``PoolSplits``)
    The pipeline's *pool* -- what auto-sharding would split: the indices of a random-access
    input, or the units (files, row groups) of a file source (``datapipe.distribute.
    shard_point``) -- is cut into ranges of ``split_size`` positions; split ``j`` reads its
    range as the share of every shard point (``share.Split``), so the splits together read
    every position of every pool exactly once. Without ``num_consumers`` the ranges are
    consecutive and any consumer takes the next one (first come, first served: the
    dynamic balance of tf.data's ``"distributed_epoch"``). With ``num_consumers = n`` the
    ranges are laid out in rounds of ``n``, split ``j`` going to consumer ``j % n`` (a strict
    round-robin of splits), and the last round is cut so that every consumer reads the same
    number of positions, evened out as ``Options.distribute.uneven`` says ("drop": at most
    ``n - 1`` positions skipped; "pad": at most ``n - 1`` read twice; "allow": every
    position once, counts differ by at most one).
``"parallel_epochs"`` (``ParallelSlots``)
    Every worker produces the whole dataset: ``num_workers`` slots, slot ``w`` being the
    whole pipeline run with epoch ``(..., w)`` (so seeded shuffles differ between slots).
    With ``num_consumers = n`` each slot is dealt round-robin among the consumers: split
    ``w * n + c`` is consumer ``c``'s DATA share (every ``n``-th pool element, the worker
    context ``c`` of ``n``) of slot ``w``.

Both are plain, picklable descriptions (the dispatcher actor holds one per job); a split's
description (``SplitSpec``) is JSON-like, so it travels in consumer checkpoints too.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from datapipe.distribute.share import Pad, Share, Split, split_counts

INFINITE = -1


@dataclass(frozen=True)
class SplitSpec:
    """How a worker builds split ``sid``'s chain.

    Attributes:
        sid: the split's number in its job.
        epoch_extra: appended to the job's epoch (``parallel_epochs``: the slot).
        shares: per shard point (cut id order), the share's state (``Share.to_state``);
            None: no shard point is restricted (the whole pipeline, or ``context``'s share).
        context: ``(index, count)``: the worker context the chain is sharded for
            (``parallel_epochs`` with consumers); None: one worker of one.
        size: how many pool positions the split reads (None: unknown or unbounded).
    """

    sid: int
    epoch_extra: tuple[int, ...] = ()
    shares: tuple | None = None
    context: tuple[int, int] | None = None
    size: int | None = None

    def to_state(self) -> dict:
        return {
            "sid": self.sid,
            "epoch_extra": list(self.epoch_extra),
            "shares": None if self.shares is None else list(self.shares),
            "context": None if self.context is None else list(self.context),
            "size": self.size,
        }


@dataclass(frozen=True)
class PoolSplits:
    """The splits of ``"distributed_epoch"`` (see the module docstring).

    Attributes:
        pools: the size of each shard point's pool, in cut-id order (``INFINITE``: no end).
        split_size: pool positions per split (the last split of a round may hold fewer).
        consumers: ``num_consumers`` (round-robin), or None (first come, first served).
        uneven: how the last round is evened out across consumers.
        shuffle: hand the splits out in a random order (the pool is a shuffling
            ``list_files``: its files are read in a new order each iteration, drawn from
            the job's seed; with consumers, the rounds are shuffled, so each consumer still
            reads the same number of elements).
    """

    pools: tuple[int, ...]
    split_size: int
    consumers: int | None = None
    uneven: str = "drop"
    shuffle: bool = False

    @property
    def size(self) -> int:
        """Positions in the largest pool (``INFINITE`` when one has no end)."""
        return INFINITE if INFINITE in self.pools else max(self.pools)

    def owner(self, sid: int) -> int | None:
        """The consumer index that reads split ``sid`` (None: any consumer)."""
        return None if self.consumers is None else sid % self.consumers

    def count(self) -> int | None:
        """How many split numbers the job has (some may be empty); None: unbounded."""
        n, s = self.size, self.split_size
        if n == INFINITE:
            return None
        if self.consumers is None:
            return -(-n // s)
        full = n // (self.consumers * s)
        return (full + 1) * self.consumers

    def order(self, i: int, owner: int | None, seed: int) -> int | None:
        """The ``i``-th split of ``owner``'s sequence (None past its end): ``i`` itself,
        or for consumer ``c`` of ``n`` the split ``c`` of round ``i``; rounds (or splits) in
        a random order drawn from ``seed`` when ``shuffle``."""
        count = self.count()
        k = self.consumers or 1
        rounds = None if count is None else count // k
        if rounds is not None and i >= rounds:
            return None
        if self.shuffle and rounds is not None:
            i = int(_permutation(rounds, seed)[i])
        return i * k + (owner or 0)

    def _range(self, sid: int) -> tuple[int, int, tuple[int, ...]]:
        """``(start, count, padding)``: the positions ``start .. start + count - 1`` of the
        largest pool, and the positions read again after them."""
        n, s = self.size, self.split_size
        if self.consumers is None:
            start = sid * s
            return start, s if n == INFINITE else max(0, min(s, n - start)), ()
        k = self.consumers
        r, c = divmod(sid, k)
        full = None if n == INFINITE else n // (k * s)
        if full is None or r < full:
            return (r * k + c) * s, s, ()
        if r > full:
            return n, 0, ()
        rest = n - full * k * s  # the last round: the rest, cut evenly among consumers
        spans = split_counts(rest, k, "allow")
        start = full * k * s + sum(spans[:c])
        counts = split_counts(rest, k, self.uneven)
        pad: tuple[int, ...] = ()
        if self.uneven == "pad" and counts[c] < max(counts):
            first = start if counts[c] else 0  # its own first position, else the pool's
            pad = (first,) * (max(counts) - counts[c])
        return start, counts[c], pad

    def spec(self, sid: int) -> SplitSpec:
        start, count, pad = self._range(sid)
        shares = []
        for pool in self.pools:
            mine = count if pool == INFINITE else max(0, min(start + count, pool) - start)
            segments: list = [Split(start, 1, mine)]
            if pad and (pool == INFINITE or pad[0] < pool):
                segments.append(Pad(pad))
            shares.append(Share(segments).to_state())
        return SplitSpec(sid, (), tuple(shares), None, count + len(pad))


@dataclass(frozen=True)
class ParallelSlots:
    """The splits of ``"parallel_epochs"`` (see the module docstring).

    Attributes:
        slots: how many whole copies of the dataset the job produces (its worker count).
        consumers: ``num_consumers`` (each slot dealt among them), or None.
    """

    slots: int
    consumers: int | None = None

    def owner(self, sid: int) -> int | None:
        return None if self.consumers is None else sid % self.consumers

    def count(self) -> int:
        return self.slots * (self.consumers or 1)

    def order(self, i: int, owner: int | None, seed: int) -> int | None:
        """The ``i``-th split of ``owner``'s sequence: slot ``i``'s (share of its) copy."""
        k = self.consumers or 1
        return None if i >= self.slots else i * k + (owner or 0)

    def slot(self, sid: int) -> int:
        return sid // (self.consumers or 1)

    def spec(self, sid: int) -> SplitSpec:
        slot = self.slot(sid)
        context = None if self.consumers is None else (sid % self.consumers, self.consumers)
        return SplitSpec(sid, (slot,), None, context, None)


Layout = PoolSplits | ParallelSlots


@lru_cache(maxsize=8)
def _permutation(n: int, seed: int) -> Any:
    import numpy as np

    return np.random.Generator(np.random.PCG64([int(seed) % 2**63, n])).permutation(n)


def layout_to_state(layout: Layout) -> dict[str, Any]:
    """A JSON-like description (kept in consumer checkpoints: a resumed job is cut the same
    way, whatever the new worker count)."""
    if isinstance(layout, PoolSplits):
        return {
            "kind": "pool",
            "pools": list(layout.pools),
            "split_size": layout.split_size,
            "consumers": layout.consumers,
            "uneven": layout.uneven,
            "shuffle": layout.shuffle,
        }
    return {"kind": "slots", "slots": layout.slots, "consumers": layout.consumers}


def layout_from_state(doc: Any) -> Layout:
    """Inverse of ``layout_to_state``.

    Raises:
        ValueError: ``doc`` is not such a description (names what is wrong).
    """
    try:
        if doc["kind"] == "pool":
            return PoolSplits(
                tuple(int(p) for p in doc["pools"]),
                int(doc["split_size"]),
                None if doc["consumers"] is None else int(doc["consumers"]),
                str(doc["uneven"]),
                bool(doc.get("shuffle", False)),
            )
        if doc["kind"] == "slots":
            consumers = None if doc["consumers"] is None else int(doc["consumers"])
            return ParallelSlots(int(doc["slots"]), consumers)
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"distribute: the checkpoint's split layout is malformed ({e})") from e
    raise ValueError(f"distribute: unknown split layout kind {doc.get('kind')!r} in the checkpoint")
