"""``interleave``: map elements to datasets and interleave their elements
(``tf.data.Dataset.interleave``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from datapipe._functions import raise_pending
from datapipe._iterator import OpIterator
from datapipe._positions import error_from_state, error_to_state
from datapipe._validate import check_int, check_optional_bool, check_optional_int
from datapipe.dataset_ops import AUTOTUNE, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset
from datapipe.errors import annotate
from datapipe.ops.flat_map import _sub_dataset, sub_dataset_spec
from datapipe.ops.map import validate_parallelism
from datapipe.parallel import autotune, policies
from datapipe.parallel.pool import close_deadline
from datapipe.parallel.request import StageRequest


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
        cycle_length = check_optional_int(
            "interleave", "cycle_length", cycle_length, 1, (AUTOTUNE,), ">= 1 or AUTOTUNE"
        )
        if cycle_length is None or cycle_length == AUTOTUNE:
            cycle_length = autotune.cpu_count()
        self._func = map_func
        self._cycle = cycle_length
        self._block = check_int("interleave", "block_length", block_length, minimum=1)
        self._stage_request = StageRequest(
            policies.Slots(self._block),
            parallelism=validate_parallelism("interleave", num_parallel_calls),
            deterministic=check_optional_bool("interleave", "deterministic", deterministic),
        )
        self._spec_cache: Any = None

    @property
    def element_spec(self) -> Any:
        return sub_dataset_spec(self)

    def cardinality(self) -> int:
        # tf.data's rule: an infinite input never ends the interleave; else unknown.
        if self._inputs[0].cardinality() == INFINITE_CARDINALITY:
            return INFINITE_CARDINALITY
        return UNKNOWN_CARDINALITY

    def _make_iterator(self, ctx, epoch):
        from datapipe.parallel.plan import plan_stage

        inner = ctx.make(self._inputs[0], epoch)
        it = InterleaveIterator(inner, self._func, self._cycle, self._block, ctx, epoch)
        plan = plan_stage(self.stage_request, ctx, self._inputs[0])
        if plan is not None:
            from datapipe.parallel.interleave import SlotEngine

            it.parallel = SlotEngine(plan, ctx)
        return it


class _Slot:
    """One open dataset of the cycle. Sequentially it is read directly; in parallel mode
    it is a lane of the slot engine, whose workers fill it ahead."""

    def __init__(self, element: Any, index: int, it: OpIterator):
        self.element, self.index, self.it = element, index, it
        self.lane: Any = None

    def state(self, parallel: Any) -> dict:
        out = {"element": self.element, "index": self.index}
        if parallel is not None:
            out["lane"] = parallel.slot_state(self)
        else:
            out["state"], out["skip"] = self.it.get_state(), 0
        return out


class _FailedOpen:
    """An empty slot whose opening, done ahead by a parallel interleave, failed: the error
    is raised when the cycle reaches the slot, where the sequential order raises it."""

    def __init__(self, error: BaseException):
        self.error: BaseException | None = error
        self.it = self.lane = None


class InterleaveIterator(OpIterator):
    """tf.data's interleave cycle. In parallel, every empty slot is opened as soon as
    possible (when the cycle first reaches an empty slot and whenever a slot's dataset
    ends), not when the cycle reaches it, so the workers fill it a whole cycle ahead: the
    first elements of a dataset (a remote file's open and first read) are then fetched
    while the consumer reads the others. The order is unchanged: the cycle reaches empty
    slots in the order they became empty, which is the order they are refilled in."""

    op_name = "interleave"

    def __init__(self, inner, func, cycle_length, block_length, ctx, epoch):
        super().__init__([inner])
        self.inner, self.func, self.ctx, self.epoch = inner, func, ctx, epoch
        self.cycle, self.block = cycle_length, block_length
        self.slots: list[_Slot | _FailedOpen | None] = [None] * cycle_length
        self.cycle_index = 0
        self.block_index = 0
        self.count = 0  # input elements taken
        self.input_done = False
        self.parallel: Any = None  # parallel.interleave.SlotEngine
        self.stopping = False  # close() began (maybe on another thread than the consumer's)

    # ---- the cycle (tf.data's InterleaveDatasetOp::Iterator::GetNextInternal) ----------
    def _advance(self) -> None:
        self.block_index = 0
        self.cycle_index = (self.cycle_index + 1) % self.cycle

    def _open(self, x: Any, index: int) -> _Slot:
        sub_ds = _sub_dataset(self.func, x, self.op_name, index)
        slot = _Slot(x, index, self.ctx.make(sub_ds, (*self.epoch, index)))
        if self.parallel is not None:
            slot.lane = self.parallel.lane_for(slot.it, sub_ds, index)
        return slot

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
                    self._open_ahead()
                continue
            if isinstance(slot, _FailedOpen):
                self.slots[self.cycle_index] = None  # the next visit opens the next element
                raise_pending(slot, "error")
            k = min(n, self.block - self.block_index)
            all_skipped = skipped >= self._num_open()
            if all_skipped and self.parallel is not None and not self.parallel.deterministic:
                # No open slot had an element ready: wait for a worker to hand one over to
                # any slot, then look again. Waiting on this slot alone would put every
                # other dataset behind a slow one (tf.data's sloppy interleave does not).
                self.parallel.wait_for_any()
                skipped = 0
                continue
            out = self._read(slot, k, all_skipped)
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
            if self.stopping:  # close() on another thread ended the read: it closes the slots
                return []
            self._close_slot(self.cycle_index)
            self._advance()
            if self.parallel is not None:
                self._open_ahead()
        return []

    def _open_ahead(self) -> None:
        """Parallel only: open the empty slots now, in cycle order from the current one
        (the order the cycle would open them in). A failure is kept in its slot, and no
        slot is opened until the cycle has raised it (the cycle would open the next input
        element in that slot)."""
        if any(isinstance(s, _FailedOpen) for s in self.slots):
            return
        for k in range(self.cycle):
            i = (self.cycle_index + k) % self.cycle
            if self.input_done or self.stopping:
                return
            if self.slots[i] is not None:
                continue
            try:
                got = self.inner.next_chunk(1)
                if not got:
                    self.input_done = True
                    return
                self.count += 1
                slot = self._open(got[0], self.count - 1)
            except Exception as e:  # noqa: BLE001 - raised when the cycle reaches slot i
                self.slots[i] = _FailedOpen(e)
                return
            self.slots[i] = slot
            self.parallel.added(slot)

    def _read(self, slot: _Slot, k: int, must_wait: bool) -> list | BaseException | None:
        if self.parallel is not None:
            return self.parallel.read(slot, k, must_wait)
        try:
            return slot.it.next_chunk(k)
        except BaseException as e:  # noqa: BLE001 - located, then raised at this position
            return annotate(self.op_name, slot.index, e)

    def _close_slot(self, i: int, final: bool = False) -> None:
        slot = self.slots[i]
        self.slots[i] = None
        if slot is not None and not isinstance(slot, _FailedOpen):
            if self.parallel is not None:
                self.parallel.removed(slot, final)
            slot.it.close()

    def get_state(self) -> dict:
        slots = [
            None
            if s is None
            else {"failed": error_to_state(s.error)}
            if isinstance(s, _FailedOpen)
            else s.state(self.parallel)
            for s in self.slots
        ]
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
            if "failed" in s:
                self.slots[i] = _FailedOpen(error_from_state(s["failed"], self.op_name))
                continue
            slot = self._open(s["element"], int(s["index"]))
            if slot.lane is not None:
                from datapipe.parallel.replay import restore

                restore(slot.lane, s["lane"])
            else:
                from datapipe.parallel.replay import skip_elements

                slot.it.set_state(s["state"])
                skip_elements(slot.it, int(s["skip"]))
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
                self._close_slot(i, final=True)
            super().close()
