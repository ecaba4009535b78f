"""``unique``: drop repeated elements (``tf.data.Dataset.unique``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from datapipe import _structure as nest
from datapipe._functions import ElementwiseIterator
from datapipe._iterator import OpIterator
from datapipe._spec import TensorSpec, UnknownSpec, dtype_name, is_torch, is_torch_dtype
from datapipe.dataset_ops import UNKNOWN_CARDINALITY, Dataset, UnaryDataset


def _check_spec(spec: Any) -> None:
    if isinstance(spec, UnknownSpec):  # an empty input: nothing to check
        return
    if nest.is_nested(spec) or not isinstance(spec, TensorSpec):
        raise TypeError(
            "unique: elements must be single components of an integer or string type, got "
            f"the structure {spec!r}"
        )
    name = dtype_name(spec.dtype)
    if is_torch_dtype(spec.dtype):
        ok = not (spec.dtype.is_floating_point or spec.dtype.is_complex or name == "bool")
    else:
        ok = np.dtype(spec.dtype).kind in "iuOSU"
    if not ok:
        raise TypeError(
            f"unique: elements must be integers or strings (tf.data: int32, int64, string), "
            f"got dtype {name}"
        )


def _type_error(what: str) -> TypeError:
    return TypeError(f"unique: elements must be integers or strings, got {what}")


def _array_key(shape: tuple, values: list) -> tuple:
    """The key of a non-scalar element: its shape and values (tf.data compares whole
    tensors), as a tuple that is hashable, sortable and survives a JSON state."""
    return ("ndarray", tuple(shape), tuple(values))


def _key(x: Any) -> Any:
    """The hashable, sortable value of an int/str/bytes element (a scalar, or an array of
    any shape: ``_array_key``)."""
    if isinstance(x, (str, bytes)):
        return x
    if isinstance(x, int) and not isinstance(x, bool):
        return x
    if is_torch(x):
        if x.dtype.is_floating_point or x.dtype.is_complex or str(x.dtype) == "torch.bool":
            raise _type_error(f"dtype {x.dtype}")
        return int(x) if x.ndim == 0 else _array_key(tuple(x.shape), x.reshape(-1).tolist())
    if isinstance(x, np.ndarray) and x.shape != ():
        if x.dtype.kind not in "iuOSU":
            raise _type_error(f"dtype {x.dtype}")
        flat = x.reshape(-1).tolist()
        if x.dtype.kind in "OSU" and not all(isinstance(v, (str, bytes)) for v in flat):
            raise _type_error("an object array that does not hold strings")
        return _array_key(x.shape, flat)
    if isinstance(x, (np.ndarray, np.generic)):
        if x.dtype.kind in "iu":
            return int(x)
        v = x.item()
        if isinstance(v, (str, bytes)):
            return v
        raise _type_error(f"dtype {x.dtype}")
    raise _type_error(type(x).__name__)


def _as_key(k: Any) -> Any:
    """A key back from a state (JSON makes ``_array_key``'s tuples lists)."""
    if isinstance(k, (list, tuple)):
        return tuple(_as_key(v) for v in k)
    return k


def _sort_key(v: Any) -> tuple:
    # str and bytes never compare with each other, so the type name leads the key.
    return (type(v).__name__, v)


class UniqueDataset(UnaryDataset):
    """Each distinct element once, at its first occurrence, in input order.

    Elements must be of an integer type or strings (``str``/``bytes``), as in tf.data
    (int32, int64, string): scalars, or arrays of any shape compared whole. Every
    distinct element seen is held in memory, and in the iterator state (``"seen"``: a
    list of disjoint sorted runs of the seen keys, kept as runs so that taking a state
    costs O(log n) amortised per key, not O(n)) so that a checkpoint resumes exactly.

    Raises:
        TypeError: at construction when the input's ``element_spec`` is nested or of
            another dtype.
        PipelineError (at iteration): an element that is not such a value; names
            ``unique`` and the element's index.

    ``cardinality()`` is ``UNKNOWN_CARDINALITY`` (tf.data). Random access is lost.

    Example:
        >>> import datapipe as dp
        >>> [int(x) for x in dp.from_tensor_slices([1, 3, 1, 2, 3, 4]).unique()]
        [1, 3, 2, 4]
    """

    _name = "unique"

    def __init__(self, input_ds: Dataset):
        super().__init__(input_ds)
        _check_spec(input_ds.element_spec)

    def cardinality(self) -> int:
        return UNKNOWN_CARDINALITY

    def _make_iterator(self, ctx, epoch):
        return UniqueIterator(ctx.make(self._inputs[0], epoch))


class UniqueIterator(ElementwiseIterator):
    op_name = "unique"

    def __init__(self, inner: OpIterator):
        super().__init__(inner)
        self.seen: set = set()
        # For get_state: ``seen`` as sorted runs (disjoint; a run is never mutated once
        # made, so states can share them), plus the keys added since the last snapshot.
        self.runs: list[list] = []
        self.added: list = []

    def _is_new(self, x: Any) -> bool:
        k = _key(x)
        if k in self.seen:
            return False
        self.seen.add(k)
        self.added.append(k)
        return True

    def next_chunk(self, n: int) -> list:
        return self._select(n, self._is_new)

    def get_state(self) -> dict:
        # The outer iterator asks for the state before every chunk, so this must not cost
        # O(len(seen)): the new keys become one sorted run, and runs merge like a binary
        # counter (a run merges into the one before it once it is as large), which keeps
        # O(log n) runs and O(log n) amortised work per key.
        if self.added:
            run = sorted(self.added, key=_sort_key)
            self.added = []
            runs = list(self.runs)
            while runs and len(runs[-1]) <= len(run):
                run = sorted(runs.pop() + run, key=_sort_key)  # two sorted runs: linear
            runs.append(run)
            self.runs = runs
        return {"seen": list(self.runs), **super().get_state()}

    def seen_sorted(self) -> list:
        """Every key seen so far, sorted (for inspection and tests)."""
        return sorted(self.seen, key=_sort_key)

    def set_state(self, state: dict) -> None:
        self.runs = [[_as_key(k) for k in run] for run in state["seen"]]
        self.seen = {k for run in self.runs for k in run}
        self.added = []
        super().set_state(state)
