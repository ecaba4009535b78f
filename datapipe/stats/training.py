"""Input-bound fraction of a training loop: time waiting for data against step compute.

The TensorFlow Profiler splits each step into "input" (waiting for the next batch) and
the rest; a job is input-bound when the input share is large (5% and more: moderately,
20% and more: highly). ``InputBoundTimer`` measures the same split in a plain PyTorch loop:
it wraps the data iterator, times each ``next()`` as waiting, and the time from a batch's
delivery to the next request as the step.

On a GPU the step's kernels run asynchronously; pass ``sync=torch.cuda.synchronize`` so
each step's time includes its kernels (otherwise their time shows up as input wait when
the next ``next()`` happens to synchronise).

With ``prefetch_to_device`` a batch is handed over while its copy may still be running
(the training stream waits for it on the device). The timer counts that wait as input:
after each ``next()`` on a datapipe iterator it calls ``Iterator.synchronize()``, which
blocks until the batch has arrived, inside the measured wait.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from collections.abc import Iterator as PyIterator
from dataclasses import asdict, dataclass
from time import perf_counter
from typing import Any

from datapipe._iterator import Iterator


@dataclass
class EpochTiming:
    """One epoch: ``steps`` batches, ``wait_s`` waiting for them, ``step_s`` computing."""

    epoch: int
    steps: int
    wait_s: float
    step_s: float

    @property
    def input_bound_fraction(self) -> float:
        total = self.wait_s + self.step_s
        return self.wait_s / total if total > 0 else 0.0


class InputBoundTimer:
    """Times "waiting for data" against "step compute", per epoch.

    Args:
        sync: called before each step's end is timed (e.g. ``torch.cuda.synchronize``).

    Example:
        >>> import time
        >>> timer = InputBoundTimer()
        >>> for epoch in range(2):
        ...     for batch in timer.epoch(range(3)):
        ...         time.sleep(0.001)  # the training step
        >>> [e.steps for e in timer.epochs]
        [3, 3]
        >>> timer.epochs[0].step_s >= 0.003  # each step slept 1 ms
        True
    """

    def __init__(self, sync: Callable[[], Any] | None = None):
        self.sync = sync
        self.epochs: list[EpochTiming] = []

    def epoch(self, iterable: Iterable) -> PyIterator:
        """Iterate ``iterable`` as one epoch, recording its timing when it ends (also when
        the loop is left early)."""
        rec = EpochTiming(len(self.epochs), 0, 0.0, 0.0)
        self.epochs.append(rec)
        sync = self.sync
        it = iter(iterable)
        # a datapipe iterator: wait for a device copy inside the measured input time
        arrived = getattr(it, "synchronize", None) if isinstance(it, Iterator) else None
        t_request = perf_counter()
        try:
            while True:
                try:
                    x = next(it)
                except StopIteration:
                    rec.wait_s += perf_counter() - t_request
                    return
                if arrived is not None:
                    arrived()
                t_got = perf_counter()
                rec.wait_s += t_got - t_request
                rec.steps += 1
                yield x  # the caller's step runs here
                if sync is not None:
                    sync()
                t_request = perf_counter()
                rec.step_s += t_request - t_got
        finally:
            close = getattr(it, "close", None)
            if close is not None and it is not iterable:
                close()

    __call__ = epoch

    @property
    def input_bound_fraction(self) -> float:
        """Over all epochs: wait / (wait + step)."""
        wait = sum(e.wait_s for e in self.epochs)
        total = wait + sum(e.step_s for e in self.epochs)
        return wait / total if total > 0 else 0.0

    def to_dict(self) -> dict:
        """JSON-serialisable summary with one entry per epoch."""
        epochs = [asdict(e) | {"input_bound_fraction": e.input_bound_fraction} for e in self.epochs]
        return json.loads(
            json.dumps({"epochs": epochs, "input_bound_fraction": self.input_bound_fraction})
        )

    def summary(self) -> str:
        """A table: epoch, steps, wait s, step s, input-bound %, and a verdict line."""
        lines = ["epoch  steps    wait s    step s  input-bound"]
        for e in self.epochs:
            lines.append(
                f"{e.epoch:5d}  {e.steps:5d}  {e.wait_s:8.3f}  {e.step_s:8.3f}  "
                f"{100 * e.input_bound_fraction:10.1f}%"
            )
        f = self.input_bound_fraction
        if not any(e.steps for e in self.epochs):
            # No batch arrived: there is no training step to weigh the wait against.
            lines.append("overall: no steps were timed")
            return "\n".join(lines)
        if f >= 0.20:
            verdict = "highly input-bound: profile the pipeline (Dataset.profile)"
        elif f >= 0.05:
            verdict = "moderately input-bound"
        else:
            verdict = "not input-bound: the step (model) is the bottleneck"
        lines.append(f"overall: {100 * f:.1f}% of the time waiting for data ({verdict})")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()
