"""Shard points: the nodes auto-sharding inserts, each reading this worker's share of a pool.

Three kinds, by what the pool is (``datapipe.distribute.share`` describes shares):

``IndexCut``
    a random-access input (arrays, ``range``, file lists, ``map``/``global_shuffle``/
    ``batch`` chains of them): reads ``pool[position]`` for the share's positions. Keeps
    random access; the push-down rewrite moves it below ``map``/``random_map``.
``StreamCut``
    a stream that is the same on every worker (``interleave`` over files, a generator,
    ``filter``): pulls it and keeps the share's positions (tf.data's DATA sharding).
``UnitCut``
    a file source that reads its units itself (``TextLineDataset``, the columnar readers,
    ``Dataset.load``): reads only the share's units (files, row groups), evening out rows
    where their counts are known (FILE sharding).

Every shard point's iterator registers with the ``IterContext`` (``ctx.cuts``), so a
checkpoint records, next to the chain's state, each shard point's share and how much of it
was taken (``cut_state``): what elastic resume (``datapipe.distribute.elastic``) needs to
give the rest of the pool to another number of workers. While a checkpoint's ``ResumePlan``
is active, a shard point reads the plan's share instead of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe._identity import chunk_ids
from datapipe._iterator import OpIterator
from datapipe._random_access import RandomAccessIterator
from datapipe.dataset_ops import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset
from datapipe.distribute.share import Base, SeededOrder, Share, Split

_PULL = 4096  # most input elements a StreamCut pulls at once


class _Cut(Dataset):
    """Base of the shard points: ``cut_id`` (its index in the graph) and ``share`` (this
    worker's share of a fresh pass over the pool)."""

    _name = "auto_shard"
    kind = "?"

    def __init__(self, pool: Dataset, cut_id: int, share: Share, label: str, even: bool = True):
        super().__init__(pool)
        self.cut_id, self.share, self.label = cut_id, share, label
        self.even = even  # False: elements expand above, counts cannot be evened out

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def cardinality(self) -> int:
        if not self.share.bounded:
            n = self._inputs[0].cardinality()
            return UNKNOWN_CARDINALITY if n == UNKNOWN_CARDINALITY else INFINITE_CARDINALITY
        return len(self.share)

    def active_share(self, ctx: Any, build: bool = True, epoch: Any = None) -> Share:
        """The share an iterator built now (for pass ``epoch``) reads: a restored
        checkpoint's (see ``ResumePlan.share_for``), else ``share``. ``build=False``: only
        look."""
        plan = ctx.resume
        planned = None if plan is None else plan.share_for(self.cut_id, build, epoch)
        return self.share if planned is None else planned

    def uneven_after_resume(self, options: Any) -> str:
        """How a new layout's shares of this pool are evened out."""
        from datapipe.distribute.auto_shard import uneven_of

        return uneven_of(options) if self.even else "allow"


class IndexCut(_Cut):
    """The share's positions of a random-access pool (see the module docstring)."""

    kind = "index"
    keeps_random_access = True
    selects_indices = True

    def __init__(
        self,
        pool: Dataset,
        cut_id: int,
        share: Share,
        label: str,
        even: bool = True,
        permute: Dataset | None = None,
    ):
        super().__init__(pool, cut_id, share, label, even)
        self.permute = permute  # a shuffling list_files: each epoch, a new order of the share

    def _passes_below(self, node: Dataset) -> bool:
        # random_map keys its draws on the pool index only through an arithmetic share.
        return not node.uses_randomness or self.share.index_base() is not None

    def _make_random_access(self, ctx):
        # An op above reads this share through random access: its progress is in that
        # op's state, not in a shard point iterator (elastic resume cannot split it).
        ctx.cuts_by_access.add(self.cut_id)
        return self._access(ctx)

    def _access(self, ctx: Any, epoch: Any = None) -> ShareAccess:
        permute = None if self.permute is None else (ctx, self.permute)
        return ShareAccess(
            self._inputs[0]._make_random_access(ctx), self.active_share(ctx, True, epoch), permute
        )

    def _make_iterator(self, ctx, epoch):
        it = IndexCutIterator(self._access(ctx, tuple(epoch)), epoch, self._name)
        ctx.register_cut(self.cut_id, it)
        return it


class ShareAccess:
    """Random access to a share of a random-access pool. ``permute=(ctx, node)``: each
    epoch, segments without an order are read in a new random order drawn from ``node``'s
    seeds (a shuffling ``list_files``'s files)."""

    def __init__(self, inner: Any, share: Share, permute: tuple | None = None):
        self.inner, self.share, self.permute = inner, share, permute
        self.n = len(share) if share.bounded else len(inner)
        self._orders: tuple | None = None  # (epoch, share with the epoch's orders)
        base = share.index_base() if permute is None else None
        if base is not None:
            stride, offset = getattr(inner, "index_base", (1, 0))
            self.index_base = (stride * base[0], offset + stride * base[1])

    def __len__(self) -> int:
        return self.n

    def share_for(self, epoch: tuple) -> Share:
        """The share as read in ``epoch`` (with this epoch's random orders)."""
        if self.permute is None:
            return self.share
        if self._orders is None or self._orders[0] != epoch:
            ctx, node = self.permute
            segs = []
            for k, seg in enumerate(self.share.segments):
                if isinstance(seg, Split) and seg.order is None:
                    # (segment 0 draws as the source would: one worker of one, same order);
                    # the order is its seeds, so a checkpoint of it is O(1) (share.py)
                    seq = ctx.seed_sequence(node, epoch, *([k] if k else []))
                    order = SeededOrder(np.atleast_1d(seq.entropy).tolist(), len(seg))
                    seg = Split(seg.offset, seg.step, seg.count, seg.base, order)
                segs.append(seg)
            self._orders = (epoch, Share(segs))
        return self._orders[1]

    def identities(self, indices: Sequence[int], epoch: tuple) -> np.ndarray:
        """The source indices of the share elements ``indices``: what draws above are
        keyed by (``datapipe._identity``) where they are not linear in ``indices``."""
        pos = pool_positions(self.share_for(tuple(epoch)), indices)
        base = getattr(self.inner, "index_base", None)
        if base is not None:
            return pos * base[0] + base[1]
        ids = getattr(self.inner, "identities", None)
        return pos if ids is None else np.asarray(ids(pos, epoch), dtype=np.int64)

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        share = self.share_for(tuple(epoch))
        base = share.index_base()
        if base is not None and isinstance(indices, range):
            step, off = base
            mapped: Sequence[int] = range(
                off + step * indices.start, off + step * indices.stop, step * indices.step
            )
            return self.inner.get_many(mapped, epoch)
        return self.inner.get_many(pool_positions(share, indices).tolist(), epoch)


def pool_positions(share: Share, indices: Sequence[int]) -> np.ndarray:
    """Pool positions of the share elements ``indices`` (any order)."""
    idx = np.asarray(indices, dtype=np.int64)
    out = np.empty(len(idx), dtype=np.int64)
    start = 0
    for seg in share.segments:
        size = len(seg) if seg.bounded else None
        inside = (idx >= start) if size is None else (idx >= start) & (idx < start + size)
        if inside.any():
            local = idx[inside] - start
            lo = int(local.min())  # only the range asked for: a chunk of a long share
            out[inside] = seg.positions(lo, int(local.max()) + 1)[local - lo]
        if size is None:
            break
        start += size
    return out


class IndexCutIterator(RandomAccessIterator):
    """Reads the share in order; ``taken`` (the state's ``index``) is how many of its
    elements were read; ``ended``: the ops above were told that the share ended."""

    ra: ShareAccess  # type: ignore[assignment]  # IndexCut reads through one
    ended = False

    def next_chunk(self, n: int) -> list:
        # Only an arithmetic share is linear (index_base); any other (after an elastic
        # resume, a pad, a shuffling list_files) gives its elements' pool positions per
        # chunk (RandomAccessIterator, ShareAccess.identities).
        out = super().next_chunk(n)
        if not out:
            self.ended = True
        return out

    @property
    def share(self) -> Share:
        return self.ra.share_for(self.epoch)

    @property
    def taken(self) -> int:
        return self.index


class StreamCut(_Cut):
    """The share's positions of a stream that every worker reads in the same order."""

    kind = "stream"

    def _make_iterator(self, ctx, epoch):
        it = StreamCutIterator(self, ctx, epoch, self.active_share(ctx, True, tuple(epoch)))
        ctx.register_cut(self.cut_id, it)
        return it


class StreamCutIterator(OpIterator):
    """Pulls the stream up to (never past) the next share position and keeps it. A share
    position behind the stream's (a pad, or the next segment after an elastic resume)
    restarts the stream at the segment's ``seek`` point, or from its start.

    State: ``pos`` (share elements delivered), ``at`` (stream elements consumed), the
    stream's state."""

    op_name = "auto_shard"

    def __init__(self, node: StreamCut, ctx: Any, epoch: tuple, share: Share):
        self.node, self.ctx, self.epoch, self.share = node, ctx, epoch, share
        super().__init__([ctx.make(node._inputs[0], epoch)])
        self.pos = self.at = 0
        self.done = False
        # A parallel stage above may pull on its workers while a checkpoint reads us.
        self.lock = threading.Lock()
        self.whole = _whole_stream(share)

    @property
    def taken(self) -> int:
        return self.pos

    @property
    def ended(self) -> bool:
        return self.done

    def next_chunk(self, n: int) -> list:
        with self.lock:
            self._ids: list | None = []  # of the chunk returned (datapipe._identity)
            if self.whole is not None:
                return self._next_whole(n)
            return self._next_positions(n)

    def _note_ids(self, at: int, got: list, keep: Any = None) -> None:
        """Record the identities of ``got`` (the stream's elements from ``at``; ``keep``:
        the offsets kept): the stream's own, else their positions in it, which is the
        same on every worker (nothing below a shard point is sharded)."""
        if self._ids is None:
            return
        ids = chunk_ids(self.inputs[0], at, len(got), True)
        if ids is None:
            self._ids = None
        else:
            self._ids.extend((ids if keep is None else ids[keep]).tolist())

    def carries_ids(self) -> bool:
        return True

    def last_ids(self) -> np.ndarray | None:
        ids = getattr(self, "_ids", None)
        return None if ids is None else np.asarray(ids, dtype=np.int64)

    def _next_whole(self, n: int) -> list:
        """The share is the stream itself (one worker): pass chunks through."""
        whole = self.whole
        assert whole is not None  # only called when the share is the whole stream
        want = n if whole < 0 else min(n, whole - self.pos)
        got = self.inputs[0].next_chunk(want) if want > 0 and not self.done else []
        if not got:
            self.done = True
        self._note_ids(self.at, got)
        self.pos += len(got)
        self.at += len(got)
        return got

    def _next_positions(self, n: int) -> list:
        while not self.done:
            want, seg = self.share.positions(self.pos, n)
            if seg is None:
                self.done = True
                break
            if want[0] < self.at:
                self._restart(int(want[0]), seg)
            got = self._read(want)
            if got:
                return got
            self.done = True  # the stream ended before the share did
        return []

    def _read(self, want: np.ndarray) -> list:
        """The stream's elements at ``want`` (ascending, >= ``at``), up to the end of the
        ascending run or of the stream."""
        back = np.nonzero(np.diff(want) <= 0)[0]  # a pad may go back: read up to there
        if len(back):
            want = want[: int(back[0]) + 1]
        out: list = []
        k = 0
        inner = self.inputs[0]
        while k < len(want):
            need = int(want[-1]) + 1 - self.at
            got = inner.next_chunk(min(need, _PULL))
            if not got:
                break
            lo = self.at
            self.at += len(got)
            k0 = k
            while k < len(want) and want[k] < self.at:
                out.append(got[int(want[k]) - lo])
                k += 1
            self._note_ids(lo, got, want[k0:k] - lo)
        self.pos += len(out)
        return out

    def _restart(self, target: int, seg: Any) -> None:
        inner = self.inputs[0]
        seek = getattr(seg, "seek", None)
        if seek is not None and seek[0] <= target:
            inner.set_state(seek[1])
            self.at = int(seek[0])
        else:
            inner.close()
            self.inputs = [self.ctx.make(self.node._inputs[0], self.epoch)]
            self.at = 0

    def live_input(self) -> tuple[int, Any]:
        """``(at, state)`` of the stream now: a point other workers may seek to."""
        with self.lock:
            return self.at, self.inputs[0].get_state()

    def get_state(self) -> dict:
        with self.lock:
            inner = self.inputs[0].get_state()
            return {"pos": self.pos, "at": self.at, "done": self.done, "input": inner}

    def set_state(self, state: dict) -> None:
        with self.lock:
            self.pos, self.at = int(state["pos"]), int(state["at"])
            self.done = bool(state["done"])
            self.inputs[0].set_state(state["input"])


def _whole_stream(share: Share) -> int | None:
    """-1 (or the count) when ``share`` is the whole stream from its start (or a prefix of
    it): one worker, read without position arithmetic; else None."""
    if len(share.segments) != 1 or not isinstance(share.segments[0], Split):
        return None
    seg = share.segments[0]
    if (seg.offset, seg.step, seg.order, seg.base) != (0, 1, None, Base()):
        return None
    return -1 if seg.count is None else seg.count


class UnitCut(_Cut):
    """A unit-reading file source restricted to the share's units (pool: its units in
    sorted order), with its rows evened out: ``limit`` rows at most, then ``pad`` rows read
    again from the start of the worker's own units (the whole source's when it has none)."""

    kind = "units"

    def __init__(
        self, src: Dataset, cut_id: int, share: Share, label: str, limit: int | None, pad: int
    ):
        super().__init__(src, cut_id, share, label)
        self.units = sorted_units(src)
        self.limit, self.pad = limit, pad

    def cardinality(self) -> int:
        n = self.restricted(self.share).cardinality()
        if n < 0:
            return n
        return (n if self.limit is None else min(n, self.limit)) + self.pad

    def restricted(self, share: Share) -> Dataset:
        """The source reading only ``share``'s units, in the share's order."""
        return restricted(self._inputs[0], self.units, share)

    def uneven_after_resume(self, options: Any) -> str:
        return "allow"  # units are split; rows are evened out only in a first layout

    def _make_iterator(self, ctx, epoch):
        share = self.active_share(ctx, True, tuple(epoch))
        elastic = ctx.resume is not None and ctx.resume.elastic
        it = UnitCutIterator(self, ctx, epoch, share, None if elastic else self.limit,
                             0 if elastic else self.pad, elastic)  # fmt: skip
        ctx.register_cut(self.cut_id, it)
        return it


def sorted_units(src: Any) -> list:
    """A file source's units in sorted order: the pool FILE sharding splits (the same in
    every process, whatever order each process listed them in)."""
    sorted_files = getattr(src, "sorted_files", None)
    if sorted_files is not None:  # list_files: numpy buffers, sorted without strings
        return sorted_files()
    files = src.files
    order = sorted(range(len(files)), key=lambda t: (str(files[t]), t))
    return [files[t] for t in order]


def restricted(src: Any, units: list, share: Share) -> Dataset:
    """``src`` reading only the units (of the sorted ``units``) of ``share``, in order."""
    parts = [seg.positions(0, len(seg)) for seg in share.segments]
    positions = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return src.with_files([units[int(p)] for p in positions])


class UnitCutIterator(OpIterator):
    """Reads the restricted source, stops after ``limit`` rows, then pads ``pad`` rows."""

    op_name = "auto_shard"

    def __init__(
        self,
        node: UnitCut,
        ctx: Any,
        epoch: tuple,
        share: Share,
        limit: int | None,
        pad: int,
        elastic: bool = False,
    ):
        self.node, self.ctx, self.epoch, self.share = node, ctx, epoch, share
        self.limit, self.pad, self.elastic = limit, pad, elastic
        super().__init__([ctx.make(node.restricted(share), epoch)])
        self.rows = 0  # rows delivered from the share (padding not counted)
        self.padded = 0
        self.filler: OpIterator | None = None
        self.ended = False  # the ops above were told that the share ended

    @property
    def taken(self) -> int | None:
        """Units of the share started so far (None: the source cannot tell)."""
        started = getattr(self.inputs[0], "units_started", None)
        return None if started is None else int(started())

    def next_chunk(self, n: int) -> list:
        if self.limit is None or self.rows < self.limit:
            want = n if self.limit is None else min(n, self.limit - self.rows)
            got = self.inputs[0].next_chunk(want)
            if got:
                self.rows += len(got)
                return got
            self.limit = self.rows  # the share ended: padding (if any) is next
        return self._pad(n)

    def _pad(self, n: int) -> list:
        want = min(n, self.pad - self.padded)
        if want <= 0:
            self.ended = True
            return []
        got = self._filler().next_chunk(want)
        if not got:  # the filler ran out: read it again from its start
            self._filler().close()
            self.filler = None
            got = self._filler().next_chunk(want)
            if not got:
                raise ValueError("auto_shard: nothing to pad with (the file source is empty)")
        self.padded += len(got)
        return got

    def _filler(self) -> OpIterator:
        if self.filler is None:
            node = self.node
            own = node.restricted(node.share)
            if own.cardinality() == 0:  # no rows of its own: pad from the whole source
                own = node._inputs[0]
            self.filler = self.ctx.make(own, self.epoch)
            self.inputs = [self.inputs[0], self.filler]
        return self.filler

    def get_state(self) -> dict:
        filler = None if self.filler is None else self.filler.get_state()
        return {
            "input": self.inputs[0].get_state(),
            "rows": self.rows,
            "limit": self.limit,
            "pad": self.pad,
            "padded": self.padded,
            "filler": filler,
        }

    def set_state(self, state: dict) -> None:
        self.inputs[0].set_state(state["input"])
        self.rows, self.padded = int(state["rows"]), int(state["padded"])
        if not self.elastic:  # after a layout change the old layout's even ends are void
            self.limit = None if state["limit"] is None else int(state["limit"])
            self.pad = int(state["pad"])
        if self.filler is not None:
            self.filler.close()
            self.filler = None
            self.inputs = self.inputs[:1]
        if state["filler"] is not None:
            self._filler().set_state(state["filler"])


def cut_state(node: _Cut, ctx: Any) -> dict:
    """What a checkpoint records of shard point ``node`` (see the module docstring): its
    kind, the share the live iterator reads and how much of it was ``taken`` (None when
    unknown: an op above reads it through random access, or the source cannot tell), and
    for a stream where the stream is now (``at``, ``input``), a point to start from."""
    it = ctx.cuts.get(node.cut_id)
    if it is None:  # not built yet (e.g. concatenate's second input), or random access
        taken = None if node.cut_id in ctx.cuts_by_access else 0
        share = node.active_share(ctx, build=False)
        return {"kind": node.kind, "share": share.to_state(), "taken": taken}
    out: dict = {"kind": node.kind, "share": it.share.to_state(), "taken": it.taken}
    if it.ended:
        out["ended"] = True
    if isinstance(it, StreamCutIterator):
        out["at"], out["input"] = it.live_input()
    return out


__all__ = [
    "IndexCut",
    "ShareAccess",
    "StreamCut",
    "Split",
    "UnitCut",
    "cut_state",
    "sorted_units",
]
