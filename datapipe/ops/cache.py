"""``cache``: keep the elements of the first complete pass in memory
(``tf.data.Dataset.cache`` with no file name)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe._identity import chunk_ids, has_identity, sharded_below, tracked
from datapipe._iterator import OpIterator, pull_exactly
from datapipe._structure import read_only
from datapipe.dataset_ops import Dataset, RandomAccessUnaryDataset
from datapipe.errors import PipelineBrokenError


class _CacheStore:
    """The cached elements of one ``CacheDataset`` object, shared by all its iterators
    (threads included): ``elements`` is published once, by the first pass that completes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.elements: list | None = None
        self.ids: list | None = None  # the elements' identities (datapipe._identity)
        self.fill_epoch: tuple | None = None
        self.memo: dict[int, Any] = {}  # random access: index -> element, until complete

    def record(self, elements: list) -> list:
        """``elements`` as the cache keeps and hands them out: numpy arrays as read-only
        views (``read_only``), torch tensors as they are (D-TF-28)."""
        return [read_only(x) for x in elements]

    def publish(self, elements: list, epoch: tuple, ids: list | None = None) -> None:
        with self.lock:
            if self.elements is None:
                self.elements, self.fill_epoch = elements, tuple(epoch)
                self.ids = ids if ids is not None and len(ids) == len(elements) else None
                self.memo = {}

    def snapshot(self) -> tuple[list | None, tuple | None]:
        with self.lock:
            return self.elements, self.fill_epoch


class CacheDataset(RandomAccessUnaryDataset):
    """Elements unchanged; the first *complete* pass over the input is recorded in memory
    and every later pass (a later ``repeat`` pass, a later ``iter()`` of the same Dataset
    object, another thread's iterator) reads the recorded elements instead of running
    the input again (tf.data's in-memory ``cache``).

    As in tf.data, a pass that stops early (``take``, ``break``, a broken pipeline) is not
    cached, and a pass that goes on past an element's error to its end is: without the
    failed elements (tf.data's ``MemoryWriterIterator``), so later passes do not fail or
    recompute them. Random ops before ``cache`` are frozen to the first complete pass. The cache
    belongs to this Dataset object: build the pipeline once and iterate it many times.

    The iterator state is the position (plus, while the first pass is still running, the
    input's state). A checkpoint taken while reading the cache and restored in a process
    where the cache is empty re-runs the input with the recording pass's epoch up to the
    position, so it resumes exactly when the input is reproducible (``Options.seed``).
    Restoring a checkpoint taken during the first pass continues that pass without
    recording it (its first elements are not in the checkpoint).

    Keeps random access; random access reads fill the cache element by element.

    The cache records its elements' numpy arrays as read-only views (no copy) and hands
    those out, in the recording pass too: tf.data's cached tensors are immutable, and an
    in-place op after the cache (``x /= 255`` in ``map``) fails at once, naming the
    element, where it used to change every later pass. torch has no read-only tensors:
    a torch leaf is handed out as recorded, and an in-place op writes through (D-TF-28).

    Example:
        >>> import datapipe as dp
        >>> calls = []
        >>> ds = dp.range(3).map(lambda x: calls.append(int(x)) or x).cache()
        >>> [int(x) for x in ds.repeat(2)], calls
        ([0, 1, 2, 0, 1, 2], [0, 1, 2])
    """

    _name = "cache"
    commutes_with_shard = True

    def __init__(self, input_ds: Dataset):
        super().__init__(input_ds)
        self._store = _CacheStore()

    def _for_worker(self, key: tuple) -> Dataset:
        # Above a shard point the cache records one worker's share: a store per worker
        # context, kept on the user's node so that the worker's next iter() reads it back.
        from datapipe._context import origin
        from datapipe._rewrites import copy_node

        out = copy_node(self)
        stores = origin(self).__dict__.setdefault("_worker_stores", {})
        out._store = stores.setdefault(key, _CacheStore())
        return out

    def _make_random_access(self, ctx):
        return _CacheAccess(self._store, self._inputs[0]._make_random_access(ctx))

    def _make_iterator(self, ctx, epoch):
        return CacheIterator(self, ctx, epoch)


class _CacheAccess:
    def __init__(self, store: _CacheStore, inner: Any):
        self.store, self.inner, self.n = store, inner, len(inner)

    def __len__(self) -> int:
        return self.n

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        store = self.store
        with store.lock:
            elements, memo = store.elements, store.memo
            if elements is not None:
                return [elements[int(i)] for i in indices]
            missing = sorted({int(i) for i in indices if int(i) not in memo})
        if missing:
            fetched = store.record(self.inner.get_many(missing, epoch))
            with store.lock:
                for i, x in zip(missing, fetched):
                    memo.setdefault(i, x)  # another thread may have been first: keep its
                found = [memo[int(i)] for i in indices]
                complete = len(memo) == self.n
        else:
            found = [memo[int(i)] for i in indices]
            complete = False
        if complete:
            store.publish([memo[i] for i in range(self.n)], epoch)
        return found


class CacheIterator(OpIterator):
    """Reads the published cache, or runs the input and records the pass."""

    op_name = "cache"

    def __init__(self, node: CacheDataset, ctx: Any, epoch: tuple):
        super().__init__()
        self.node, self.ctx, self.epoch = node, ctx, epoch
        self.pos = 0
        self.inner: OpIterator | None = None
        self.global_stream = False  # nothing below is sharded (set by _open)
        self.recorded: list | None = None  # this pass's elements while it may be cached
        self.fill_epoch = tuple(epoch)
        self.elements, fill_epoch = node._store.snapshot()
        if self.elements is not None and fill_epoch is not None:  # published together
            self.fill_epoch = fill_epoch
        else:
            self._open(self.fill_epoch, record=True)

    def _open(self, epoch: tuple, record: bool) -> OpIterator:
        self.elements = None
        self.fill_epoch = tuple(epoch)
        inner = self.inner = self.ctx.make(self.node._inputs[0], self.fill_epoch)
        self.inputs = [inner]
        self.recorded = [] if record else None
        self.global_stream = not sharded_below(self.node._inputs[0])
        # the recorded elements' identities, kept with them for the passes that read the
        # cache (None: the input gives none, datapipe._identity)
        self.recorded_ids: list | None = [] if record and tracked(self.ctx) else None
        n = self.node._inputs[0].cardinality()
        self.expected = n if n >= 0 else None
        return inner

    def _filling(self) -> OpIterator:
        """The input of a pass that reads it (no cached elements): open while filling."""
        assert self.inner is not None, "cache: no cached elements and no input open"
        return self.inner

    def next_chunk(self, n: int) -> list:
        self._last: np.ndarray | None = None
        if self.elements is not None:
            out = self.elements[self.pos : self.pos + n]
            ids = self.node._store.ids
            if ids is not None:
                self._last = np.asarray(ids[self.pos : self.pos + len(out)], dtype=np.int64)
            self.pos += len(out)
            return out
        try:
            got = self._filling().next_chunk(n)
        except Exception as e:
            # One element's error: the pass goes on without it, and is cached when it ends
            # (tf.data). A broken pipeline (or an interrupt, below) ends the pass.
            if isinstance(e, PipelineBrokenError):
                self.recorded = None
            raise
        except BaseException:
            self.recorded = None  # an incomplete pass is never cached
            raise
        if self.recorded_ids is not None or self.recorded is None:
            self._last = chunk_ids(self._filling(), self.pos, len(got), self.global_stream)
        self.pos += len(got)
        if self.recorded is not None:
            got = self.node._store.record(got)  # as a later pass will see them
            self.recorded.extend(got)
            if self.recorded_ids is not None:
                if self._last is None:
                    self.recorded_ids = None
                else:
                    self.recorded_ids.extend(self._last.tolist())
            # The pass is complete at its end, or as soon as it holds every element of an
            # input of known size: a consumer that stops at the last element without asking
            # for the end (zip's shorter input, take(len)) still completes the cache.
            if not got or len(self.recorded) == self.expected:
                self.node._store.publish(self.recorded, self.fill_epoch, self.recorded_ids)
                self.recorded = None
        return got

    def carries_ids(self) -> bool:
        if self.elements is not None:
            return self.node._store.ids is not None
        return self.inner is not None and has_identity(self.inner, self.global_stream)

    def last_ids(self) -> np.ndarray | None:
        return getattr(self, "_last", None)

    def get_state(self) -> dict:
        state = {"pos": self.pos, "fill_epoch": list(self.fill_epoch)}
        if self.elements is not None:
            return {"mode": "read", **state}
        return {"mode": "fill", **state, "input": self._filling().get_state()}

    def set_state(self, state: dict) -> None:
        if self.inner is not None:
            self.inner.close()
            self.inner, self.inputs = None, []
        self.pos = int(state["pos"])
        epoch = tuple(state["fill_epoch"])
        elements, fill_epoch = self.node._store.snapshot()
        if state["mode"] == "read" and elements is not None and fill_epoch == epoch:
            self.elements, self.fill_epoch = elements, fill_epoch
            return
        if state["mode"] == "fill":
            self._open(epoch, record=False).set_state(state["input"])
            return
        # A read position but no cache here: re-run the recording pass up to it.
        head = pull_exactly(self._open(epoch, record=elements is None), self.pos)
        if self.recorded is not None:
            self.recorded.extend(head)
            self.recorded_ids = None  # not read here: the re-run cache has none

    def close(self) -> None:
        self.recorded = None
        super().close()
