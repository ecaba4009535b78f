"""Shares: which positions of a pool a shard point reads, and in which order.

A *pool* is what a shard point shards: the indices ``0 .. n-1`` of a random-access input,
the positions ``0, 1, ...`` of a stream that is the same on every worker, or the units
(files, row groups) of a file source in sorted order. A worker's *share* is a list of
segments read one after the other:

``Split(offset, step, count, base, order)``
    the elements ``offset, offset + step, ...`` (``count`` of them; None: unbounded) of the
    *base set* ``base`` (``Base(P, E)`` = the positions ``>= P`` not in ``E``; the whole
    pool for a first layout), read in the order ``order`` (a permutation of ``range(count)``,
    or None for ascending). Worker ``i`` of ``k`` reads ``Split(i, k, ...)`` of the pool:
    ``shard(k, i)``'s elements. After an elastic resume the base is the part of the pool no
    worker had consumed, and ``order`` lets a file share keep its source (or shuffled) order.
``Pad(positions)``
    positions read again to even out the workers' counts (``uneven="pad"``); they repeat
    positions that belong to a share, so they never count as consumed.

A share's prefix (what a worker has read) is again a share, and ``Split`` prefixes of the
workers of one layout combine into a new ``Base`` cheaply (``datapipe.distribute.elastic``).
States hold shares as JSON-like dicts (``to_state`` / ``share_from_state``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, overload

import numpy as np


@dataclass(frozen=True)
class Base:
    """The pool positions ``>= start`` that are not in ``excluded`` (sorted, all ``>= start``)."""

    start: int = 0
    excluded: tuple[int, ...] = ()

    def at(self, r: np.ndarray) -> np.ndarray:
        """The ``r``-th elements (vectorised): ``start + r + #{k : E[k] - start - k <= r}``."""
        r = np.asarray(r, dtype=np.int64)
        if not self.excluded:
            return self.start + r
        e = np.asarray(self.excluded, dtype=np.int64)
        gaps = e - self.start - np.arange(len(e), dtype=np.int64)
        return self.start + r + np.searchsorted(gaps, r, side="right")

    def size_below(self, n: int) -> int:
        """How many elements of this set are ``< n``."""
        if n <= self.start:
            return 0
        return n - self.start - sum(1 for e in self.excluded if e < n)

    def to_state(self) -> list:
        return [int(self.start), [int(e) for e in self.excluded]]

    @staticmethod
    def from_state(s: Any) -> Base:
        return Base(int(s[0]), tuple(int(e) for e in s[1]))


WHOLE = Base()


class SeededOrder:
    """A permutation of ``range(n)`` given by its seeds: numpy's
    ``Generator(PCG64(SeedSequence(entropy))).permutation(n)``, drawn on first use and
    kept (int64). A checkpoint holds the seeds, ``n`` and the prefix ``limit`` -- a few
    integers -- instead of ``n`` positions (a shuffling ``list_files``'s share of 640k
    files was a 640k-entry list in every state). Indexing and ``np.asarray`` give the
    positions (of the prefix)."""

    __slots__ = ("entropy", "n", "limit", "_perm")

    def __init__(self, entropy: Sequence[int], n: int, limit: int | None = None):
        self.entropy = tuple(int(e) for e in entropy)
        self.n, self.limit = int(n), None if limit is None else min(int(limit), int(n))
        self._perm: np.ndarray | None = None

    def array(self) -> np.ndarray:
        if self._perm is None:
            rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(self.entropy)))
            self._perm = rng.permutation(self.n)
        return self._perm if self.limit is None else self._perm[: self.limit]

    def __len__(self) -> int:
        return self.n if self.limit is None else self.limit

    def __getitem__(self, i: Any) -> Any:
        return self.array()[i]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.array()
        return a if dtype is None else a.astype(dtype)

    def prefix(self, t: int) -> SeededOrder:
        out = SeededOrder(self.entropy, self.n, min(t, len(self)))
        out._perm = self._perm  # the same permutation: share the drawn array
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SeededOrder):
            return NotImplemented
        return (self.entropy, self.n, len(self)) == (other.entropy, other.n, len(other))

    def __hash__(self) -> int:
        return hash((self.entropy, self.n, len(self)))

    def __repr__(self) -> str:
        return f"SeededOrder(n={self.n}, limit={self.limit})"

    def to_state(self) -> dict:
        return {"entropy": list(self.entropy), "n": self.n, "limit": self.limit}


@dataclass(frozen=True)
class Split:
    """See the module docstring. ``seek`` (streams only): ``(position, input state)`` of a
    point of the stream at or before this segment's first position, to start reading there
    instead of from the stream's start. ``accounted``: a prefix adopted at an elastic
    resume, whose positions the resume already counted as consumed."""

    offset: int
    step: int
    count: int | None
    base: Base = WHOLE
    order: tuple[int, ...] | SeededOrder | None = None
    seek: Any = field(default=None, compare=False)
    accounted: bool = False

    def __len__(self) -> int:
        if self.order is not None:
            return len(self.order)
        if self.count is None:
            raise OverflowError("an unbounded share has no length")
        return self.count

    @property
    def bounded(self) -> bool:
        return self.order is not None or self.count is not None

    def positions(self, start: int, stop: int) -> np.ndarray:
        j = np.arange(start, stop, dtype=np.int64)
        if isinstance(self.order, SeededOrder):
            j = self.order.array()[start:stop]
        elif self.order is not None:
            j = np.asarray(self.order[start:stop], dtype=np.int64)
        return self.base.at(self.offset + self.step * j)

    def prefix(self, t: int) -> Split:
        if isinstance(self.order, SeededOrder):
            return replace(self, order=self.order.prefix(t))
        if self.order is not None:
            return replace(self, order=self.order[:t])
        return replace(self, count=t if self.count is None else min(t, self.count))

    def to_state(self) -> dict:
        s: dict = {
            "split": [int(self.offset), int(self.step)],
            "count": None if self.count is None else int(self.count),
            "base": self.base.to_state(),
        }
        if isinstance(self.order, SeededOrder):
            s["seeded_order"] = self.order.to_state()
        elif self.order is not None:
            s["order"] = [int(j) for j in self.order]
        if self.seek is not None:
            s["seek"] = {"at": int(self.seek[0]), "input": self.seek[1]}
        if self.accounted:
            s["accounted"] = True
        return s


@dataclass(frozen=True)
class Pad:
    """Pool positions read a second time (``uneven="pad"``)."""

    items: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.items)

    bounded = True
    seek = None

    def positions(self, start: int, stop: int) -> np.ndarray:
        return np.asarray(self.items[start:stop], dtype=np.int64)

    def prefix(self, t: int) -> Pad:
        return Pad(self.items[:t])

    def to_state(self) -> dict:
        return {"pad": [int(p) for p in self.items]}


Segment = Split | Pad


class Share:
    """Segments read one after the other (see the module docstring)."""

    def __init__(self, segments: Sequence[Segment] = ()):
        # Empty pads go; empty splits stay (they say which worker of which layout this is).
        self.segments: tuple[Segment, ...] = tuple(
            s for s in segments if not (isinstance(s, Pad) and not s.items)
        )

    def __len__(self) -> int:
        return sum(len(s) for s in self.segments)

    @property
    def bounded(self) -> bool:
        return all(s.bounded for s in self.segments)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Share) and self.segments == other.segments

    def __hash__(self) -> int:  # pragma: no cover - shares are not used as keys
        return hash(self.segments)

    def __add__(self, other: Share) -> Share:
        return Share(self.segments + other.segments)

    def locate(self, pos: int) -> tuple[int, int]:
        """``(segment index, index within it)`` of share element ``pos`` (past the end:
        ``(len(segments), 0)``)."""
        for k, seg in enumerate(self.segments):
            if not seg.bounded or pos < len(seg):
                return k, pos
            pos -= len(seg)
        return len(self.segments), 0

    def positions(self, pos: int, n: int) -> tuple[np.ndarray, Segment | None]:
        """Pool positions of share elements ``pos .. pos+n-1`` that lie in the segment of
        element ``pos`` (the caller moves on to the next segment), and that segment."""
        k, j = self.locate(pos)
        if k == len(self.segments):
            return np.zeros(0, dtype=np.int64), None
        seg = self.segments[k]
        stop = j + n if not seg.bounded else min(j + n, len(seg))
        return seg.positions(j, stop), seg

    def prefix(self, t: int) -> Share:
        """The first ``t`` elements."""
        out: list[Segment] = []
        for seg in self.segments:
            if t <= 0:
                break
            if seg.bounded and len(seg) <= t:
                out.append(seg)
                t -= len(seg)
            else:
                out.append(seg.prefix(t))
                t = 0
        return Share(out)

    def index_base(self) -> tuple[int, int] | None:
        """``(stride, offset)`` when element ``j`` is pool position ``offset + stride * j``
        (one ascending ``Split`` of the whole pool), else None."""
        if not self.segments:
            return (1, 0)
        seg = self.segments[0]
        if len(self.segments) == 1 and isinstance(seg, Split):
            if seg.order is None and not seg.base.excluded:
                return (seg.step, seg.base.start + seg.offset)
        return None

    def to_state(self) -> list:
        return [s.to_state() for s in self.segments]

    def __repr__(self) -> str:
        return f"Share({list(self.segments)!r})"


def share_from_state(doc: Any) -> Share:
    """Inverse of ``Share.to_state``.

    Raises:
        ValueError: ``doc`` is not a share (a checkpoint of another layout or tampered).
    """
    try:
        return Share([_segment(s) for s in doc])
    except (KeyError, TypeError, IndexError, ValueError) as e:
        raise ValueError(f"load_state_dict: a shard point's share is malformed ({e})") from e


def _segment(s: dict) -> Segment:
    if "pad" in s:
        return Pad(tuple(int(p) for p in s["pad"]))
    offset, step = (int(v) for v in s["split"])
    order: Any = s.get("order")
    if order is not None:
        order = tuple(int(j) for j in order)
    elif "seeded_order" in s:
        order = _seeded_order(s["seeded_order"], s["count"])
    seek = s.get("seek")
    return Split(
        offset,
        step,
        None if s["count"] is None else int(s["count"]),
        Base.from_state(s["base"]),
        order,
        None if seek is None else (int(seek["at"]), seek["input"]),
        bool(s.get("accounted", False)),
    )


def _seeded_order(doc: dict, count: Any) -> SeededOrder:
    """A ``SeededOrder`` from a state, its size checked before the permutation is drawn:
    it is the segment's own ``count`` (a permutation of the segment's elements)."""
    n, limit = int(doc["n"]), doc.get("limit")
    if count is None or n != int(count):
        raise ValueError(f"a seeded order of {n} elements for a segment of {count}")
    if limit is not None and not 0 <= int(limit) <= n:
        raise ValueError(f"a seeded order's prefix of {limit} out of [0, {n}]")
    return SeededOrder([int(e) for e in doc["entropy"]], n, limit)


@overload
def split_counts(r: int, count: int, uneven: str) -> list[int]: ...
@overload
def split_counts(r: int | None, count: int, uneven: str) -> list[int | None]: ...


def split_counts(r: int | None, count: int, uneven: str) -> list[int] | list[int | None]:
    """How many elements of a base set of ``r`` each of ``count`` workers reads (None:
    unbounded), evened out as ``uneven`` says ("allow": shard sizes; "drop": the smallest;
    "pad": the shard sizes, padded to the largest by ``pad_share``)."""
    if r is None:
        unbounded: list[int | None] = [None] * count
        return unbounded
    sizes = [r // count + (1 if j < r % count else 0) for j in range(count)]
    if uneven == "drop":
        return [min(sizes)] * count
    return sizes


def worker_share(
    base: Base,
    r: int | None,
    index: int,
    count: int,
    uneven: str,
    order_of: Callable[[np.ndarray], Sequence[int] | None] | None = None,
) -> Share:
    """Worker ``index`` of ``count``'s share of the ``r`` elements of ``base`` (see
    ``split_counts``); with ``"pad"`` short workers read their first elements again (the
    base's first ones when their share is empty), as ``DistributedSampler`` pads.
    ``order_of(positions)``: the order to read the share's positions in (a permutation
    of their indices), or None for ascending."""
    if r is None:  # unbounded: every worker reads its stride, nothing to pad
        return Share([Split(index, count, None, base)])
    counts = split_counts(r, count, uneven)
    mine = counts[index]
    split = Split(index, count, mine, base)
    if order_of is not None and mine:
        order = order_of(split.positions(0, mine))
        if order is not None:
            split = Split(index, count, mine, base, tuple(int(j) for j in order))
    if uneven != "pad" or max(counts) == mine:
        return Share([split])
    need = max(counts) - mine
    if mine > 0:
        own = split.positions(0, mine)  # in the order the share is read
        items = [int(own[j % mine]) for j in range(need)]
    else:
        items = [int(p) for p in base.at(np.arange(need) % max(r, 1))]
    return Share([split, Pad(tuple(items))])
