"""``take_while``: elements up to the first one a predicate rejects
(``tf.data.Dataset.take_while``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from datapipe._functions import call
from datapipe._iterator import OpIterator
from datapipe.dataset import UNKNOWN_CARDINALITY, Dataset
from datapipe.errors import annotate
from datapipe.ops.filter import as_scalar_bool


class TakeWhileDataset(Dataset):
    """The input's elements while ``predicate`` holds; ends at the first element for which
    it is False (that element and everything after it are not produced).

    Args:
        predicate: function of one element (unpacked when the element is a plain tuple)
            returning a scalar boolean (``bool``, ``numpy.bool_``, 0-d bool array/tensor).

    Raises (at iteration):
        PipelineError: ``predicate`` raised or returned a non-boolean; names ``take_while``
            and the element's index. Elements before it were delivered first.

    ``cardinality()`` is ``UNKNOWN_CARDINALITY``, as in tf.data. Random access is lost.

    Example:
        >>> import datapipe as dp
        >>> [int(x) for x in dp.range(10).take_while(lambda x: x * x < 20)]
        [0, 1, 2, 3, 4]
    """

    _name = "take_while"

    def __init__(self, input_ds: Dataset, predicate: Callable):
        super().__init__(input_ds)
        if not callable(predicate):
            raise TypeError(
                f"take_while: predicate must be callable, got {type(predicate).__name__}"
            )
        self._predicate = predicate

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def cardinality(self) -> int:
        return UNKNOWN_CARDINALITY

    def _make_iterator(self, ctx, epoch):
        return TakeWhileIterator(ctx.make(self._inputs[0], epoch), self._predicate)


class TakeWhileIterator(OpIterator):
    """Like ``FilterIterator``, a failing element is raised after the good ones and the
    rest of its chunk is kept (``leftover``) so that iteration may continue past it."""

    op_name = "take_while"

    def __init__(self, inner: OpIterator, predicate: Callable):
        super().__init__([inner])
        self.inner, self.predicate = inner, predicate
        self.count = 0  # input elements consumed, for error indices
        self.done = False
        self.leftover: list = []
        self.pending: BaseException | None = None

    def next_chunk(self, n: int) -> list:
        if self.pending is not None:
            err, self.pending = self.pending, None
            raise err
        if self.done:
            return []
        if self.leftover:
            chunk, self.leftover = self.leftover[:n], self.leftover[n:]
        else:
            chunk = self.inner.next_chunk(n)
        out = []
        for j, x in enumerate(chunk):
            try:
                keep = as_scalar_bool(call(self.predicate, x), "take_while")
            except Exception as e:  # noqa: BLE001 - located and handed to the consumer
                err = annotate("take_while", self.count + j, e)
                self.count += j + 1
                self.leftover = chunk[j + 1 :] + self.leftover
                if not out:
                    raise err from e
                self.pending = err
                return out
            if not keep:
                break
            out.append(x)
        self.count += len(out)
        if len(out) < len(chunk) or not chunk:
            self.done, self.leftover = True, []
        return out

    def get_state(self) -> dict:
        return {
            "count": self.count,
            "done": self.done,
            "leftover": list(self.leftover),
            "input": self.inner.get_state(),
        }

    def set_state(self, state: dict) -> None:
        self.count, self.done = int(state["count"]), bool(state["done"])
        self.leftover = list(state["leftover"])
        self.pending = None
        self.inner.set_state(state["input"])
