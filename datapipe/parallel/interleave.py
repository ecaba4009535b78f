"""Parallel ``interleave``: the open input datasets are lanes of one stage (``Slots``
policy): ``num_parallel_calls`` worker threads keep each open dataset's buffer filled (the
emptiest first) while the consumer walks the cycle (``ops/interleave.py``) and takes from
the lane of the slot it visits.

``deterministic=True`` waits at each slot for its next element (exactly the sequential
order); ``False`` lets the cycle move past a slot whose next element is not ready yet
(no element is lost or duplicated: each lane keeps its own order).

A slot's state is its input element and its lane's snapshot (``replay.py``): the
dataset's state before the oldest buffered chunk and how much of it was consumed, or, for
a dataset whose own order is not reproducible, the buffered elements.
"""

from __future__ import annotations

import time
import weakref
from typing import Any

from datapipe.parallel.engine import Lane
from datapipe.parallel.plan import Plan
from datapipe.parallel.pool import POLL_S, _closing
from datapipe.parallel.stage import Stage


class SlotEngine:
    """The workers behind a parallel interleave's open slots (one lane per slot): a
    ``Stage`` whose lanes come and go with the cycle's datasets."""

    def __init__(self, plan: Plan, ctx: Any):
        self.deterministic = plan.deterministic
        self.ctx = ctx
        self.stage = Stage("interleave", plan, ctx)
        self.eng = self.stage.engine
        self._owner: Any = None

    @property
    def cond(self) -> Any:
        return self.eng.cond

    def start(self, owner: Any) -> None:
        if self._owner is None:  # the interleave's finaliser closes the stage
            self._owner = weakref.finalize(owner, Stage.close, self.stage)
        self.stage.start()

    def lane_for(self, it: Any, sub_ds: Any, index: int) -> Lane:
        """The lane of the dataset opened for input element ``index``; its failures are
        named by that index (tf.data's interleave names the input element)."""
        from datapipe.parallel.replay import replayable

        ok = replayable(sub_ds, self.ctx)
        return Lane(it, "interleave", None, replayable=ok, error_index=lambda _: index)

    def added(self, slot: Any) -> None:
        with self.eng.cond:
            self.eng.lanes.append(slot.lane)
            self.eng.cond.notify_all()

    def removed(self, slot: Any, final: bool = False) -> None:
        """Detach the slot's lane; a worker reading its dataset finishes first (the input
        lock), and none reads it afterwards, so the dataset may be closed then. When the
        interleave closes (``final``), the wait ends at the close's deadline: a worker still
        reading is stuck in the dataset (e.g. its own blocked workers), and closing the
        dataset is what lets it return."""
        eng, lane = self.eng, slot.lane
        timeout = -1.0
        if final:
            deadline = getattr(_closing, "deadline", None) or time.monotonic() + 1.0
            timeout = max(0.0, deadline - time.monotonic())
        locked = lane.input_lock.acquire(timeout=timeout)
        try:
            self._detach(eng, lane)
        finally:
            if locked:
                lane.input_lock.release()

    @staticmethod
    def _detach(eng: Any, lane: Any) -> None:
        with eng.cond:
            lane.detached = True
            if lane in eng.lanes:
                eng.lanes.remove(lane)
            for c in lane.chunks:
                eng.ram.release(c.reserved)
                c.reserved = 0
            lane.chunks.clear()

    def read(self, slot: Any, k: int, must_wait: bool) -> list | BaseException | None:
        """Up to ``k`` elements of ``slot``, or a failure to raise at its place; ``[]`` at
        its end; None when nothing is ready and the cycle may move on
        (``deterministic=False`` and not ``must_wait``)."""
        eng, lane = self.eng, slot.lane
        if not self.deterministic and not must_wait:
            with eng.cond:
                ready = eng.fatal is None and not eng.closed
                got = eng.take(lane, k) if ready else None
            if ready:
                return got  # None: not ready, the cycle moves on
        return eng.wait(lambda: eng.take(lane, k), raise_errors=False)

    def wait_for_any(self) -> None:
        """``deterministic=False`` and no open slot has an element ready: wait (one poll at
        most) for a worker to hand a chunk to any lane; the cycle then looks again."""
        eng = self.eng
        with eng.cond:
            if eng.closed or eng.fatal is not None:
                return  # the next read raises the worker's death or ends
            t0 = time.perf_counter()
            eng.cond.wait(POLL_S)
            eng.meter.consumer_wait_s += time.perf_counter() - t0
        eng.tuner.maybe_step()

    def slot_state(self, slot: Any) -> dict:
        return self.eng.snapshot(slot.lane)

    def stop(self, final: bool = False) -> None:
        """Stop the workers; unless ``final`` (close), they start again on the next read."""
        if final:
            self.stage.close()
        else:
            self.stage.stop_workers()
