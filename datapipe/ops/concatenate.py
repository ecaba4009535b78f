"""``concatenate``: one dataset's elements, then another's (``tf.data.Dataset.concatenate``)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from datapipe._iterator import OpIterator
from datapipe._random_access import get_grouped
from datapipe._spec import common_spec
from datapipe.dataset_ops import (
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

    A chain ``a.concatenate(b).concatenate(c)...`` is one node with inputs ``a, b, c,
    ...`` (the inputs of a plain ``concatenate`` on the left are taken over), so a chain
    of a thousand concatenations (tf.data's options_test) is no deeper than one.

    Example:
        >>> import datapipe as dp
        >>> [int(x) for x in dp.range(3).concatenate(dp.range(10, 12))]
        [0, 1, 2, 10, 11]
    """

    _name = "concatenate"
    commutes_with_shard = True
    keeps_random_access = True

    def __init__(self, input_ds: Dataset, dataset: Dataset):
        left: tuple = (input_ds,)
        if type(input_ds) is ConcatenateDataset and "_origin" not in input_ds.__dict__:
            left = input_ds._inputs  # a chain of concatenations: one node (see above)
        super().__init__(*left, dataset)
        self._spec = merge_specs("concatenate", [input_ds.element_spec, dataset.element_spec])

    @property
    def element_spec(self) -> Any:
        return self._spec

    def cardinality(self) -> int:
        counts = [d.cardinality() for d in self._inputs]
        if INFINITE_CARDINALITY in counts:
            return INFINITE_CARDINALITY
        if UNKNOWN_CARDINALITY in counts:
            return UNKNOWN_CARDINALITY
        return sum(counts)

    def _make_random_access(self, ctx):
        return _ConcatAccess([d._make_random_access(ctx) for d in self._inputs])

    def _make_iterator(self, ctx, epoch):
        return ConcatenateIterator(self._inputs, ctx, epoch)


class _ConcatAccess:
    def __init__(self, inners: list):
        self.inners = inners
        self.starts = [0]  # index of each input's first element
        for inner in inners:
            self.starts.append(self.starts[-1] + len(inner))

    def __len__(self) -> int:
        return self.starts[-1]

    def _locate(self, i: int) -> tuple[int, int]:
        k = bisect.bisect_right(self.starts, i) - 1  # (input, index within it)
        return k, i - self.starts[k]

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        if isinstance(indices, range) and indices.step == 1 and len(indices):
            k, _ = self._locate(indices.start)
            out: list = []
            while k < len(self.inners) and self.starts[k] < indices.stop:  # contiguous runs
                lo = max(indices.start, self.starts[k]) - self.starts[k]
                hi = min(indices.stop, self.starts[k + 1]) - self.starts[k]
                if hi > lo:
                    out.extend(self.inners[k].get_many(range(lo, hi), epoch))
                k += 1
            return out
        return get_grouped(
            indices,
            self._locate,
            lambda k, run: self.inners[int(k)].get_many(run, epoch),  # type: ignore[call-overload]
        )


class ConcatenateIterator(ChainIterator):
    """Reads each input to its end, then opens the next (lazily, so a pipeline that stops
    early never builds the later ones)."""

    op_name = "concatenate"
    pos_key = "which"  # the input being read: 0, 1, ...

    def __init__(self, nodes: tuple, ctx: Any, epoch: tuple):
        super().__init__(ctx, epoch)
        self.nodes = nodes

    def _build(self) -> OpIterator:
        return self.ctx.make(self.nodes[self.pos], self.epoch)

    def next_chunk(self, n: int) -> list:
        while self.pos < len(self.nodes):
            got = self._open().next_chunk(n)
            if got:
                return got
            self._advance()
        return []
