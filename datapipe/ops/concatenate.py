"""``concatenate``: one dataset's elements, then another's (``tf.data.Dataset.concatenate``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from datapipe._iterator import OpIterator
from datapipe._random_access import get_grouped
from datapipe._spec import common_spec
from datapipe.dataset import (
    INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY,
    Dataset,
)
from datapipe.ops.repeat import ChainIterator


def merge_specs(op: str, specs: Sequence[Any]) -> Any:
    """The most specific spec every one of ``specs`` fits (tf.data's
    ``most_specific_compatible_type``): same structure and dtypes required; shapes merge
    dimension-wise (equal sizes kept, differing ones become ``None``, differing ranks
    become an unknown rank).

    Raises:
        TypeError: two specs differ in structure or dtype; the message shows both.
    """
    merged = specs[0]
    for other in specs[1:]:
        out = common_spec(merged, other)
        if out is None:
            raise TypeError(
                f"{op}: incompatible dataset elements (structures and dtypes must match):\n"
                f"  {merged!r}\nvs.\n  {other!r}"
            )
        merged = out
    return merged


class ConcatenateDataset(Dataset):
    """All elements of ``input_ds``, then all of ``dataset`` (``tf.data`` semantics).

    Raises:
        TypeError: the element specs are incompatible (different nesting or dtypes); the
            message shows both specs.

    ``element_spec`` is the most specific spec both inputs fit (``[None, 3]`` from
    ``[2, 3]`` and ``[5, 3]``). Cardinality: infinite if either input is, else unknown if
    either is, else the sum. Keeps random access when both inputs have it.

    Example:
        >>> import datapipe as dp
        >>> [int(x) for x in dp.range(3).concatenate(dp.range(10, 12))]
        [0, 1, 2, 10, 11]
    """

    _name = "concatenate"
    commutes_with_shard = True
    keeps_random_access = True

    def __init__(self, input_ds: Dataset, dataset: Dataset):
        super().__init__(input_ds, dataset)
        self._spec = merge_specs("concatenate", [input_ds.element_spec, dataset.element_spec])

    @property
    def element_spec(self) -> Any:
        return self._spec

    def cardinality(self) -> int:
        a, b = (d.cardinality() for d in self._inputs)
        if INFINITE_CARDINALITY in (a, b):
            return INFINITE_CARDINALITY
        if UNKNOWN_CARDINALITY in (a, b):
            return UNKNOWN_CARDINALITY
        return a + b

    def _make_random_access(self, ctx):
        return _ConcatAccess([d._make_random_access(ctx) for d in self._inputs])

    def _make_iterator(self, ctx, epoch):
        return ConcatenateIterator(self._inputs, ctx, epoch)


class _ConcatAccess:
    def __init__(self, inners: list):
        self.a, self.b = inners
        self.na = len(self.a)

    def __len__(self) -> int:
        return self.na + len(self.b)

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        na = self.na
        if isinstance(indices, range) and indices.step == 1:
            lo, hi = indices.start, indices.stop
            out = self.a.get_many(range(lo, min(hi, na)), epoch) if lo < na else []
            if hi > na:
                out.extend(self.b.get_many(range(max(lo, na) - na, hi - na), epoch))
            return out
        return get_grouped(
            indices,
            lambda i: (True, i - na) if i >= na else (False, i),  # (in the second input, j)
            lambda second, run: (self.b if second else self.a).get_many(run, epoch),
        )


class ConcatenateIterator(ChainIterator):
    """Reads the first input to its end, then opens the second (lazily, so a pipeline that
    stops early never builds it)."""

    op_name = "concatenate"
    pos_key = "which"  # the input being read: 0 or 1

    def __init__(self, nodes: tuple, ctx: Any, epoch: tuple):
        super().__init__(ctx, epoch)
        self.nodes = nodes

    def _build(self) -> OpIterator:
        return self.ctx.make(self.nodes[self.pos], self.epoch)

    def next_chunk(self, n: int) -> list:
        while self.pos < 2:
            got = self._open().next_chunk(n)
            if got:
                return got
            self._advance()
        return []
