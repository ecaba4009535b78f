"""``ignore_errors``: drop the elements whose production raised
(``tf.data.Dataset.ignore_errors``)."""

from __future__ import annotations

import logging
from typing import Any

from datapipe._iterator import OpIterator
from datapipe.dataset import Dataset

logger = logging.getLogger("datapipe")

# Consecutive failures without progress after which the input is taken to be stuck (an op
# that raises the same error on every call would otherwise loop forever).
MAX_CONSECUTIVE_ERRORS = 100_000


class IgnoreErrorsDataset(Dataset):
    """The input's elements, without those whose production raised an ``Exception``.

    Every upstream op delivers the good elements before a failure and continues after it
    (a failing element is skipped, not retried), so the output is the input minus the
    failing elements, in order. ``KeyboardInterrupt`` and ``SystemExit`` are not caught.

    Args:
        log_warning: log each failure at WARNING on the ``"datapipe"`` logger, once per
            file for errors that carry a ``path`` (``PipelineError.path``): once for this
            dataset object, across epochs and ``repeat`` passes.

    The running iterator counts what it dropped: ``ignored_count(iterator)`` (the sum over
    every ``ignore_errors`` in the pipeline) or the op iterator's ``num_ignored``.
    ``cardinality()`` is unknown (tf.data).

    Example:
        >>> import datapipe as dp
        >>> ds = dp.from_tensor_slices([1.0, 0.0, 2.0]).map(lambda x: 1 / int(x))
        >>> it = iter(ds.ignore_errors())
        >>> [float(x) for x in it], ignored_count(it)
        ([1.0, 0.5], 1)
    """

    _name = "ignore_errors"
    commutes_with_shard = True

    def __init__(self, input_ds: Dataset, log_warning: bool = False):
        super().__init__(input_ds)
        self._log = bool(log_warning)
        # Shared by every iterator of this dataset: a bad file is reported once, not once
        # per epoch (set.add is atomic under the GIL, so parallel iterators may share it).
        self._logged_paths: set[str] = set()

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def cardinality(self) -> int:
        from datapipe.dataset import UNKNOWN_CARDINALITY

        return UNKNOWN_CARDINALITY

    def _make_iterator(self, ctx, epoch):
        return IgnoreErrorsIterator(ctx.make(self._inputs[0], epoch), self._log, self._logged_paths)


class IgnoreErrorsIterator(OpIterator):
    op_name = "ignore_errors"

    def __init__(self, inner: OpIterator, log_warning: bool, logged_paths: set[str]):
        super().__init__([inner])
        self.inner, self.log = inner, log_warning
        self.num_ignored = 0
        self._logged_paths = logged_paths

    def next_chunk(self, n: int) -> list:
        for _ in range(MAX_CONSECUTIVE_ERRORS):
            try:
                return self.inner.next_chunk(n)
            except Exception as e:  # noqa: BLE001 - dropping failures is this op's job
                self.num_ignored += 1
                self._warn(e)
        raise RuntimeError(
            f"ignore_errors: {MAX_CONSECUTIVE_ERRORS} consecutive failures without an "
            "element; the input seems unable to move past a failure"
        )

    def _warn(self, e: Exception) -> None:
        if not self.log:
            return
        path = getattr(e, "path", None)
        if path is not None:
            if path in self._logged_paths:
                return
            self._logged_paths.add(path)
        logger.warning("ignore_errors: dropped an element: %s", e)

    def get_state(self) -> dict:
        return {"ignored": self.num_ignored, "input": self.inner.get_state()}

    def set_state(self, state: dict) -> None:
        self.num_ignored = int(state["ignored"])
        self.inner.set_state(state["input"])


def _walk(it: Any, seen: set[int]) -> int:
    if it is None or id(it) in seen:
        return 0
    seen.add(id(it))
    total = getattr(it, "num_ignored", 0) if isinstance(it, IgnoreErrorsIterator) else 0
    for child in getattr(it, "inputs", []):
        total += _walk(child, seen)
    return total


def ignored_count(iterator: Any) -> int:
    """Elements dropped so far by every ``ignore_errors`` op of a running pipeline.

    Args:
        iterator: the iterator ``iter(dataset)`` returned (or an op iterator).
    """
    return _walk(getattr(iterator, "_root", iterator), set())
