"""``counter``: an infinite count (``tf.data.Dataset.counter``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from datapipe._iterator import OpIterator
from datapipe._spec import TensorSpec
from datapipe._validate import check_int
from datapipe.dataset_ops import INFINITE_CARDINALITY, Dataset
from datapipe.errors import PipelineError


class CounterDataset(Dataset):
    """Elements ``start, start + step, start + 2 * step, ...`` forever
    (``tf.data.Dataset.counter``).

    Args:
        start: the first value (an integer).
        step: the difference between consecutive values (an integer; 0 and negative
            values are allowed, as in tf.data).
        dtype: the numpy integer dtype of the elements (default ``int64``, tf.data's).

    Raises:
        TypeError: ``start`` or ``step`` is not an integer, ``dtype`` is not an integer
            dtype.
        PipelineError (at iteration): a value does not fit ``dtype`` (names the element).

    Elements are numpy scalars of ``dtype``; ``element_spec`` is ``TensorSpec((), dtype)``;
    ``cardinality()`` is ``INFINITE_CARDINALITY``. The iterator state is one integer (the
    count of elements produced). No random access (the dataset has no length). Under a
    worker context, DATA auto-sharding gives worker ``i`` of ``k`` the elements
    ``i, i + k, ...`` of the count.

    Example:
        >>> import datapipe as dp
        >>> [int(x) for x in dp.Dataset.counter(start=3, step=2).take(4)]
        [3, 5, 7, 9]
    """

    _name = "counter"

    def __init__(self, start: int = 0, step: int = 1, dtype: Any = "int64"):
        super().__init__()
        self._start = check_int("counter", "start", start)
        self._step = check_int("counter", "step", step)
        try:
            self._dtype = np.dtype(dtype)
        except TypeError as e:
            raise TypeError(f"counter: dtype must be a numpy integer dtype, got {dtype!r}") from e
        if self._dtype.kind not in "iu":
            raise TypeError(f"counter: dtype must be an integer dtype, got {self._dtype}")

    @property
    def element_spec(self) -> Any:
        return TensorSpec((), self._dtype)

    def cardinality(self) -> int:
        return INFINITE_CARDINALITY

    def _make_iterator(self, ctx, epoch):
        return CounterIterator(self._start, self._step, self._dtype)


class CounterIterator(OpIterator):
    op_name = "counter"

    def __init__(self, start: int, step: int, dtype: np.dtype):
        super().__init__()
        self.start, self.step, self.dtype = start, step, dtype
        self.index = 0  # elements produced

    def next_chunk(self, n: int) -> list:
        info = np.iinfo(self.dtype)
        values = [self.start + (self.index + j) * self.step for j in range(n)]
        # The count is monotonic: when both ends fit, every value does.
        if not (info.min <= values[0] <= info.max and info.min <= values[-1] <= info.max):
            fits = [info.min <= v <= info.max for v in values]
            values = values[: fits.index(False)]
            if not values:  # this element fails; the next call goes on after it
                self.index += 1
                raise PipelineError(
                    "counter", self.index - 1, OverflowError(f"the count does not fit {self.dtype}")
                )
        self.index += len(values)
        return list(np.array(values, dtype=self.dtype))

    def get_state(self) -> dict:
        return {"index": self.index}

    def set_state(self, state: dict) -> None:
        self.index = int(state["index"])
