"""``flat_map``: map each element to a Dataset and chain those datasets
(``tf.data.Dataset.flat_map``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from datapipe._functions import call
from datapipe._iterator import OpIterator
from datapipe._spec import UnknownSpec, seen_spec
from datapipe.dataset_ops import UNKNOWN_CARDINALITY, Dataset
from datapipe.errors import annotate


def _sub_dataset(func: Callable, x: Any, op: str, index: int) -> Dataset:
    try:
        sub = call(func, x)
    except Exception as e:  # noqa: BLE001 - located and re-raised
        raise annotate(op, index, e) from e
    if not isinstance(sub, Dataset):
        raise annotate(
            op,
            index,
            TypeError(f"map_func must return a Dataset, got {type(sub).__name__}"),
        )
    return sub


class FlatMapDataset(Dataset):
    """The elements of ``map_func(x_0)``, then of ``map_func(x_1)``, ... in order.

    Args:
        map_func: function of one input element (unpacked when it is a plain tuple)
            returning a ``Dataset``.

    Each sub-dataset runs in the same ``iter()`` (options and global seed), with the
    epoch ``(*epoch, input_index)``, so random ops inside it draw differently for each
    input element and each epoch, reproducibly from the seed. The iterator state holds the
    current input element and the position inside its sub-dataset; on restore
    ``map_func`` is called again on that element.

    Raises (at iteration):
        PipelineError: ``map_func`` raised or returned something other than a Dataset
            (names ``flat_map`` and the input element's index); errors inside a
            sub-dataset keep the location given by its own ops.

    ``element_spec`` is the first sub-dataset's (``map_func`` is called on the first
    input element; an empty input gives ``UnknownSpec()``). ``cardinality()``
    is unknown (tf.data). Random access is lost.

    Example:
        >>> import datapipe as dp
        >>> [int(x) for x in dp.range(1, 4).flat_map(lambda n: dp.range(n))]
        [0, 0, 1, 0, 1, 2]
    """

    _name = "flat_map"
    expands = True

    def __init__(self, input_ds: Dataset, map_func: Callable):
        super().__init__(input_ds)
        if not callable(map_func):
            raise TypeError(f"flat_map: map_func must be callable, got {type(map_func).__name__}")
        self._func = map_func
        self._spec_cache: Any = None

    @property
    def element_spec(self) -> Any:
        return sub_dataset_spec(self)

    def cardinality(self) -> int:
        return UNKNOWN_CARDINALITY

    def _make_iterator(self, ctx, epoch):
        return FlatMapIterator(ctx.make(self._inputs[0], epoch), self._func, ctx, epoch)


def sub_dataset_spec(node: Any) -> Any:
    """Element spec of ``flat_map``/``interleave``: that of the Dataset ``node._func`` makes
    from the first input element (cached on the node); unknown for an empty input."""
    if node._spec_cache is None:
        first = node._inputs[0]._first_element()
        if first is None:
            return UnknownSpec()
        node._spec_cache = seen_spec(_sub_dataset(node._func, first, node._name, 0).element_spec)
    return node._spec_cache


class FlatMapIterator(OpIterator):
    op_name = "flat_map"

    def __init__(self, inner: OpIterator, func: Callable, ctx: Any, epoch: tuple):
        super().__init__([inner])
        self.inner, self.func, self.ctx, self.epoch = inner, func, ctx, epoch
        self.count = 0  # input elements consumed
        self.element: Any = None  # the input element whose sub-dataset is open
        self.sub: OpIterator | None = None

    def _open(self, x: Any, index: int) -> OpIterator:
        sub_ds = _sub_dataset(self.func, x, self.op_name, index)
        sub = self.sub = self.ctx.make(sub_ds, (*self.epoch, index))
        self.element = x
        self.inputs = [self.inner, sub]
        return sub

    def _close_sub(self) -> None:
        if self.sub is not None:
            self.sub.close()
        self.sub, self.element = None, None
        self.inputs = [self.inner]

    def next_chunk(self, n: int) -> list:
        while True:
            sub = self.sub
            if sub is None:
                got = self.inner.next_chunk(1)
                if not got:
                    return []
                self.count += 1
                sub = self._open(got[0], self.count - 1)
            out = sub.next_chunk(n)
            if out:
                return out
            self._close_sub()

    def get_state(self) -> dict:
        return {
            "count": self.count,
            "open": self.sub is not None,
            "element": self.element,
            "sub": None if self.sub is None else self.sub.get_state(),
            "input": self.inner.get_state(),
        }

    def set_state(self, state: dict) -> None:
        self._close_sub()
        self.count = int(state["count"])
        self.inner.set_state(state["input"])
        if state["open"]:
            self._open(state["element"], self.count - 1).set_state(state["sub"])
