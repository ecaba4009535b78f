"""``prefetch_to_device``'s stage: an engine lane whose transform starts each element's copy
to the device (``transfer.py``), read by one worker thread.

* On an accelerator the engine runs the ``queue`` policy: the worker takes one element at a
  time from the input, puts it in pinned memory (a ``batch`` read on this thread stacks
  straight into pinned buffers: ``_batching.read_with_alloc``), starts its copy on the
  side stream, and goes on with the next while at most ``buffer_size`` elements are taken
  and not consumed. ``next_chunk`` hands over one element per call, so the consumer's
  stream waits for each copy only when the consumer takes that element.
* With ``device="cpu"`` it is ``prefetch``'s stage (``buffer`` policy, AUTOTUNE's inline
  first choice) and the hand-over converts numpy leaves to tensors.

``buffer_size=AUTOTUNE`` starts with 2 elements in flight (double buffering) and doubles
up to 16 while the consumer waits on an empty buffer that the worker had filled
(``autotune._step_buffer``).

State: ``replay.py``, as ``prefetch``: the input's position before the oldest element not
consumed; the elements in flight are read and copied again after a restore (device memory
is never part of a checkpoint). ``close()`` (and the finaliser) stops the worker, drops
the buffered device tensors and waits for copies still running.

With ``Options.stats.enabled`` (``Dataset.profile``, ``iterator_report``) the hand-over
also blocks the host until the copy is done, so the statistics count a wait for the copy
as this stage's (input) time; ``synchronize_delivered()`` does the same on request
(``Iterator.synchronize``, ``InputBoundTimer``).
"""

from __future__ import annotations

import weakref
from typing import Any

from datapipe._batching import read_with_alloc
from datapipe._iterator import OpIterator
from datapipe.parallel import autotune
from datapipe.parallel.engine import INLINE, THREAD, Engine, Lane
from datapipe.parallel.plan import Plan
from datapipe.parallel.pool import close_deadline


class PinnedBatches(OpIterator):
    """The stage's input as its worker reads it: batches stacked on that thread meanwhile
    go into the transfer's pinned buffers. Owns nothing (the stage closes the input)."""

    op_name = "prefetch_to_device"

    def __init__(self, inner: OpIterator, alloc: Any):
        super().__init__()
        self.inner, self.alloc = inner, alloc

    def next_chunk(self, n: int) -> list:
        return read_with_alloc(self.alloc, lambda: self.inner.next_chunk(n))

    def get_state(self) -> dict:
        return self.inner.get_state()

    def set_state(self, state: dict) -> None:
        self.inner.set_state(state)

    def index_base(self) -> tuple[int, int] | None:
        return self.inner.index_base()


class DevicePrefetchIterator(OpIterator):
    """Elements of ``inner`` on the transfer's device (see the module docstring)."""

    op_name = "prefetch_to_device"

    def __init__(self, inner: OpIterator, transfer: Any, plan: Plan, ctx: Any):
        super().__init__([inner])
        self.inner, self.transfer = inner, transfer
        self.tuner = tuner = autotune.get_tuner(ctx)
        self.stage = tuner.add_stage(
            autotune.Stage(self.op_name, "buffer", plan.value, plan.autotuned, plan.max_value)
        )
        self._sync = bool(ctx.options.stats.enabled)
        self._per_call = None if transfer.chunked else 1
        lane_input: OpIterator = inner
        if transfer.transform is None:  # device="cpu": prefetch's stage
            auto = plan.executor == "auto"
            eng = Engine(self.op_name, "buffer", tuner, self.stage, INLINE if auto else THREAD)
            if auto:  # AUTOTUNE may also run it inline (a cheap input)
                self.stage.choose_executor, self.stage.phase = True, "inline"
                ref = weakref.ref(eng)
                self.stage.switch = lambda k, v: (e := ref()) is not None and e.set_executor(k, v)
        else:
            eng = Engine(self.op_name, "queue", tuner, self.stage, THREAD)
            if transfer.alloc is not None:
                lane_input = PinnedBatches(inner, transfer.alloc)
        self._eng = eng
        self.stage.executor = eng.executor
        self.stage.apply = lambda _: None  # the worker reads the new size on its next wake
        self._lane = Lane(lane_input, self.op_name, transfer.transform, indexed=True,
                          replayable=plan.replayable, error_index=lambda i: None)  # fmt: skip
        eng.lanes.append(self._lane)
        self._finalizer = weakref.finalize(self, _close, eng, transfer)

    def index_base(self) -> tuple[int, int] | None:
        return self.inner.index_base()

    def stats_gauges(self) -> dict:
        """Buffer size and fill in elements (``datapipe.stats`` protocol); on a device also
        the worker's own time (pinning, starting copies), which no other stage counts."""
        g: dict[str, float] = {"buffer_size": self.stage.value, "buffer_fill": self._lane.buffered,
             "parallelism": 1}  # fmt: skip
        if self.transfer.transform is not None:
            g["busy_s"], g["cpu_s"] = self.stage.busy_s, self.stage.cpu_s
        return g

    @property
    def autotune_events(self) -> list:
        return self.stage.events

    def next_chunk(self, n: int) -> list:
        got = self._eng.next_from(self._lane, self._per_call or n)
        hand_over, sync = self.transfer.hand_over, self._sync
        return [hand_over(x, sync) for x in got]

    def synchronize_delivered(self) -> None:
        """Block the host until the last element handed over is on the device."""
        self.transfer.synchronize()

    def get_state(self) -> dict:
        return self._eng.snapshot(self._lane)

    def set_state(self, state: dict) -> None:
        self._eng.restore(self._lane, state)

    def close(self) -> None:
        if self.closed:
            return
        with close_deadline():  # one deadline for this stage and the stages below it
            _close(self._eng, self.transfer)
            super().close()


def _close(eng: Engine, transfer: Any) -> None:
    eng.close()  # the worker first: it may be starting a copy
    transfer.close()
