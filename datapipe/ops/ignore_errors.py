"""``ignore_errors``: drop the elements whose production raised
(``tf.data.Dataset.ignore_errors``)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from datapipe._iterator import OpIterator
from datapipe._redact import redact_url
from datapipe._validate import check_bool
from datapipe.dataset_ops import Dataset
from datapipe.errors import InputStuckError, PipelineBrokenError

logger = logging.getLogger("datapipe")

# Consecutive failures after which an input whose state cannot be taken is assumed stuck
# (inputs with a state are checked by comparing it, see IgnoreErrorsIterator.next_chunk).
MAX_CONSECUTIVE_ERRORS = 100_000


class IgnoreErrorsDataset(Dataset):
    """The input's elements, without those whose production raised an ``Exception``.

    Every upstream op delivers the good elements before a failure and continues after it
    (a failing element is skipped, not retried), so the output is the input minus the
    failing elements, in order. ``KeyboardInterrupt`` and ``SystemExit`` are not caught.

    Where a failure goes (see ``datapipe._positions``): a failing element keeps its
    position, so ``zip`` drops the whole tuple at that position and stays aligned,
    ``sample_from_datasets`` / ``choose_from_datasets`` use up the choice made for it, and
    ``take``, ``skip``, ``shard`` and ``enumerate`` count it, exactly as when they read by
    index. After ``batch``, ``padded_batch`` or ``window``, the failing element is left out
    of its batch and the batch is filled with the next elements (every batch but the last
    stays full); tf.data's ``ignore_errors`` after ``batch`` drops the whole batch instead.
    A batch that fails to build (elements of different shapes) is dropped whole. A file
    source raises once for a file (or row group) it cannot read and moves past it.

    An input that fails again without moving past its failure (its state unchanged, so it
    would fail the same way for ever) raises ``InputStuckError`` instead of being retried.
    Errors that mean the pipeline itself cannot go on (``PipelineBrokenError``: a worker
    thread or process died, ``WorkerDiedError``; a stuck input) are raised, never dropped.

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
        self._log = check_bool("ignore_errors", "log_warning", log_warning)
        # Shared by every iterator of this dataset: a bad file is reported once, not once
        # per epoch (set.add is atomic under the GIL, so parallel iterators may share it).
        self._logged_paths: set[str] = set()

    @property
    def element_spec(self) -> Any:
        return self._inputs[0].element_spec

    def cardinality(self) -> int:
        from datapipe.dataset_ops import UNKNOWN_CARDINALITY

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
        streak, check_at, snapshot = 0, 1, None
        while True:
            try:
                return self.inner.next_chunk(n)
            except PipelineBrokenError:
                raise  # a dead worker or a stuck input: no element to skip
            except Exception as e:  # noqa: BLE001 - dropping failures is this op's job
                if isinstance(e.__cause__, PipelineBrokenError):
                    raise
                self.num_ignored += 1
                self._warn(e)
                streak += 1
                if streak == check_at:  # after failures 1, 2, 4, 8, ...: a few snapshots
                    state = self._snapshot()
                    if snapshot is not None and state is not None and same_state(state, snapshot):
                        raise self._stuck(e) from e
                    snapshot, check_at = state, 2 * check_at
                if streak >= MAX_CONSECUTIVE_ERRORS and snapshot is None:
                    raise self._stuck(e) from e

    def _snapshot(self) -> Any:
        try:
            return self.inner.get_state()
        except Exception:  # noqa: BLE001 - no state to compare: the count cap applies
            return None

    def _stuck(self, e: Exception) -> InputStuckError:
        """The input raised again without moving: its state is the same after the failure
        as after the previous one, so the next call would fail the same way for ever."""
        return InputStuckError(
            f"ignore_errors: the input failed again without moving past the failure (its "
            f"state did not change), so it cannot continue: {type(e).__name__}: {e}",
            getattr(e, "path", None),
        )

    def _warn(self, e: Exception) -> None:
        if not self.log:
            return
        path = getattr(e, "path", None)
        if path is not None:
            if path in self._logged_paths:
                return
            self._logged_paths.add(path)
        logger.warning("ignore_errors: dropped an element: %s", redact_url(str(e)))

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


def same_state(a: Any, b: Any) -> bool:
    """Whether two iterator states are equal (numpy arrays and torch tensors by value);
    False when they cannot be compared."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_state(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_state(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    if hasattr(a, "detach") and hasattr(a, "shape"):  # a torch tensor
        import torch

        return a.dtype == b.dtype and bool(torch.equal(a, b))
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - not comparable: treat as different
        return False
