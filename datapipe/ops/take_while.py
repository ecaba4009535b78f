"""``take_while``: elements up to the first one a predicate rejects
(``tf.data.Dataset.take_while``)."""

from __future__ import annotations

from collections.abc import Callable

from datapipe._functions import ElementwiseIterator, call
from datapipe._iterator import OpIterator
from datapipe.dataset_ops import UNKNOWN_CARDINALITY, Dataset, UnaryDataset
from datapipe.errors import annotate
from datapipe.ops.filter import as_scalar_bool


class TakeWhileDataset(UnaryDataset):
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

    def cardinality(self) -> int:
        return UNKNOWN_CARDINALITY

    def _make_iterator(self, ctx, epoch):
        return TakeWhileIterator(ctx.make(self._inputs[0], epoch), self._predicate)


class TakeWhileIterator(ElementwiseIterator):
    """Like ``FilterIterator``, a failing element is raised after the good ones and the
    rest of its chunk is kept (``leftover``) so that iteration may continue past it."""

    op_name = "take_while"

    def __init__(self, inner: OpIterator, predicate: Callable):
        super().__init__(inner)
        self.predicate = predicate
        self.done = False

    def next_chunk(self, n: int) -> list:
        self._raise_pending()
        if self.done:
            return []
        chunk = self._take(n)
        out: list = []
        for j, x in enumerate(chunk):
            try:
                keep = as_scalar_bool(call(self.predicate, x), "take_while")
            except Exception as e:  # noqa: BLE001 - located and handed to the consumer
                return self._fail(chunk, j, out, annotate("take_while", self.count + j, e), e)
            if not keep:
                break
            out.append(x)
        if len(out) < len(chunk) or not chunk:
            self.done, self.count, self.leftover = True, self.count + len(out), []
            return out
        self._commit(len(chunk))
        return out

    def get_state(self) -> dict:
        return {**super().get_state(), "done": self.done}

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        self.done = bool(state["done"])
