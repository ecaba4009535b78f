"""``zip``: combine datasets element-wise into nested structures (``tf.data.Dataset.zip``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from datapipe import _structure as nest
from datapipe._iterator import OpIterator, pull_exactly
from datapipe.dataset import (
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
    """Asks the first input for a chunk, then each other input for exactly as many."""

    op_name = "zip"

    def __init__(self, inners: list[OpIterator], structure: Any):
        super().__init__(inners)
        self.inners, self.structure = inners, structure
        self.done = False

    def next_chunk(self, n: int) -> list:
        if self.done:
            return []
        columns = [self.inners[0].next_chunk(n)]
        k = len(columns[0])
        for it in self.inners[1:]:
            if k == 0:
                break
            col = pull_exactly(it, k)
            k = min(k, len(col))
            columns.append(col)
        if k < len(columns[0]) or k == 0:
            # An input ended: the stream ends here (elements already read from the longer
            # inputs past this point are dropped, as in tf.data).
            self.done = True
            if k == 0:
                return []
            columns = [c[:k] for c in columns]
        return _pack_rows(self.structure, columns)

    def get_state(self) -> dict:
        return {"done": self.done, "inputs": [it.get_state() for it in self.inners]}

    def set_state(self, state: dict) -> None:
        self.done = bool(state["done"])
        for it, s in zip(self.inners, state["inputs"]):
            it.set_state(s)
