"""Where a pipeline may compute ahead of its consumer, decided in one place.

Two facts about a graph decide whether elements may be computed before the consumer asks
for them:

* a *buffering* op (``prefetch``, a parallel ``map`` / ``random_map`` / ``batch`` /
  ``interleave``) computes ahead by design: the user asked for its buffer, or AUTOTUNE
  sized it;
* a source whose class sets ``_no_read_ahead`` (``from_generator``: its generator may wait
  for the consumer, e.g. on a queue the training loop fills) must never be asked for an
  element before the consumer needs it, unless a buffering op sits between it and the
  consumer.

``read_ahead_allowed(ds)`` walks the graph from the output and answers whether the outer
iterator may take more than one element per call (see ``datapipe._iterator.Iterator``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def is_buffering(node: Any) -> bool:
    """Whether ``node`` computes ahead of its consumer on its own (a buffer or workers)."""
    calls = getattr(node, "_num_parallel_calls", None)
    if calls not in (None, 1):
        return True
    if getattr(node, "_name", None) in ("prefetch", "prefetch_to_device"):
        return getattr(node, "_buffer_size", 0) != 0
    return False


def read_ahead_allowed(ds: Any) -> bool:
    """False when a source that must not be read ahead (``_no_read_ahead``) is reachable
    from ``ds`` without passing a buffering op."""
    stack, seen = [ds], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if getattr(node, "_no_read_ahead", False):
            return False
        if not is_buffering(node):
            stack.extend(getattr(node, "_inputs", ()))
    return True


# ---- sequential or parallel, and how: the one decision every parallel-capable op asks for --
@dataclass
class Plan:
    """How a stage runs.

    Attributes:
        value: the knob's starting value (worker count; elements buffered for prefetch).
        max_value: the most the tuner may set it to.
        autotuned: AUTOTUNE moves the knob (and, for ``executor="auto"``, the executor).
        deterministic: deliver in input order (``Options.deterministic`` unless the op says).
        executor: ``"thread"``, ``"process"`` or ``"auto"`` (AUTOTUNE picks by measurement:
            inline, threads or, where ``allow_process``, processes).
        replayable: the input's order is reproducible (see ``replay.replayable``).
        allow_process: AUTOTUNE may choose worker processes (``map`` / ``random_map``).
    """

    value: int
    max_value: int
    autotuned: bool
    deterministic: bool
    executor: str
    replayable: bool = True
    allow_process: bool = True


EXECUTORS = ("thread", "process")


def validate_executor(op: str, executor: str | None) -> str | None:
    if executor is not None and executor not in EXECUTORS:
        raise ValueError(f"{op}: executor must be one of {EXECUTORS} or None, got {executor!r}")
    return executor


def make_plan(
    ctx: Any,
    num_parallel_calls: int,
    deterministic: bool | None,
    executor: str | None = None,
    replayable: bool = True,
) -> Plan:
    """The plan of a worker stage asked for ``num_parallel_calls`` (an int or AUTOTUNE)."""
    from datapipe.dataset import AUTOTUNE
    from datapipe.parallel import autotune

    tuner = autotune.get_tuner(ctx)
    cap = autotune.max_threads(ctx)
    auto = num_parallel_calls == AUTOTUNE and tuner.enabled
    det = ctx.deterministic if deterministic is None else bool(deterministic)
    kind = executor or ("auto" if auto else "thread")
    if kind == "process" and _in_daemon():
        import warnings

        warnings.warn(
            "executor='process' inside a daemonic process (e.g. a torch DataLoader worker, "
            "which may not start processes): running on threads instead; use process "
            "workers instead of DataLoader workers to use more cores",
            RuntimeWarning,
            stacklevel=2,
        )
        kind = "thread"
    if kind == "process":
        cap = min(cap, autotune.max_processes(tuner))
    start = autotune.initial_parallelism(ctx, tuner) if auto else int(num_parallel_calls)
    if num_parallel_calls == AUTOTUNE and not tuner.enabled:
        start = autotune.initial_parallelism(ctx, tuner)
    return Plan(max(1, min(start, cap)), cap, auto, det, kind, replayable)


def decide(node: Any, ctx: Any) -> Plan | None:
    """Whether ``node`` (``map``, ``random_map``, ``batch``, ``interleave``, ``prefetch``)
    runs sequentially (None) or as a parallel stage, and how (its ``Plan``).

    Sequential: ``num_parallel_calls`` None or 1 (unless ``executor="process"`` asks for a
    worker process), ``prefetch(0)``. Otherwise the node's own arguments decide, then
    ``Options.threading.executor`` (the executor of maps that name none).
    ``prefetch_to_device`` is always a stage (its ``buffer_size`` is at least 1).
    """
    from datapipe.dataset import AUTOTUNE
    from datapipe.parallel import autotune

    inputs = getattr(node, "_inputs", ())
    ok = replayable(inputs[0], ctx) if inputs else True
    if getattr(node, "_name", None) == "prefetch_to_device":
        size = node._buffer_size
        auto = size == AUTOTUNE and autotune.get_tuner(ctx).enabled
        start = DEVICE_AUTOTUNE_START if size == AUTOTUNE else int(size)
        cap = MAX_DEVICE_BUFFER if size == AUTOTUNE else start
        thread_only = ctx.options.threading.executor is not None
        return Plan(start, cap, auto, True, "auto" if auto and not thread_only else "thread", ok)
    if getattr(node, "_name", None) == "prefetch" and hasattr(node, "_buffer_size"):
        size = node._buffer_size
        if size == 0:
            return None
        tuner = autotune.get_tuner(ctx)
        auto = size == AUTOTUNE and tuner.enabled
        start = PREFETCH_AUTOTUNE_START if size == AUTOTUNE else int(size)
        cap = autotune.MAX_AUTOTUNE_BUFFER if size == AUTOTUNE else start
        thread_only = ctx.options.threading.executor is not None
        return Plan(start, cap, auto, True, "auto" if auto and not thread_only else "thread", ok)
    calls = getattr(node, "_num_parallel_calls", None)
    maps = hasattr(node, "_executor")  # map, random_map: their function may go to processes
    executor = getattr(node, "_executor", None) or ctx.options.threading.executor
    if calls is None or (calls == 1 and executor != "process"):
        return None
    if not maps and executor == "process":
        executor = "thread"  # batch, interleave: threads (their work is not a function)
    plan = make_plan(ctx, calls, getattr(node, "_deterministic", None), executor, ok)
    # A daemonic process (a DataLoader worker) may not start processes of its own.
    plan.allow_process = maps and executor != "thread" and not _in_daemon()
    if not maps and plan.executor == "auto" and getattr(node, "_name", "") == "interleave":
        plan.executor = "thread"  # its lanes are filled by threads only
    return plan


def _in_daemon() -> bool:
    import multiprocessing

    return bool(multiprocessing.current_process().daemon)


def replayable(ds: Any, ctx: Any) -> bool:
    from datapipe.parallel.replay import replayable as check

    return check(ds, ctx)


PREFETCH_AUTOTUNE_START = 4
# prefetch_to_device(AUTOTUNE): elements in flight to the device at first (double
# buffering), and at most (each one holds a batch of device memory).
DEVICE_AUTOTUNE_START = 2
MAX_DEVICE_BUFFER = 16
