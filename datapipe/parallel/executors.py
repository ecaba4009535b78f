"""Executors: where a stage's chunks are computed, behind one interface.

* ``Inline``: the consumer computes a chunk when it needs one (no thread, no read-ahead;
  ``engine.Engine.next_from``). AUTOTUNE starts here and measures the cost per element.
* ``Threads``: ``n`` worker threads (``datapipe-<op>-<i>``) run the engine's worker loop
  (``engine.work``): take a chunk, compute it on the thread, hand it to the consumer.
* ``Processes``: the same threads, each serving one worker process (``processes.py``)
  that computes the chunk: pure-Python functions that hold the GIL use more cores.

A stage (``stage.py``) creates an executor on first use (``create(kind, stage)``), and
swapping executors swaps an object: the engine computes every later chunk on the new one,
and the old one's threads retire after the chunk in hand. The interface: ``prepare(n)``
(resources for ``n`` workers: processes), ``start(n)`` (run ``n`` worker threads; 0: let
them retire), ``stop()`` (join them), ``compute(lane, elems, first, wid, cancelled)``,
``close()``, ``pids()``. A new executor is one class here, registered in ``EXECUTORS``,
plus one phase of the tuner's search (``autotune.py``).

Worker threads never block without a timeout and check the engine's stop flag on every
wake-up, so ``stop()`` returns within a fraction of a second; a thread's target receives
the engine and its executor, never the op iterator that owns them, so dropping the public
iterator lets the garbage collector run its finaliser (which closes the pipeline).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from itertools import islice
from typing import Any, ClassVar

from datapipe._draws import enter, leave
from datapipe._functions import as_elements, called_through, writable_inputs
from datapipe._positions import Failed
from datapipe.errors import WorkerDiedError, annotate
from datapipe.parallel import shm
from datapipe.parallel.pool import PROCESS_CHUNK_S, TARGET_CHUNK_S, _closing


class WorkerGroup:
    """A resizable set of named daemon threads running ``target(shared, worker_id, tag)``.

    ``target`` must return when ``shared.closed`` is set or when ``worker_id >=
    group.size`` (the group shrank). ``resize`` starts missing threads; ``stop`` joins them.
    """

    def __init__(self, name: str, target: Callable[[Any, int, Any], None], shared: Any,
                 tag: Any = None):  # fmt: skip
        self.name, self.target, self.shared, self.tag = name, target, shared, tag
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
                        args=(self.target, self.shared, i, self.tag),
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
                _join(t, deadline)


def _join(t: threading.Thread, deadline: float) -> None:
    """Join ``t`` by ``deadline``. An interrupt that landed inside its ``start()`` (a
    KeyboardInterrupt as a stage starts) leaves a thread that ``join`` refuses ("cannot
    join thread before it is started"): it may still begin (then it sees the stop flag),
    or never; it is waited for within the deadline, and the caller's own exception is not
    replaced by the ``RuntimeError``."""
    while True:
        try:
            t.join(max(0.0, deadline - time.monotonic()))
            return
        except RuntimeError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.005)


def _run_worker(target: Callable[[Any, int, Any], None], shared: Any, wid: int, tag: Any) -> None:
    """Run a worker; if it dies (an exception escaped ``target``: not the user function's,
    which stages deliver in place), tell the stage so its consumer raises at once."""
    try:
        target(shared, wid, tag)
    except BaseException as e:  # noqa: BLE001 - handed to the consumer
        died = getattr(shared, "worker_died", None)
        if died is None:
            raise
        if isinstance(e, WorkerDiedError):  # a worker process died: its own message
            died(e, e.__cause__)
            return
        name = threading.current_thread().name
        died(WorkerDiedError(f"{name}: worker thread died: {type(e).__name__}: {e}"), e)


def apply(lane: Any, elems: list, first: int) -> tuple[list, bool]:
    """``lane.transform`` over ``elems`` (the first at stream index ``first``); a failing
    element becomes a ``Failed`` in its place, named by op and index. Returns (results,
    whether any failed). The loop runs in C (``list.extend(map(...))`` keeps the results
    made before an exception), resuming after each failure. Random layers that ``fn``
    calls draw by the element's position (``datapipe._draws``: ``out`` says which)."""
    fn = lane.transform
    assert fn is not None  # a lane that transforms (engine.Lane)
    out: list = []
    elems = writable_inputs(fn, elems)  # views of a source or cache: see ReturnsElement
    scope = enter(fn, out, first)
    call = called_through(fn)  # a map's function itself: a Python frame less an element
    try:
        failed = _apply(call, lane, elems, first, out)
    finally:
        leave(scope)
    return as_elements(out, fn, call), failed


def _apply(fn: Callable, lane: Any, elems: list, first: int, out: list) -> bool:
    n, failed = len(elems), False
    stride, offset = lane.base
    while len(out) < n:
        start = len(out)
        try:
            # the list itself the first time: islice costs ~20 ns an element (W1: 5%)
            rest = elems if start == 0 else islice(elems, start, None)
            if lane.indexed:
                out.extend(map(fn, range(first + start, first + n), rest))
            elif type(elems[start]) is tuple:  # tf.data's convention: a tuple is unpacked
                out.extend(fn(*x) if type(x) is tuple else fn(x) for x in rest)
            else:
                out.extend(map(fn, rest))
        except BaseException as e:  # noqa: BLE001 - the consumer raises it at this position
            if isinstance(e, KeyboardInterrupt) and threading.current_thread() is _MAIN:
                raise  # Ctrl-C (inline, on the main thread) stops: no element's failure
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
    return failed


class Executor:
    """The interface (see the module docstring)."""

    name: ClassVar[str]
    named: ClassVar[bool] = True  # users may ask for it (``map(executor=name)``)
    threads: ClassVar[bool] = True  # runs worker threads (else the consumer computes)
    measures: ClassVar[bool] = False  # ``compute`` records its work in the meter itself
    chunk_s: ClassVar[float] = TARGET_CHUNK_S  # target seconds of work per chunk
    start_method: str | None = None  # worker processes: how they started, and why
    start_reason: str | None = None

    @classmethod
    def possible(cls, stage: Any) -> bool:
        """Whether it may run ``stage`` at all (AUTOTUNE's search tries only those)."""
        return True

    @classmethod
    def create(cls, stage: Any) -> Executor | None:
        """The executor for ``stage`` (``stage.Stage``), or None where it cannot run it."""
        raise NotImplementedError

    def prepare(self, n: int) -> bool:
        """Make ``n`` workers possible (start processes); False if it cannot."""
        return True

    def start(self, n: int) -> None:
        """Run ``n`` workers from now on (0: the running ones retire)."""

    def stop(self) -> None:
        """Join the workers (the engine has set its stop flag)."""

    def compute(self, lane: Any, elems: list, first: int, wid: int,
                cancelled: Callable[[], bool]) -> tuple[list, bool] | None:  # fmt: skip
        """(results, any failed) of ``lane.transform`` over ``elems``; None if the stage
        stopped meanwhile (``cancelled()``)."""
        return apply(lane, elems, first)

    def pids(self) -> list[int]:
        return []

    def close(self) -> None:
        """Let go of what ``prepare`` started (the workers are stopped)."""


class Inline(Executor):
    name = "inline"
    named = False  # AUTOTUNE's choice only: a sequential op is what a user asks for
    threads = False

    @classmethod
    def possible(cls, stage: Any) -> bool:
        return bool(stage.policy.inline_ok)  # e.g. interleave: threads only

    @classmethod
    def create(cls, stage: Any) -> Executor | None:
        return cls() if cls.possible(stage) else None


class Threads(Executor):
    name = "thread"

    def __init__(self, engine: Any, op: str):
        from datapipe.parallel.engine import work

        self.group = WorkerGroup(op, work, engine, self)

    @classmethod
    def create(cls, stage: Any) -> Executor | None:
        return cls(stage.engine, stage.op)

    def start(self, n: int) -> None:
        self.group.resize(n)

    def stop(self) -> None:
        self.group.stop(1.0)


class Processes(Threads):
    """Worker threads that each hand their chunks to one worker process."""

    name = "process"
    measures = True  # the worker measures its own wall and CPU time
    chunk_s = PROCESS_CHUNK_S  # a process round trip costs ~0.1-0.3 ms: larger chunks

    def __init__(self, engine: Any, op: str, workers: Any, strict: bool):
        super().__init__(engine, op)
        self.workers, self.strict = workers, strict
        self._lock = threading.Lock()

    @classmethod
    def possible(cls, stage: Any) -> bool:
        if not stage.processes_allowed:  # its work is not a function
            return False
        if stage.strict:  # executor="process": the user's choice, whatever the start method
            return True
        from datapipe.parallel.processes import fork_is_chosen

        opts = stage.ctx.options.threading  # AUTOTUNE: only where the workers would fork
        return fork_is_chosen(opts.process_start_method, stage.knob.intra_op)

    @classmethod
    def create(cls, stage: Any) -> Executor | None:
        from datapipe.parallel.processes import lease

        eng = stage.engine
        if not cls.possible(stage) or eng.stepped_back:
            return None  # its work is not a function, or it stepped back for good
        if eng.sampling and not eng.samples_cross():
            stage.processes_allowed = False  # its elements or results do not pickle
            return None
        if not stage.strict and shm.function_exceeds(stage.function, AUTOTUNE_FUNCTION_BYTES):
            stage.processes_allowed = False  # each worker would hold a copy of its data
            return None
        key = stage.pool_key if stage.pool_key is not None else id(stage)
        workers = lease(stage.ctx, key, stage.op)
        try:
            workers.set_function(stage.function)  # TypeError when it cannot be pickled
        except TypeError:
            workers.release()
            if stage.strict:
                raise
            stage.processes_allowed = False
            return None
        workers.meter = stage.meter  # what the processes measure goes there
        # AUTOTUNE's choice: what cannot cross is computed here, and the stage steps back
        workers.strict = stage.strict
        workers.local, workers.on_step_back = apply, eng.request_step_back
        return cls(eng, stage.op, workers, stage.strict)

    @property
    def start_method(self) -> str | None:  # type: ignore[override]
        return self.workers.start_method

    @property
    def start_reason(self) -> str | None:  # type: ignore[override]
        return self.workers.start_reason

    def prepare(self, n: int) -> bool:
        try:
            with self._lock:  # the consumer's start and a tuner step may both ask
                while len(self.workers.procs) < n:
                    self.workers.start_process()
        except Exception:  # noqa: BLE001 - no process can start here: keep the executor
            if self.strict:
                raise
            return False
        return True

    def start(self, n: int) -> None:
        # one thread per process (a process that could not start has no thread)
        self.group.resize(min(n, len(self.workers.procs)))

    def compute(self, lane: Any, elems: list, first: int, wid: int,
                cancelled: Callable[[], bool]) -> tuple[list, bool] | None:  # fmt: skip
        return self.workers.run(wid, lane, elems, first, cancelled)

    def pids(self) -> list[int]:
        return self.workers.pids()

    def close(self) -> None:
        self.workers.release()


_MAIN = threading.main_thread()

# AUTOTUNE moves a function to processes only if it pickles to at most this many bytes:
# each worker unpickles its own copy (a function reading an 800 MB table from its closure
# took 3.2 GB in the parent and 4.8 GB in two workers, 12.7 s against 0.8 s on threads).
AUTOTUNE_FUNCTION_BYTES = 64 << 20

EXECUTORS: dict[str, type[Executor]] = {"inline": Inline, "thread": Threads, "process": Processes}


def names() -> list[str]:
    """The executors users may name (``map(executor=...)``, ``ThreadingOptions.executor``)."""
    return [k for k, cls in EXECUTORS.items() if cls.named]


def create(kind: str, stage: Any) -> Executor | None:
    """A new executor ``kind`` for ``stage`` (None if it cannot run it)."""
    return EXECUTORS[kind].create(stage)
