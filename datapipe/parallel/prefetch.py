"""``prefetch``'s background producer: one thread keeps up to ``buffer_size`` elements ready.

The thread takes chunks from the input (``pool.ChunkSizer``: growing from 1 towards ~4 ms of
input work) and the consumer takes elements from the oldest chunk. An input failure is
kept at its position and raised to the consumer there; the thread then goes on (the input
may continue after a failure, e.g. under ``ignore_errors``).

``buffer_size=AUTOTUNE``: the buffer starts at 4 elements and the tuner doubles it while
the consumer waits on an empty buffer (tf.data's prefetch autotuning), up to 1024, and
never past the pipeline's RAM budget.

State: the input's state before the oldest chunk not fully consumed, and how many of its
elements were consumed; a restore replays the input from there (recomputing the buffered
elements rather than storing them in the checkpoint).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import deque
from typing import Any

from datapipe._iterator import OpIterator
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

AUTOTUNE_START = 4


class _Shared(SharedStage):
    def __init__(self, inner: OpIterator, op: str, tuner: autotune.Autotuner, stage: Any):
        self.inner, self.op, self.tuner, self.stage, self.ram = inner, op, tuner, stage, tuner.ram
        self.cond = threading.Condition(threading.Lock())
        self.input_lock = threading.Lock()
        self.chunks: deque[Chunk] = deque()
        self.buffered = 0  # elements ready and not consumed
        self.done = False
        self.closed = False
        self.sizer = ChunkSizer()
        self.bytes_per_elem: float | None = None
        self.group = WorkerGroup(op, _producer, self)


def _room(sh: _Shared) -> int:
    """Under ``cond``: elements the producer may take now (0: wait)."""
    if sh.done:
        return 0
    room = sh.stage.value - sh.buffered
    if room <= 0:
        sh.stage.full += 1
        return 0
    if sh.bytes_per_elem is None:
        return 0 if sh.buffered else 1
    fit = int(sh.ram.free() // max(sh.bytes_per_elem, 1.0))
    if fit < 1:
        return 0 if sh.buffered else 1
    return sh.sizer.next_size(limit=min(room, fit))


def _producer(sh: _Shared, wid: int) -> None:
    while True:
        with sh.cond:
            n = 0
            while not sh.closed and not sh.done and wid < sh.group.size:
                n = _room(sh)
                if n:
                    break
                sh.cond.wait(POLL_S)
            if sh.closed or sh.done or wid >= sh.group.size:
                return
        with sh.input_lock:
            chunk = Chunk(0, 0, sh.inner.get_state())
            t0 = time.perf_counter()
            try:
                items = sh.inner.next_chunk(n)
            except BaseException as e:  # noqa: BLE001 - raised to the consumer in place
                items = [Failed(annotate(sh.op, None, e))]
            dt = time.perf_counter() - t0
            nbytes = autotune.chunk_nbytes([x for x in items[:1] if type(x) is not Failed])
            nbytes *= len(items)
            with sh.cond:
                if not items:
                    sh.done = True
                else:
                    chunk.items, chunk.done, chunk.size = items, True, len(items)
                    chunk.reserved = nbytes
                    sh.ram.try_reserve(nbytes, force=True)
                    if nbytes:
                        sh.bytes_per_elem = nbytes / len(items)
                    sh.chunks.append(chunk)
                    sh.buffered += len(items)
                    sh.sizer.observe(len(items), dt)
                    sh.stage.produced += len(items)
                    sh.stage.busy_s += dt
                sh.cond.notify_all()


class PrefetchIterator(OpIterator):
    """Elements of ``inner`` unchanged, produced ahead by one background thread."""

    op_name = "prefetch"

    def __init__(self, inner: OpIterator, buffer_size: int, ctx: Any):
        super().__init__([inner])
        self.inner = inner
        tuner = autotune.get_tuner(ctx)
        auto = buffer_size == AUTOTUNE
        start = AUTOTUNE_START if auto else int(buffer_size)
        cap = autotune.MAX_AUTOTUNE_BUFFER if auto else start
        self.stage = tuner.add_stage(
            autotune.Stage("prefetch", "buffer", start, auto and tuner.enabled, cap)
        )
        self.tuner = tuner
        self._sh = _Shared(inner, "prefetch", tuner, self.stage)
        self.stage.apply = _notifier(self._sh)
        self._started = False
        self._finalizer = weakref.finalize(self, _Shared.close, self._sh)

    def index_base(self) -> tuple[int, int] | None:
        return self.inner.index_base()

    def stats_gauges(self) -> dict:
        """Buffer size and fill in elements (``datapipe.stats`` protocol). No ``busy_s``: the
        producer thread's time is the upstream stages' work, already counted there."""
        return {"buffer_size": self.stage.value, "buffer_fill": self._sh.buffered, "parallelism": 1}

    @property
    def autotune_events(self) -> list:
        return self.stage.events

    def next_chunk(self, n: int) -> list:
        sh = self._sh
        if not self._started:
            self._started = True
            sh.group.resize(1)

        def take() -> list | BaseException | None:
            if sh.chunks:
                return self._take(n)
            return [] if sh.done else None

        return consume(sh.cond, take, lambda: sh.closed, self.stage, self.tuner, sh)

    def _take(self, n: int) -> list | BaseException:
        sh = self._sh
        chunk = sh.chunks[0]
        out, err, pos = take_ready(chunk.items, chunk.consumed, n)
        taken = pos - chunk.consumed
        chunk.consumed = pos
        sh.buffered -= taken
        part = chunk.reserved if pos >= len(chunk.items) else chunk.reserved * taken // chunk.size
        sh.ram.release(part)
        chunk.reserved -= part
        if pos >= len(chunk.items):
            sh.chunks.popleft()
        sh.cond.notify_all()
        return err if err is not None else out

    def get_state(self) -> dict:
        sh = self._sh
        with sh.input_lock, sh.cond:
            if sh.chunks:
                head = sh.chunks[0]
                return {"input": head.state_before, "skip": head.consumed}
            return {"input": sh.inner.get_state(), "skip": 0}

    def set_state(self, state: dict) -> None:
        sh = self._sh
        if self._started:
            with sh.cond:
                sh.closed = True
                sh.cond.notify_all()
            sh.group.stop(1.0)
            sh.group = WorkerGroup("prefetch", _producer, sh)
            self._started = False
        with sh.input_lock, sh.cond:
            sh.closed = False
            for c in sh.chunks:
                sh.ram.release(c.reserved)
            sh.chunks.clear()
            sh.buffered, sh.done = 0, False
            sh.inner.set_state(state["input"])
            _skip(sh.inner, int(state["skip"]))

    def close(self) -> None:
        if self.closed:
            return
        with close_deadline():  # one deadline for this stage and the stages below it
            self._sh.close()
            super().close()


def _skip(inner: OpIterator, k: int) -> None:
    """Consume ``k`` elements of ``inner`` (a failure the consumer saw counts as one)."""
    while k > 0:
        try:
            got = inner.next_chunk(k)
        except Exception:  # noqa: BLE001 - already delivered to the consumer before
            k -= 1
            continue
        if not got:
            return
        k -= len(got)


def _notifier(sh: _Shared):
    ref = weakref.ref(sh)

    def apply(_: int) -> None:
        s = ref()
        if s is not None:
            with s.cond:
                s.cond.notify_all()

    return apply
