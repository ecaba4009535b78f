"""Sequential or parallel, and how: the one decision every parallel-capable op asks for,
made from its ``StageRequest`` (``request.py``) and the pipeline's options.

``plan_stage(request, ctx)`` answers None (run sequentially) or a ``Plan``: the knob's
start and most, whether AUTOTUNE moves it, the order, the executor (``"thread"``,
``"process"``, or ``"auto"``: AUTOTUNE measures inline, threads and, where allowed,
processes) and whether processes may be tried. It reads the request and the options and
nothing else: no op's private attributes, no op names.

``read_ahead_allowed(ds)`` answers whether the outer iterator may take more than one
element per call: not when a source whose class sets ``no_read_ahead`` (``from_generator``:
its generator may wait for the consumer, e.g. on a queue the training loop fills) is
reachable from the output without passing a stage that computes ahead by design (the user
asked for its buffer or its workers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from datapipe.parallel.request import StageRequest


def is_buffering(node: Any) -> bool:
    """Whether ``node`` computes ahead of its consumer on its own (a buffer or workers)."""
    req = node.stage_request
    return req is not None and req.runs_parallel()


def read_ahead_allowed(ds: Any) -> bool:
    """False when a source that must not be read ahead (``no_read_ahead``) is reachable
    from ``ds`` without passing a buffering op."""
    stack, seen = [ds], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.no_read_ahead:
            return False
        if not is_buffering(node):
            stack.extend(node._inputs)
    return True


@dataclass
class Plan:
    """How a stage runs.

    Attributes:
        value: the knob's starting value (worker count; elements buffered for a buffer).
        max_value: the most the tuner may set it to.
        autotuned: AUTOTUNE moves the knob (and, for ``executor="auto"``, the executor).
        deterministic: deliver in input order (``Options.deterministic`` unless the op says).
        executor: ``"thread"``, ``"process"`` or ``"auto"`` (AUTOTUNE picks by measurement:
            inline, threads or, where ``allow_process``, processes).
        replayable: the input's order is reproducible (see ``replay.replayable``).
        allow_process: the stage's function may run in worker processes.
        policy: the engine policy the op asked for (``policies.py``).
        remembered: where the stage finds and leaves its tuned choice (the request's
            ``tuned``; ``remembered.py``), for ``executor="auto"``; else None.
    """

    value: int
    max_value: int
    autotuned: bool
    deterministic: bool
    executor: str
    replayable: bool = True
    allow_process: bool = False
    policy: Any = None
    remembered: Any = None


def validate_executor(op: str, executor: str | None) -> str | None:
    """``executor`` if it is None or an executor users may name (``executors.names``).

    Raises:
        ValueError: any other value; names the op and the choices.
    """
    from datapipe.parallel.executors import names

    choices = tuple(names())
    if executor is not None and executor not in choices:
        raise ValueError(f"{op}: executor must be one of {choices} or None, got {executor!r}")
    return executor


def plan_stage(req: StageRequest, ctx: Any, input_ds: Any = None) -> Plan | None:
    """Whether an op declaring ``req`` runs sequentially (None) or as a parallel stage,
    and how (its ``Plan``); ``input_ds`` is its input (is its order reproducible?).

    Sequential: ``num_parallel_calls`` None or 1 (unless ``executor="process"`` asks for a
    worker process: the op's own argument with None, or with 1 also the option's), a
    buffer of size 0. Otherwise the request decides, then ``Options.threading.executor``
    (the executor of maps that name none). A stage whose work is not a function (a
    buffer, batch's stacking, interleave's inputs) runs on threads where processes are
    asked for; AUTOTUNE may still run it inline where its policy allows.
    """
    from datapipe.dataset_ops import AUTOTUNE
    from datapipe.parallel import autotune
    from datapipe.parallel.replay import replayable

    ok = replayable(input_ds, ctx) if input_ds is not None else True
    tuner = autotune.get_tuner(ctx)
    if req.is_buffer:
        size = req.buffer_size
        if size == 0:
            return None
        auto = size == AUTOTUNE and tuner.enabled
        start, most = req.autotune_buffer
        start = start if size == AUTOTUNE else int(size)  # type: ignore[arg-type]
        cap = most if size == AUTOTUNE else start
        free = ctx.options.threading.executor is None and req.policy.inline_ok
        kind = "auto" if auto and free else "thread"
        remembered = req.tuned if kind == "auto" else None
        return Plan(start, cap, auto, True, kind, ok, policy=req.policy, remembered=remembered)
    calls = req.parallelism
    executor = req.executor or ctx.options.threading.executor
    if calls is None and req.executor == "process":
        calls = 1  # the op itself asked for a worker process: one (it was silently inline)
    if calls is None or (calls == 1 and executor != "process"):
        return None
    if not req.processes_allowed and executor == "process":
        executor = "thread"  # its work is not a function
    plan = _worker_plan(ctx, tuner, calls, req.deterministic, executor, ok)
    plan.policy = req.policy
    # A daemonic process (a DataLoader worker) may not start processes of its own.
    plan.allow_process = req.processes_allowed and executor != "thread" and not _in_daemon()
    if plan.executor == "auto" and not req.policy.inline_ok:
        plan.executor = "thread"  # e.g. interleave: its lanes are filled by threads only
    if plan.executor == "auto":
        plan.remembered = req.tuned
    return plan


def _worker_plan(ctx: Any, tuner: Any, calls: int, deterministic: bool | None,
                 executor: str | None, replayable: bool) -> Plan:  # fmt: skip
    """The plan of a worker stage asked for ``calls`` (an int or AUTOTUNE)."""
    from datapipe.dataset_ops import AUTOTUNE
    from datapipe.parallel import autotune

    cap = autotune.max_threads(ctx)
    auto = calls == AUTOTUNE and tuner.enabled
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
    start = autotune.initial_parallelism(ctx, tuner) if calls == AUTOTUNE else int(calls)
    return Plan(max(1, min(start, cap)), cap, auto, det, kind, replayable)


def _in_daemon() -> bool:
    import multiprocessing

    return bool(multiprocessing.current_process().daemon)
