"""The iterator protocol every op speaks, and the public ``Iterator`` around a chain.

Internally ops exchange *chunks* (lists of elements): ``next_chunk(n)`` returns between 1
and ``n`` elements, or an empty list when the stream has ended. A Python-level hand-off
per element costs more than the work of most ops (docs/architecture.md, "Chunks"),
so chunks amortise it; ops ask their input for exactly what they need, so no op holds
elements it has not been asked for and an op's state is always exact at a chunk boundary.
"""

from __future__ import annotations

import sys
import threading
import time
import weakref
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

import numpy as np

from datapipe.errors import WorkerDiedError

# Top-level chunks grow from 1 (a first element comes fast) to this size.
MAX_OUTER_CHUNK = 64
# close() takes the state (state_dict() after it is exact); a lane's snapshot waits this
# long at most for a worker that holds its input (blocked in a function below), so that
# close never hangs: state_dict() then raises, saying why.
CLOSE_SNAPSHOT_S = 0.1
# ... and stop growing past this many bytes of (array) elements, so buffering large batches
# costs little memory (W3 in benchmarks/README.md).
MAX_OUTER_CHUNK_BYTES = 1 << 20
# ... and so that the elements computed ahead of the consumer by one chunk cost at most this
# much (measured): an element that costs more than this is never computed before it is asked
# for. A chunk of cheap elements still pays: W1's batches cost ~35 µs each, so ~29 of them
# share one call down the chain.
MAX_AHEAD_S = 0.001


class OpIterator:
    """Base class of an op's running iterator.

    Subclasses implement ``next_chunk``, ``get_state`` and ``set_state``, and list the
    iterators they own in ``self.inputs`` so that ``close`` reaches them.

    Attributes:
        op_name: the op's name in error messages and statistics.
        inputs: iterators this one pulls from.
    """

    op_name = "op"

    def __init__(self, inputs: list[OpIterator] | None = None):
        self.inputs: list[OpIterator] = list(inputs or [])
        self.closed = False

    def next_chunk(self, n: int) -> list:
        """Up to ``n`` (>= 1) next elements; ``[]`` once the stream has ended.

        A call that raises stands for exactly one element, the next one, which failed
        (after the good elements before it were returned by earlier calls); the next call
        continues after it. Ops that count or align elements rely on it (see
        ``datapipe._positions``). A failure held back for the next call is part of the
        state (``pending_error``), so a checkpoint cannot skip it."""
        raise NotImplementedError

    def get_state(self) -> dict:
        """A snapshot (JSON-like dict; may hold numpy arrays and elements) that
        ``set_state`` on a fresh iterator of the same dataset resumes from exactly."""
        raise NotImplementedError

    def set_state(self, state: dict) -> None:
        raise NotImplementedError

    def index_base(self) -> tuple[int, int] | None:
        """``(stride, offset)`` such that this iterator's k-th element of the epoch is element
        ``offset + stride * k`` of the random-access source below it, or None when unknown
        (after filter, interleave, ...). ``random_map`` keys its generators on that global
        index, so its draws do not depend on sharding or worker count."""
        return None

    def close(self) -> None:
        """Stop every thread this iterator (and its inputs) started. Idempotent."""
        if self.closed:
            return
        self.closed = True
        for it in self.inputs:
            it.close()


_snapshot = threading.local()  # set on a thread inside ``snapshots_within()``


@contextmanager
def snapshots_within(seconds: float) -> Generator[None, None, None]:
    """Within: a parallel stage's snapshot on this thread waits at most ``seconds`` for its
    input lock (a worker may hold it, blocked in the input's own function), then raises
    ``TimeoutError``."""
    before = getattr(_snapshot, "by", None)
    _snapshot.by = time.monotonic() + seconds
    try:
        yield
    finally:
        _snapshot.by = before


def snapshot_deadline() -> float | None:
    """The ``time.monotonic()`` by which a snapshot on this thread must be taken, if any."""
    return getattr(_snapshot, "by", None)


@contextmanager
def keeping_snapshots() -> Generator[None, None, None]:
    """Within: a parallel stage closed on this thread records its lanes' snapshots once its
    workers stopped, before it lets go of them (``Engine.close``): ``Iterator.close`` asks
    for it when a worker was still reading a slow input as the state was taken."""
    before = getattr(_snapshot, "keep", False)
    _snapshot.keep = True
    try:
        yield
    finally:
        _snapshot.keep = before


def snapshots_kept() -> bool:
    """Within ``keeping_snapshots()`` on this thread."""
    return getattr(_snapshot, "keep", False)


def pull_exactly(it: OpIterator, n: int) -> list:
    """Read up to ``n`` elements from ``it`` (fewer only at the end of the stream)."""
    out: list = []
    while len(out) < n:
        chunk = it.next_chunk(n - len(out))
        if not chunk:
            break
        out.extend(chunk)
    return out


def check_state_dict(state: Any, keys: tuple[str, ...], where: str) -> None:
    """A state handed to ``set_state`` must be the dict ``get_state`` made: a list, a str
    or None would otherwise fail deep inside an op with an ``AttributeError``.

    Raises:
        ValueError: ``state`` is not a dict or lacks one of ``keys``.
    """
    if not isinstance(state, dict):
        raise ValueError(
            f"{where}: expected the dict that get_state()/state_dict() returned, got "
            f"{type(state).__name__}"
        )
    missing = [k for k in keys if k not in state]
    if missing:
        raise ValueError(
            f"{where}: missing keys {missing}; expected the dict that "
            f"get_state()/state_dict() returned (keys {list(keys)})"
        )


def _is_int_list(x: Any) -> bool:
    return isinstance(x, (list, tuple)) and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in x
    )


def _check_outer_state(state: dict) -> None:
    """The entries ``Iterator.get_state`` itself writes have the types it writes."""
    bad = None
    if not _is_int_list(state["epoch"]):
        bad = "epoch (a list of ints)"
    elif "worker" in state and not (_is_int_list(state["worker"]) and len(state["worker"]) == 2):
        bad = "worker (two ints)"
    elif not isinstance(state.get("seed"), (int, np.integer, type(None))):
        bad = "seed (an int or None)"
    elif not isinstance(state["pending"], list):
        bad = "pending (a list of elements)"
    if bad is not None:
        raise ValueError(
            f"load_state_dict: the state's entry {bad} has the wrong type; expected the dict "
            "that get_state()/state_dict() returned"
        )


class Iterator:
    """The iterator ``iter(dataset)`` returns: a per-element view over the op chain.

    Methods beyond the iterator protocol:
        state_dict() (alias get_state()): snapshot of the position (elements consumed so
            far, and the epoch); the layout is described in ``datapipe._checkpoint``.
        load_state_dict(state) (alias set_state(state)): resume exactly from a snapshot
            taken on an iterator of the same dataset (``ValueError`` for a state that doesn't
            fit it, or that another worker layout saved); the dataset's next ``iter()`` is
            then the epoch after the state's. ``load_state_dict([state_0, ..., state_n-1])``,
            the states of all workers of a run, resumes on any number of workers: the rest
            of the epoch is delivered exactly once across them (elastic resume, see
            ``datapipe.distribute.elastic``).
        close(): stop every thread the pipeline started; also on ``with`` exit, on garbage
            collection, and when the consumer's loop is broken out of and the iterator dropped.

    Interrupts: a ``KeyboardInterrupt`` or ``SystemExit`` (a signal handler's, or raised by
    a map function; also a function's ``GeneratorExit``) that lands inside ``next()``
    closes the pipeline and reaches the caller as it is; ``state_dict()`` then describes
    exactly the elements delivered, wherever it landed (inside or outside the functions,
    as a stage starts), so a resume delivers every element once (docs/architecture.md,
    "Checkpoints"). An interrupt that lands in the caller's own code after ``next()``
    returned, before it stored the element (``x = next(it)``), is the caller's: a ``for``
    loop stores it first.
    """

    def __init__(self, root: OpIterator, epoch: tuple, dataset: Any, ctx: Any = None):
        from datapipe.parallel.plan import read_ahead_allowed

        self._root = root  # what __next__ pulls (after an elastic resume: drains first)
        self._primary = root  # this worker's own chain
        self._ctx = ctx  # its datapipe._context.IterContext
        self._epoch = epoch
        self._dataset = dataset
        self._buf: list = []
        self._pos = 0
        self._chunk = 1
        # Elements the root produced this epoch before the chunk in ``_buf`` (``_produced``
        # adds it: an elastic resume weighs what a state still holds inside its ops by it,
        # datapipe.distribute.elastic). Kept apart from the buffer's length so that no
        # interrupt can land between storing a chunk and counting it (``_refill``).
        self._produced_before = 0
        # Without a buffer the user asked for, a source such as a generator fed by the
        # training loop must never be asked for an element before the consumer needs it.
        self._read_ahead = read_ahead_allowed(dataset)
        self._cost: float | None = None  # seconds per element of a root call (moving avg)
        self._ranged = False  # record_function ranges installed (datapipe.stats.torch_ranges)
        self._device_stages: list | None = None  # for synchronize()
        self._broken: tuple | None = None  # a WorkerDiedError ended it: (type, args, cause)
        # close() (or an interrupt / dead worker, which close it) stops the stages and drops
        # what they computed ahead, so the state is taken as it closes: state_dict() after
        # it (the usual save-on-Ctrl-C handler) is then exact. (state, or the error taking
        # it raised); None while open.
        self._state_at_close: tuple[dict | None, BaseException | None] | None = None
        self._finalizer = weakref.finalize(self, root.close)

    @property
    def _produced(self) -> int:
        """Elements the root has produced this epoch, the buffered chunk included."""
        return self._produced_before + len(self._buf)

    @_produced.setter
    def _produced(self, value: int) -> None:  # set after ``_buf`` (a restore)
        self._produced_before = int(value) - len(self._buf)

    @property
    def element_spec(self) -> Any:
        return self._dataset.element_spec

    @property
    def dataset(self) -> Any:
        """The ``Dataset`` this iterator runs (as the user built it, before the rewrites)."""
        return self._dataset

    @property
    def root(self) -> OpIterator:
        """The op iterator ``__next__`` pulls chunks from (the ``OpIterator`` protocol:
        ``next_chunk``/``get_state``/``set_state``/``close``, ``inputs`` down the chain).
        After an elastic resume it first drains the old workers' chains."""
        return self._root

    @property
    def context(self) -> Any:
        """The ``datapipe._context.IterContext`` the chain was built with (options, seeds,
        the worker layout, each node's position)."""
        return self._ctx

    def replace_chains(
        self,
        epoch: tuple,
        ctx: Any,
        primary: OpIterator,
        root: OpIterator,
        pending: list,
        produced: int = 0,
    ) -> None:
        """Run ``root`` from now on (closing the current chain): ``primary`` is this worker's
        own chain, ``root`` what ``__next__`` pulls (``primary`` or a chain that drains
        others first), ``pending`` elements delivered before either, ``produced`` what the
        primary chain's state had produced. Used by an elastic resume
        (``datapipe.distribute.elastic.install``)."""
        self._root.close()
        self._epoch, self._ctx, self._primary, self._root = epoch, ctx, primary, root
        self._buf, self._pos, self._produced = list(pending), 0, int(produced)
        self._broken = None  # new chains: a worker that died in the old ones is gone
        self._state_at_close = None
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, root.close)

    def __iter__(self) -> Iterator:
        return self

    def __next__(self) -> Any:
        if self._pos < len(self._buf):
            x = self._buf[self._pos]
            self._pos += 1
            return x
        return self._refill()

    def _refill(self) -> Any:
        if self._broken is not None:  # a worker died: the pipeline is closed, and broken
            kind, args, cause = self._broken
            err = kind(*args)
            raise err from cause
        if self._root.closed:
            raise StopIteration
        try:
            return self._refill_open()
        except BaseException as e:
            # Ops locate their own errors (op, element index, file); here we only make sure
            # an interrupt, or a stage that cannot go on, stops every thread and process
            # the pipeline started (while the error may stay referenced, as in a notebook).
            if isinstance(e, WorkerDiedError):
                self._broken = (type(e), e.args, e.__cause__)
            if isinstance(e, WorkerDiedError) or not isinstance(e, Exception):
                self.close()  # KeyboardInterrupt, SystemExit, a dead worker
            raise

    def _refill_open(self) -> Any:
        """``_refill`` on an open chain: the next chunk from the root, its first element.

        The hand-over is exact wherever an interrupt (a signal handler's
        ``KeyboardInterrupt`` or ``SystemExit``) lands: the consumed chunk is let go of and
        counted in one statement; the new chunk is stored the moment the root returns it (a
        Python return into an attribute store: no signal handler runs between the two); from
        then on the state (``_buf[_pos:]``, its ``pending``) holds it until it is delivered,
        and nothing here clears it. An interrupt inside the root's call leaves the chain as
        it was before the call (each op puts back what it took)."""
        if _profiler_records():  # torch.profiler: the stages' ranges on its timeline
            from datapipe.stats.torch_ranges import instrument

            instrument(self)
            self._ranged = True
        elif self._ranged:
            from datapipe.stats.torch_ranges import uninstrument

            uninstrument(self)
            self._ranged = False
        # Let go of the consumed chunk first: two chunks of large batches alive at once
        # would double this buffer's share of the peak memory.
        self._produced_before, self._buf, self._pos = self._produced, [], 0
        t0 = time.perf_counter()
        self._buf = self._root.next_chunk(self._chunk)
        dt = time.perf_counter() - t0
        if not self._buf:
            # The end of the data: stop the pipeline's threads and processes now, as
            # DataLoader's iterator shuts its workers down (worker processes used to stay
            # until close() or GC; a notebook holding `it` kept them and their memory).
            # state_dict() still gives the end state.
            self.close()
            raise StopIteration
        self._chunk = self._next_size(dt)
        self._pos = 1
        return self._buf[0]

    def _next_size(self, dt: float) -> int:
        """The next root call's chunk: doubling from 1 while the elements it computes ahead
        of the consumer cost under ``MAX_AHEAD_S`` together and hold under
        ``MAX_OUTER_CHUNK_BYTES``; 1 when read-ahead is not allowed."""
        if not self._read_ahead:
            return 1
        n = len(self._buf)
        per = dt / n
        self._cost = per if self._cost is None else 0.5 * (self._cost + per)
        if getattr(self._buf[0], "nbytes", 0) * n > MAX_OUTER_CHUNK_BYTES:
            return max(1, self._chunk // 2)  # large elements: a small buffer suffices
        ahead = 1 + int(MAX_AHEAD_S / self._cost) if self._cost > 0 else MAX_OUTER_CHUNK
        return max(1, min(self._chunk * 2, MAX_OUTER_CHUNK, ahead))

    def synchronize(self) -> None:
        """Block until the last element returned is ready where it lives: with
        ``prefetch_to_device``, until its copy to the device has finished (the consumer's
        stream already waits for it; this makes the host wait too, e.g. to time the wait
        as input: ``InputBoundTimer``). Returns at once for a pipeline without one."""
        stages = self._device_stages
        if stages is None or any(s.closed for s in stages):
            stages = self._device_stages = _device_stages(self._root)
        for s in stages:
            s.synchronize_delivered()

    def get_state(self) -> dict:
        # The root is past the elements still in our buffer; they travel in the state
        # (at most MAX_OUTER_CHUNK - 1), so a snapshot costs nothing until it is asked for.
        from datapipe._checkpoint import iterator_state

        if self._state_at_close is None:
            return iterator_state(self)
        state, err = self._state_at_close
        if state is None:
            raise ValueError(
                "state_dict: the iterator was closed, and its state could not be taken as "
                f"it closed ({type(err).__name__}: {err})"
            ) from err
        return state

    def set_state(self, state: dict | list) -> None:
        from datapipe._checkpoint import restore_iterator

        restore_iterator(self, state)
        # The epoch travels with the state: the Dataset's next iter() is the epoch after the
        # restored one (its reshuffle order), also in a fresh process whose first iter()
        # was epoch 0.
        self._dataset._continue_after_epoch(self._epoch[0])

    state_dict = get_state
    load_state_dict = set_state

    def close(self) -> None:
        """Stop every thread and process of the pipeline. Idempotent. ``state_dict()``
        still gives the state as it was at the close (the elements delivered, no more)."""
        if self._state_at_close is None and not self._root.closed:
            self._state_at_close = self._close_taking_state()
        self._buf = []
        self._root.close()

    def _close_taking_state(self) -> tuple[dict | None, BaseException | None]:
        """Close the chain and return (its state as it closed, or the error taking it).
        First while the workers run, waiting ``CLOSE_SNAPSHOT_S`` at most for a lane whose
        input a worker is reading; else once the workers stopped (within the close
        deadline), from the snapshots the stages recorded before letting go of their
        lanes: a slow input (20 ms an element) is read to the end of its chunk, while a
        worker blocked for good leaves its lane unrecorded, and the error says so."""
        from datapipe._checkpoint import iterator_state

        try:
            with snapshots_within(CLOSE_SNAPSHOT_S):  # close never waits for a worker
                return iterator_state(self), None
        except TimeoutError:
            pass  # a worker still reads its input: take it once the workers stopped
        except Exception as e:  # noqa: BLE001 - raised by a later state_dict()
            return None, e
        with keeping_snapshots():
            self._root.close()
        try:
            with snapshots_within(CLOSE_SNAPSHOT_S):
                return iterator_state(self), None
        except Exception as e:  # noqa: BLE001 - raised by a later state_dict()
            return None, e

    def __enter__(self) -> Iterator:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._root.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _profiler_records() -> bool:
    """Whether a torch profiler records now (``datapipe.stats.torch_ranges.active``, inlined:
    the public iterator asks on every call into the chain)."""
    mod = sys.modules.get("torch.autograd.profiler")
    return mod is not None and bool(getattr(mod, "_is_profiler_enabled", False))


def _device_stages(root: OpIterator) -> list:
    """The op iterators under ``root`` that copy to a device (``synchronize_delivered``)."""
    out, seen, stack = [], set(), [root]
    while stack:
        it = stack.pop()
        if id(it) in seen:
            continue
        seen.add(id(it))
        if hasattr(type(it), "synchronize_delivered"):
            out.append(it)
        stack.extend(getattr(it, "inputs", ()))
    return out
