"""``prefetch_to_device``'s stage: a lane whose transform starts each element's copy to the
device (``transfer.py``), read by one worker thread.

* On an accelerator the engine runs the ``Queue`` policy: the worker takes one element at
  a time from the input, puts it in pinned memory (a ``batch`` read on this thread stacks
  straight into pinned buffers: ``_batching.read_with_alloc``), starts its copy on the
  side stream, and goes on with the next while at most ``buffer_size`` elements are taken
  and not consumed. ``next_chunk`` hands over one element per call, so the consumer's
  stream waits for each copy only when the consumer takes that element.
* With ``device="cpu"`` it is ``prefetch``'s stage (``Buffer`` policy, AUTOTUNE's inline
  first choice) and the hand-over converts numpy leaves to tensors.

``buffer_size=AUTOTUNE`` starts with 2 elements in flight (double buffering) and doubles
up to 16 while the consumer waits on an empty buffer that the worker had filled
(``autotune``'s buffer step).

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
from datapipe.parallel.plan import Plan
from datapipe.parallel.pool import close_deadline
from datapipe.parallel.stage import Stage, StageIterator


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


def _no_index(i: int) -> None:
    return None


class DevicePrefetchIterator(StageIterator):
    """Elements of ``inner`` on the transfer's device (see the module docstring): the
    stage iterator plus the hand-over, one element per call on an accelerator."""

    op_name = "prefetch_to_device"

    def __init__(self, inner: OpIterator, transfer: Any, plan: Plan, ctx: Any):
        pinned = None if transfer.alloc is None else PinnedBatches(inner, transfer.alloc)
        super().__init__(inner, plan, ctx, self.op_name, transfer.transform, indexed=True,
                         lane_input=pinned, error_index=_no_index)  # fmt: skip
        self.transfer = transfer
        self._sync = bool(ctx.options.stats.enabled)
        self._per_call = None if transfer.chunked else 1
        self._finalizer.detach()  # the worker first (it may be starting a copy), then copies
        self._finalizer = weakref.finalize(self, _close, self.stage, transfer)

    def next_chunk(self, n: int) -> list:
        got = super().next_chunk(self._per_call or n)
        hand_over, sync = self.transfer.hand_over, self._sync
        return [hand_over(x, sync) for x in got]

    def synchronize_delivered(self) -> None:
        """Block the host until the last element handed over is on the device."""
        self.transfer.synchronize()

    def close(self) -> None:
        if self.closed:
            return
        with close_deadline():  # one deadline for this stage and the stages below it
            super().close()
            self.transfer.close()


def _close(stage: Stage, transfer: Any) -> None:
    stage.close()  # the worker first: it may be starting a copy
    transfer.close()
