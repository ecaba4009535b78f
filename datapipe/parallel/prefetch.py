"""``prefetch``'s background producer: an engine lane without transform (a buffer), read by
one worker thread that keeps up to ``buffer_size`` elements ready.

The thread takes chunks from the input (``pool.ChunkSizer``: growing from 1 towards a few
ms of input work) and the consumer takes elements from the oldest chunk. An input failure
is kept at its position and raised to the consumer there; the thread then goes on (the
input may continue after a failure, e.g. under ``ignore_errors``).

``buffer_size=AUTOTUNE``: the stage first runs inline (no thread) and measures what one
element of its input costs; under ``autotune.PREFETCH_INLINE_MAX_COST_S`` (a cheap input,
e.g. batches of scalars) it stays inline, as a thread hand-off would cost more than it
hides. Otherwise the producer thread starts with a buffer of 4 elements, and the tuner
doubles it while the consumer waits on an empty buffer (tf.data's prefetch autotuning), up
to 1024, and never past the pipeline's RAM budget.

State (``replay.py``): the input's state before the oldest chunk not fully consumed and
how many of its elements were consumed; a restore replays the input from there
(recomputing the buffered elements rather than storing them). Above a nondeterministic
stage the buffered elements themselves are stored.
"""

from __future__ import annotations

import weakref
from typing import Any

from datapipe._iterator import OpIterator
from datapipe.parallel import autotune
from datapipe.parallel.engine import INLINE, THREAD, Engine, Lane
from datapipe.parallel.plan import Plan
from datapipe.parallel.pool import close_deadline

AUTOTUNE_START = 4


class PrefetchIterator(OpIterator):
    """Elements of ``inner`` unchanged, produced ahead by one background thread."""

    op_name = "prefetch"

    def __init__(self, inner: OpIterator, plan: Plan, ctx: Any):
        super().__init__([inner])
        self.inner = inner
        self.tuner = tuner = autotune.get_tuner(ctx)
        self.stage = tuner.add_stage(
            autotune.Stage("prefetch", "buffer", plan.value, plan.autotuned, plan.max_value)
        )
        auto = plan.executor == "auto"  # AUTOTUNE may also run it inline (a cheap input)
        self._eng = eng = Engine(
            "prefetch", "buffer", tuner, self.stage, INLINE if auto else THREAD
        )
        self.stage.executor = eng.executor
        if auto:
            self.stage.choose_executor, self.stage.phase = True, "inline"
            ref = weakref.ref(eng)
            self.stage.switch = lambda kind, v: (e := ref()) is not None and e.set_executor(kind, v)
        self._lane = Lane(inner, "prefetch", None, replayable=plan.replayable,
                          error_index=lambda i: None)  # fmt: skip
        eng.lanes.append(self._lane)
        self.stage.apply = lambda _: None  # the producer reads the new size on its next wake
        self._finalizer = weakref.finalize(self, Engine.close, eng)

    def index_base(self) -> tuple[int, int] | None:
        return self.inner.index_base()

    def stats_gauges(self) -> dict:
        """Buffer size and fill in elements (``datapipe.stats`` protocol). No ``busy_s``: the
        producer thread's time is the upstream stages' work, already counted there."""
        return {"buffer_size": self.stage.value, "buffer_fill": self._lane.buffered,
                "parallelism": 1}  # fmt: skip

    @property
    def autotune_events(self) -> list:
        return self.stage.events

    def next_chunk(self, n: int) -> list:
        return self._eng.next_from(self._lane, n)

    def get_state(self) -> dict:
        return self._eng.snapshot(self._lane)

    def set_state(self, state: dict) -> None:
        self._eng.restore(self._lane, state)

    def close(self) -> None:
        if self.closed:
            return
        with close_deadline():  # one deadline for this stage and the stages below it
            self._eng.close()
            super().close()
