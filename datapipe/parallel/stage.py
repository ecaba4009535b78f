"""The one stage iterator: the wiring every parallel op shares, done once.

An op that runs as a parallel stage (``map``, ``random_map``, parallel ``batch``,
``prefetch``, ``interleave``, ``prefetch_to_device``) declares a ``StageRequest``; the
planner turns it into a ``Plan`` (``plan.py``); a ``Stage`` turns the plan into running
parts:

* the **knob** (``Knob``: the worker count, or a buffer's size, and the executor) that
  the tuner turns, and the **meter** (``Meter``: what the engine and the executors
  measure) that it reads; both are registered with the pipeline's tuner
  (``autotune.py``), which keeps its own search state;
* the **engine** (``engine.py``: lanes, the bounded buffer of chunks, the consumer's
  wait), with the op's **policy** (``policies.py``);
* the **executor** (``executors.py``: ``Inline``, ``Threads``, ``Processes``), created
  on first use and swapped when the tuner moves the knob's executor;
* ``close``, restores (``get_state``/``set_state`` through ``replay.py``), statistics
  gauges and the tuner's events.

``StageIterator`` is the ``OpIterator`` of a one-lane stage; an op's own iterator adds
only what is its own (``prefetch_to_device``'s hand-over; ``batch``'s grouping is its
input and its stacking the lane's transform), the way torchdata's ``Prefetcher`` is a
base plus one worker function. ``interleave``'s iterator keeps its cycle and uses a
``Stage`` whose lanes are its open datasets (``interleave.py``).

How one element flows through these parts, and the walk of ``num_parallel_calls`` from
``Dataset.map`` to the workers: docs/architecture.md.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from typing import Any

from datapipe._iterator import OpIterator
from datapipe.parallel import autotune, executors, fork_safety
from datapipe.parallel.engine import Engine, Lane, inline_here
from datapipe.parallel.plan import Plan
from datapipe.parallel.pool import close_deadline
from datapipe.parallel.remembered import TunedChoice


class Knob:
    """What the tuner turns for one stage: ``value`` (workers, or a buffer's elements)
    and ``executor`` (``"inline"``, ``"thread"``, ``"process"``).

    ``set_value`` and ``set_executor`` put a change into effect through the stage
    (``on_value``, ``on_executor``) and record it: ``history`` (every value, in order) and
    ``events`` (``(time.perf_counter(), "value" kind, old, new)`` or ``(t, "executor", old,
    new)``: ``datapipe.stats``'s autotune events). ``limit`` is the most under threads;
    ``max_value`` the most under the executor running (a process stage has at most one
    worker per core of the budget).
    """

    def __init__(self, name: str, kind: str, value: int, autotuned: bool, max_value: int,
                 intra_op: int = 1):  # fmt: skip
        self.name, self.kind, self.value = name, kind, int(value)
        self.autotuned, self.intra_op = autotuned, intra_op
        self.limit = self.max_value = int(max_value)
        self.executor = "thread"
        self.history: list[int] = [self.value]
        self.events: list[tuple[float, str, int | str, int | str]] = []
        self.switches = 0  # executor changes so far (the tuner re-measures after one)
        self.on_value: Callable[[int], None] | None = None
        self.on_executor: Callable[[str, int], bool] | None = None

    def set_value(self, v: int) -> None:
        v = max(1, min(int(v), self.max_value))
        if v != self.value:
            self.events.append((time.perf_counter(), self.kind, self.value, v))
            self.value = v
            self.history.append(v)
            if self.on_value is not None:
                self.on_value(v)

    def set_executor(self, kind: str, value: int, cap: int | None = None) -> bool:
        """Run on ``kind`` with ``value`` (at most ``cap``, and ``limit``); False if the
        stage refused (e.g. a function or elements that cannot be sent to processes)."""
        cap = self.limit if cap is None else min(self.limit, cap)
        value = max(1, min(int(value), cap))
        if self.on_executor is None or not self.on_executor(kind, value):
            return False
        self.max_value = cap
        self.events.append((time.perf_counter(), "executor", self.executor, kind))
        if value != self.value:
            self.events.append((time.perf_counter(), self.kind, self.value, value))
            self.history.append(value)
        self.executor, self.value = kind, value
        self.switches += 1
        return True


class Meter:
    """What the engine and the executors measure for one stage; the tuner reads it.

    Counters grow for the stage's lifetime (the tuner takes differences per window):
    ``produced`` elements, ``busy_s`` wall seconds of work, ``cpu_s`` CPU seconds of it,
    ``consumer_wait_s`` the consumer waited, ``full`` times a buffer's producer found it
    full; inline, ``outside_s`` / ``outside_cpu_s`` the consumer spent between requests
    (its own work). ``out_bytes`` bytes per result; ``per_elem_s`` a moving average of
    the wall seconds per element (``pool.ChunkSizer`` sizes chunks from it).
    """

    def __init__(self) -> None:
        self.produced = 0
        self.busy_s = 0.0
        self.cpu_s = 0.0
        self.consumer_wait_s = 0.0
        self.full = 0
        self.outside_s = 0.0
        self.outside_cpu_s = 0.0
        self.out_bytes: float | None = None
        self.per_elem_s: float | None = None

    def record(self, n: int, wall: float, cpu: float) -> None:
        """``n`` elements computed in ``wall`` seconds using ``cpu`` seconds of CPU (under
        the GIL or on a worker's own counters: a lost update only blurs one window)."""
        self.produced += n
        self.busy_s += wall
        self.cpu_s += cpu
        if n > 0:
            t = wall / n
            prev = self.per_elem_s
            self.per_elem_s = t if prev is None else 0.7 * prev + 0.3 * t


class Stage:
    """A parallel stage's running parts (see the module docstring).

    Args:
        op: the op's name (threads ``datapipe-<op>-<i>``, errors, statistics).
        plan: ``plan.plan_stage``'s answer for the op's request (with its policy).
        ctx: the iteration context (options, the tuner, the process pools).
        function: the function worker processes run (None: processes are no option).
        pool_key: the key of the stage's process pool (an epoch's stage of the same op
            takes back the pool the previous epoch parked: ``processes.lease``).
    """

    def __init__(self, op: str, plan: Plan, ctx: Any, function: Callable | None = None,
                 pool_key: Any = None):  # fmt: skip
        self.op, self.ctx, self.policy = op, ctx, plan.policy
        self.function, self.pool_key = function, pool_key
        self.tuner = autotune.get_tuner(ctx)
        self.meter = Meter()
        self.knob = Knob(op, self.policy.knob_kind, plan.value, plan.autotuned, plan.max_value,
                         autotune.intra_op(ctx))  # fmt: skip
        self.engine = Engine(op, self.policy, self.tuner, self.knob, self.meter)
        self.strict = plan.executor == "process"  # named errors; AUTOTUNE's choice steps back
        self.processes_allowed = plan.allow_process and function is not None
        # Why AUTOTUNE keeps it out of processes, where it would compute something else (a
        # module-level file or lock it uses, a global it changes: fork_safety.py); None
        # when it may try them. executor="process" is the user's choice: never refused.
        self.process_refusal: str | None = None
        if plan.executor == "auto" and self.processes_allowed:
            self.process_refusal = fork_safety.parent_state(function)
            self.processes_allowed = self.process_refusal is None
        # AUTOTUNE may still move it to processes: sample what crosses the boundary first
        self.engine.sampling = plan.executor == "auto" and self.processes_allowed
        self.executors = self.engine.executors  # by kind, created on first use
        self.started = False
        self.asked = False  # the consumer asked for an element
        self.remembered = plan.remembered  # the op's last tuned choice (remembered.py)
        if plan.executor == "auto":
            self._start_search()
        else:
            # executor="process" with a function that cannot be pickled raises here
            if not self.use(plan.executor, plan.value):
                raise RuntimeError(f"{op}: the planned executor {plan.executor!r} cannot run it")
            self.knob.executor = plan.executor
            self.tuner.add(self.knob, self.meter)
        ref = weakref.ref(self)  # the tuner must not keep a closed pipeline alive

        def on_value(n: int) -> None:
            stage = ref()
            if stage is not None:
                stage.resize()

        def on_executor(kind: str, n: int) -> bool:
            stage = ref()
            return stage is not None and stage.use(kind, n)

        self.knob.on_value, self.knob.on_executor = on_value, on_executor

    # ---- AUTOTUNE's executor search, and what it remembers across iter() ---------------
    def _start_search(self) -> None:
        """Register with the tuner's executor search, on the executor this op's previous
        stage settled on (``remembered.py``: the tuner verifies it) or else inline."""
        choice = self.remembered.get() if self.remembered is not None else None
        if choice is not None and choice.cpu_budget != self.tuner.cpu_budget:
            choice = None  # measured on another budget: search anew
        if choice is not None and choice.stepped_back:
            self.processes_allowed = False  # an element could not cross last time
        # the search tries, in order, what may run this stage
        order = [k for k, cls in executors.EXECUTORS.items() if cls.possible(self)]
        if choice is not None and choice.executor in order[1:]:
            cap = autotune.max_processes(self.tuner) if choice.executor == "process" else None
            value = max(1, min(choice.value, self.knob.limit, cap or self.knob.limit))
            if self.use(choice.executor, value):
                k = self.knob
                k.executor, k.value, k.history = choice.executor, value, [value]
                k.max_value = min(k.limit, cap or k.limit)
                self.tuner.add(k, self.meter, order, resumed=choice)
                return
        if not self.use(order[0], self.knob.value):
            raise RuntimeError(f"{self.op}: the planned executor {order[0]!r} cannot run it")
        self.knob.executor = order[0]
        self.tuner.add(self.knob, self.meter, order)

    def _remember(self) -> None:
        """At the input's end or at close: leave what the tuner settled on (threads or
        processes, the value, the rate) for this op's next stage; an inline outcome
        forgets the last choice, an unfinished search keeps it."""
        if self.remembered is None or self.engine.fatal is not None:
            return  # a broken stage (a worker died) measured nothing to keep
        outcome = self.tuner.outcome(self.knob)
        if outcome is None:
            return  # the search had not finished (a short iteration): keep the last one
        executor, value, rate = outcome
        if executor == "inline":
            self.remembered.put(None)
            return
        back = self.engine.stepped_back
        self.remembered.put(TunedChoice(executor, value, rate, self.tuner.cpu_budget, back))

    # ---- executors --------------------------------------------------------------------
    def use(self, kind: str, n: int) -> bool:
        """Run later chunks on executor ``kind`` with ``n`` for the knob (the tuner's
        executor choice; chunks in flight finish where they are). False if ``kind`` is not
        possible here."""
        if self.engine.closed:
            return False
        ex = self.executors.get(kind)
        if ex is None:
            ex = executors.create(kind, self)
            if ex is None:
                return False
            self.executors[kind] = ex
        wanted = self.policy.workers(n)
        if self.started and not ex.prepare(wanted):
            return False
        self.engine.set_executor(ex)
        if self.started:
            ex.start(wanted)
        for other in self.executors.values():
            if other is not ex:
                other.start(0)  # their threads retire after the chunk in hand
        return True

    def start(self) -> None:
        """Start the workers (on the consumer's first request; again after a restore)."""
        if not self.started and not self.engine.closed:
            self.started = True
            self.resize()

    def resize(self) -> None:
        """The tuner moved the knob: more or fewer workers (processes: at most as many as
        could start)."""
        if self.started and not self.engine.closed:
            ex, n = self.engine.executor, self.policy.workers(self.knob.value)
            ex.prepare(n)
            ex.start(n)

    def stop_workers(self) -> None:
        """Stop and join every worker (a restore follows); worker processes stay."""
        self.engine.halt_workers()
        self.started = False

    def step_back(self) -> None:
        """On the consumer's thread: AUTOTUNE's processes gave an element back (it could not
        cross); back to threads for good, with one warning."""
        import warnings

        why = self.engine.step_back or ""
        self.engine.stepped_back = True
        self.processes_allowed = False
        self.tuner.end_search(self.knob)
        self.knob.set_executor("thread", self.knob.value)
        warnings.warn(why, RuntimeWarning, stacklevel=2)

    def worker_pids(self) -> list[int]:
        return [pid for ex in self.executors.values() for pid in ex.pids()]

    def start_method(self) -> tuple[str | None, str | None]:
        """(start method, why) of the stage's worker processes; (None, None) if none."""
        for ex in self.executors.values():
            if ex.start_method is not None:
                return ex.start_method, ex.start_reason
        return None, None

    # ---- the consumer -----------------------------------------------------------------
    def next_from(self, lane: Lane, n: int) -> list:
        eng = self.engine
        if not self.asked:  # the tuner's first window starts with the first request
            self.asked = True
            self.tuner.begin(self.knob)
        if eng.step_back is not None and not eng.stepped_back:
            self.step_back()
        if eng.executor.threads and not inline_here():
            self.start()
        out = eng.next_from(lane, n)
        if not out and n > 0:  # the end (a training loop's epoch ends here, the iterator
            self._remember()  # is dropped later: after the next epoch's iter(), perhaps)
        return out

    def restore(self, lane: Lane, state: dict) -> None:
        """``set_state`` of a one-lane stage: stop the workers, rebuild the lane."""
        if self.started:
            self.stop_workers()
        self.engine.restore(lane, state)

    def close(self) -> None:
        """Stop every worker and process, give back the RAM the buffer holds, leave the
        tuner, leaving it the tuned choice for this op's next stage. Idempotent."""
        if not self.engine.closed:
            self._remember()
        self.engine.close()
        self.tuner.remove(self.knob)

    @property
    def events(self) -> list:
        return self.knob.events


class StageIterator(OpIterator):
    """The ``OpIterator`` of a one-lane stage (see the module docstring).

    Args:
        inner: the input iterator (closed with this one).
        plan, ctx, pool_key: as ``Stage``.
        op: the op's name.
        transform: None (a buffer: elements pass unchanged) or the function of one
            element (with ``indexed``: ``transform(index, element)``).
        lane_input: what the lane reads, if not ``inner`` (a wrapper of it).
        error_index: the index an input failure is reported at (``engine.Lane``).
    """

    def __init__(self, inner: OpIterator, plan: Plan, ctx: Any, op: str,
                 transform: Callable | None = None, indexed: bool = False,
                 pool_key: Any = None, lane_input: OpIterator | None = None,
                 error_index: Callable[[int], int | None] | None = None):  # fmt: skip
        super().__init__([inner])
        self.inner, self.op_name = inner, op
        function = transform if plan.allow_process else None
        self.stage = stage = Stage(op, plan, ctx, function, pool_key)
        self._lane = Lane(lane_input or inner, op, transform, indexed, plan.deterministic,
                          plan.replayable, error_index)  # fmt: skip
        stage.engine.lanes.append(self._lane)
        self._finalizer: Any = weakref.finalize(self, Stage.close, stage)

    @property
    def knob(self) -> Knob:
        return self.stage.knob

    @property
    def meter(self) -> Meter:
        return self.stage.meter

    @property
    def tuner(self) -> Any:
        return self.stage.tuner

    @property
    def deterministic(self) -> bool:
        return self._lane.deterministic

    @property
    def executor(self) -> str:
        """The executor running the stage now: ``"inline"``, ``"thread"`` or ``"process"``."""
        return self.stage.engine.executor.name

    @property
    def start_method(self) -> str | None:
        """How the stage's worker processes started (None: none did); ``start_reason``
        says why (``processes.choose_start_method``)."""
        return self.stage.start_method()[0]

    @property
    def start_reason(self) -> str | None:
        return self.stage.start_method()[1]

    @property
    def process_refusal(self) -> str | None:
        """Why AUTOTUNE does not try worker processes for this stage's function, which
        would compute something else there (``fork_safety.parent_state``); None if not."""
        return self.stage.process_refusal

    def worker_pids(self) -> list[int]:
        """The pids of the stage's worker processes (empty without any)."""
        return self.stage.worker_pids()

    def next_chunk(self, n: int) -> list:
        return self.stage.next_from(self._lane, n)

    def index_base(self) -> tuple[int, int] | None:
        return self.inner.index_base()

    def identity_base(self) -> tuple[int, int] | None:
        # output k is input k (or group k) only in order (datapipe._identity)
        if not self.deterministic:
            return None
        from datapipe._identity import identity_base_of

        return identity_base_of(self.inner)

    def get_state(self) -> dict:
        return self.stage.engine.snapshot(self._lane)

    def set_state(self, state: dict) -> None:
        self.stage.restore(self._lane, state)

    def close(self) -> None:
        if self.closed:
            return
        with close_deadline():  # one deadline for this stage and the stages below it
            self.stage.close()
            super().close()

    # ---- statistics: the gauge protocol of datapipe.stats --------------------------------
    def stats_gauges(self) -> dict:
        """The policy's gauges (``policies.py``): buffer size and fill, workers, and their
        wall and CPU seconds where the stage computes something."""
        return self.stage.policy.gauges(self.stage.engine, self._lane)

    @property
    def autotune_events(self) -> list:
        return self.stage.events

    def label_worker_ranges(self, label: str) -> None:
        """Name the worker threads' torch profiler ranges (``stats.torch_ranges``)."""
        self.stage.engine.label = label
