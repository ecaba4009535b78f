"""Bounded groups of worker threads and the chunked hand-off between them and a consumer.

A thread-to-thread round trip costs about 88 µs on the 2-vCPU machines we measure on
(DESIGN.md, "The flow of one element"), so parallel stages never hand single elements
between threads: a worker takes a *chunk* of input elements, processes it, and hands back
one ``Chunk``. Chunk sizes grow from 1 (a first element comes fast) towards a target
duration of work per chunk (``ChunkSizer``).

Threads are daemon threads named ``datapipe-<op>-<i>`` so tests and users can count them.
They never block without a timeout and check a stop flag on every wake-up, so ``close()``
stops them within a fraction of a second. A worker's target receives only a shared-state
object, never the op iterator that owns the group, so dropping the public iterator lets
the garbage collector run its finaliser (which closes the pipeline).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from datapipe.errors import WorkerDiedError

# How long a waiting thread sleeps before re-checking the stop flag (seconds).
POLL_S = 0.05
# Target wall time of work per chunk: large against the ~88 µs hand-off, small enough that
# a deterministic consumer is not held up long behind one chunk.
TARGET_CHUNK_S = 0.004
# ... and with worker processes, whose round trip (pipe, pickle, shared-memory segment)
# costs ~0.1-0.3 ms here: larger chunks keep it at ~1% of the work.
PROCESS_CHUNK_S = 0.02
MAX_CHUNK = 4096

# The deadline of the close() running on this thread (see ``close_deadline``).
_closing = threading.local()


@contextlib.contextmanager
def close_deadline(timeout: float = 1.0) -> Iterator[None]:
    """Closes nested in this block share one deadline for joining their threads.

    A pipeline is closed from its outermost stage inwards, each stage joining its threads
    before closing its input; with a deadline per stage, N stages whose threads are blocked
    (in a user function, or on an input that is not closed yet) took N times ``timeout``.
    """
    if getattr(_closing, "deadline", None) is not None:
        yield
        return
    _closing.deadline = time.monotonic() + timeout
    try:
        yield
    finally:
        _closing.deadline = None


class WorkerGroup:
    """A resizable set of named daemon threads running ``target(shared, worker_id)``.

    ``target`` must return when ``shared.closed`` is set or when ``worker_id >=
    group.size`` (the group shrank). ``resize`` starts missing threads; ``stop`` joins them.
    """

    def __init__(self, name: str, target: Callable[[Any, int], None], shared: Any):
        self.name, self.target, self.shared = name, target, shared
        self.size = 0
        self.threads: dict[int, threading.Thread] = {}
        self._lock = threading.Lock()

    def resize(self, n: int) -> None:
        with self._lock:
            self.size = n
            for i in range(n):
                t = self.threads.get(i)
                if t is None or not t.is_alive():
                    t = threading.Thread(
                        target=_run_worker,
                        args=(self.target, self.shared, i),
                        name=f"datapipe-{self.name}-{i}",
                        daemon=True,
                    )
                    self.threads[i] = t
                    t.start()

    def alive(self) -> int:
        return sum(t.is_alive() for t in self.threads.values())

    def retire(self, wid: int) -> bool:
        """Called by worker ``wid`` that saw ``wid >= size``: True if it should exit (then
        it is forgotten, so a later ``resize`` starts a fresh thread in its place); False
        if the group grew again meanwhile."""
        with self._lock:
            if wid < self.size:
                return False
            if self.threads.get(wid) is threading.current_thread():
                del self.threads[wid]
            return True

    def stop(self, timeout: float = 1.0) -> None:
        """Join every thread (the caller has set the stop flag and notified waiters)."""
        deadline = getattr(_closing, "deadline", None) or time.monotonic() + timeout
        me = threading.current_thread()
        with self._lock:
            self.size = 0
            threads = list(self.threads.values())
            self.threads = {}
        for t in threads:
            if t is not me:  # a finaliser may run on one of our own threads
                t.join(max(0.0, deadline - time.monotonic()))


def _run_worker(target: Callable[[Any, int], None], shared: Any, wid: int) -> None:
    """Run a worker; if it dies (an exception escaped ``target``: not the user function's,
    which stages deliver in place), tell the stage so its consumer raises at once."""
    try:
        target(shared, wid)
    except BaseException as e:  # noqa: BLE001 - handed to the consumer
        died = getattr(shared, "worker_died", None)
        if died is None:
            raise
        if isinstance(e, WorkerDiedError):  # a worker process died: its own message
            died(e, e.__cause__)
            return
        name = threading.current_thread().name
        died(WorkerDiedError(f"{name}: worker thread died: {type(e).__name__}: {e}"), e)


class ChunkSizer:
    """Chooses how many elements the next chunk holds.

    Starts at 1 and at most doubles per chunk (so the first elements and a ``take(1)``
    never wait on a large chunk), towards ``TARGET_CHUNK_S`` of work measured per element
    (an exponential moving average of each finished chunk's wall time). ``limit`` caps it
    (the RAM budget, the op's own needs).
    """

    def __init__(self, target_s: float = TARGET_CHUNK_S, max_chunk: int = MAX_CHUNK):
        self.target_s, self.max_chunk = target_s, max_chunk
        self.size = 1
        self.per_elem_s: float | None = None

    def observe(self, n: int, seconds: float) -> None:
        if n <= 0:
            return
        t = seconds / n
        self.per_elem_s = t if self.per_elem_s is None else 0.7 * self.per_elem_s + 0.3 * t

    def next_size(self, limit: int | None = None) -> int:
        want = self.max_chunk
        if self.per_elem_s is not None and self.per_elem_s > 0:
            want = int(self.target_s / self.per_elem_s)
        size = max(1, min(want, self.size * 2, self.max_chunk))
        self.size = size
        if limit is not None:
            size = max(1, min(size, limit))
        return size


class Chunk:
    """One unit of hand-off: the results of a run of consecutive input elements.

    Attributes:
        start: index of the chunk's first input element in the lane's input stream.
        size: number of input elements taken for it.
        skip: how many of them were consumed before a restore (``items`` holds the rest).
        state_before: the input's state before the chunk was taken (replayable lanes).
        inputs: the elements taken (stored-state lanes and identity lanes; see replay.py).
        items: results; a failed element is a ``Failed`` in its place.
        done: results are ready.
        consumed: how many items the consumer has taken.
        reserved: bytes reserved against the RAM budget.
        input_error: the input raised while this chunk was taken (the error until it is
            delivered as a ``Failed`` item, then True); ``error_text`` its message.
    """

    __slots__ = (
        "start",
        "size",
        "skip",
        "state_before",
        "inputs",
        "items",
        "done",
        "consumed",
        "reserved",
        "input_error",
        "error_text",
        "failed",
    )

    def __init__(self, start: int, state_before: Any):
        self.start, self.state_before = start, state_before
        self.size = 0
        self.skip = 0
        self.inputs: Any = ()
        self.items: list = []
        self.done = False
        self.consumed = 0
        self.reserved = 0
        self.input_error: Any = None
        self.error_text: str | None = None
        self.failed = False  # some item is a Failed


class Failed:
    """Marks an element whose computation raised; the consumer raises ``error`` there."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error


def take_ready(items: list, start: int, n: int) -> tuple[list, BaseException | None, int]:
    """From ``items[start:]``, the elements before the first ``Failed`` (at most ``n``).

    Returns (elements, error or None, new position). The error is returned only when it is
    the very next item, so good elements are always delivered before a failure.
    """
    out: list = []
    i, end = start, min(len(items), start + n)
    while i < end:
        x = items[i]
        if type(x) is Failed:
            if not out:
                # Drop our reference: once raised, the error's traceback holds the consumer's
                # frames (and so the public iterator); a worker-reachable reference would keep
                # the pipeline alive after the consumer let go of it.
                items[i] = None
                return [], x.error, i + 1
            break
        out.append(x)
        i += 1
    return out, None, i


def consume(
    cond: threading.Condition,
    take: Callable[[], Any],
    closed: Callable[[], bool],
    stage: Any,
    tuner: Any,
    shared: Any = None,
) -> Any:
    """The consumer side of a parallel stage: wait on ``cond`` until ``take()`` (called with
    ``cond`` held) returns something other than None; ``[]`` once ``closed()``. Waits count
    as the stage's consumer wait, and the tuner gets a step at least every ``POLL_S`` of
    waiting (it has no thread of its own). A taken exception is raised here, and so is
    ``shared.fatal`` (a worker died: ``SharedStage.worker_died``) before anything else.
    """
    got: Any = None
    waited = 0.0
    counted = False  # this consumer is counted in ``shared.waiting``
    broken = False
    with cond:
        try:
            while True:
                if shared is not None and shared.fatal is not None:
                    # a fresh error per raise: the stored one must not keep consumer frames
                    got = WorkerDiedError(*shared.fatal.args)
                    got.__cause__ = shared.fatal.__cause__
                    broken = True
                    break
                if closed():
                    return []
                got = take()
                if got is not None:
                    break
                if shared is not None and not counted:
                    counted = True
                    shared.starts_waiting()
                t0 = time.perf_counter()
                cond.wait(POLL_S)
                waited += time.perf_counter() - t0
                if waited > POLL_S:
                    stage.consumer_wait_s += waited
                    waited = 0.0
                    cond.release()
                    try:
                        tuner.maybe_step()
                    finally:
                        cond.acquire()
        finally:
            if counted:
                shared.waiting -= 1
    if broken:  # every worker of the broken stage stops before the error goes up
        shared.close()
    stage.consumer_wait_s += waited
    tuner.maybe_step()
    if isinstance(got, BaseException):
        try:
            raise got
        finally:  # the traceback keeps this frame: it must not keep the error (a cycle
            got = None  # would keep the pipeline's threads alive until a gc run)
    return got


class SharedStage:
    """Base of the state a parallel stage's consumer and workers share. Subclasses set
    ``cond``, ``closed``, ``group`` (WorkerGroup), ``chunks``, ``ram``, ``tuner`` and
    ``stage``."""

    fatal: BaseException | None = None  # a worker died: raised to the consumer from now on
    waiting = 0  # consumers waiting in ``consume`` for this stage now (under ``cond``)
    cond: threading.Condition
    closed: bool
    group: WorkerGroup
    chunks: Any  # the chunks not consumed yet (each with its ``reserved`` RAM)
    ram: Any  # the pipeline's RAM budget (autotune)
    tuner: Any
    stage: Any

    def starts_waiting(self) -> None:
        """Under ``cond``: a consumer begins to wait in ``consume`` (it ends by decrementing
        ``waiting``). A stage may go over the RAM budget only for a waiting consumer
        (``engine.Engine._fit``)."""
        self.waiting += 1

    def worker_died(self, error: BaseException, cause: BaseException) -> None:
        """Called on a worker thread whose loop raised: the stage is broken; wake the
        consumer, which raises ``error`` (chained to ``cause``) at once."""
        if cause is not None:
            error.__cause__ = cause
        with self.cond:
            if self.fatal is None:
                self.fatal = error
            self.cond.notify_all()

    def close(self) -> None:
        """Stop the workers (within the shared close deadline) and give back the RAM
        reserved by chunks not consumed. Idempotent."""
        with self.cond:
            if self.closed:
                return
            self.closed = True
            self.cond.notify_all()
        self.group.stop(1.0)
        with self.cond:
            for c in self.chunks:
                self.ram.release(c.reserved)
                c.reserved = 0
            self.chunks.clear()
        self.tuner.remove_stage(self.stage)
