"""Parallel ``batch``: groups of ``batch_size`` elements stacked on worker threads.

A ``GroupIterator`` cuts the input into lists of ``batch_size`` consecutive elements (the
last one shorter, or dropped with ``drop_remainder``); a ``ParallelMapIterator`` in
``indexed`` mode stacks them, so parallel batching inherits its ordering (``deterministic``),
error positions, AUTOTUNE and exact checkpoints. An error names the batch op and the index
of the batch's first element in the batch's input stream, as the sequential batch does.
"""

from __future__ import annotations

from typing import Any

from datapipe._batching import stack
from datapipe._iterator import OpIterator, pull_exactly
from datapipe.parallel.map import ParallelMapIterator
from datapipe.parallel.plan import Plan


class GroupIterator(OpIterator):
    """Lists of ``batch_size`` consecutive input elements."""

    op_name = "batch"

    def __init__(self, inner: OpIterator, batch_size: int, drop_remainder: bool):
        super().__init__([inner])
        self.inner, self.b, self.drop = inner, batch_size, drop_remainder
        self.done = False

    def next_chunk(self, n: int) -> list:
        if self.done:
            return []
        b = self.b
        elems = pull_exactly(self.inner, n * b)
        if len(elems) < n * b:
            self.done = True
        groups = [elems[s : s + b] for s in range(0, len(elems), b)]
        if groups and self.drop and len(groups[-1]) < b:
            groups.pop()
        return groups

    def get_state(self) -> dict:
        return {"done": self.done, "input": self.inner.get_state()}

    def set_state(self, state: dict) -> None:
        self.done = bool(state["done"])
        self.inner.set_state(state["input"])


class _Stack:
    """Stacks group ``index`` (picklable, for worker processes)."""

    def __init__(self, batch_size: int):
        self.batch_size = batch_size

    def __call__(self, index: int, group: list) -> Any:
        return stack(group, "batch", index * self.batch_size)


def parallel_batch_iterator(
    inner: OpIterator, batch_size: int, drop_remainder: bool, plan: Plan, ctx: Any
) -> OpIterator:
    groups = GroupIterator(inner, batch_size, drop_remainder)
    return ParallelMapIterator(
        groups, _Stack(batch_size), "batch", plan.value, plan.deterministic, ctx,
        indexed=True, plan=plan,
    )  # fmt: skip
