"""AUTOTUNE: measure every parallel stage while the pipeline runs and move its knobs.

Where the model comes from
--------------------------
tf.data models a pipeline as a tree of nodes, each with a measured *processing time* per
element and, for asynchronous nodes, a parallelism or buffer-size parameter; it predicts
the pipeline's output latency from those (``tensorflow/core/framework/model.cc``: e.g.
``AsyncKnownRatio::OutputTimeLocked`` divides the self time by the parallelism and models
the buffer as a queue) and optimises the parameters by gradient descent or hill climbing
under a CPU budget (the number of schedulable cores) and a RAM budget (half of available
memory) — Murray et al., "tf.data: A Machine Learning Data Processing Framework",
PVLDB 14(12), 2021, §3.3.

What we keep, and what we change
--------------------------------
We keep the measurements (per stage: elements produced, wall time busy, thread CPU time,
time the consumer waited, bytes buffered), the two budgets with tf.data's names and
defaults, and hill climbing on the output rate. We change the predictor: in CPython a
thread's speed depends on whether its function holds the GIL, which no per-element time
tells in advance (a pure-Python function gets *slower* per element on more threads). So
the model only *proposes* moves and the measured rate decides them:

* A stage whose workers are busy (busy fraction >= 0.7, i.e. it is a bottleneck) proposes
  ``p -> max(p + 1, 1.5 p)`` (``2 p`` after a trial that scaled almost linearly; as the
  first step of threads that mostly wait, ``4 p``, or ``8 p`` if they use under 10% of a
  core), if its
  predicted CPU demand ``p' * cpu_time / wall_time * max_intra_op_parallelism`` (summed
  over stages) fits the CPU budget. Threads that sleep
  on I/O cost almost no CPU, so an I/O-latency map may get many threads on two cores.
* A trial runs for two measurement windows (after one that lets buffers refill) and is
  kept only if its output rate rose, over the median of the last three windows before it,
  by at least 25% of the ideal linear gain (and 8%); otherwise it is reverted and the stage waits
  ``2**(k+2)`` windows before trying again (``k`` grows with each failure). This is what keeps a
  GIL-bound function at 1–2 threads instead of the budget's maximum. (Threads that wait
  are judged faster: "The ramp" below.)
* A stage whose workers idle (busy fraction < 0.5; the consumer or the input limits it),
  or whose busy threads together use about one core (the GIL's signature), and every 64th
  window (~3 s) any stage, probes ``p -> p / 1.5``; it keeps the lower value if the rate
  stays within 5%: threads that bring no throughput are given back.
* Buffers (``prefetch(AUTOTUNE)``) double when their consumer waited on an empty buffer
  for more than 2% of a window (tf.data's prefetch autotuning) and the producer was held
  back by the buffer's size in that window (else more room cannot help), up to 1024.
* Every buffer reserves bytes from one ``RamBudget`` per pipeline before it is filled, so
  the bytes buffered never exceed ``Options.autotune.ram_budget`` (a stage with nothing
  outstanding may always compute one element, so a budget below one element still runs).

``Options.threading.max_intra_op_parallelism`` (threads a user function uses inside
itself) multiplies a worker's CPU demand in the budget. torch's and OpenCV's thread counts
are process-wide, so worker threads leave them alone (changing them would change the
training step's torch too); worker processes set both to it (default 1). Threads that
those pools or the GIL hold back get a trial of processes instead (step 2 below;
docs/architecture.md, "Intra-op threads", has the measurements).

Which executor (``num_parallel_calls=AUTOTUNE`` with no executor named)
-----------------------------------------------------------------------
No per-element time tells in advance whether a function holds the GIL, so the stage
measures each candidate in turn, on the live pipeline, and keeps the fastest:

1. **Inline** first: the consumer's thread computes each chunk when it needs it (no
   thread, no read-ahead; ``executors.Inline``), which measures the function's cost
   per element: its CPU time when the thread mostly computed (wall time would count the
   time other processes held the core), its wall time when it mostly waited
   (``_work``). Below ``INLINE_MAX_COST_S`` (5 µs) in two consecutive windows the stage
   stays inline: a chunk hand-off costs ~25-90 µs between threads and ~170 µs to a
   process here, and two threads around a 0.5 µs function ran at 0.90x inline (2 cores,
   load 3.0) — W1's ``map(x*2+1)`` is such a function. Inline costs the sequential map's
   price plus ~1.7 µs per call (4.9 vs 3.2 µs per 1-element call, 44 vs 45 µs per
   256-element call; load ~3). A cost over ``CLEAR_COST_FACTOR`` (10) times the limit
   leaves inline after one window, however few elements it held.
2. **Threads** next, at the CPU budget (higher for a function that waited: "The ramp"),
   for two windows (one, when they gained nothing: below ``THREADS_NO_GAIN``, 55%, of
   linear scaling). Kept (and hill-climbed as above) when they reach ``THREADS_SCALE_OK``
   (80%) of linear scaling over inline at the budget's thread count: numpy, Pillow, torch
   and I/O release the GIL and get there; and, if they computed (CPU time at least a
   quarter of their wall time), when they used at least that share of their cores
   (``_short_of_cores``: CPU seconds per second in their last window). Threads held back
   by the GIL or by intra-op threads competing with them (torch's, OpenCV's) fill fewer,
   whatever their rate over inline's, whose one window also holds the pipeline's start
   (the walkthrough's augmentation in ``map``: 225 el/s inline, 625 after it; two threads
   610 el/s on one core between them).
3. **Processes** are tried when threads stayed below either, the function costs at least
   ``PROCESS_MIN_COST_S`` (50 µs: ~170 µs per process round trip plus pickling must be
   amortised by chunks of ``pool.PROCESS_CHUNK_S`` = 20 ms of work), ``map`` /
   ``random_map`` can send their function (cloudpickle) and the sampled inputs and results
   of its last chunk (``engine.Engine.samples_cross``), the workers would fork
   (``processes.fork_is_chosen``) and the RAM budget has ``PROCESS_RAM_BYTES`` per
   process. An element that cannot cross later is computed in the parent and the stage
   goes back to threads for good (``stage.Stage.step_back``). They are kept if they beat
   the better of inline and threads by ``PROCESS_MIN_GAIN`` (10%) over three windows, or
   more while the rate still rises (``PROCESS_WARM_GAIN``, up to ``PROCESS_MAX_WINDOWS``:
   each new worker's first chunks pay for its start); otherwise the stage goes back to
   that one. A process stage never has more workers than the CPU budget.
   Threads that scale are
   compared with processes too when their CPU-bound results are small
   (``PROCESS_SMALL_OUTPUT_BYTES``, 64 KiB; kept at a 5% gain): a process sends such a
   result back for nothing and pays none of the GIL hand-offs around each C call.

   A function that inline showed CPU-bound (its thread's CPU time at least half its wall
   time), costing at least ``PROCESS_MIN_COST_S``, with results of at most
   ``PROCESS_SMALL_OUTPUT_BYTES`` tries processes *before* threads (``_processes_first``):
   threads would only be their reference, and threads of such a function that holds the
   GIL ran at half inline's rate (the walkthrough's augmentation: ~300 el/s on two threads,
   600 inline, 1,200 on two processes). They are kept at ``PROCESS_FIRST_KEEP`` (80%) of
   linear scaling over inline; short of it threads are tried next, and the best stays.
4. **A remembered choice** (``remembered.py``): a stage of an op whose previous stage
   settled on threads or processes starts there (the ``"resumed"`` phase) and is kept if
   its best window of at least ``RESUME_WINDOWS`` reaches ``RESUME_MIN_SHARE`` of the rate
   remembered (``outcome``: the median of the last ``REMEMBER_WINDOWS``), else the search
   starts again from inline; remembered threads short of their cores give processes a
   trial again.

``prefetch(AUTOTUNE)`` measures the same way, inline first: a thread can only hide the
smaller of its input's cost and the consumer's own work per element, so below
``PREFETCH_INLINE_MAX_COST_S`` (200 µs, about two hand-offs) for either it stays inline —
W1's batches (~70-100 µs each) feeding a loop that sums them. The choice is made once per
stage (per ``iter()``: a later one starts on the choice remembered); a stage that fell
back does not try again during the iteration.

The ramp (a latency-bound stage: a remote read of tens of milliseconds)
------------------------------------------------------------------------
Its threads are busy yet mostly wait (their CPU time under ``WAIT_CPU_FRACTION``, 25%,
of their busy time), so the model predicts linear scaling until the CPU budget is full,
and each window is short of elements (16 of 20-ms elements take 0.16 s at 2 threads).
Judged like any stage, such a stage took 2.1-2.2 s to reach 90% of its final rate
(``benchmarks/bench_s3_scale.py``): a window inline, two at 2 threads, three more before
the first step, and a cooldown after a step that gained less than its size asked for. So:

* Leaving inline, threads start where the first step of waiting threads would take them:
  ``WAIT_STEP_MAX`` (8x) the CPU budget's count when the inline window's thread used
  under ``WAIT_CPU_FRACTION_LOW`` (10%) of a core, ``WAIT_STEP`` (4x) under 25%, within
  the CPU budget's prediction and the thread limit (``_enter_thread``); their trial is
  judged on one window once they scale, and hill climbing starts from that window's rate.
* With threads named, the first step of waiting threads (the same 4x / 8x) comes after one
  window, not after the three a base rate needs: the gain it must show dwarfs the noise.
* A trial up of waiting threads whose first window rose by ``CLEAR_GAIN`` (70%) of the
  ideal gain is judged on that window.
* A trial up refused yet ``PARTIAL_GAIN`` (1.25x) faster than its base tries half way at
  once, against the same base (bisection), instead of going back and waiting a cooldown.

The budgets bound it as before: the CPU demand predicted from the measured CPU time per
thread (threads using 15% of a core each: ~15 on two cores), the thread limit
(``threading.private_threadpool_size`` or 64) and the RAM budget. GIL-bound and CPU-bound
functions use most of a core per thread and take none of these paths.

The tuner has no thread of its own: stage consumers call ``maybe_step`` whenever they ask
for data or wake from a wait, and one of them runs a step when a window has passed.

Its state is split three ways (docs/architecture.md, "The tuner"): what a stage's engine
and executors measure (``stage.Meter``), the knob the tuner turns (``stage.Knob``: value and
executor), and the tuner's own search state per stage (``_Search``), which nothing outside
this module reads. The executor search is one phase per executor (``PHASES``: an entry and
a judge), in the order of the stage's executors.
"""

from __future__ import annotations

import math
import os
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from datapipe import _structure as nest

WINDOW_S = 0.05  # shortest measurement window
MIN_WINDOW_ELEMENTS = 16
# A trial is judged on a window this many times WINDOW_S, against the median of the last
# BASE_WINDOWS windows at the value it started from.
TRIAL_WINDOWS = 2
BASE_WINDOWS = 3
# A periodic probe for fewer threads every this many windows (~3 s): conditions change.
PROBE_EVERY_WINDOWS = 64
DEFAULT_MAX_THREADS = 64  # per stage, when threading.private_threadpool_size is unset
# ---- threads that mostly wait (latency-bound: a remote read, a sleep; see "The ramp") ---
# Busy threads using under this share of a core wait: they scale until the CPU budget is
# full, so their first step up is large (WAIT_STEP_MAX under WAIT_CPU_FRACTION_LOW) ...
WAIT_CPU_FRACTION = 0.25
WAIT_CPU_FRACTION_LOW = 0.1
WAIT_STEP, WAIT_STEP_MAX = 4.0, 8.0
# ... and a trial up of theirs whose first window already rose by this share of the ideal
# gain is judged on that window (a step that must show 1.25x here shows 1.7x).
CLEAR_GAIN = 0.7
# Threads on trial are measured until each finished an element, for at most this long.
THREAD_WARMUP_S = 1.0
# A trial up refused yet this many times faster than its base tries half way at once.
PARTIAL_GAIN = 1.25
MAX_AUTOTUNE_BUFFER = 1024

# ---- the executor choice (see "Which executor" in the module docstring) ------------------
# Below this many seconds of work per element a map runs inline: no hand-off can pay.
INLINE_MAX_COST_S = 5e-6
# Below this a prefetch runs inline: the input's cost is of the order of a thread hand-off.
PREFETCH_INLINE_MAX_COST_S = 200e-6
# An inline stage whose elements cost this many times its limit leaves inline after one
# window, however few elements it held: no measuring noise (µs) can bring a cost that far
# above the limit (W2's batches of 64 JPEGs, ~70 ms each, spent 0.5 s of a 2 s run inline
# waiting for two windows of 16 elements).
CLEAR_COST_FACTOR = 10
# Worker processes are tried only for elements costing at least this (a process round trip
# plus pickling must be amortised) ...
PROCESS_MIN_COST_S = 50e-6
# ... and only when threads reached less than this share of linear scaling in the budget.
THREADS_SCALE_OK = 0.8
# ... and after one window already when they reached less than this share: no gain at all
# over inline (two threads of a GIL-bound function run at 0.9-1.0x one), so the second
# window of the trial (W6: 50 ms at half speed) would only confirm it.
THREADS_NO_GAIN = 0.55
# Processes are kept only if they beat the better of threads and inline by this factor.
PROCESS_MIN_GAIN = 1.1
# A process trial lasts past its three windows while the last one beat every earlier one
# by this factor (the workers are still starting), up to this many windows.
PROCESS_WARM_GAIN = 1.1
PROCESS_MAX_WINDOWS = 8
# Threads that scale are still compared with processes when the function is CPU-bound and
# its results are at most this many bytes: a process sends them back for nothing, and it
# pays none of the GIL hand-offs around each C call that threads pay (W4's JPEG function,
# a pixel out: 2 processes 1.07x 2 threads, 10 paired runs, where W2's 150-KB images made
# processes 0.89x). They are kept if they beat threads by PROCESS_MIN_GAIN_SMALL.
PROCESS_SMALL_OUTPUT_BYTES = 64 << 10
PROCESS_MIN_GAIN_SMALL = 1.05
# Such a function's processes, tried before threads (``_processes_first``), are kept without
# a thread trial at this share of linear scaling over inline: threads could beat them by at
# most 1/0.8 = 1.25x there, and such functions ran faster on processes (W4: 1.07x).
PROCESS_FIRST_KEEP = THREADS_SCALE_OK
# RAM set aside per worker process in the budget (its private pages: interpreter, imports).
PROCESS_RAM_BYTES = 256 << 20
# A stage started on its op's remembered choice (``remembered.py``) verifies it on its best
# window of at least RESUME_WINDOWS (more while a process stage's rate still rises): kept at
# RESUME_MIN_SHARE of the remembered rate, else the search starts again from inline. Loose,
# as this machine's load halves a rate for seconds at a time, and a search costs ~0.5 s.
RESUME_WINDOWS = 3
RESUME_MIN_SHARE = 0.5
# The windows whose median rate a stage's choice is remembered with.
REMEMBER_WINDOWS = 8


def cpu_count() -> int:
    """Cores available to this process (its affinity mask)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def available_memory() -> int:
    """Bytes of available memory (``MemAvailable``), or 8 GiB when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 << 30


def chunk_nbytes(items: list) -> int:
    """Bytes of a chunk of same-structure elements, from its first element (cheap)."""
    if not items:
        return 0
    first = items[0]
    if isinstance(first, (int, float, np.generic)):
        return 8 * len(items)
    return nest.element_nbytes(first) * len(items)


class RamBudget:
    """Bytes reserved by the buffers of one pipeline, against ``limit``.

    ``peak`` is the most bytes ever reserved at once (tests assert ``peak <= limit``).
    """

    def __init__(self, limit: int):
        self.limit = int(limit)
        self.used = 0
        self.peak = 0
        self._lock = threading.Lock()

    def free(self) -> int:
        return self.limit - self.used

    def try_reserve(self, nbytes: int, force: bool = False) -> bool:
        with self._lock:
            if not force and self.used + nbytes > self.limit:
                return False
            self.used += nbytes
            self.peak = max(self.peak, self.used)
            return True

    def release(self, nbytes: int) -> None:
        with self._lock:
            self.used -= nbytes

    def exchange(self, old: int, new: int) -> None:
        """Replace a reservation of ``old`` bytes by one of ``new`` (forced) atomically."""
        with self._lock:
            self.used += new - old
            self.peak = max(self.peak, self.used)


class _Search:
    """The tuner's private state for one stage: what it measured last, the trial under way,
    and where its executor search stands. Nothing outside this module reads it."""

    def __init__(self, knob: Any, meter: Any, executors: list[str] | None,
                 resumed: Any = None):  # fmt: skip
        self.knob, self.meter = knob, meter
        self.mark: tuple | None = None
        self.trial: tuple | None = None  # (old value, base rate, direction)
        self.settle = False  # discard the window right after a change (buffers refill)
        self.switches = knob.switches  # the knob's executor changes seen (re-measure after)
        self.cooldown = {"up": 0, "down": 0}
        self.failures = {"up": 0, "down": 0}
        self.windows = 0
        self.cpu_fraction = 1.0
        self.step_up = 1.5  # growth factor of the next trial up (2 after a near-linear gain)
        self.grew = False  # a trial up was kept (threads that wait: no more large steps)
        self.refused_up: int | None = None  # the last value a trial up did not earn
        self.recent: dict[int, list[float]] = {}  # value -> its last windows' rates
        self.rate = 0.0
        # judged trials: (direction, from, to, rate before, rate during, kept)
        self.trials: list[tuple] = []
        # the executor search: the executors it may try, in order, and the phase (the one
        # under measurement, or "done"); its measured rates and costs
        self.executors = list(executors or ())
        self.phase = self.executors[0] if self.executors else "done"
        # started on the op's remembered choice (``remembered.TunedChoice``): verified first
        self.resumed = resumed
        if resumed is not None and self.executors:
            self.phase = "resumed"
        self.window_rates: deque[float] = deque(maxlen=REMEMBER_WINDOWS)  # at this executor
        self.phase_rates: list[float] = []
        self.executor_rates: dict[str, float] = {}
        self.cost_s = 0.0  # busy seconds per element in the last window
        # inline: the consumer's own work per element in the last window (a prefetch can
        # hide at most the smaller of its input's cost and this)
        self.outside_mark = (0.0, 0.0)
        self.outside_cost_s = 0.0
        self.full_mark = 0  # the meter's ``full`` count at the last buffer step
        self.over = 0  # consecutive windows whose cost was over the inline limit
        self.inline_cost_s = 0.0
        self.process_max = knob.limit

    def counters(self) -> tuple:
        m = self.meter
        return (time.monotonic(), m.produced, m.busy_s, m.cpu_s, m.consumer_wait_s)

    def switch(self, kind: str, value: int, cap: int | None = None) -> bool:
        """Move the knob's executor (the search's own moves)."""
        if not self.knob.set_executor(kind, value, cap):
            return False
        self.switches = self.knob.switches
        self.remeasure()
        return True

    def remeasure(self) -> None:
        """After an executor change: the window until the next step is not measured (the
        mark is taken then: workers start, buffers refill), the ones after it are."""
        self.phase_rates = []
        self.window_rates.clear()
        self.settle, self.trial, self.mark = False, None, None


def _small_cpu_bound(s: _Search) -> bool:
    """The stage's threads computed (not waited) and its results are small: processes may
    beat threads that scale (see ``PROCESS_SMALL_OUTPUT_BYTES``)."""
    out = s.meter.out_bytes
    return out is not None and out <= PROCESS_SMALL_OUTPUT_BYTES and s.cpu_fraction >= 0.5


class Autotuner:
    """The tuner of one pipeline (one ``iter()``): its stages' knobs and meters (``stage.Knob``,
    ``stage.Meter``), the budgets, and a search state per stage that it keeps to itself."""

    def __init__(self, enabled: bool, cpu_budget: int, ram_budget: int):
        self.enabled, self.cpu_budget = enabled, int(cpu_budget)
        self.ram = RamBudget(ram_budget)
        self._searches: dict[int, _Search] = {}  # id(knob) -> its search
        self._lock = threading.Lock()
        self._last = time.monotonic()

    @property
    def knobs(self) -> list:
        """The knobs of the stages running now."""
        return [s.knob for s in list(self._searches.values())]

    def add(self, knob: Any, meter: Any, executors: list[str] | None = None,
            resumed: Any = None) -> None:  # fmt: skip
        """Tune ``knob`` from ``meter``; with ``executors`` (in the order to try: inline,
        threads, processes) the search also chooses the executor (``knob.executor`` is the
        first). ``resumed``: the op's remembered choice (``remembered.TunedChoice``) that
        ``knob`` already runs on; the search verifies it instead of starting inline."""
        with self._lock:
            if id(knob) not in self._searches:
                self._searches[id(knob)] = _Search(knob, meter, executors, resumed)

    def begin(self, knob: Any) -> None:
        """The stage's consumer asked for its first element: its first window starts now
        (not at the next step, a window later: AUTOTUNE's inline phase lasted 0.1 s)."""
        s = self._searches.get(id(knob))
        if s is not None and s.mark is None:
            s.mark = s.counters()

    def remove(self, knob: Any) -> None:
        with self._lock:
            self._searches.pop(id(knob), None)

    def end_search(self, knob: Any) -> None:
        """The executor stays as it is now (the stage stepped back, or a caller switches it
        itself): no more executor moves for ``knob``; its value is still tuned."""
        s = self._searches.get(id(knob))
        if s is not None:
            s.phase, s.executors = "done", []

    def outcome(self, knob: Any) -> tuple[str, int, float] | None:
        """(executor, value, rate) that the search of ``knob`` settled on: the value
        measured last (a trial's starting value while one runs) and the median rate of its
        last windows there; None while the executor search has not finished."""
        s = self._searches.get(id(knob))
        if s is None or s.phase != "done":
            return None
        rates = list(s.window_rates)
        rate = statistics.median(rates) if rates else s.executor_rates.get(knob.executor, 0.0)
        if rate <= 0:
            return None
        value = s.trial[0] if s.trial is not None else knob.value
        return knob.executor, int(value), float(rate)

    def trials(self, knob: Any) -> list[tuple]:
        """The judged trials of ``knob`` (direction, from, to, rate before, rate during,
        kept): why the tuner chose what it chose."""
        s = self._searches.get(id(knob))
        return [] if s is None else list(s.trials)

    def in_trial(self, knob: Any) -> bool:
        s = self._searches.get(id(knob))
        return s is not None and s.trial is not None

    def maybe_step(self) -> None:
        """Run one tuning step if a window has passed and no other thread is running one."""
        if not self.enabled or time.monotonic() - self._last < WINDOW_S:
            return
        if not self._lock.acquire(blocking=False):
            return
        try:
            self._last = time.monotonic()
            for s in list(self._searches.values()):
                if s.knob.autotuned:
                    self._step_stage(s)
        finally:
            self._lock.release()

    # ---- one stage ---------------------------------------------------------------------
    def _step_stage(self, s: _Search) -> None:
        k = s.knob
        if s.switches != k.switches:  # someone else moved the executor: measure anew
            s.switches = k.switches
            s.remeasure()
        now = s.counters()
        if s.mark is None:
            s.mark = now
            return
        dt, dn, dbusy, dcpu, dwait = (a - b for a, b in zip(now, s.mark))
        if dn < MIN_WINDOW_ELEMENTS and dt < 4 * WINDOW_S and not _clearly_costly(s, dn, dbusy):
            return  # too few elements to judge; keep measuring
        if _warming_up(s, dn, dt):
            return
        rate = dn / dt if dt > 0 else 0.0
        if s.trial is not None and not s.settle and dt < TRIAL_WINDOWS * WINDOW_S:
            if not _clear_gain(s, rate, dcpu, dbusy):
                return  # a trial is judged on a longer window: noise must not win
        s.mark = now
        if s.settle:
            s.settle = False
            return
        s.rate = rate
        s.window_rates.append(rate)
        if dbusy > 0:
            s.cpu_fraction = min(1.0, dcpu / dbusy)
        m = s.meter
        if dn:
            s.cost_s = _work(dbusy, dcpu) / dn
            out = (m.outside_s - s.outside_mark[0], m.outside_cpu_s - s.outside_mark[1])
            s.outside_cost_s = _work(*out) / dn
        s.outside_mark = (m.outside_s, m.outside_cpu_s)
        if s.phase != "done" and self._step_executor(s, rate):
            return
        if k.executor == "inline":
            return
        if k.kind == "buffer":
            self._step_buffer(s, dt, dwait)
            return
        busy_fraction = dbusy / (k.value * dt) if dt > 0 else 0.0
        if s.trial is not None:
            self._judge(s, rate)
            return
        self._propose(s, rate, busy_fraction)

    def _judge(self, s: _Search, rate: float) -> None:
        assert s.trial is not None  # a trial is running
        old, base, direction = s.trial
        s.trial = None
        new = s.knob.value
        if direction == "up":
            ideal = new / old
            keep = rate >= base * max(1.08, 1 + 0.25 * (ideal - 1))
        else:
            keep = rate >= 0.95 * base
        if len(s.trials) < 1000:
            s.trials.append((direction, old, new, round(base, 1), round(rate, 1), keep))
        if direction == "up":
            s.refused_up = None if keep and new >= (s.refused_up or 0) else s.refused_up
            if not keep:
                s.refused_up = new
        s.recent[new] = [rate] * TRIAL_WINDOWS  # samples at the tried value, whichever wins
        if keep:
            s.failures[direction] = 0
            if direction == "up":  # scaled almost linearly: take bigger steps
                s.step_up = 2.0 if rate >= base * (1 + CLEAR_GAIN * (ideal - 1)) else 1.5
                s.grew = True
            return
        mid = max(old + 1, (old + new) // 2)
        if direction == "up" and rate >= PARTIAL_GAIN * base and mid < new:
            # It gained, less than its size asked for: the stage saturates in between. Half
            # way is tried at once against the same base (going back first and waiting out
            # a cooldown kept a stage of 20-ms reads that saturate at 4 threads at 2 for
            # 1.4 s after its 2 -> 16 step doubled the rate).
            s.trial, s.settle = (old, base, "up"), True
            s.knob.set_value(mid)
            return
        s.knob.set_value(old)
        s.failures[direction] = min(s.failures[direction] + 1, 6)
        s.cooldown[direction] = 2 ** (s.failures[direction] + 2)
        s.mark = None  # re-measure at the restored value

    def _propose(self, s: _Search, rate: float, busy_fraction: float) -> None:
        s.windows += 1
        for d in ("up", "down"):
            s.cooldown[d] = max(0, s.cooldown[d] - 1)
        k = s.knob
        p = k.value
        # A trial is judged against the median of the last few windows at this value, not
        # the last one alone: with another process on the cores, single 50-ms windows of
        # 40 sleeping threads swung between 5,500 and 16,000 el/s (W4's I/O case: a lucky
        # base refused every step up and the stage stayed at 44% of the best setting).
        recent = s.recent.setdefault(p, [])
        recent.append(rate)
        del recent[:-BASE_WINDOWS]
        # Threads that mostly wait scale linearly until the CPU budget is full (the
        # model's prediction), so their first step is already large, and it is taken after
        # one window: the 4-8x gain it must show dwarfs a window's noise, and the warm-up
        # of 3 windows of a stage of 20-ms elements (16 elements each: 0.16-0.2 s at 2
        # threads) held it at 2 threads for 0.5 s. Later steps are at most 2x: past
        # saturation a 4x step cannot show the 1.75x its size asks for (W4's I/O: 16 ->
        # 64 threads gained 1.66x and was refused, the stage then searched below 64 for a
        # second of a 5-s run).
        wait = _wait_step(s.cpu_fraction) if not s.grew else None
        if len(recent) < (1 if wait else BASE_WINDOWS):  # also the warm-up: chunk sizes
            return  # are still settling
        rate = statistics.median(recent)
        if busy_fraction >= 0.7 and p < k.max_value and s.cooldown["up"] == 0:
            step = wait or s.step_up
            target = min(k.max_value, max(p + 1, math.ceil(step * p)))
            if s.refused_up is not None and p < s.refused_up:
                # Past a saturation point a large step cannot show the gain its size asks
                # for: aim half way to the refused value (bisection), not at it again.
                target = min(target, max(p + 1, (p + s.refused_up) // 2))
            target = self._fit_cpu(s, target)
            if target > p:
                s.trial, s.settle = (p, rate, "up"), True
                k.set_value(target)
                return
        idle = busy_fraction < 0.5
        # Threads busy, yet all of them together use about one core: the GIL signature (or
        # threads queueing on one lock) -- fewer threads may do as well.
        one_core = 2 < p <= 16 and 0.7 <= p * s.cpu_fraction * busy_fraction <= 1.3
        periodic = s.windows % PROBE_EVERY_WINDOWS == 0
        if p > 1 and s.cooldown["down"] == 0 and (idle or one_core or periodic):
            s.trial, s.settle = (p, rate, "down"), True
            k.set_value(max(1, math.floor(p / 1.5)))

    # ---- the executor search: one phase per executor, in the order of ``_Search.executors``
    def _step_executor(self, s: _Search, rate: float) -> bool:
        """One window of the executor search; True while it holds the knob (no hill
        climbing). The phase of the executor running judges its windows (``PHASES``):
        ``"wait"`` (more windows), ``"keep"`` (done: it stays), ``"next"`` (try the next
        executor whose entry says it is worth a trial; else the best measured), ``"back"``
        (done: the best of the others measured)."""
        phase = PHASES[s.phase]
        if s.knob.executor == "process" and rate == 0.0:
            return True  # the worker processes are still starting (spawn takes seconds)
        s.phase_rates.append(rate)
        verdict = phase.judge(self, s)
        if verdict == "wait":
            return True
        if verdict == "search":  # the remembered choice fell short: search from inline
            s.resumed, s.phase = None, s.executors[0]
            if not s.switch(s.phase, s.knob.value):
                s.phase = "done"
            return True
        current = s.knob.executor if s.phase == "resumed" else s.phase
        s.phase = "done"
        if verdict == "keep" or (verdict == "next" and self._try_next(s, current)):
            return True
        others = {k: r for k, r in s.executor_rates.items() if verdict != "back" or k != current}
        best = max(others, key=others.__getitem__, default=current)
        if best != current:
            s.switch(best, s.knob.value)
        return True

    def _try_next(self, s: _Search, current: str) -> bool:
        """Start a trial of the first executor after ``current`` whose entry says it may pay."""
        order = s.executors
        for kind in order[order.index(current) + 1 :]:
            entry = PHASES[kind].enter(self, s)
            if entry is not None and s.switch(kind, *entry):
                # a buffer only chooses inline or a thread: its thread is not on trial
                s.phase = "done" if s.knob.kind == "buffer" else kind
                return True
        return False

    def _fit_cpu(self, s: _Search, target: int) -> int:
        """Largest value <= target whose predicted CPU demand fits the budget."""
        others = sum(
            o.knob.value * o.cpu_fraction * o.knob.intra_op
            for o in list(self._searches.values())
            if o is not s and o.knob.kind == "parallelism" and o.knob.executor != "inline"
        )
        per_thread = max(s.cpu_fraction, 0.02) * s.knob.intra_op
        room = (self.cpu_budget + 0.25 - others) / per_thread
        return max(s.knob.value, min(target, int(room)))

    def _step_buffer(self, s: _Search, dt: float, dwait: float) -> None:
        # A bigger buffer helps only if the producer was held back by the buffer's size at
        # some point (bursts to absorb); a producer that is simply slower never fills it.
        m, k = s.meter, s.knob
        was_full, s.full_mark = m.full > s.full_mark, m.full
        if dt > 0 and dwait / dt > 0.02 and was_full and k.value < k.max_value:
            k.set_value(min(k.max_value, 2 * k.value))


# ---- the phases: each executor's entry (the knob's value and cap to start its trial at, or
# None when a trial cannot pay) and judge (a verdict on its measured windows). Adding an
# executor is one class in executors.py plus one phase here, in the search's order.
def _enter_inline(t: Autotuner, s: _Search) -> tuple[int, int | None] | None:
    return s.knob.value, None


def _judge_inline(t: Autotuner, s: _Search) -> str:
    """Measure the function's cost per element; leave inline when it is over the limit in
    two consecutive windows (after one, when it is far over it)."""
    k = s.knob
    s.executor_rates["inline"] = max(s.phase_rates)
    s.inline_cost_s = s.cost_s  # the function's own cost (threads add GIL waits)
    limit = _inline_limit(k)
    if k.kind == "buffer":  # a thread can overlap the input with the consumer's
        cost = min(s.cost_s, s.outside_cost_s)  # work: at most the smaller one
    else:
        cost = s.cost_s
    s.over = s.over + 1 if cost >= limit else 0
    clear = cost >= CLEAR_COST_FACTOR * limit
    if not clear and (len(s.phase_rates) < 2 or s.over < 2):
        return "wait"  # cheap: stays inline (re-measured every window)
    if _processes_first(s):
        s.executors = [x for x in s.executors if x != "thread"] + ["thread"]
    return "next"


def _processes_first(s: _Search) -> bool:
    """A CPU-bound function with small results costing at least ``PROCESS_MIN_COST_S``:
    processes are tried before threads. They would be compared with threads anyway
    (``_small_cpu_bound``), and threads of a function that holds the GIL run at a fraction
    of inline: the walkthrough's augmentation ran ~300 el/s on two threads (each thread's
    CPU time twice inline's per element, in GIL hand-offs), 600 inline and 1,200 on two
    processes; its first epoch spent 0.15-0.25 s of ~1.5 s on that trial."""
    order = s.executors
    return (
        "process" in order
        and "thread" in order
        and s.cost_s >= PROCESS_MIN_COST_S
        and _small_cpu_bound(s)
    )


def _enter_thread(t: Autotuner, s: _Search) -> tuple[int, int | None] | None:
    """Threads at the CPU budget; a function that mostly waited inline (its thread used
    under ``WAIT_CPU_FRACTION`` of a core: a remote read) starts where the first step up of
    waiting threads would take it, ``WAIT_STEP`` or ``WAIT_STEP_MAX`` times that, within
    the CPU budget (``_fit_cpu``) and the thread limit."""
    k = s.knob
    if k.kind == "buffer":
        return k.value, None
    start = min(k.limit, max(2, t.cpu_budget))
    step = _wait_step(s.cpu_fraction)
    if step is not None:
        start = t._fit_cpu(s, min(k.limit, math.ceil(step * start)))
    return start, None


def _judge_thread(t: Autotuner, s: _Search) -> str:
    """Threads for two windows (one, when they gained nothing, or when they mostly wait
    and already scaled): kept when they reach ``THREADS_SCALE_OK`` of linear scaling over
    inline at the CPU budget's thread count (what processes could reach at best; numpy,
    Pillow, torch, I/O get there) and are not CPU-bound with small results; else the next
    executor may be tried. Kept threads hill-climb from the windows measured here."""
    k = s.knob
    rate = s.executor_rates["thread"] = max(s.phase_rates)
    inline = s.executor_rates.get("inline", 0.0)
    ref = min(k.value, max(2, t.cpu_budget)) * inline
    scaled = rate >= THREADS_SCALE_OK * ref
    clear = scaled and s.cpu_fraction < WAIT_CPU_FRACTION
    if len(s.phase_rates) < 2 and not clear and rate >= THREADS_NO_GAIN * ref:
        return "wait"  # a trial is judged on its best window of two
    if not scaled or _small_cpu_bound(s) or _short_of_cores(t, s):
        return "next"  # short of its cores: the GIL or intra-op pools held it (processes)
    s.recent[k.value] = [statistics.median(s.phase_rates)] * BASE_WINDOWS
    if k.value * inline > ref:  # started past the budget (waiting threads): their large
        s.grew = True  # first step is taken; later ones as after a trial up
        s.step_up = 2.0 if rate >= CLEAR_GAIN * k.value * inline else 1.5
    return "keep"


def _short_of_cores(t: Autotuner, s: _Search) -> bool:
    """Busy threads that computed (not waited) and together used less than
    ``THREADS_SCALE_OK`` of the cores they run on: the GIL, or intra-op threads (torch's,
    OpenCV's) competing with them, held them back, so processes (one intra-op thread
    each) may do better. Their rate against inline's does not tell: inline's one window
    includes the pipeline's start (the walkthrough's augmentation: 225 el/s inline, 625
    after it; two threads 610 el/s, 1.0 core)."""
    cores = s.rate * s.cost_s  # CPU seconds per second in the last window
    return s.cpu_fraction >= 0.25 and cores < THREADS_SCALE_OK * min(s.knob.value, t.cpu_budget)


def _enter_process(t: Autotuner, s: _Search) -> tuple[int, int | None] | None:
    """Processes pay for work of at least ``PROCESS_MIN_COST_S`` per element, with
    ``PROCESS_RAM_BYTES`` per process free in the RAM budget; at most one per core."""
    room = t.ram.free() >= max(1, t.cpu_budget) * PROCESS_RAM_BYTES
    if s.inline_cost_s < PROCESS_MIN_COST_S or not room:
        return None
    s.process_max = max_processes(t)
    return s.process_max, s.process_max


def _judge_process(t: Autotuner, s: _Search) -> str:
    """Processes for three windows, more while their rate still rises (``_still_rising``):
    kept if they beat the better of inline and threads by ``PROCESS_MIN_GAIN``
    (``PROCESS_MIN_GAIN_SMALL`` for small CPU-bound results)."""
    if len(s.phase_rates) < 3 or _still_rising(s.phase_rates):
        return "wait"
    rate = s.executor_rates["process"] = max(s.phase_rates)
    if "thread" not in s.executor_rates and "thread" in s.executors:  # tried before threads
        linear = s.process_max * s.executor_rates.get("inline", 0.0)
        return "keep" if rate >= PROCESS_FIRST_KEEP * linear else "next"
    others = [v for kind, v in s.executor_rates.items() if kind != "process"]
    gain = PROCESS_MIN_GAIN_SMALL if _small_cpu_bound(s) else PROCESS_MIN_GAIN
    return "keep" if rate >= gain * max(others, default=0.0) else "back"


def _still_rising(rates: list[float]) -> bool:
    """A process trial's rate still rising: its last window beat every earlier one by
    ``PROCESS_WARM_GAIN``, within ``PROCESS_MAX_WINDOWS``. Each worker's first chunks pay
    for its start (the function unpickled, torch's first calls in a new process): the
    walkthrough's augmentation ran 198, 271, 597 el/s in its first three windows, and
    the trial's best, 597, lost to threads' 635; processes ran at ~1.6x those threads."""
    if len(rates) >= PROCESS_MAX_WINDOWS:
        return False
    return rates[-1] >= PROCESS_WARM_GAIN * max(rates[:-1])


def _enter_resumed(t: Autotuner, s: _Search) -> tuple[int, int | None] | None:
    return None  # the phase a stage starts in; never entered from another


def _judge_resumed(t: Autotuner, s: _Search) -> str:
    """The executor and value the op's previous stage settled on (``remembered.py``), on
    its best of ``RESUME_WINDOWS`` windows (more while processes still warm up): kept at
    ``RESUME_MIN_SHARE`` of the rate remembered, else ``"search"``: from inline again."""
    k, choice = s.knob, s.resumed
    if len(s.phase_rates) < RESUME_WINDOWS:
        return "wait"
    if k.executor == "process" and _still_rising(s.phase_rates):
        return "wait"
    best = max(s.phase_rates)
    if choice is None or best < RESUME_MIN_SHARE * choice.rate:
        return "search"
    s.executor_rates[k.executor] = best
    s.recent[k.value] = [statistics.median(s.phase_rates)] * BASE_WINDOWS  # hill climbing
    if k.executor == "thread" and (_short_of_cores(t, s) or _small_cpu_bound(s)):
        # Threads that the thread phase would not keep (a process trial lost to them by a
        # noisy margin, on a loaded machine): processes get their trial again, not the
        # whole search. Their cost per element stands in for inline's (it includes the
        # GIL's waits: at least the function's own).
        s.inline_cost_s = s.cost_s
        return "next"
    return "keep"


class _Phase(NamedTuple):
    enter: Callable[[Autotuner, _Search], tuple[int, int | None] | None]
    judge: Callable[[Autotuner, _Search], str]


PHASES: dict[str, _Phase] = {
    "inline": _Phase(_enter_inline, _judge_inline),
    "thread": _Phase(_enter_thread, _judge_thread),
    "process": _Phase(_enter_process, _judge_process),
    "resumed": _Phase(_enter_resumed, _judge_resumed),  # not an executor: a stage's start
}


def _wait_step(cpu_fraction: float) -> float | None:
    """The first step up of threads that each use ``cpu_fraction`` of a core while busy:
    ``WAIT_STEP_MAX`` or ``WAIT_STEP`` if they mostly wait, else None."""
    if cpu_fraction < WAIT_CPU_FRACTION_LOW:
        return WAIT_STEP_MAX
    return WAIT_STEP if cpu_fraction < WAIT_CPU_FRACTION else None


def _warming_up(s: _Search, dn: int, dt: float) -> bool:
    """Threads on trial that have not finished one element each (for at most
    ``THREAD_WARMUP_S``): the window is their start, not their rate. 16 threads of 20-ms
    remote reads (s3fs on moto) delivered nothing for 0.4 s of their first windows at load 9,
    were judged not to scale, and the stage went to 2 processes (29 obj/s, threads ~90)."""
    k = s.knob
    on_trial = s.phase == "thread" or (s.phase == "resumed" and k.executor == "thread")
    return on_trial and k.kind == "parallelism" and dn < k.value and dt < THREAD_WARMUP_S


def _clear_gain(s: _Search, rate: float, dcpu: float, dbusy: float) -> bool:
    """A trial up of threads that wait (``dcpu / dbusy`` in this window) whose rate already
    rose by ``CLEAR_GAIN`` of the ideal gain: judged now, not after a second window."""
    if s.trial is None or s.trial[2] != "up" or dbusy <= 0 or dcpu >= WAIT_CPU_FRACTION * dbusy:
        return False
    old, base, _ = s.trial
    return rate >= base * (1 + CLEAR_GAIN * (s.knob.value / old - 1))


def _inline_limit(k: Any) -> float:
    """The cost per element under which the stage (its knob ``k``) stays inline."""
    return PREFETCH_INLINE_MAX_COST_S if k.kind == "buffer" else INLINE_MAX_COST_S


def _clearly_costly(s: _Search, dn: int, dbusy: float) -> bool:
    """An inline window of few elements may be judged: each cost far above the limit."""
    limit = CLEAR_COST_FACTOR * _inline_limit(s.knob)
    return s.phase == "inline" and dn > 0 and dbusy / dn >= limit


def _work(wall: float, cpu: float) -> float:
    """Seconds of work in ``wall`` seconds of one thread that used ``cpu`` seconds of CPU:
    the CPU time when the thread mostly computed (its wall time also counts the time other
    processes held the core: a loaded machine), the wall time when it mostly waited (I/O,
    sleeps, torch's intra-op threads)."""
    return cpu if cpu >= 0.25 * wall else wall


def get_tuner(ctx: Any) -> Autotuner:
    """The pipeline's tuner, created on first use from ``ctx.options.autotune``."""
    tuner = ctx.tuner
    if tuner is None:
        opts = ctx.options.autotune
        enabled = True if opts.enabled is None else bool(opts.enabled)
        cpu = opts.cpu_budget if opts.cpu_budget else cpu_count()
        ram = opts.ram_budget if opts.ram_budget else available_memory() // 2
        tuner = Autotuner(enabled, cpu, ram)
        ctx.tuner = tuner
    return tuner


def initial_parallelism(ctx: Any, tuner: Autotuner) -> int:
    """Where AUTOTUNE starts: tf.data's ``GetAutotuneDefaultParallelism``, the smaller of
    16 and the cores (here: the CPU budget), capped by ``max_threads``."""
    return max(1, min(16, tuner.cpu_budget, max_threads(ctx)))


def max_threads(ctx: Any) -> int:
    """Most threads one stage may use: ``threading.private_threadpool_size`` or 64."""
    n = ctx.options.threading.private_threadpool_size
    return int(n) if n else DEFAULT_MAX_THREADS


def max_processes(tuner: Autotuner) -> int:
    """Most worker processes one stage may use: the CPU budget (each one is CPU-bound)."""
    return max(1, tuner.cpu_budget)


def intra_op(ctx: Any) -> int:
    n = ctx.options.threading.max_intra_op_parallelism
    return int(n) if n else 1
