"""Parallel ``map`` (and ``random_map``, and ``batch``'s stacking): one engine lane whose
transform is the user function, with tf.data's semantics.

``ParallelMapIterator(inner, func, op_name, num_parallel_calls, deterministic, ctx,
indexed=False, executor=None, replayable=True)``:

* Workers take *chunks* of consecutive input elements (the input is read by one worker at a
  time), apply ``func`` to each element and hand the chunk back (``engine.py``); chunk
  sizes grow towards a few ms of work, since a thread hand-off costs ~88 µs.
* ``deterministic=True`` (default unless ``Options(deterministic=False)``): output order is
  the input order whatever the timing. ``False``: a finished chunk is delivered as soon as
  it is ready; elements may come out of order, none is lost or duplicated
  (``tf.data.Dataset.map``'s ``deterministic``).
* ``indexed=True`` calls ``func(index, element)`` with the element's index in the input
  stream and the element *not* unpacked (``random_map`` keys its generators on it);
  otherwise ``func`` follows tf.data's convention (a plain tuple is unpacked).
* ``executor``: ``"thread"`` (default) or ``"process"`` (``processes.py``: worker processes,
  elements through shared memory); with ``num_parallel_calls=AUTOTUNE`` the tuner moves the
  worker count within the CPU budget; bytes buffered count against the RAM budget.
* An exception in ``func`` reaches the consumer at that element's position as a
  ``PipelineError`` naming the op and the element index; the elements before it are
  delivered first, and iteration may continue after it (``ignore_errors``).
* Checkpoints: ``replay.py`` (exact for both orders). Shutdown: ``close()`` (also reached
  from the public iterator's finaliser, ``break`` + garbage collection, exceptions and
  KeyboardInterrupt) stops every worker within ~1 s.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from datapipe._iterator import OpIterator
from datapipe.parallel import autotune
from datapipe.parallel.engine import INLINE, PROCESS, THREAD, Engine, Lane
from datapipe.parallel.plan import Plan, make_plan
from datapipe.parallel.pool import PROCESS_CHUNK_S, close_deadline


class ParallelMapIterator(OpIterator):
    """``map`` with ``num_parallel_calls`` workers (see the module docstring)."""

    def __init__(
        self,
        inner: OpIterator,
        func: Callable,
        op_name: str,
        num_parallel_calls: int,
        deterministic: bool | None,
        ctx: Any,
        indexed: bool = False,
        executor: str | None = None,
        replayable: bool = True,
        plan: Plan | None = None,
        pool_key: Any = None,
    ):
        super().__init__([inner])
        self.inner, self.op_name = inner, op_name
        if plan is None:
            plan = make_plan(ctx, num_parallel_calls, deterministic, executor, replayable)
        self.tuner = tuner = autotune.get_tuner(ctx)
        stage = autotune.Stage(op_name, "parallelism", plan.value, plan.autotuned, plan.max_value)
        stage.intra_op = autotune.intra_op(ctx)
        self.stage = tuner.add_stage(stage)
        kind = {"process": PROCESS, "auto": INLINE}.get(plan.executor, THREAD)
        self._eng = eng = Engine(op_name, "map", tuner, stage, kind)
        self._lane = Lane(inner, op_name, func, indexed, plan.deterministic, plan.replayable)
        eng.lanes.append(self._lane)
        key = pool_key if pool_key is not None else id(self)
        if plan.executor in ("process", "auto") and plan.allow_process:
            eng.process_factory = _process_factory(ctx, key, op_name, func, eng)
            eng.sampling = plan.executor == "auto"  # checked before it moves to processes
        if kind == PROCESS:  # started with the first chunk; a function that cannot be
            assert eng.process_factory is not None  # PROCESS is only planned with one
            eng.processes = eng.process_factory()  # pickled raises TypeError here
            eng.sizer.target_s = PROCESS_CHUNK_S
        stage.executor = kind
        if plan.executor == "auto":  # AUTOTUNE chooses: inline first, then measures
            stage.choose_executor, stage.phase = True, "inline"
            stage.allow_process = eng.process_factory is not None
            stage.switch = _switcher(eng)
        stage.apply = _resizer(eng)
        self._finalizer = weakref.finalize(self, Engine.close, eng)

    @property
    def deterministic(self) -> bool:
        return self._lane.deterministic

    @property
    def executor(self) -> str:
        return self._eng.executor

    @property
    def start_method(self) -> str | None:
        """How the stage's worker processes started (None: none did), and why:
        ``start_reason`` (``processes.choose_start_method``)."""
        procs = self._eng.processes
        return None if procs is None else procs.start_method

    @property
    def start_reason(self) -> str | None:
        procs = self._eng.processes
        return None if procs is None else procs.start_reason

    def next_chunk(self, n: int) -> list:
        return self._eng.next_from(self._lane, n)

    def index_base(self) -> tuple[int, int] | None:
        return self.inner.index_base()

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

    # ---- statistics: the gauge protocol of datapipe.stats --------------------------------
    def stats_gauges(self) -> dict:
        """Buffer in chunks (at most two per worker), workers, their wall and CPU seconds."""
        eng, lane = self._eng, self._lane
        with eng.cond:
            ready = sum(1 for c in lane.chunks if c.done and c.consumed < len(c.items))
        par = max(1, eng.workers_wanted())
        st = self.stage
        return {"buffer_size": 2 * par, "buffer_fill": ready, "parallelism": par,
                "busy_s": st.busy_s, "cpu_s": st.cpu_s}  # fmt: skip

    @property
    def autotune_events(self) -> list:
        return self.stage.events


def _process_factory(ctx: Any, key: Any, op: str, func: Callable, eng: Engine) -> Callable:
    def make() -> Any:
        from datapipe.parallel.engine import apply
        from datapipe.parallel.processes import lease

        workers = lease(ctx, key, op)
        workers.set_function(func)  # TypeError when it cannot be pickled
        workers.engine = eng
        # AUTOTUNE's choice: what cannot cross is computed here, and the stage steps back
        workers.strict = not eng.sampling
        workers.local, workers.on_step_back = apply, eng.request_step_back
        return workers

    return make


def _switcher(eng: Engine) -> Callable[[str, int], bool]:
    ref = weakref.ref(eng)

    def switch(kind: str, value: int) -> bool:
        e = ref()
        return e is not None and e.set_executor(kind, value)

    return switch


def _resizer(eng: Engine) -> Callable[[int], None]:
    ref = weakref.ref(eng)  # the tuner must not keep a closed pipeline alive

    def apply(n: int) -> None:
        e = ref()
        if e is not None:
            e.resize(n)

    return apply
