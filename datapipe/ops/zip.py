"""``zip``: combine datasets element-wise into nested structures (``tf.data.Dataset.zip``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from datapipe import _structure as nest
from datapipe._functions import raise_pending
from datapipe._iterator import OpIterator
from datapipe._positions import (
    Failed,
    buffer_from_state,
    buffer_to_state,
    error_from_state,
    error_to_state,
    first_failure,
    read_positions,
)
from datapipe.dataset_ops import (
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Dataset,
)


def zip_cardinality(cards: Sequence[int]) -> int:
    """tf.data's rule: any unknown input gives unknown; else the smallest finite one;
    infinite only when every input is infinite."""
    result = INFINITE_CARDINALITY
    for n in cards:
        if n == UNKNOWN_CARDINALITY:
            return UNKNOWN_CARDINALITY
        if n != INFINITE_CARDINALITY and (result == INFINITE_CARDINALITY or n < result):
            result = n
    return result


def _check_structure(datasets: Any) -> list[Dataset]:
    leaves = nest.flatten(datasets)
    if not leaves:
        raise TypeError("zip: expected at least one dataset")
    for path, ds in nest.flatten_with_paths(datasets):
        if isinstance(ds, list):
            raise TypeError(
                f"zip: component {path} is a Python list; inputs must be (nested) tuples or "
                "dicts of Datasets — use a tuple instead of a list"
            )
        if not isinstance(ds, Dataset):
            raise TypeError(
                f"zip: component {path} must be a Dataset, got {type(ds).__name__}; inputs "
                "must be (nested) tuples or dicts of Datasets"
            )
    return leaves


class ZipDataset(Dataset):
    """Element ``i`` is the structure of the inputs' elements ``i`` (``tf.data.Dataset.zip``).

    Accepts ``zip(a, b, ...)``, ``zip((a, b))``, ``zip({"x": a, "y": b})`` or any nest of
    tuples/namedtuples/dicts of datasets; ``zip(a)`` with a single dataset gives ``a``'s
    elements unchanged, as tf.data does. Ends with the shortest input.

    Raises:
        TypeError: no datasets, a component that is not a Dataset, or a Python list (use a
            tuple; tf.data refuses lists too).

    Cardinality follows tf.data (see ``zip_cardinality``). Keeps random access when all
    inputs have it.

    Example:
        >>> import datapipe as dp
        >>> ds = dp.zip(dp.range(3), dp.range(10, 20))
        >>> [(int(a), int(b)) for a, b in ds]
        [(0, 10), (1, 11), (2, 12)]
        >>> [sorted(d) for d in dp.zip({"x": dp.range(2), "y": dp.range(2)})]
        [['x', 'y'], ['x', 'y']]
    """

    _name = "zip"
    commutes_with_shard = True
    keeps_random_access = True
    aligns_inputs = True

    def __init__(self, *datasets: Any):
        structure: Any = datasets[0] if len(datasets) == 1 else tuple(datasets)
        leaves = _check_structure(structure)
        super().__init__(*leaves)
        self._structure = structure

    @property
    def element_spec(self) -> Any:
        return nest.pack_as(self._structure, [d.element_spec for d in self._inputs])

    def cardinality(self) -> int:
        return zip_cardinality([d.cardinality() for d in self._inputs])

    def _make_random_access(self, ctx):
        return _ZipAccess([d._make_random_access(ctx) for d in self._inputs], self._structure)

    def _make_iterator(self, ctx, epoch):
        return ZipIterator([ctx.make(d, epoch) for d in self._inputs], self._structure)


def _pack_rows(structure: Any, columns: list[list]) -> list:
    if not nest.is_nested(structure):
        return columns[0]
    if type(structure) is tuple and all(not nest.is_nested(v) for v in structure):
        return list(zip(*columns))  # a flat plain tuple: the fast path
    return [nest.pack_as(structure, list(row)) for row in zip(*columns)]


class _ZipAccess:
    def __init__(self, inners: list, structure: Any):
        self.inners, self.structure = inners, structure
        self.n = min(len(a) for a in inners)

    def __len__(self) -> int:
        return self.n

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        return _pack_rows(self.structure, [a.get_many(indices, epoch) for a in self.inners])


class ZipIterator(OpIterator):
    """Reads a chunk from the first input, then exactly as many positions from each other
    input, buffering what it read (``bufs``, part of the state).

    A failing element keeps its position (see ``datapipe._positions``): the tuple at a
    position where any input failed is dropped whole, its first failure is raised after
    the tuples before it, and every input moves past that position, so the inputs stay
    aligned (tf.data's zip also advances every input past a failure). When an input ends,
    each other input whose buffer is empty is asked once more, so an input that ends at
    the same place sees its end (a ``cache()`` on it completes; tf.data asks every input
    too); what a longer input returns then is dropped.
    """

    op_name = "zip"

    def __init__(self, inners: list[OpIterator], structure: Any):
        super().__init__(inners)
        self.inners, self.structure = inners, structure
        self.bufs: list[list] = [[] for _ in inners]
        self.ended = [False] * len(inners)
        self.done = False
        self.pending: BaseException | None = None
        self.failures = 0  # Failed entries in the buffers (none: no scan needed)

    def _read(self, i: int, want: int, exact: bool) -> None:
        more, failed = read_positions(self.inners[i], self.bufs[i], want, exact)
        self.ended[i] = not more
        self.failures += failed

    def next_chunk(self, n: int) -> list:
        raise_pending(self)
        if self.done:
            return []
        bufs = self.bufs
        if not bufs[0] and not self.ended[0]:
            self._read(0, n, exact=False)
        k = min(n, len(bufs[0]))
        for i in range(1, len(bufs)):
            if k == 0:
                break
            if len(bufs[i]) < k and not self.ended[i]:
                self._read(i, k, exact=True)
            k = min(k, len(bufs[i]))
        if k == 0:
            self._finish()
            return []
        rows = [b[:k] for b in bufs]
        good = min(first_failure(r) for r in rows) if self.failures else k
        if good < k:  # position `good` failed in some input: drop it whole, raise its error
            self.pending = next(r[good].error for r in rows if type(r[good]) is Failed)
            self.failures -= sum(type(r[good]) is Failed for r in rows)
        for b in bufs:
            del b[: good + (good < k)]
        out = _pack_rows(self.structure, [r[:good] for r in rows]) if good else []
        del rows  # it holds the failure: no local may (see raise_pending)
        if not out:
            raise_pending(self)
        return out

    def _finish(self) -> None:
        """An input has ended: the stream ends. Ask the others for their end once."""
        self.done = True
        for i, it in enumerate(self.inners):
            if not self.ended[i] and not self.bufs[i]:
                try:
                    self.ended[i] = not it.next_chunk(1)
                except Exception:  # noqa: BLE001 - an element past the end: not part of the output
                    pass
        self.bufs = [[] for _ in self.inners]
        self.failures = 0

    def get_state(self) -> dict:
        return {
            "done": self.done,
            "ended": list(self.ended),
            "bufs": [buffer_to_state(b) for b in self.bufs],
            "pending_error": error_to_state(self.pending),
            "inputs": [it.get_state() for it in self.inners],
        }

    def set_state(self, state: dict) -> None:
        self.done = bool(state["done"])
        self.pending = error_from_state(state.get("pending_error"), self.op_name)
        self.ended = [bool(e) for e in state.get("ended", [False] * len(self.inners))]
        bufs = state.get("bufs")
        self.bufs = (
            [buffer_from_state(b, self.op_name) for b in bufs]
            if bufs
            else [[] for _ in self.inners]
        )
        self.failures = sum(type(x) is Failed for b in self.bufs for x in b)
        for it, s in zip(self.inners, state["inputs"]):
            it.set_state(s)
