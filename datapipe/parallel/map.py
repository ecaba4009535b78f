"""Parallel ``map`` on a bounded group of worker threads, with tf.data's semantics.

``ParallelMapIterator(inner, func, op_name, num_parallel_calls, deterministic, ctx,
indexed=False)``:

* Workers take *chunks* of consecutive input elements (the input is read by one worker at a
  time, under a lock), apply ``func`` to each element and hand the chunk back; chunk sizes
  grow towards ~4 ms of work (``pool.ChunkSizer``), since a thread hand-off costs ~88 µs.
* ``deterministic=True`` (default unless ``Options(deterministic=False)``): output order is
  the input order whatever the thread timing (chunks are delivered in dispatch order).
  ``False``: a finished chunk is delivered as soon as it is ready; elements may come out of
  order, none is lost or duplicated (``tf.data.Dataset.map``'s ``deterministic``).
* ``indexed=True`` calls ``func(index, element)`` with the element's index in the input
  stream and the element *not* unpacked (for ``random_map``, which derives per-element
  randomness from the index); otherwise ``func`` follows tf.data's convention (a plain
  tuple is unpacked into positional arguments).
* An exception in ``func`` reaches the consumer at that element's position as a
  ``PipelineError`` naming the op and the element index; the elements before it are
  delivered first, and iteration may continue after it (``ignore_errors``).
* ``num_parallel_calls=AUTOTUNE`` (-1): the tuner (``autotune.py``) moves the number of
  threads within the CPU budget; the bytes buffered count against the RAM budget.
* Checkpoints: every chunk records its input's state before it was taken. ``get_state``
  returns the input state before the oldest chunk the consumer has not finished plus, for
  each later chunk, its size and how many of its elements were consumed; ``set_state``
  replays the input from there and recomputes only the elements not consumed.
* Shutdown: ``close()`` (also reached from the public iterator's finaliser, ``break`` +
  garbage collection, exceptions and KeyboardInterrupt) stops and joins every worker
  within ~1 s. Workers hold only a ``_Shared`` object, never this iterator.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from datapipe._iterator import OpIterator, pull_exactly
from datapipe.dataset import AUTOTUNE
from datapipe.errors import annotate
from datapipe.parallel import autotune
from datapipe.parallel.pool import (
    POLL_S,
    Chunk,
    ChunkSizer,
    Failed,
    SharedStage,
    WorkerGroup,
    close_deadline,
    consume,
    take_ready,
)
from datapipe.stats import trace

# Most chunks and deliveries logged after a deterministic=False snapshot (see get_state).
LOG_LIMIT = 10_000


class _Shared(SharedStage):
    """State shared by the consumer and the workers (guarded by ``cond``; the input by
    ``input_lock``, always taken before ``cond``)."""

    def __init__(self, inner, func, op, deterministic, indexed, tuner, stage):
        self.inner, self.func, self.op = inner, func, op
        self.deterministic, self.indexed = deterministic, indexed
        # Errors name the element's index in the random-access source when a shard was
        # moved below this map (stride, offset); (1, 0) otherwise.
        self.base = inner.index_base() or (1, 0)
        self.tuner, self.stage, self.ram = tuner, stage, tuner.ram
        self.cond = threading.Condition(threading.Lock())
        self.input_lock = threading.Lock()
        self.chunks: deque[Chunk] = deque()  # in dispatch order, oldest unfinished first
        # chunks re-taken by set_state, to recompute: (state_before, start, size, skip,
        # elements, input error or None)
        self.redo: deque[tuple] = deque()
        self.pending = 0  # chunks dispatched and not fully consumed
        self.next_seq = 0
        self.next_index = 0  # input elements taken so far
        self.input_done = False
        self.closed = False
        # deterministic=False only: the snapshots returned by get_state that are still
        # alive, to which the chunks taken and the deliveries made since are appended (see
        # get_state), and the deliveries a restore must repeat first: [input index, count]
        self.logs: list[_Log] = []
        self.forced: deque[list] = deque()
        self.sizer = ChunkSizer()
        self.bytes_per_elem: float | None = None
        self.group = WorkerGroup(op, _worker, self)

    def parallelism(self) -> int:
        return self.stage.value


def _admit(sh: _Shared) -> int:
    """Under ``cond``: elements the next chunk may hold (0: not now)."""
    if sh.redo:  # re-taken by a restore; bounded by the checkpoint, and a forced
        return 1  # delivery may wait on any of them, so the buffer bound does not apply
    if sh.pending >= 2 * sh.parallelism():
        return 0
    if sh.input_done:
        return 0
    bpe = sh.bytes_per_elem
    if bpe is None:  # element size unknown: one element per worker until a chunk is done
        return 0 if sh.pending >= sh.parallelism() else 1
    fit = int(sh.ram.free() // max(bpe, 1.0))
    if fit < 1:
        if sh.pending:
            return 0
        fit = 1  # always let one element through, so a tiny budget cannot deadlock
    return sh.sizer.next_size(limit=fit)


def _worker(sh: _Shared, wid: int) -> None:
    while True:
        with sh.cond:
            n = 0
            while not sh.closed and wid < sh.group.size:
                n = _admit(sh)
                if n:
                    break
                if sh.input_done and not sh.redo:
                    return
                sh.cond.wait(POLL_S)
            if sh.closed or wid >= sh.group.size:
                return
            sh.pending += 1
            reserve = int(n * sh.bytes_per_elem) if sh.bytes_per_elem else 0
            sh.ram.try_reserve(reserve, force=True)
        chunk, elems = _take_input(sh, n, reserve)
        if chunk is None:
            continue
        _compute(sh, chunk, elems)


def _take_input(sh: _Shared, n: int, reserve: int) -> tuple[Chunk | None, list]:
    """Take the next chunk's elements (a replayed one first) and register the chunk."""
    with sh.input_lock:
        if sh.redo:
            state, start, size, skip, elems, error = sh.redo.popleft()
            chunk = Chunk(sh.next_seq, start, state)
            chunk.size, chunk.skip, chunk.input_error = size, skip, error
        else:
            chunk = Chunk(sh.next_seq, sh.next_index, sh.inner.get_state())
            try:
                elems = sh.inner.next_chunk(n)
            except BaseException as e:  # noqa: BLE001 - delivered at its position
                elems, chunk.input_error = [], annotate(sh.op, sh.next_index, e)
            chunk.size = len(elems)
            sh.next_index += len(elems)
            if not elems and chunk.input_error is None:
                with sh.cond:
                    sh.input_done = True
                    sh.pending -= 1
                    sh.ram.release(reserve)
                    sh.cond.notify_all()
                return None, []
            for log in _live_logs(sh):
                state = log.state  # one strong reference: the snapshot may die any time
                if state is not None and len(state["then_chunks"]) < LOG_LIMIT:
                    state["then_chunks"].append([chunk.size, chunk.input_error is not None])
                    log.end = sh.next_index
        chunk.reserved = reserve
        sh.next_seq += 1
        with sh.cond:
            sh.chunks.append(chunk)
    return chunk, elems


def _compute(sh: _Shared, chunk: Chunk, elems: list) -> None:
    t0, c0 = time.perf_counter(), time.thread_time()
    if chunk.input_error is not None:
        items: list = [Failed(chunk.input_error)]
        chunk.input_error = True  # keep the fact, not the exception (see take_ready)
    else:
        items = _apply(sh, elems, chunk.start + chunk.skip)
    dt, dcpu = time.perf_counter() - t0, time.thread_time() - c0
    if trace.ENABLED:  # datapipe.stats: a span per chunk on this worker's own track
        trace.record_span(f"{sh.op} workers", "chunk", t0, t0 + dt, {"elements": len(items)})
    nbytes = autotune.chunk_nbytes([x for x in items[:1] if type(x) is not Failed]) * len(items)
    with sh.cond:
        chunk.items, chunk.done = items, True
        if items and nbytes:
            sh.bytes_per_elem = nbytes / len(items)
        sh.ram.release(chunk.reserved)
        sh.ram.try_reserve(nbytes, force=True)
        chunk.reserved = nbytes
        sh.sizer.observe(len(items), dt)
        st = sh.stage
        st.produced += len(items)
        st.busy_s += dt
        st.cpu_s += dcpu
        sh.cond.notify_all()


def _apply(sh: _Shared, elems: list, first: int) -> list:
    fn, out = sh.func, []
    indexed, unpack = sh.indexed, bool(elems) and type(elems[0]) is tuple
    for k, x in enumerate(elems):
        try:
            if indexed:
                out.append(fn(first + k, x))
            elif unpack and type(x) is tuple:
                out.append(fn(*x))
            else:
                out.append(fn(x))
        except BaseException as e:  # noqa: BLE001 - the consumer raises it at this position
            out.append(Failed(annotate(sh.op, sh.base[1] + sh.base[0] * (first + k), e)))
    return out


class ParallelMapIterator(OpIterator):
    """``map`` with ``num_parallel_calls`` threads (see the module docstring)."""

    def __init__(
        self,
        inner: OpIterator,
        func: Callable,
        op_name: str,
        num_parallel_calls: int,
        deterministic: bool | None,
        ctx: Any,
        indexed: bool = False,
    ):
        super().__init__([inner])
        self.inner, self.op_name = inner, op_name
        det = ctx.deterministic if deterministic is None else bool(deterministic)
        tuner = autotune.get_tuner(ctx)
        auto = num_parallel_calls == AUTOTUNE
        cap = autotune.max_threads(ctx)
        start = (
            autotune.initial_parallelism(ctx, tuner) if auto else min(int(num_parallel_calls), cap)
        )
        stage = autotune.Stage(op_name, "parallelism", start, auto and tuner.enabled, cap)
        stage.intra_op = autotune.intra_op(ctx)
        self.stage = tuner.add_stage(stage)
        self.tuner = tuner
        self._sh = _Shared(inner, func, op_name, det, indexed, tuner, stage)
        stage.apply = _resizer(self._sh)
        self._started = False
        self._finalizer = weakref.finalize(self, _Shared.close, self._sh)

    @property
    def deterministic(self) -> bool:
        return self._sh.deterministic

    def _start(self) -> None:
        if not self._started:
            self._started = True
            self._sh.group.resize(self.stage.value)

    def next_chunk(self, n: int) -> list:
        sh = self._sh
        self._start()
        return consume(
            sh.cond, lambda: self._take(n), lambda: sh.closed, self.stage, self.tuner, sh
        )

    def _take(self, n: int) -> list | BaseException | None:
        """Under ``cond``: up to ``n`` ready elements, a failure to raise, ``[]`` at the end,
        or None (nothing ready yet)."""
        sh = self._sh
        if sh.forced:
            chunk = self._forced_chunk()
            if chunk is None:
                return None
        else:
            chunk = self._ready_chunk()
        if chunk is None:
            if sh.pending == 0 and sh.input_done and not sh.redo:
                return []
            return None
        if sh.forced:
            n = min(n, sh.forced[0][1])
        out, err, pos = take_ready(chunk.items, chunk.consumed, n)
        taken = pos - chunk.consumed
        if sh.forced:
            sh.forced[0][0] += taken
            sh.forced[0][1] -= taken
            if sh.forced[0][1] <= 0:
                sh.forced.popleft()
        if sh.logs:
            for log in _live_logs(sh):
                _log_take(log, chunk, taken)
        chunk.consumed = pos
        if pos >= len(chunk.items):
            self._finish(chunk)
        else:
            part = chunk.reserved * taken // max(len(chunk.items), 1)
            sh.ram.release(part)
            chunk.reserved -= part
        return err if err is not None else out

    def _ready_chunk(self) -> Chunk | None:
        sh = self._sh
        for c in sh.chunks:
            if c.done and c.consumed < len(c.items):
                return c
            if sh.deterministic and not (c.done and c.consumed >= len(c.items)):
                return None  # the oldest unfinished chunk is not ready: keep the order
        return None

    def _forced_chunk(self) -> Chunk | None:
        """After a restore with deterministic=False: the chunk holding the next element the
        original run delivered (None: not computed yet)."""
        sh = self._sh
        at = sh.forced[0][0]
        for c in sh.chunks:
            if c.start + c.skip + c.consumed == at and c.consumed < len(c.items or [0]):
                return c if c.done else None
        if any(r[1] + r[3] == at for r in sh.redo) or not sh.input_done:
            return None
        sh.forced.clear()  # cannot happen with a state from this dataset; never hang on it
        return self._ready_chunk()

    def _finish(self, chunk: Chunk) -> None:
        sh = self._sh
        sh.ram.release(chunk.reserved)
        chunk.reserved = 0
        chunk.items = [None] * len(chunk.items)  # keep the count, drop the results
        sh.pending -= 1
        while sh.chunks and sh.chunks[0].done and sh.chunks[0].consumed >= len(sh.chunks[0].items):
            sh.chunks.popleft()
        sh.cond.notify_all()

    def index_base(self) -> tuple[int, int] | None:
        return self._sh.inner.index_base()

    # ---- checkpoints -------------------------------------------------------------------
    def get_state(self) -> dict:
        sh = self._sh
        with sh.input_lock, sh.cond:
            # (state before, start, size, consumed, input failed) of every chunk taken from
            # the input and not yet finished by the consumer, in input order
            entries = [
                (
                    c.state_before,
                    c.start,
                    c.size,
                    c.skip + (c.consumed if c.done else 0),
                    c.input_error is not None,
                )
                for c in sh.chunks
            ]
            entries += [(r[0], r[1], r[2], r[3], r[5] is not None) for r in sh.redo]
            if not entries:
                entries = [(sh.inner.get_state(), sh.next_index, 0, 0, False)]
            first = entries[0]
            if sh.deterministic:
                while entries and entries[-1][3] == 0:
                    entries.pop()  # untouched chunks at the end are simply taken again
            replay = [[size, used, failed] for _, _, size, used, failed in entries]
            state = {"input": first[0], "index": first[1], "replay": replay}
            if not sh.deterministic:
                # Out-of-order delivery: a consumer that restores this snapshot and then pulls
                # k elements must get the k elements this run delivered after it. So the
                # chunks taken and the deliveries made after the snapshot are appended to
                # it as they happen (while it is alive, up to LOG_LIMIT) and replayed in that
                # order. Every live snapshot keeps its log: a parallel stage above takes one
                # per chunk and may replay several of its chunks from the oldest.
                # (then_take first: a copy made while workers append to then_chunks then
                # records every chunk the copied deliveries come from)
                state = _State(state, then_take=[], then_chunks=[])
                sh.logs = [*_live_logs(sh), _Log(state, sh.next_index)]
            return state

    def set_state(self, state: dict) -> None:
        sh = self._sh
        if self._started:
            _stop_workers(sh)
            self._started = False
        with sh.input_lock, sh.cond:
            for c in sh.chunks:
                sh.ram.release(c.reserved)
            sh.chunks.clear()
            sh.redo.clear()
            sh.pending, sh.input_done = 0, False
            # deliveries before chunks: a state still growing (see get_state) then holds
            # every chunk the deliveries read come from
            forced = deque([list(x) for x in state.get("then_take", [])])
            sh.inner.set_state(state["input"])
            index = int(state["index"])
            replay = list(state["replay"]) + [[z, 0, f] for z, f in state.get("then_chunks", [])]
            for size, used, failed in replay:
                index = _replay_one(sh, index, int(size), int(used), bool(failed))
            sh.next_index = index
            sh.logs = []
            sh.forced = forced

    def close(self) -> None:
        if self.closed:
            return
        with close_deadline():  # one deadline for this stage and the stages below it
            self._sh.close()
            super().close()

    # ---- statistics: the gauge protocol of datapipe.stats --------------------------------
    def stats_gauges(self) -> dict:
        """Buffer in chunks (at most two per worker), workers, their wall and CPU seconds."""
        sh = self._sh
        with sh.cond:
            ready = sum(1 for c in sh.chunks if c.done and c.consumed < len(c.items))
        par = self.stage.value
        st = self.stage
        return {"buffer_size": 2 * par, "buffer_fill": ready, "parallelism": par,
                "busy_s": st.busy_s, "cpu_s": st.cpu_s}  # fmt: skip

    @property
    def autotune_events(self) -> list:
        return self.stage.events


class _State(dict):
    """A deterministic=False snapshot: a dict (JSON-like) that can be weakly referenced,
    so its log stops growing once nobody holds it."""


class _Log:
    """One live snapshot's log: its state (weakly held), the input index up to which every
    chunk taken is in the snapshot or its log, and whether deliveries are still logged."""

    def __init__(self, state: _State, end: int):
        self.ref, self.end, self.takes = weakref.ref(state), end, True

    @property
    def state(self) -> _State | None:
        return self.ref()


def _live_logs(sh: _Shared) -> list[_Log]:
    sh.logs = [log for log in sh.logs if log.ref() is not None]
    return sh.logs


def _log_take(log: _Log, chunk: Chunk, taken: int) -> None:
    """Under ``cond``: log a delivery made after a snapshot (deterministic=False).

    Only while every delivery so far came from a chunk the snapshot or its log records:
    once the chunk log is full, a later chunk is formed afresh after a restore (its bounds
    may differ), and a forced delivery from it could never be matched (a hang). A restore
    then repeats an exact prefix of this run's deliveries and delivers the rest freely.
    """
    state = log.state
    if state is None:
        return
    takes = state["then_take"]
    if len(takes) >= LOG_LIMIT or chunk.start + chunk.size > log.end:
        log.takes = False
    if log.takes:
        takes.append([chunk.start + chunk.skip + chunk.consumed, taken])


def _replay_one(sh: _Shared, index: int, size: int, used: int, failed: bool) -> int:
    """Re-take one chunk of the input; queue its unconsumed elements for recomputation."""
    state = sh.inner.get_state()
    if failed:  # the input raised here: raise again, unless the consumer saw it already
        try:
            elems = sh.inner.next_chunk(1)
        except Exception as e:  # noqa: BLE001 - the same failure as before the checkpoint
            if not used:
                sh.redo.append((state, index, 0, 0, [], annotate(sh.op, index, e)))
            return index
        size, used = len(elems), 0  # it did not fail this time: recompute what it gave
        if elems:
            sh.redo.append((state, index, size, 0, elems, None))
        return index + size
    elems = pull_exactly(sh.inner, size)
    if used < len(elems):
        sh.redo.append((state, index, len(elems), used, elems[used:], None))
    return index + len(elems)


def _stop_workers(sh: _Shared) -> None:
    with sh.cond:
        sh.closed = True
        sh.cond.notify_all()
    sh.group.stop(1.0)
    with sh.cond:
        sh.closed = False
        sh.group = WorkerGroup(sh.op, _worker, sh)


def _resizer(sh: _Shared) -> Callable[[int], None]:
    ref = weakref.ref(sh)

    def apply(n: int) -> None:
        s = ref()
        if s is not None and not s.closed:
            with s.cond:
                s.cond.notify_all()
            if s.group.threads:
                s.group.resize(n)

    return apply
