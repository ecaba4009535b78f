"""``filter``: keep the elements a predicate accepts (``tf.data.Dataset.filter``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from datapipe._functions import ElementwiseIterator, call
from datapipe._iterator import OpIterator
from datapipe._spec import is_torch
from datapipe.dataset_ops import UNKNOWN_CARDINALITY, Dataset, UnaryDataset


def as_scalar_bool(value: Any, op: str) -> bool:
    """``value`` as a Python bool when it is a scalar boolean (Python ``bool``, numpy
    ``bool_``, a 0-d bool array or tensor), as tf.data requires of predicates."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if is_torch(value) or isinstance(value, np.ndarray):
        kind = "bool" if str(value.dtype) in ("bool", "torch.bool") else str(value.dtype)
        if tuple(value.shape) == () and kind == "bool":
            return bool(value)
        raise TypeError(
            f"{op}: predicate must return a scalar boolean, got an array of shape "
            f"{tuple(value.shape)} and dtype {kind}"
        )
    raise TypeError(f"{op}: predicate must return a scalar boolean, got {type(value).__name__}")


class FilterDataset(UnaryDataset):
    """The elements ``x`` of the input for which ``predicate(x)`` is True, in order.

    Args:
        predicate: function of one element (unpacked when the element is a plain tuple, as
            tf.data) returning a scalar boolean: ``bool``, ``numpy.bool_``, or a 0-d bool
            array/tensor. Other return types raise ``TypeError`` (tf.data's rule; write
            ``x % 2 == 0`` rather than ``x % 2``).

    Raises (at iteration):
        PipelineError: ``predicate`` raised or returned a non-boolean; names ``filter`` and
            the index of the element in the input stream. Accepted elements before it were
            delivered first.

    ``element_spec`` is the input's; ``cardinality()`` is ``UNKNOWN_CARDINALITY`` (as
    tf.data). Random access is lost: the output index of an element depends on the
    predicate's results on all earlier ones.

    Example:
        >>> import datapipe as dp
        >>> [int(x) for x in dp.range(10).filter(lambda x: x % 3 == 0)]
        [0, 3, 6, 9]
    """

    _name = "filter"
    commutes_with_shard = True

    def __init__(self, input_ds: Dataset, predicate: Callable):
        super().__init__(input_ds)
        if not callable(predicate):
            raise TypeError(f"filter: predicate must be callable, got {type(predicate).__name__}")
        self._predicate = predicate

    def cardinality(self) -> int:
        return UNKNOWN_CARDINALITY

    def _make_iterator(self, ctx, epoch):
        return FilterIterator(ctx.make(self._inputs[0], epoch), self._predicate)


class FilterIterator(ElementwiseIterator):
    """Pulls ``n`` input elements per step until at least one passes (or the input ends).

    After a failing element the rest of its chunk is kept (``leftover``, part of the
    state) and filtered on the next call, so only the failing element is lost (what
    ``ignore_errors`` relies on).
    """

    op_name = "filter"

    def __init__(self, inner: OpIterator, predicate: Callable):
        super().__init__(inner)
        self.predicate = predicate

    def next_chunk(self, n: int) -> list:
        return self._select(n, lambda x: as_scalar_bool(call(self.predicate, x), "filter"))
