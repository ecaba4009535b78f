"""``interleave``: map elements to datasets and interleave their elements
(``tf.data.Dataset.interleave``)."""

from __future__ import annotations

import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from datapipe._iterator import OpIterator
from datapipe.dataset import AUTOTUNE, UNKNOWN_CARDINALITY, Dataset
from datapipe.errors import annotate
from datapipe.ops.flat_map import _sub_dataset, sub_dataset_spec
from datapipe.ops.map import validate_parallelism
from datapipe.parallel import autotune
from datapipe.parallel.pool import (
    POLL_S,
    Chunk,
    ChunkSizer,
    Failed,
    WorkerGroup,
    close_deadline,
    take_ready,
)


class InterleaveDataset(Dataset):
    """Elements of ``map_func(x)`` for the input elements ``x``, ``cycle_length`` of them
    open at once, ``block_length`` consecutive elements from each in turn.

    tf.data's order (``InterleaveDatasetOp``): slot ``i`` of the cycle opens the next input
    element when the cycle reaches it empty; each visit takes up to ``block_length``
    elements from the slot's dataset, then moves to the next slot; a dataset that ends frees
    its slot and the cycle moves on. ``cycle_length=1`` is ``flat_map``.

    Args:
        map_func: function of one input element (unpacked when a plain tuple) returning a
            ``Dataset``.
        cycle_length: datasets open at once (default / ``AUTOTUNE``: the CPU count).
        block_length: consecutive elements from each dataset per visit (default 1).
        num_parallel_calls: None (sequential), a positive int or ``AUTOTUNE``: worker
            threads fill the open datasets' buffers ahead of the consumer.
        deterministic: parallel only; True (default unless ``Options(deterministic=False)``)
            gives exactly the sequential order; False lets the cycle skip a dataset whose
            next element is not ready yet (no element is lost or duplicated).

    Raises:
        ValueError: ``cycle_length`` or ``block_length`` < 1.
        PipelineError (at iteration): ``map_func`` failed or did not return a Dataset (names
            ``interleave`` and the input element's index); errors inside a sub-dataset keep
            their own location.

    State: the input's state, the cycle position and, per open slot, its input element
    and its dataset's state (buffered elements are recomputed after a restore).

    Example:
        >>> import datapipe as dp
        >>> ds = dp.range(1, 4).interleave(lambda n: dp.range(10 * n, 10 * n + 2),
        ...                               cycle_length=2, block_length=1)
        >>> [int(x) for x in ds]
        [10, 20, 11, 21, 30, 31]
    """

    _name = "interleave"
    expands = True

    def __init__(
        self,
        input_ds: Dataset,
        map_func: Callable,
        cycle_length: int | None = None,
        block_length: int = 1,
        num_parallel_calls: int | None = None,
        deterministic: bool | None = None,
    ):
        super().__init__(input_ds)
        if not callable(map_func):
            raise TypeError(f"interleave: map_func must be callable, got {type(map_func)}")
        if cycle_length is None or int(cycle_length) == AUTOTUNE:
            cycle_length = autotune.cpu_count()
        if int(cycle_length) < 1:
            raise ValueError(f"interleave: cycle_length must be >= 1, got {cycle_length}")
        if int(block_length) < 1:
            raise ValueError(f"interleave: block_length must be >= 1, got {block_length}")
        self._func = map_func
        self._cycle, self._block = int(cycle_length), int(block_length)
        self._num_parallel_calls = validate_parallelism("interleave", num_parallel_calls)
        self._deterministic = deterministic
        self._spec_cache: Any = None

    @property
    def element_spec(self) -> Any:
        return sub_dataset_spec(self)

    def cardinality(self) -> int:
        return UNKNOWN_CARDINALITY

    def _make_iterator(self, ctx, epoch):
        inner = ctx.make(self._inputs[0], epoch)
        it = InterleaveIterator(inner, self._func, self._cycle, self._block, ctx, epoch)
        if self._num_parallel_calls not in (None, 1):
            det = ctx.deterministic if self._deterministic is None else self._deterministic
            it.parallel = _SlotFiller(self._num_parallel_calls, bool(det), ctx)
        return it


class _Slot:
    """One open dataset of the cycle. Sequentially it is read directly; in parallel mode
    workers fill ``chunks`` ahead (each chunk records the dataset's state before it)."""

    def __init__(self, element: Any, index: int, it: OpIterator):
        self.element, self.index, self.it = element, index, it
        self.chunks: deque[Chunk] = deque()
        self.buffered = 0
        self.ended = False
        self.busy = False
        self.busy_state: Any = None  # the dataset's state before the chunk being filled

    def state(self) -> dict:
        if self.chunks:
            head = self.chunks[0]
            inner, skip = head.state_before, head.consumed
        elif self.busy:
            inner, skip = self.busy_state, 0
        else:
            inner, skip = self.it.get_state(), 0
        return {"element": self.element, "index": self.index, "state": inner, "skip": skip}


class InterleaveIterator(OpIterator):
    op_name = "interleave"

    def __init__(self, inner, func, cycle_length, block_length, ctx, epoch):
        super().__init__([inner])
        self.inner, self.func, self.ctx, self.epoch = inner, func, ctx, epoch
        self.cycle, self.block = cycle_length, block_length
        self.slots: list[_Slot | None] = [None] * cycle_length
        self.cycle_index = 0
        self.block_index = 0
        self.count = 0  # input elements taken
        self.input_done = False
        self.parallel: _SlotFiller | None = None
        self.stopping = False  # close() began (maybe on another thread than the consumer's)

    # ---- the cycle (tf.data's InterleaveDatasetOp::Iterator::GetNextInternal) ----------
    def _advance(self) -> None:
        self.block_index = 0
        self.cycle_index = (self.cycle_index + 1) % self.cycle

    def _open(self, x: Any, index: int) -> _Slot:
        sub_ds = _sub_dataset(self.func, x, self.op_name, index)
        return _Slot(x, index, self.ctx.make(sub_ds, (*self.epoch, index)))

    def _num_open(self) -> int:
        return sum(s is not None for s in self.slots)

    def next_chunk(self, n: int) -> list:
        if self.parallel is not None:
            self.parallel.start(self)
        skipped = 0  # slots passed over without an element (deterministic=False only)
        while (not self.input_done or self._num_open()) and not self.stopping:
            slot = self.slots[self.cycle_index]
            if slot is None:
                if self.input_done:
                    self._advance()
                    continue
                got = self.inner.next_chunk(1)
                if not got:
                    self.input_done = True
                    continue
                self.count += 1
                slot = self._open(got[0], self.count - 1)
                self.slots[self.cycle_index] = slot
                if self.parallel is not None:
                    self.parallel.added(slot)
                continue
            k = min(n, self.block - self.block_index)
            out = self._read(slot, k, skipped >= self._num_open())
            if out is None:  # not ready (deterministic=False): try the next slot
                skipped += 1
                self._advance()
                continue
            if isinstance(out, BaseException):
                try:
                    raise out
                finally:  # no cycle error -> traceback -> this frame -> error (see map)
                    out = None
            if out:
                self.block_index += len(out)
                if self.block_index >= self.block:
                    self._advance()
                return out
            self._close_slot(self.cycle_index)
            self._advance()
        return []

    def _read(self, slot: _Slot, k: int, must_wait: bool) -> list | BaseException | None:
        if self.parallel is not None:
            return self.parallel.read(slot, k, must_wait)
        try:
            return slot.it.next_chunk(k)
        except BaseException as e:  # noqa: BLE001 - located, then raised at this position
            return annotate(self.op_name, slot.index, e)

    def _close_slot(self, i: int) -> None:
        slot = self.slots[i]
        self.slots[i] = None
        if slot is not None:
            if self.parallel is not None:
                self.parallel.removed(slot)
            slot.it.close()

    def get_state(self) -> dict:
        if self.parallel is not None:
            with self.parallel.cond:
                slots = [None if s is None else s.state() for s in self.slots]
        else:
            slots = [None if s is None else s.state() for s in self.slots]
        return {
            "input": self.inner.get_state(),
            "count": self.count,
            "input_done": self.input_done,
            "cycle_index": self.cycle_index,
            "block_index": self.block_index,
            "slots": slots,
        }

    def set_state(self, state: dict) -> None:
        if self.parallel is not None:
            self.parallel.stop()
        for i in range(self.cycle):
            self._close_slot(i)
        self.inner.set_state(state["input"])
        self.count, self.input_done = int(state["count"]), bool(state["input_done"])
        self.cycle_index, self.block_index = int(state["cycle_index"]), int(state["block_index"])
        for i, s in enumerate(state["slots"]):
            if s is None:
                continue
            slot = self._open(s["element"], int(s["index"]))
            slot.it.set_state(s["state"])
            _skip(slot.it, int(s["skip"]))
            self.slots[i] = slot
            if self.parallel is not None:
                self.parallel.added(slot)

    def close(self) -> None:
        if self.closed:
            return
        with close_deadline():  # one deadline for the workers and the open datasets' stages
            self.stopping = True  # a consumer waiting in next_chunk opens nothing more
            if self.parallel is not None:
                self.parallel.stop(final=True)
            for i in range(self.cycle):
                self._close_slot(i)
            super().close()


def _skip(it: OpIterator, k: int) -> None:
    while k > 0:
        try:
            got = it.next_chunk(k)
        except Exception:  # noqa: BLE001 - delivered to the consumer before the checkpoint
            k -= 1
            continue
        if not got:
            return
        k -= len(got)


class _SlotFiller:
    """Worker threads that fill the open slots' buffers (parallel interleave)."""

    def __init__(self, num_parallel_calls: int, deterministic: bool, ctx: Any):
        self.deterministic = deterministic
        self.tuner = autotune.get_tuner(ctx)
        auto = num_parallel_calls == AUTOTUNE
        cap = autotune.max_threads(ctx)
        start = (
            autotune.initial_parallelism(ctx, self.tuner)
            if auto
            else min(int(num_parallel_calls), cap)
        )
        self.stage = self.tuner.add_stage(
            autotune.Stage("interleave", "parallelism", start, auto and self.tuner.enabled, cap)
        )
        self.shared = _FillShared(self.stage, self.tuner)
        self.cond = self.shared.cond
        self.stage.apply = _resizer(self.shared)
        self.started = False

    def start(self, owner: InterleaveIterator) -> None:
        if not self.started:
            self.started = True
            if self.stage not in self.tuner.stages:
                self.tuner.add_stage(self.stage)
            self.shared.block = owner.block
            self.shared.group.resize(self.stage.value)
            self.shared.finalizer = weakref.finalize(owner, _FillShared.stop, self.shared)

    def added(self, slot: _Slot) -> None:
        with self.cond:
            self.shared.slots.append(slot)
            self.cond.notify_all()

    def removed(self, slot: _Slot) -> None:
        with self.cond:
            while slot.busy:  # a worker is reading it: let it finish before closing
                self.cond.wait(POLL_S)
            if slot in self.shared.slots:
                self.shared.slots.remove(slot)
            for c in slot.chunks:
                self.tuner.ram.release(c.reserved)
            slot.chunks.clear()

    def read(self, slot: _Slot, k: int, must_wait: bool) -> list | BaseException | None:
        sh = self.shared
        cond = sh.cond  # not self.cond: a stop() on another thread replaces it
        with cond:
            while not sh.closed:
                if slot.chunks:
                    return _take(sh, slot, k)
                if slot.ended:
                    return []
                if not self.deterministic and not must_wait:
                    return None
                t0 = time.perf_counter()
                cond.wait(POLL_S)
                self.stage.consumer_wait_s += time.perf_counter() - t0
                cond.release()
                try:
                    self.tuner.maybe_step()
                finally:
                    cond.acquire()
        return []

    def stop(self, final: bool = False) -> None:
        """Stop the workers; unless ``final`` (close), a fresh set may start later."""
        self.shared.stop()
        if final:
            return
        self.shared = _FillShared(self.stage, self.tuner, self.shared.block)
        self.cond = self.shared.cond
        self.stage.apply = _resizer(self.shared)
        self.started = False


def _take(sh: _FillShared, slot: _Slot, k: int) -> list | BaseException:
    chunk = slot.chunks[0]
    out, err, pos = take_ready(chunk.items, chunk.consumed, k)
    taken = pos - chunk.consumed
    chunk.consumed = pos
    slot.buffered -= taken
    if pos >= len(chunk.items):
        slot.chunks.popleft()
        sh.tuner.ram.release(chunk.reserved)
    sh.cond.notify_all()
    return err if err is not None else out


class _FillShared:
    def __init__(self, stage: Any, tuner: Any, block: int = 1):
        self.stage, self.tuner, self.block = stage, tuner, block
        self.cond = threading.Condition(threading.Lock())
        self.slots: list[_Slot] = []
        self.closed = False
        self.sizer = ChunkSizer()
        self.group = WorkerGroup("interleave", _fill_worker, self)
        self.finalizer: Any = None

    def stop(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        self.group.stop(1.0)
        self.tuner.remove_stage(self.stage)


def _resizer(shared: _FillShared) -> Callable[[int], None]:
    ref = weakref.ref(shared)  # the tuner must not keep a closed pipeline alive

    def apply(n: int) -> None:
        sh = ref()
        if sh is not None and not sh.closed and sh.group.threads:
            sh.group.resize(n)

    return apply


def _pick(sh: _FillShared) -> _Slot | None:
    """Under ``cond``: the open slot (in cycle order of opening) that most needs elements."""
    want = max(2 * sh.block, sh.sizer.size)
    if sh.tuner.ram.free() <= 0:
        want = 1  # over the RAM budget: only slots with nothing buffered may take more
    best = None
    for s in sh.slots:
        if not s.busy and not s.ended and s.buffered < want:
            if best is None or s.buffered < best.buffered:
                best = s
    return best


def _fill_worker(sh: _FillShared, wid: int) -> None:
    while True:
        with sh.cond:
            slot = None
            while not sh.closed and wid < sh.group.size:
                slot = _pick(sh)
                if slot is not None:
                    break
                sh.cond.wait(POLL_S)
            if sh.closed or wid >= sh.group.size:
                return
            slot.busy, slot.busy_state = True, slot.it.get_state()
            n = sh.sizer.next_size(limit=max(2 * sh.block, 1))
        chunk = Chunk(0, 0, slot.busy_state)
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            items = slot.it.next_chunk(n)
        except BaseException as e:  # noqa: BLE001 - raised to the consumer in place
            items = [Failed(annotate("interleave", slot.index, e))]
        dt = time.perf_counter() - t0
        with sh.cond:
            slot.busy = False
            if items:
                chunk.items, chunk.done, chunk.size = items, True, len(items)
                chunk.reserved = autotune.chunk_nbytes(items)
                sh.tuner.ram.try_reserve(chunk.reserved, force=True)
                slot.chunks.append(chunk)
                slot.buffered += len(items)
                sh.sizer.observe(len(items), dt)
                sh.stage.produced += len(items)
                sh.stage.busy_s += dt
                sh.stage.cpu_s += time.thread_time() - c0
            else:
                slot.ended = True
            sh.cond.notify_all()
