"""``enumerate``: pair each element with its index (``tf.data.Dataset.enumerate``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe._iterator import OpIterator
from datapipe._spec import TensorSpec
from datapipe._validate import check_int
from datapipe.dataset_ops import Dataset, RandomAccessUnaryDataset


class EnumerateDataset(RandomAccessUnaryDataset):
    """Elements ``(index, element)`` with ``index`` a ``numpy.int64`` counting from
    ``start``.

    The pair is a plain tuple, so a following ``map(lambda i, x: ...)`` receives the index
    and the element as two arguments (tf.data's convention). ``element_spec`` is
    ``(TensorSpec((), int64), input spec)``; cardinality is the input's. Keeps random
    access (element ``i`` is ``(start + i, input[i])``).

    Example:
        >>> import datapipe as dp
        >>> [(int(i), int(x)) for i, x in dp.range(10, 13).enumerate(start=5)]
        [(5, 10), (6, 11), (7, 12)]
    """

    _name = "enumerate"

    def __init__(self, input_ds: Dataset, start: int = 0):
        super().__init__(input_ds)
        self._start = check_int("enumerate", "start", start)

    @property
    def element_spec(self) -> Any:
        return (TensorSpec((), np.int64), self._inputs[0].element_spec)

    def _make_random_access(self, ctx):
        return _EnumerateAccess(self._inputs[0]._make_random_access(ctx), self._start)

    def _make_iterator(self, ctx, epoch):
        return EnumerateIterator(ctx.make(self._inputs[0], epoch), self._start)


class _EnumerateAccess:
    def __init__(self, inner: Any, start: int):
        self.inner, self.start = inner, start

    def __len__(self) -> int:
        return len(self.inner)

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        elems = self.inner.get_many(indices, epoch)
        return [(np.int64(self.start + int(i)), x) for i, x in zip(indices, elems)]


class EnumerateIterator(OpIterator):
    op_name = "enumerate"

    def __init__(self, inner: OpIterator, start: int):
        super().__init__([inner])
        self.inner, self.next_index = inner, start

    def next_chunk(self, n: int) -> list:
        try:
            chunk = self.inner.next_chunk(n)
        except Exception:
            # A failing element keeps its position and its index (datapipe._positions), as
            # tf.data's enumerate (a zip with a range) and enumerate by index do.
            self.next_index += 1
            raise
        i0 = self.next_index
        self.next_index += len(chunk)
        return [(np.int64(i0 + j), x) for j, x in enumerate(chunk)]

    def get_state(self) -> dict:
        return {"next_index": self.next_index, "input": self.inner.get_state()}

    def set_state(self, state: dict) -> None:
        self.next_index = int(state["next_index"])
        self.inner.set_state(state["input"])
