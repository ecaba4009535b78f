"""Parallel ``batch``: groups of ``batch_size`` elements stacked on worker threads.

The sequential ``BatchIterator`` with a ``make`` that only groups cuts the input into lists
of ``batch_size`` consecutive elements (the last one shorter, or dropped with
``drop_remainder``), so a failing input element is handled exactly as by the sequential
batch: raised at its position, and the elements read before it are kept for the next
group (the batch minus the failing element, filled with the next ones). A stage iterator
(``stage.StageIterator``) whose transform stacks a group (``indexed``) does the rest, so
parallel batching inherits the map policy's ordering (``deterministic``), error positions,
AUTOTUNE and exact checkpoints. An error names the batch op and the index of the batch's
first element in the batch's input stream, as the sequential batch does.
"""

from __future__ import annotations

from typing import Any

from datapipe._batching import stack
from datapipe._iterator import OpIterator
from datapipe.ops.batch import BatchIterator, stack_identified
from datapipe.parallel.plan import Plan
from datapipe.parallel.stage import StageIterator


def _group(part: list, start: int) -> tuple[int, list]:
    return start, part


class GroupIterator(BatchIterator):
    """``(index of the first element, [batch_size consecutive input elements])``."""

    def __init__(self, inner: OpIterator, batch_size: int, drop_remainder: bool):
        super().__init__(inner, batch_size, drop_remainder, make=_group)


class _Stack:
    """Stacks a group (picklable). ``paired``: a group of ``(identity, element)`` pairs
    (``datapipe._identity``), stacked as ``(its first identity, the batch)``."""

    def __init__(self, paired: bool = False):
        self.paired = paired

    def __call__(self, index: int, group: tuple[int, list]) -> Any:
        start, elements = group
        if self.paired:
            return stack_identified(elements, start)
        return stack(elements, "batch", start)


def parallel_batch_iterator(
    inner: OpIterator, batch_size: int, drop_remainder: bool, plan: Plan, ctx: Any,
    paired: bool = False,
) -> OpIterator:  # fmt: skip
    groups = GroupIterator(inner, batch_size, drop_remainder)
    return StageIterator(groups, plan, ctx, "batch", _Stack(paired), indexed=True)
