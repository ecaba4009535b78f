"""The stage engine: every parallel stage (``map``/``random_map``, ``batch``, ``prefetch``,
``interleave``) is an ``Engine`` feeding a bounded buffer of chunks from one or more lanes.

* A **lane** is one ordered input: its iterator (read under the lane's input lock by one
  thread at a time), the chunks taken from it in input order, its replay state
  (``replay.py``) and an optional **transform** applied to each chunk's elements outside the
  lock (a map's function; a batch's stacking). A lane without a transform is a buffer: the
  work is reading the input (``prefetch``, an ``interleave`` input).
* The **engine** holds the lanes, the condition the consumer and the workers share, the
  RAM budget, the tuner's knob (``autotune.Stage``), and the **executor** that computes
  chunks: ``inline`` (the consumer computes a chunk when it needs one: no thread, no
  read-ahead), ``thread`` (worker threads) or ``process`` (each worker thread hands its
  chunks to one worker process: ``processes.py``). Its **policy** decides which lane a
  free worker fills next and how many elements it takes: ``map`` (one lane, at most two
  chunks per worker in flight), ``buffer`` (one lane, at most ``stage.value`` elements
  buffered: prefetch), ``queue`` (one lane, one element per chunk, at most ``stage.value``
  elements taken and not consumed: ``prefetch_to_device``, whose elements become ready one
  by one) or ``slots`` (many lanes, the emptiest first: interleave).
* Hand-offs are chunks (a thread hand-off costs ~88 µs here, DESIGN.md), sized by
  ``pool.ChunkSizer`` towards a few ms of work; results keep the input order within a
  lane, and a ``deterministic=False`` map lane delivers any finished chunk first.
* Errors: a failing element is a ``Failed`` item at its place and raised when the consumer
  reaches it; a worker that dies of anything else marks the engine ``fatal``
  (``WorkerDiedError`` at once, never a wait).
* Shutdown: ``close()`` stops and joins every worker within the shared close deadline
  (``pool.close_deadline``); workers hold the engine, never the op iterator, so dropping
  the public iterator lets its finaliser run. ``set_state`` bumps ``generation``: a worker
  still inside a user function from before the restore drops its result.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import islice
from typing import Any

from datapipe.errors import annotate
from datapipe.parallel import autotune, replay
from datapipe.parallel.pool import (
    POLL_S,
    PROCESS_CHUNK_S,
    TARGET_CHUNK_S,
    Chunk,
    ChunkSizer,
    Failed,
    SharedStage,
    WorkerGroup,
    consume,
    take_ready,
)
from datapipe.stats import torch_ranges, trace

INLINE, THREAD, PROCESS = "inline", "thread", "process"

# Set on a thread inside ``computing_inline()``.
_here = threading.local()


@contextmanager
def computing_inline() -> Iterator[None]:
    """Within: every engine asked for elements on this thread computes them here, as the
    inline executor does (no worker starts, nothing is read ahead), whatever its executor.
    An elastic resume restores each old chain once to see where its shard point re-reads
    (``datapipe.distribute.elastic``): with workers reading ahead during that restore, the
    point would be their timing's, and two new workers would divide the rest differently."""
    before = getattr(_here, "inline", False)
    _here.inline = True
    try:
        yield
    finally:
        _here.inline = before


class Lane:
    """One ordered input of an engine (see the module docstring).

    Args:
        inner: the input iterator.
        op: the op's name, for errors.
        transform: ``None`` (elements pass unchanged) or the function of one element;
            with ``indexed`` it is called ``transform(index, element)`` (``random_map``,
            ``batch``), else with tf.data's convention (a plain tuple is unpacked).
        deterministic: deliver chunks in input order (else any finished chunk first).
        replayable: the input's order is reproducible (``replay.replayable``); else
            snapshots store the taken elements.
        error_index: the index an input failure is reported at, from the stream index
            (default: the stream index).
    """

    def __init__(
        self,
        inner: Any,
        op: str,
        transform: Callable | None = None,
        indexed: bool = False,
        deterministic: bool = True,
        replayable: bool = True,
        error_index: Callable[[int], int | None] | None = None,
    ):
        self.inner, self.op, self.transform, self.indexed = inner, op, transform, indexed
        self.deterministic, self.replayable = deterministic, replayable
        self.error_index = error_index or (lambda i: i)
        # (stride, offset): errors name an element by its index in the random-access
        # source when a shard was moved below this op
        self.base = inner.index_base() or (1, 0)
        self.keep_inputs = transform is not None and not replayable
        self.input_lock = threading.Lock()
        self.chunks: deque[Chunk] = deque()  # in input order, oldest unfinished first
        # chunks re-taken by a restore, to recompute: (state_before, start, size, skip,
        # elements, input error or None)
        self.redo: deque[tuple] = deque()
        self.pending = 0  # chunks admitted and not fully consumed
        self.buffered = 0  # elements ready and not consumed
        self.next_index = 0  # input elements taken so far
        self.input_done = False
        self.detached = False  # removed from its engine (a closed interleave slot)

    def finished(self) -> bool:
        return self.pending == 0 and self.input_done and not self.redo

    def ready_chunk(self) -> Chunk | None:
        """Under ``cond``: the chunk the consumer reads next (None: nothing ready)."""
        for c in self.chunks:
            if c.done and c.consumed < len(c.items):
                return c
            if self.deterministic and not (c.done and c.consumed >= len(c.items)):
                return None  # the oldest unfinished chunk is not ready: keep the order
        return None


class Engine(SharedStage):
    """A parallel stage's shared state (see the module docstring).

    Args:
        op: the op's name (worker threads are ``datapipe-<op>-<i>``).
        policy: ``"map"``, ``"buffer"``, ``"queue"`` or ``"slots"``.
        tuner, stage: the pipeline's tuner and this stage's knob (parallelism, or the
            buffer size for ``"buffer"``).
        executor: ``INLINE``, ``THREAD`` or ``PROCESS``.
    """

    def __init__(self, op: str, policy: str, tuner: Any, stage: Any, executor: str = THREAD):
        self.op, self.policy, self.tuner, self.stage = op, policy, tuner, stage
        self.ram = tuner.ram
        self.executor = executor
        self.cond = threading.Condition(threading.Lock())
        self.closed = False
        self.generation = 0
        self.lanes: list[Lane] = []
        self.sizer = ChunkSizer()
        self.bytes_per_elem: float | None = None
        # elements admitted before their size was known: computed without a reservation,
        # they are counted against the budget when it is known (``_fit``)
        self.unsized = 0
        self.block = 1  # slots: elements per visit of a lane (interleave's block_length)
        self.group = WorkerGroup(op, _worker, self)
        self.processes: Any = None  # processes.Workers once the executor was PROCESS
        # () -> processes.Workers for this stage (None: processes are not an option)
        self.process_factory: Callable[[], Any] | None = None
        self.started = False
        # inline: when the consumer got its last answer (wall, thread CPU seconds)
        self._returned: tuple[float, float] | None = None

    @property
    def chunks(self) -> list[Chunk]:  # for SharedStage.close
        return [c for lane in self.lanes for c in lane.chunks]

    def workers_wanted(self, executor: str | None = None, value: int | None = None) -> int:
        if (executor or self.executor) == INLINE:
            return 0
        return 1 if self.policy in ("buffer", "queue") else value or self.stage.value

    def set_executor(self, kind: str, value: int) -> bool:
        """Run later chunks on ``kind`` with ``value`` workers (the tuner's executor choice;
        chunks in flight finish where they are). False if ``kind`` is not possible."""
        if self.closed:
            return False
        if kind == PROCESS and self.processes is None:
            if self.process_factory is None:
                return False
            try:
                self.processes = self.process_factory()
            except TypeError:  # the function cannot be sent to a process
                self.process_factory = None
                return False
        if kind == PROCESS:
            try:
                self.processes.ensure(value)
            except Exception:  # noqa: BLE001 - no process can start here: keep the executor
                if self.executor == PROCESS:
                    raise
                self.process_factory = None
                return False
        self.sizer.target_s = PROCESS_CHUNK_S if kind == PROCESS else TARGET_CHUNK_S
        with self.cond:
            self.executor = kind
            self.cond.notify_all()
        if kind == INLINE:
            self.group.resize(0)
            self.started = False
        elif self.started:
            self.group.resize(self.workers_wanted(kind, value))
        return True

    def start(self) -> None:
        """Start the workers (on the consumer's first request; again after a restore)."""
        if not self.started:
            self.started = True
            if self.executor == PROCESS and self.processes is not None:
                self.processes.ensure(self.workers_wanted())
            self.group.resize(self.workers_wanted())

    def resize(self, n: int) -> None:
        """The tuner moved the knob (``Stage.apply``): more or fewer workers."""
        if self.closed or not self.started:
            return
        if self.executor == PROCESS and self.processes is not None:
            self.processes.ensure(self.workers_wanted())
        self.group.resize(self.workers_wanted())

    def stop_workers(self) -> None:
        """Stop and join the workers (a restore follows); worker processes stay."""
        with self.cond:
            self.generation += 1
            self.closed = True
            self.cond.notify_all()
        self.group.stop(1.0)
        with self.cond:
            self.closed = False
        self.started = False

    def close(self) -> None:
        super().close()
        with self.cond:  # let go of the buffered results now, not when the iterator dies
            for lane in self.lanes:
                lane.chunks.clear()
                lane.redo.clear()
        if self.processes is not None:
            self.processes.release()
            self.processes = None

    # ---- admission: which lane a free worker fills, and how many elements ----------------
    def admit(self) -> tuple[Lane, int] | None:
        """Under ``cond``: (lane, elements) for the next chunk, or None (nothing now)."""
        if self.policy == "slots":
            return self._admit_slot()
        lane = self.lanes[0]
        if self.policy == "map":
            n = self._admit_map(lane)
        elif self.policy == "queue":
            n = self._admit_queue(lane)
        else:
            n = self._admit_buffer(lane)
        return (lane, n) if n else None

    def starts_waiting(self) -> None:
        self.waiting += 1
        bpe = self.bytes_per_elem
        if bpe is not None and self.ram.free() < bpe:
            # the budget is full: a worker may now take one element for this consumer (not
            # otherwise: waking every worker at each wait would cost a stage of 64 threads)
            self.cond.notify_all()

    def _fit(self, room: int, busy: bool) -> int:
        """Elements that fit the RAM budget. Over it, one element when nothing is
        outstanding and a consumer waits for this stage: a budget smaller than what the
        consumer needs must not stall it, and a stage nobody waits for keeps within it."""
        bpe = self.bytes_per_elem
        if bpe is None:  # element size unknown: one element until a chunk is done
            return 0 if busy else 1
        bpe = max(bpe, 1.0)
        fit = int((self.ram.free() - self.unsized * bpe) // bpe)
        if fit < 1:
            return 0 if busy or not self.waiting else 1
        return self.sizer.next_size(limit=min(room, fit))

    def _admit_map(self, lane: Lane) -> int:
        if lane.redo:  # re-taken by a restore: bounded by the checkpoint
            return 1
        p = self.stage.value
        if lane.pending >= 2 * p or lane.input_done:
            return 0
        if self.bytes_per_elem is None:  # element size unknown: one element per worker
            return 0 if lane.pending >= p else 1
        return self._fit(self.sizer.max_chunk, lane.pending > 0)

    def _admit_buffer(self, lane: Lane) -> int:
        if lane.pending:
            return 0  # one chunk at a time: the input is read in order
        if lane.redo:
            return 1
        if lane.input_done:
            return 0
        room = self.stage.value - lane.buffered
        if room <= 0:
            self.stage.full += 1
            return 0
        return self._fit(room, lane.buffered > 0)

    def _admit_queue(self, lane: Lane) -> int:
        # One element per chunk: each is handed over as soon as it is ready, and the worker
        # goes on with the next while the consumer holds earlier ones.
        if lane.redo:
            return 1
        if lane.input_done:
            return 0
        if lane.pending >= self.stage.value:
            self.stage.full += 1
            return 0
        return min(1, self._fit(1, lane.pending > 0))

    def _admit_slot(self) -> tuple[Lane, int] | None:
        want = max(2 * self.block, self.sizer.size)
        if self.ram.free() <= 0:
            want = 1  # over the RAM budget: only lanes with nothing buffered may take more
        best = None
        for lane in self.lanes:
            if lane.pending:
                continue
            if lane.redo:
                return lane, 1
            if not lane.input_done and lane.buffered < want:
                if best is None or lane.buffered < best.buffered:
                    best = lane
        if best is None:
            return None
        return best, self.sizer.next_size(limit=max(2 * self.block, 1))

    def all_done(self) -> bool:
        """No work will come any more (workers may exit): every input ended (slots: lanes
        are added while the stage runs, so never)."""
        if self.policy == "slots":
            return False
        return all(lane.input_done and not lane.redo for lane in self.lanes)

    # ---- the consumer ---------------------------------------------------------------------
    def next_from(self, lane: Lane, n: int) -> list:
        """Up to ``n`` elements of ``lane`` in its order, waiting for them; ``[]`` at its end.
        A failed element is raised at its position."""
        if self.executor != INLINE and not getattr(_here, "inline", False):
            self.start()
            return consume(self.cond, lambda: self.take(lane, n), lambda: self.closed,
                           self.stage, self.tuner, self)  # fmt: skip
        t_in, c_in = time.perf_counter(), time.thread_time()
        if self._returned is not None:  # the consumer's own work since our last answer
            self.stage.outside_s += t_in - self._returned[0]
            self.stage.outside_cpu_s += c_in - self._returned[1]
        try:
            got = self._inline(lane, n)
            if got is not None:
                self.tuner.maybe_step()
                return got
            return consume(self.cond, lambda: self.take(lane, n), lambda: self.closed,
                           self.stage, self.tuner, self)  # fmt: skip
        finally:
            self._returned = (time.perf_counter(), time.thread_time())

    def _inline(self, lane: Lane, n: int) -> list | None:
        """Compute ``n`` elements on the consumer's thread when nothing is outstanding (no
        worker runs: the executor is inline). The results go straight to the consumer, as
        a sequential op's would: no chunk, no lock waits, no RAM reservation, and an input
        failure propagates as it is. Only a chunk in which the function failed is kept
        (the good elements go first); None then, and when chunks are outstanding. A chunk
        a restore queued for recomputation (``lane.redo``: the snapshot came from threads
        or processes) is computed here too, into a ready chunk: no worker runs inline."""
        with self.cond:
            redo = bool(lane.redo) and not lane.chunks and not lane.pending and not self.closed
            if redo:
                lane.pending += 1  # as a worker's admission does
            elif lane.pending or lane.redo or lane.chunks or self.closed or lane.input_done:
                return None if lane.pending or lane.redo or lane.chunks else []
        if redo:
            # Chunks re-taken by a restore (a state saved while workers ran) are computed
            # here: an inline stage has no worker that would, and the consumer would wait
            # for them for ever. The chunk joins the lane; the caller takes it from there.
            gen = self.generation
            chunk, elems = take_input(self, lane, 1, 0, gen)
            if chunk is not None:
                compute(self, lane, chunk, elems, -1, gen)
            return None  # the consumer takes it from the chunk, now ready
        t0, c0 = time.perf_counter(), time.thread_time()  # a buffer's work is its reading
        with lane.input_lock:
            start = lane.next_index
            elems = lane.inner.next_chunk(n)
            lane.next_index += len(elems)
        if not elems:
            with self.cond:
                lane.input_done = True
            return []
        if lane.transform is None:
            items, failed = elems, False
        else:
            t0, c0 = time.perf_counter(), time.thread_time()
            items, failed = apply(lane, elems, start)
        dt = time.perf_counter() - t0
        st = self.stage
        st.produced += len(items)
        st.busy_s += dt
        st.cpu_s += time.thread_time() - c0
        self.sizer.observe(len(items), dt)
        if not failed:
            return items
        chunk = Chunk(start, None)  # no input state: a snapshot stores its elements
        chunk.size, chunk.inputs, chunk.items = len(elems), elems, items
        chunk.done = chunk.failed = True
        with self.cond:
            lane.pending += 1
            lane.buffered += len(items)
            lane.chunks.append(chunk)
        return None

    def take(self, lane: Lane, n: int) -> list | BaseException | None:
        """Under ``cond``: up to ``n`` ready elements, a failure to raise, ``[]`` at the
        lane's end, or None (nothing ready yet)."""
        chunk = lane.ready_chunk()
        if chunk is None:
            return [] if lane.finished() else None
        if chunk.failed:
            out, err, pos = take_ready(chunk.items, chunk.consumed, n)
        else:  # no failure in it: a slice (the whole list when it is all taken)
            start, items = chunk.consumed, chunk.items
            pos = min(len(items), start + n)
            out = items if start == 0 and pos == len(items) else items[start:pos]
            err = None
        left = len(chunk.items) - chunk.consumed  # before this take
        taken = pos - chunk.consumed
        chunk.consumed = pos
        lane.buffered -= taken
        if pos >= len(chunk.items):
            _hand_over(self.ram, chunk.reserved)
            chunk.reserved = 0
            self._finish(lane, chunk)
            self.cond.notify_all()  # room for another chunk
        else:
            # the share of what is still reserved (earlier takes released theirs)
            part = chunk.reserved * taken // max(left, 1)
            _hand_over(self.ram, part)
            chunk.reserved -= part
            if self.policy != "map":  # buffers count elements: room for more
                self.cond.notify_all()
        return err if err is not None else out

    def _finish(self, lane: Lane, chunk: Chunk) -> None:
        self.ram.release(chunk.reserved)
        chunk.reserved = 0
        # keep the count, drop the results (readers of a finished chunk take its len())
        chunk.items = _Count(len(chunk.items))  # type: ignore[assignment]
        chunk.inputs = ()
        lane.pending -= 1
        chunks = lane.chunks
        while chunks and chunks[0].done and chunks[0].consumed >= len(chunks[0].items):
            chunks.popleft()

    # ---- checkpoints ----------------------------------------------------------------------
    def snapshot(self, lane: Lane) -> dict:
        with lane.input_lock, self.cond:
            return replay.snapshot(lane)

    def reset(self, lane: Lane) -> None:
        """Under ``lane.input_lock``, workers stopped: empty the lane."""
        with self.cond:
            for c in lane.chunks:
                self.ram.release(c.reserved)
                c.reserved = 0  # a worker still computing it (a slow join) releases nothing
            lane.chunks.clear()
            lane.redo.clear()
            lane.pending = lane.buffered = 0
            lane.input_done = False

    def restore(self, lane: Lane, state: dict) -> None:
        """``set_state`` of a one-lane stage: stop the workers, rebuild the lane."""
        if self.started:
            self.stop_workers()
        with lane.input_lock:
            self.reset(lane)
            # Not under ``cond``: replaying reads the input, whose consumer wait may run the
            # tuner, whose step may call back into this engine.
            replay.restore(lane, state)


class _Count:
    """A finished chunk's ``items``: only their number is kept (its list went out)."""

    __slots__ = ("n",)

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n


# ---- RAM hand-over between stages -------------------------------------------------------
# A buffer lane's worker (prefetch, interleave slots) reads elements that the stage below
# reserved. Released there and reserved again here when the chunk is done, the bytes were
# free in between, and the stage below filled them: the budget was exceeded by a chunk.
# The reading thread takes the reservation over instead (``take`` hands it to ``_carry``).
_carry = threading.local()


def _hand_over(ram: Any, nbytes: int) -> None:
    """Release ``nbytes`` of elements the current thread took, or carry them over to the
    buffer lane chunk this thread is filling (see ``take_input``)."""
    carried = getattr(_carry, "nbytes", None)
    if carried is None:
        ram.release(nbytes)
    else:
        _carry.nbytes = carried + nbytes


def _take_carried() -> int:
    carried = getattr(_carry, "nbytes", None) or 0
    _carry.nbytes = None
    return carried


# ---- the workers ------------------------------------------------------------------------
def _worker(eng: Engine, wid: int) -> None:
    gen = eng.generation
    while True:
        with eng.cond:
            got = None
            while not eng.closed and gen == eng.generation:
                if wid >= eng.group.size:
                    if eng.group.retire(wid):
                        return
                got = eng.admit()
                if got is not None:
                    break
                if eng.all_done():
                    return
                eng.cond.wait(POLL_S)
            if got is None:
                return
            lane, n = got
            lane.pending += 1
            # A map reserves its results' bytes before computing them; a buffer lane takes
            # over bytes its input reserved already (they are released there as it reads).
            reserve = unsized = 0
            if lane.transform is not None:
                if eng.bytes_per_elem:
                    reserve = int(n * eng.bytes_per_elem)
                else:  # its bytes appear when it is done; until then ``_fit`` counts it
                    unsized = n
                    eng.unsized += n
            eng.ram.try_reserve(reserve, force=True)
        try:
            _take_and_compute(eng, lane, n, reserve, wid, gen)
        finally:
            if unsized:  # its bytes are reserved now (or it was dropped)
                with eng.cond:
                    eng.unsized -= unsized


def _take_and_compute(eng: Engine, lane: Lane, n: int, reserve: int, wid: int, gen: int) -> None:
    chunk, elems = take_input(eng, lane, n, reserve, gen)
    if chunk is None:
        return
    if lane.transform is not None and torch_ranges.active():  # a range per chunk
        with torch_ranges.worker_range(getattr(eng, "label", eng.op)):
            compute(eng, lane, chunk, elems, wid, gen)
    else:
        compute(eng, lane, chunk, elems, wid, gen)


def take_input(
    eng: Engine, lane: Lane, n: int, reserve: int, gen: int
) -> tuple[Chunk | None, list]:
    """Take the lane's next chunk (a replayed one first) and register it; (None, []) when
    the input has ended. For a lane without transform, reading the input is the work."""
    with lane.input_lock:
        if gen != eng.generation:  # a restore began while this worker waited: the lane was
            eng.ram.release(reserve)  # reset without this chunk, whose bytes are ours to give
            return None, []
        if lane.detached:  # a closed interleave slot: its dataset is closed
            with eng.cond:
                lane.pending -= 1
                eng.ram.release(reserve)
            return None, []
        carried = 0
        if lane.redo:
            state, start, size, skip, elems, error = lane.redo.popleft()
            chunk = Chunk(start, state)
            chunk.size, chunk.skip, chunk.input_error = size, skip, error
        else:
            chunk = Chunk(lane.next_index, lane.inner.get_state() if lane.replayable else None)
            t0, c0 = time.perf_counter(), time.thread_time()
            outer = getattr(_carry, "nbytes", None)  # an outer lane this thread fills inline
            _carry.nbytes = 0 if lane.transform is None else None
            try:
                elems = lane.inner.next_chunk(n)
            except BaseException as e:  # noqa: BLE001 - delivered at its position
                elems = []
                chunk.input_error = annotate(lane.op, lane.error_index(lane.next_index), e)
            finally:
                carried = _take_carried()
                _carry.nbytes = outer
            if lane.transform is None:  # the work of a buffer lane is reading its input
                _account(eng, len(elems), time.perf_counter() - t0, time.thread_time() - c0)
            chunk.size = len(elems)
            lane.next_index += len(elems)
            if not elems and chunk.input_error is None:
                with eng.cond:
                    lane.input_done = True
                    lane.pending -= 1
                    eng.ram.release(reserve + carried)
                    eng.cond.notify_all()
                return None, []
        if chunk.input_error is not None:
            chunk.error_text = str(chunk.input_error)
        if lane.keep_inputs or lane.transform is None:
            chunk.inputs = elems
        chunk.reserved = reserve + carried
        with eng.cond:
            lane.chunks.append(chunk)
    return chunk, elems


def _account(eng: Engine, n: int, wall: float, cpu: float) -> None:
    st = eng.stage
    st.produced += n
    st.busy_s += wall
    st.cpu_s += cpu
    eng.sizer.observe(n, wall)


def compute(eng: Engine, lane: Lane, chunk: Chunk, elems: list, wid: int, gen: int) -> None:
    """Compute a taken chunk's results (on this thread, or in worker process ``wid``) and
    hand them to the consumer."""
    t0, c0 = time.perf_counter(), time.thread_time()
    # Decided once per chunk: the executor may change while it is computed (AUTOTUNE), and
    # a thread of a larger thread group that has not retired yet has no process of its own.
    procs = eng.processes
    remote = wid >= 0 and eng.executor == PROCESS and procs is not None and wid < len(procs.procs)
    if chunk.input_error is not None:
        items: list = [Failed(chunk.input_error)]
        chunk.input_error = True  # keep the fact, not the exception (see take_ready)
        chunk.failed = True
    elif lane.transform is None:
        items = elems
    elif remote:
        got = procs.run(wid, lane, elems, chunk.start + chunk.skip, gen)
        if got is None:  # stopped (close, restore) while the process computed
            with eng.cond:
                eng.ram.release(chunk.reserved)
                chunk.reserved = 0
            return
        items, chunk.failed = got
    else:
        items, chunk.failed = apply(lane, elems, chunk.start + chunk.skip)
    dt, dcpu = time.perf_counter() - t0, time.thread_time() - c0
    if lane.transform is not None and trace.ENABLED and not remote:
        # datapipe.stats: a span per chunk on this worker's own track
        trace.record_span(f"{eng.op} workers", "chunk", t0, t0 + dt, {"elements": len(items)})
    nbytes = autotune.chunk_nbytes([x for x in items[:1] if type(x) is not Failed]) * len(items)
    with eng.cond:
        if gen != eng.generation:  # a restore began: the chunk is dropped, its bytes
            eng.ram.release(chunk.reserved)  # released once (here, or by ``reset`` first)
            chunk.reserved = 0
            return
        chunk.items, chunk.done = items, True
        lane.buffered += len(items)
        if items and nbytes:
            eng.bytes_per_elem = nbytes / len(items)
            eng.stage.out_bytes = eng.bytes_per_elem  # the tuner's executor choice
        if wid < 0:  # computed inline for the consumer, who takes it now: not a buffer
            nbytes = 0
        eng.ram.exchange(chunk.reserved, nbytes)  # one step: no other stage sees a gap
        chunk.reserved = nbytes
        if lane.transform is not None and not remote:  # processes.run accounted for it
            _account(eng, len(items), dt, dcpu)
        eng.cond.notify_all()


def apply(lane: Lane, elems: list, first: int) -> tuple[list, bool]:
    """``lane.transform`` over ``elems`` (the first at stream index ``first``); a failing
    element becomes a ``Failed`` in its place, named by op and index. Returns (results,
    whether any failed). The loop runs in C (``list.extend(map(...))`` keeps the results
    made before an exception), resuming after each failure."""
    fn = lane.transform
    assert fn is not None  # a lane that transforms (engine.Lane)
    out: list = []
    n, failed = len(elems), False
    stride, offset = lane.base
    while len(out) < n:
        start = len(out)
        try:
            rest = islice(elems, start, None)
            if lane.indexed:
                out.extend(map(fn, range(first + start, first + n), rest))
            elif type(elems[start]) is tuple:  # tf.data's convention: a tuple is unpacked
                out.extend(fn(*x) if type(x) is tuple else fn(x) for x in rest)
            else:
                out.extend(map(fn, rest))
        except BaseException as e:  # noqa: BLE001 - the consumer raises it at this position
            k = first + len(out)
            out.append(Failed(annotate(lane.op, offset + stride * k, e)))
            failed = True
            continue
        if len(out) < n:
            # ``extend`` took a StopIteration raised by ``fn`` for the end of the elements
            # (the only way it stops early): a failure of that element, not a retry.
            k = first + len(out)
            err = StopIteration(f"raised by the function of '{lane.op}'")
            out.append(Failed(annotate(lane.op, offset + stride * k, err)))
            failed = True
    return out, failed
