"""A stage's tuned choice, remembered across ``iter()`` of the same Dataset.

AUTOTUNE's executor search (inline, then threads, then processes: ``autotune.py``) costs
its windows: on the walkthrough's augmentation in ``map`` (``benchmarks/bench_own_data.py``)
0.4-0.6 s of a ~2 s epoch, half of it at a third of the final rate. A training loop
iterates the same Dataset once per epoch, and each ``iter()`` builds a new pipeline with a
new tuner. So each parallel op's ``StageRequest`` (one per Dataset node, shared by the
copies the graph rewrites make) holds a ``Remembered``: when a stage whose search finished
on threads or processes closes, it records there the executor, the knob's value and the
rate it ran at (``TunedChoice``); the next stage of that request starts on that executor
with that value, and the tuner only verifies it (``autotune``'s "resumed" phase): kept if
its best window reaches ``autotune.RESUME_MIN_SHARE`` of the remembered rate, else the
search starts again from inline.

What it never changes: results. Draws are keyed by the element's position whatever the
executor (docs/architecture.md, "Draws in a stage"), so an iterator returns the same
elements whichever executor the memory starts it on, and the memory is not part of any
state (``get_state``): a restored iterator computes the same elements. tf.data re-tunes
every iterator from scratch; DataLoader and Grain keep the worker count a user set. We keep
what the previous epoch measured, as a user of either would expect of a second epoch.
"""

from __future__ import annotations

import threading
from typing import NamedTuple


class TunedChoice(NamedTuple):
    """What a stage's tuner settled on.

    Attributes:
        executor: ``"thread"`` or ``"process"`` (an inline choice is not remembered: the
            search starts inline anyway).
        value: the knob's value (workers; a buffer's elements).
        rate: elements per second it ran at (the median of its last windows).
        cpu_budget: the tuner's CPU budget then; another budget searches anew.
        stepped_back: an element could not cross to a worker process: processes are not
            tried again.
    """

    executor: str
    value: int
    rate: float
    cpu_budget: int
    stepped_back: bool = False


class Remembered:
    """The last ``TunedChoice`` of one stage request; thread-safe (two iterators of one
    Dataset may close at once; the last one to close is kept)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._choice: TunedChoice | None = None

    def get(self) -> TunedChoice | None:
        with self._lock:
            return self._choice

    def put(self, choice: TunedChoice | None) -> None:
        """Keep ``choice`` (None: forget; the next stage searches from inline)."""
        with self._lock:
            self._choice = choice

    # A Dataset is pickled whole (the service sends its pipeline to workers with
    # cloudpickle) and deep-copied: the copy starts with no memory (another machine, or
    # another pipeline), and a lock does not pickle.
    def __getstate__(self) -> dict:
        return {}

    def __setstate__(self, state: dict) -> None:
        self.__init__()  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"Remembered({self.get()!r})"
