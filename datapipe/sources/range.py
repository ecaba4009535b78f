"""``range``: integers like Python's ``range`` (``tf.data.Dataset.range``)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe._spec import TensorSpec
from datapipe._validate import check_int
from datapipe.dataset_ops import Dataset


class RangeDataset(Dataset):
    """``range(stop)``, ``range(start, stop)`` or ``range(start, stop, step)``.

    Elements are numpy scalars of ``dtype`` (default int64). Keeps random access.

    Raises:
        ValueError: ``step`` is 0 or the argument count is not 1–3.

    Example:
        >>> import datapipe as dp, numpy as np
        >>> [int(x) for x in dp.range(3)], [int(x) for x in dp.range(2, 10, 3)]
        ([0, 1, 2], [2, 5, 8])
        >>> dp.Dataset.range(3, dtype=np.int32).element_spec
        TensorSpec(shape=(), dtype=int32)
    """

    _name = "range"
    keeps_random_access = True

    def __init__(self, *args: int, dtype: Any = "int64"):
        super().__init__()
        if not 1 <= len(args) <= 3:
            raise ValueError(f"range: takes 1 to 3 positional arguments, got {len(args)}")
        names = ("stop",) if len(args) == 1 else ("start", "stop", "step")
        ints = [check_int("range", n, a) for n, a in zip(names, args)]
        if len(ints) == 3 and ints[2] == 0:
            raise ValueError("range: step must not be 0")
        self._range = builtins.range(*ints)
        self._dtype = np.dtype(dtype)

    @property
    def element_spec(self) -> Any:
        return TensorSpec((), self._dtype)

    def cardinality(self) -> int:
        return len(self._range)

    def _make_random_access(self, ctx):
        return _RangeAccess(self._range, self._dtype)

    def _make_iterator(self, ctx, epoch):
        return self._ra_iterator(ctx, epoch)


class _RangeAccess:
    def __init__(self, r: builtins.range, dtype: np.dtype):
        self.r, self.dtype = r, dtype

    def __len__(self) -> int:
        return len(self.r)

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        r = self.r
        if isinstance(indices, builtins.range) and indices.step == 1:
            vals = np.arange(
                r[indices.start], r.start + indices.stop * r.step, r.step, dtype=np.int64
            )
        else:
            vals = r.start + np.asarray(indices, dtype=np.int64) * r.step
        return list(vals.astype(self.dtype, copy=False))
