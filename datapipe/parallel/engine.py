"""The stage engine: the shared state of a parallel stage and its algorithms: lanes, the
bounded buffer of chunks, admission, the workers' loop, the consumer's wait.

* A **lane** is one ordered input: its iterator (read under the lane's input lock by one
  thread at a time), the chunks taken from it in input order, its replay state
  (``replay.py``) and an optional **transform** applied to each chunk's elements outside the
  lock (a map's function; a batch's stacking). A lane without a transform is a buffer: the
  work is reading the input (``prefetch``, an ``interleave`` input).
* The **engine** holds the lanes, the condition the consumer and the workers share, the
  RAM budget, the stage's knob and meter (``stage.py``), its **policy** (``policies.py``:
  which lane a free worker fills next and how many elements it takes) and the
  **executor** running it (``executors.py``): the consumer computes inline, or worker
  threads (serving worker processes, for ``Processes``) run ``work``.
* Hand-offs are chunks (a thread hand-off costs ~88 µs here: docs/architecture.md),
  sized by ``pool.ChunkSizer`` towards a few ms of work; results keep the input order
  within a lane, and a ``deterministic=False`` map lane delivers any finished chunk first.
* Errors: a failing element is a ``Failed`` item at its place and raised when the consumer
  reaches it; a worker that dies of anything else marks the engine ``fatal``
  (``WorkerDiedError`` at once, never a wait), and every worker of the stage stops before
  the error goes up.
* Shutdown: ``close()`` stops and joins every worker within the shared close deadline
  (``pool.close_deadline``); workers hold the engine and their executor, never the op
  iterator, so dropping the public iterator lets its finaliser run. A restore bumps
  ``generation``: a worker still inside a user function from before it drops its result.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from datapipe._iterator import snapshot_deadline, snapshots_kept, snapshots_within
from datapipe._positions import Failed
from datapipe.errors import WorkerDiedError, annotate
from datapipe.parallel import autotune, replay
from datapipe.parallel.executors import apply
from datapipe.parallel.pool import POLL_S, Chunk, ChunkSizer, _closing, take_ready
from datapipe.stats import torch_ranges, trace

# AUTOTUNE's samples of what would cross a process boundary: one chunk in this many.
SAMPLE_EVERY = 32

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


def inline_here() -> bool:
    """Within ``computing_inline()`` on this thread."""
    return getattr(_here, "inline", False)


class InterruptSafeCondition(threading.Condition):
    """A ``threading.Condition`` that an interrupt cannot leave held (the engine's ``cond``).

    ``threading.Condition.__enter__`` is a Python method that calls the lock's C
    ``__enter__``: a signal handler runs after that call returns, so a ``KeyboardInterrupt``
    or ``SystemExit`` landing there left the lock taken with no ``with`` block to release
    it, and the next ``with cond`` (the close's snapshot) waited for ever (issue 35 item 5).
    Here ``with`` calls the lock's own C methods (found through a property, before the lock
    is taken), and ``wait`` gives the caller the lock back when an interrupt lands inside
    it while it let go of it, so the caller's ``with`` releases a held lock. Reentrant
    (an ``RLock``: ``wait`` tells whether this thread holds it)."""

    def __init__(self) -> None:
        super().__init__(threading.RLock())

    @property
    def __enter__(self) -> Callable[[], bool]:
        return self._lock.__enter__  # type: ignore[attr-defined]

    @property
    def __exit__(self) -> Callable[..., None]:
        return self._lock.__exit__  # type: ignore[attr-defined]

    def wait(self, timeout: float | None = None) -> bool:
        try:
            return super().wait(timeout)
        except BaseException:
            if not self._is_owned():  # type: ignore[attr-defined]
                self._lock.acquire()  # type: ignore[attr-defined]
            raise


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


class Engine:
    """A parallel stage's shared state (see the module docstring).

    Args:
        op: the op's name (errors, statistics).
        policy: the engine policy (``policies.py``).
        tuner: the pipeline's tuner (its RAM budget; consumers give it steps).
        knob, meter: the stage's (``stage.Knob``, ``stage.Meter``).
    """

    def __init__(self, op: str, policy: Any, tuner: Any, knob: Any, meter: Any):
        self.op, self.policy, self.tuner, self.knob, self.meter = op, policy, tuner, knob, meter
        self.label = op  # the workers' torch profiler ranges (datapipe.stats.torch_ranges)
        self.ram = tuner.ram
        self.executor: Any = None  # executors.Executor running the stage, set by the stage
        self.executors: dict[str, Any] = {}  # every one the stage created, by kind
        self.cond = InterruptSafeCondition()
        self.closed = False
        self.generation = 0
        self.lanes: list[Lane] = []
        self.sizer = ChunkSizer(meter)
        self.bytes_per_elem: float | None = None
        # elements admitted before their size was known: computed without a reservation,
        # they are counted against the budget when it is known (``fit``)
        self.unsized = 0
        self.fatal: BaseException | None = None  # a worker died: raised from now on
        # Each lane's snapshot as the broken stage closed (by id): see ``close``.
        self.at_break: dict[int, dict] | None = None
        self.dropped = False  # close let go of chunks no snapshot recorded
        self.waiting = 0  # consumers waiting in ``wait`` for this stage now (under cond)
        # inline: when the consumer got its last answer (wall, thread CPU seconds)
        self._returned: tuple[float, float] | None = None
        # AUTOTUNE may still move the stage to processes: the first input and result of
        # the last chunk computed here, to check that they cross a process boundary first
        self.sampling = False
        self.samples: tuple = ()
        self._unsampled = 0  # chunks computed since the last sample (``sample``)
        # why the process executor gave an element back (set by a worker thread); the
        # consumer moves the stage back to threads, once (``stage.Stage.step_back``)
        self.step_back: str | None = None
        self.stepped_back = False
        # The consumer's last take (lane, chunk, elements, whether it finished the chunk),
        # until its next call: given back if an interrupt lands before the elements reach
        # the caller (``wait``). A chunk that take finished leaves its lane at the next.
        self._taken: tuple | None = None
        self._finished: tuple | None = None

    def workers_wanted(self) -> int:
        return self.policy.workers(self.knob.value) if self.executor.threads else 0

    def set_executor(self, ex: Any) -> None:
        """Compute later chunks on ``ex`` (chunks in flight finish where they are)."""
        self.sizer.target_s = ex.chunk_s
        with self.cond:
            self.executor = ex
            self.cond.notify_all()

    # ---- what crosses a process boundary ----------------------------------------------------
    def samples_cross(self) -> bool:
        """Whether the sampled inputs and results pickle (AUTOTUNE's check before it moves
        the stage to processes: an element or a result with a lock, an open file or a
        generator inside would fail there, where it works on threads)."""
        from datapipe.parallel import shm

        try:
            for x in self.samples:
                shm.check(x)
        except Exception:  # noqa: BLE001 - any failure to pickle: stay where it works
            return False
        finally:
            self.samples = ()
        return True

    def sample(self, elems: list, items: list) -> None:
        """Keep a chunk's first and last input and result, from one chunk in
        ``SAMPLE_EVERY`` (W1's inline map computes ~4,000 chunks a second: a sample each
        cost it ~3%)."""
        self._unsampled -= 1
        if self._unsampled <= 0 or not self.samples:
            self._unsampled = SAMPLE_EVERY
            self.samples = _samples(elems, items)

    def request_step_back(self, why: str) -> None:
        """Called by a worker thread: the process executor computed an element here."""
        with self.cond:
            if self.step_back is None:
                self.step_back = why

    # ---- workers: death, stop, close ------------------------------------------------------
    def worker_died(self, error: BaseException, cause: BaseException) -> None:
        """Called on a worker thread whose loop raised: the stage is broken; wake the
        consumer, which raises ``error`` (chained to ``cause``) at once."""
        if cause is not None:
            error.__cause__ = cause
        with self.cond:
            if self.fatal is None:
                self.fatal = error
            self.cond.notify_all()

    def halt_workers(self) -> None:
        """Stop and join every worker (a restore follows); a worker still computing drops
        its result (``generation``)."""
        with self.cond:
            self.generation += 1
            self.closed = True
            self.cond.notify_all()
        for ex in list(self.executors.values()):
            ex.stop()
        with self.cond:
            self.closed = False

    def close(self) -> None:
        """Stop the workers (within the shared close deadline), close the executors and
        give back the RAM reserved by chunks not consumed. Idempotent."""
        with self.cond:
            if self.closed:
                return
            self.closed = True
            self.cond.notify_all()
        executors = list(self.executors.values())
        for ex in executors:
            ex.stop()
        if (self.fatal is not None or snapshots_kept()) and self.at_break is None:
            # A worker died and the stage closes at once (the error may stay referenced,
            # as in a notebook), or the iterator closes and takes its state after the
            # workers stopped (``Iterator.close``): what the lanes held and had in flight
            # is recorded first, so that state resumes exactly (what a dead or stopped
            # worker had is computed again), within what is left of the close deadline.
            left = (getattr(_closing, "deadline", None) or 0.0) - time.monotonic()
            try:
                with snapshots_within(max(0.05, left)):
                    self.at_break = {id(ln): self.snapshot(ln) for ln in list(self.lanes)}
            except TimeoutError:
                pass  # a worker blocked in the input: the state raises, saying so
        with self.cond:  # let go of the buffered results now, not when the iterator dies
            self.dropped = any(lane.chunks or lane.redo for lane in self.lanes)
            for lane in self.lanes:
                for c in lane.chunks:
                    self.ram.release(c.reserved)
                    c.reserved = 0
                lane.chunks.clear()
                lane.redo.clear()
        for ex in executors:
            ex.close()

    # ---- admission: which lane a free worker fills, and how many elements ----------------
    def admit(self) -> tuple[Lane, int] | None:
        """Under ``cond``: (lane, elements) for the next chunk, or None (nothing now)."""
        return self.policy.admit(self)

    def starts_waiting(self) -> None:
        """Under ``cond``: a consumer begins to wait (it ends by decrementing ``waiting``).
        A stage may go over the RAM budget only for a waiting consumer (``fit``)."""
        self.waiting += 1
        bpe = self.bytes_per_elem
        if bpe is not None and self.ram.free() < bpe:
            # the budget is full: a worker may now take one element for this consumer (not
            # otherwise: waking every worker at each wait would cost a stage of 64 threads)
            self.cond.notify_all()

    def fit(self, room: int, busy: bool) -> int:
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

    def all_done(self) -> bool:
        """No work will come any more (workers may exit): every input ended (never while
        lanes may still be added: interleave)."""
        if self.policy.lanes_come_and_go:
            return False
        return all(lane.input_done and not lane.redo for lane in self.lanes)

    # ---- the consumer ---------------------------------------------------------------------
    def next_from(self, lane: Lane, n: int) -> list:
        """Up to ``n`` elements of ``lane`` in its order, waiting for them; ``[]`` at its end.
        A failed element is raised at its position."""
        if self.executor.threads and not inline_here():
            return self.wait(lambda: self.take(lane, n))
        t_in, c_in = time.perf_counter(), time.thread_time()
        meter = self.meter
        if self._returned is not None:  # the consumer's own work since our last answer
            meter.outside_s += t_in - self._returned[0]
            meter.outside_cpu_s += c_in - self._returned[1]
        # The tuner's step comes before the chunk is computed (the step the last answer
        # earned): once the chunk is in hand, nothing but the return follows, so an
        # interrupt cannot land between computing the elements and handing them on.
        self.tuner.maybe_step()
        got = self._inline(lane, n)
        if got is not None:  # (``_returned`` is set as it was computed)
            return got
        try:
            return self.wait(lambda: self.take(lane, n))
        finally:
            self._returned = (time.perf_counter(), time.thread_time())

    def wait(self, take: Callable[[], Any], raise_errors: bool = True) -> Any:
        """The consumer's side: wait on ``cond`` until ``take()`` (called with ``cond``
        held) returns something other than None; ``[]`` once closed. Waits count as the
        stage's consumer wait, and the tuner gets a step at least every ``POLL_S`` of
        waiting (it has no thread of its own). A taken exception is raised here (returned,
        without ``raise_errors``), and so is ``fatal`` (a worker died) before anything
        else, after every worker stopped."""
        self._taken = None
        try:
            return self._wait(take, raise_errors)
        except BaseException:
            # An interrupt landed between ``take`` and the return (or the error taken is
            # raised): elements taken and not handed on go back to their chunk, so a state
            # taken now has them (``take``'s record; a raised failure is not given back).
            if self._taken is not None:
                with self.cond:
                    self._untake()
            raise

    def _wait(self, take: Callable[[], Any], raise_errors: bool) -> Any:
        got: Any = None
        waited = 0.0
        counted = False  # this consumer is counted in ``waiting``
        cond, meter = self.cond, self.meter
        with cond:
            try:
                while True:
                    if self.fatal is not None:
                        got = self._fatal_error()
                        break
                    if self.closed:
                        return []
                    got = take()
                    if got is not None:
                        break
                    if not counted:
                        counted = True
                        self.starts_waiting()
                    t0 = time.perf_counter()
                    cond.wait(POLL_S)
                    waited += time.perf_counter() - t0
                    if waited > POLL_S:
                        meter.consumer_wait_s += waited
                        waited = 0.0
                        cond.release()
                        try:
                            self.tuner.maybe_step()
                        finally:
                            cond.acquire()
            finally:
                if counted:
                    self.waiting -= 1
        if self.fatal is not None:  # every worker of the broken stage stops first
            self.close()
        meter.consumer_wait_s += waited
        self.tuner.maybe_step()
        if isinstance(got, BaseException) and raise_errors:
            self._taken = None  # a failure delivered: not given back
            try:
                raise got
            finally:  # the traceback keeps this frame: it must not keep the error (a cycle
                got = None  # would keep the pipeline's threads alive until a gc run)
        return got

    def _fatal_error(self) -> WorkerDiedError:
        # a fresh error per raise: the stored one must not keep consumer frames
        assert self.fatal is not None
        err = WorkerDiedError(*self.fatal.args)
        err.__cause__ = self.fatal.__cause__
        return err

    def _inline(self, lane: Lane, n: int) -> list | None:
        """Compute ``n`` elements on the consumer's thread when nothing is outstanding (no
        worker runs: the executor is inline). The results go straight to the consumer, as
        a sequential op's would: no chunk, no lock waits, no RAM reservation, and an input
        failure propagates as it is. Only a chunk in which the function failed is kept
        (the good elements go first); None then, and when chunks are outstanding. A chunk
        a restore queued for recomputation (``lane.redo``: the snapshot came from threads
        or processes) is computed here too, into a ready chunk: no worker runs inline."""
        with self.cond:
            if self._finished is not None:  # the chunk the last take finished goes first
                self._drop_finished()
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
                compute(self, lane, chunk, elems, -1, gen, self.executor)
            return None  # the consumer takes it from the chunk, now ready
        held: list = []  # taken from the input and not handed on: an interrupt gives it back
        try:
            return self._inline_chunk(lane, n, held)
        except BaseException:
            if held:  # the elements go back, to compute again: a state now has them
                with self.cond:
                    lane.next_index = held[0] + len(held[1])
                    lane.redo.append((None, held[0], len(held[1]), 0, list(held[1]), None))
            raise

    def _inline_chunk(self, lane: Lane, n: int, held: list) -> list | None:
        """``_inline``'s computing part. ``held`` is ``[start, elements]`` from the moment
        the input returned them until they are handed on (returned, or a ready chunk of
        the lane), so an interrupt anywhere between (a signal handler's
        ``KeyboardInterrupt`` or ``SystemExit``) gives them back to the lane."""
        t0, c0 = time.perf_counter(), time.thread_time()  # a buffer's work is its reading
        with lane.input_lock:
            start = lane.next_index
            held += [start, lane.inner.next_chunk(n)]  # one statement: see the docstring
            elems = held[1]
            lane.next_index = start + len(elems)
        if not elems:
            del held[:]
            with self.cond:
                lane.input_done = True
            return []
        if lane.transform is None:
            items, failed = elems, False
        else:
            t0, c0 = time.perf_counter(), time.thread_time()
            items, failed = apply(lane, elems, start)  # the inline executor's compute
            if self.sampling:
                self.sample(elems, items)
        dt, dcpu = time.perf_counter() - t0, time.thread_time() - c0
        if self.meter.out_bytes is None and lane.transform is not None:
            # the result size, once: the tuner's first executor move reads it
            good = [x for x in items[:1] if type(x) is not Failed]
            self.meter.out_bytes = float(autotune.chunk_nbytes(good)) if good else None
        self.meter.record(len(items), dt, dcpu)
        if not failed:
            self._returned = (time.perf_counter(), time.thread_time())
            # No call from here to the caller's store (a signal handler runs only after a
            # call): ``del`` is no call, unlike ``held.clear()``.
            del held[:]
            return items
        chunk = Chunk(start, None)  # no input state: a snapshot stores its elements
        chunk.size, chunk.inputs, chunk.items = len(elems), elems, items
        chunk.done = chunk.failed = True
        k = len(items)
        with self.cond:
            lane.pending += 1
            lane.buffered += k
            del held[:]
            lane.chunks.append(chunk)  # the hand-over: no call in between (see above)
        return None

    def take(self, lane: Lane, n: int) -> list | BaseException | None:
        """Under ``cond``: up to ``n`` ready elements, a failure to raise, ``[]`` at the
        lane's end, or None (nothing ready yet).

        What it takes is recorded (``_taken``) until the consumer's next call: an interrupt
        before the elements reach the caller gives them back (``_untake``, from ``wait``).
        So a chunk all taken leaves the lane only at the next take (``_drop_finished``)."""
        if self._finished is not None:
            self._drop_finished()
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
        done = pos >= len(chunk.items)
        # The record and the commit: no call among these statements (a signal handler runs
        # only after a call), so an interrupt finds both or neither.
        self._taken = (lane, chunk, taken, done)
        chunk.consumed = pos
        lane.buffered -= taken
        if done:
            lane.pending -= 1
            self._finished = (lane, chunk)
            _hand_over(self.ram, chunk.reserved)
            chunk.reserved = 0
            self.cond.notify_all()  # room for another chunk
        else:
            # the share of what is still reserved (earlier takes released theirs)
            part = chunk.reserved * taken // max(left, 1)
            _hand_over(self.ram, part)
            chunk.reserved -= part
            if self.policy.counts_elements:  # buffers count elements: room for more
                self.cond.notify_all()
        return err if err is not None else out

    def _untake(self) -> None:
        """Under ``cond``: give back what the last ``take`` took (see ``take``)."""
        taken, self._taken = self._taken, None
        if taken is None:
            return
        lane, chunk, k, done = taken
        chunk.consumed -= k
        lane.buffered += k
        if done:
            lane.pending += 1
            if self._finished is not None and self._finished[1] is chunk:
                self._finished = None

    def _drop_finished(self) -> None:
        """Under ``cond``: the chunk the last take finished leaves its lane (its results
        go; readers of a finished chunk take its len())."""
        (lane, chunk), self._finished = self._finished, None  # type: ignore[misc]
        if chunk.consumed < len(chunk.items):
            return  # given back meanwhile
        chunk.items = _Count(len(chunk.items))
        chunk.inputs = ()
        chunks = lane.chunks
        while chunks and chunks[0].done and chunks[0].consumed >= len(chunks[0].items):
            chunks.popleft()

    # ---- checkpoints ----------------------------------------------------------------------
    def snapshot(self, lane: Lane) -> dict:
        if self.at_break is not None and id(lane) in self.at_break:
            return self.at_break[id(lane)]  # the broken stage's, as it closed
        if self.dropped:  # closed, and what it held is gone: no state is exact now
            raise TimeoutError(f"{lane.op}: the stage closed with a worker blocked in its input")
        by = snapshot_deadline()
        wait = -1 if by is None else max(0.0, by - time.monotonic())
        if not lane.input_lock.acquire(timeout=wait):
            raise TimeoutError(f"{lane.op}: a worker still reads the input (blocked in it)")
        try:
            with self.cond:
                return replay.snapshot(lane)
        finally:
            lane.input_lock.release()

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
        """Rebuild ``lane`` from a snapshot (its workers are stopped: ``halt_workers``)."""
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
def work(eng: Engine, wid: int, ex: Any) -> None:
    """Worker thread ``wid`` of executor ``ex`` (``executors.Threads``): admit a chunk,
    take its input, compute it on ``ex``, hand it to the consumer; until the stage stops,
    its input ends, or ``ex`` has fewer workers than ``wid + 1`` (a switch or a smaller
    knob: it retires after the chunk in hand)."""
    gen = eng.generation
    group = ex.group
    while True:
        with eng.cond:
            got = None
            while not eng.closed and gen == eng.generation:
                if wid >= group.size:
                    if group.retire(wid):
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
                else:  # its bytes appear when it is done; until then ``fit`` counts it
                    unsized = n
                    eng.unsized += n
            eng.ram.try_reserve(reserve, force=True)
        try:
            _take_and_compute(eng, lane, n, reserve, wid, gen, ex)
        finally:
            if unsized:  # its bytes are reserved now (or it was dropped)
                with eng.cond:
                    eng.unsized -= unsized


def _take_and_compute(eng: Engine, lane: Lane, n: int, reserve: int, wid: int, gen: int,
                      ex: Any) -> None:  # fmt: skip
    chunk, elems = take_input(eng, lane, n, reserve, gen)
    if chunk is None:
        return
    if lane.transform is not None and torch_ranges.active():  # a range per chunk
        with torch_ranges.worker_range(eng.label):
            compute(eng, lane, chunk, elems, wid, gen, ex)
    else:
        compute(eng, lane, chunk, elems, wid, gen, ex)


def take_input(
    eng: Engine, lane: Lane, n: int, reserve: int, gen: int
) -> tuple[Chunk | None, list]:
    """Take the lane's next chunk (a replayed one first) and register it; (None, []) when
    the input has ended. For a lane without transform, reading the input is the work."""
    with lane.input_lock:
        if gen != eng.generation:  # a restore began while this worker waited: the lane was
            eng.ram.release(reserve)  # reset without this chunk, whose bytes are ours to give
            return None, []
        if lane.detached or eng.closed:  # a closed interleave slot, or the stage closed
            with eng.cond:  # while this worker waited: nothing more is read (a slow input
                # would hold the close past its deadline, and the lanes' record with it)
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
                eng.meter.record(len(elems), time.perf_counter() - t0, time.thread_time() - c0)
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


def compute(eng: Engine, lane: Lane, chunk: Chunk, elems: list, wid: int, gen: int,
            ex: Any) -> None:  # fmt: skip
    """Compute a taken chunk's results on executor ``ex`` (this thread; in worker process
    ``wid`` for ``Processes``) and hand them to the consumer (``wid`` -1: the consumer's
    own thread, inline)."""
    t0, c0 = time.perf_counter(), time.thread_time()
    if chunk.input_error is not None:
        items: list = [Failed(chunk.input_error)]
        chunk.input_error = True  # keep the fact, not the exception (see take_ready)
        chunk.failed = True
    elif lane.transform is None:
        items = elems  # reading the input was the work (take_input measured it)
    else:
        got = ex.compute(lane, elems, chunk.start + chunk.skip, wid,
                         lambda: eng.closed or gen != eng.generation)  # fmt: skip
        if got is None:  # stopped (close, restore) while a process computed
            with eng.cond:
                eng.ram.release(chunk.reserved)
                chunk.reserved = 0
            return
        items, chunk.failed = got
        if eng.sampling and not ex.measures:
            eng.sample(elems, items)
    dt, dcpu = time.perf_counter() - t0, time.thread_time() - c0
    if lane.transform is not None and trace.ENABLED and not ex.measures:
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
            eng.meter.out_bytes = eng.bytes_per_elem  # the tuner's executor choice
        if wid < 0:  # computed inline for the consumer, who takes it now: not a buffer
            nbytes = 0
        eng.ram.exchange(chunk.reserved, nbytes)  # one step: no other stage sees a gap
        chunk.reserved = nbytes
        if lane.transform is not None and not ex.measures:  # a process measured its own
            eng.meter.record(len(items), dt, dcpu)
        eng.cond.notify_all()


def _samples(elems: list, items: list) -> tuple:
    """The first and last input of a chunk and their results (not failures)."""
    pairs = [(elems[i], items[i]) for i in {0, len(items) - 1} if type(items[i]) is not Failed]
    return tuple(x for pair in pairs for x in pair)
