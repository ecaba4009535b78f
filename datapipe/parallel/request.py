"""What a parallel-capable op asks of the engine: its ``StageRequest``.

Every op that may run as a parallel stage (``map``, ``random_map``, ``batch``,
``interleave``, ``prefetch``, ``prefetch_to_device``) sets ``stage_request`` on its node
when it is built, from its own arguments. Everything that needs to know how an op runs
reads that declaration and nothing else: the planner (``plan.plan_stage``: sequential or
parallel, and how), replay (``replay.replayable``: is the order below a node
reproducible), auto-sharding (``distribute.auto_shard``: may a node's order differ between
workers) and statistics (``stats.recorder``: the parallelism asked for). No reader looks at
an op's private attributes or switches on its name (docs/architecture.md, "The stage
request").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from datapipe.parallel.remembered import Remembered

# The knob's start and most under AUTOTUNE, for a buffer (elements).
PREFETCH_AUTOTUNE = (4, 1024)


@dataclass(frozen=True)
class StageRequest:
    """A parallel-capable op's declaration (see the module docstring).

    Attributes:
        policy: the engine policy (``policies.Map``, ``Buffer``, ``Queue``, ``Slots``):
            which lane a free worker fills and how much it takes.
        parallelism: ``num_parallel_calls`` as the user gave it (None or 1: sequential, an
            int, or ``AUTOTUNE``); None for a buffer.
        buffer_size: a buffer's size (0: no stage, an int, or ``AUTOTUNE``); None for
            worker stages.
        deterministic: the op's own ``deterministic`` (None: ``Options.deterministic``).
        executor: the op's own ``executor`` (``"thread"``, ``"process"`` or None).
        processes_allowed: the work is a function that may run in worker processes
            (``map``, ``random_map``); a buffer's or interleave's work is reading inputs.
        autotune_buffer: (start, most) of a buffer's knob under ``AUTOTUNE``.
        tuned: what AUTOTUNE settled on in this op's last stage (``remembered.py``): the
            next ``iter()`` starts there. Not part of the declaration's equality.
    """

    policy: Any
    parallelism: int | None = None
    buffer_size: int | None = None
    deterministic: bool | None = None
    executor: str | None = None
    processes_allowed: bool = False
    autotune_buffer: tuple[int, int] = PREFETCH_AUTOTUNE
    tuned: Remembered = field(default_factory=Remembered, compare=False, repr=False)

    @property
    def is_buffer(self) -> bool:
        return self.buffer_size is not None

    def runs_parallel(self) -> bool:
        """Whether the op computes ahead of its consumer (a buffer of size > 0, more than
        one parallel call, or ``executor="process"``, which asks for a worker process)."""
        if self.is_buffer:
            return self.buffer_size != 0
        return self.parallelism not in (None, 1) or self.executor == "process"

    def order_varies(self, default_deterministic: bool) -> bool:
        """Whether the op may deliver in an order that changes from run to run
        (``deterministic=False`` on a parallel stage)."""
        if self.is_buffer or self.parallelism in (None, 1):
            return False
        det = default_deterministic if self.deterministic is None else self.deterministic
        return not det
