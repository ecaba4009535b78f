"""Rows of a chunked Arrow table by index, as numpy columns, without copying the table.

``pyarrow.Table.take`` on a table of many chunks (a ``datasets`` cache file holds record
batches of ~1,000 rows) costs ~1-3 ms for 64 random rows of a fixed-size-list column
(measured on 50-200 chunks, pyarrow 26; ``benchmarks/bench_huggingface.py``): it works
on the whole chunked column. ``ArrowGather`` reads per chunk instead:

- fixed-width columns (numbers; fixed-size lists of numbers, nested) without nulls are
  numpy views of each chunk's buffers (zero-copy, made once per chunk on first use), and a
  gather is one numpy fancy index per chunk touched, written into the output in place;
- other columns (strings, binary, variable lists, columns with nulls) are taken per chunk
  with Arrow's ``take`` on that chunk and converted (``read_column``).

A contiguous run of rows inside one chunk is a slice: numpy views of the Arrow buffers,
read-only, no copy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from datapipe._lazy import lazy_module

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")


def is_dense(t: pa.DataType) -> bool:
    """Whether a column of type ``t`` without nulls converts to numpy without a copy."""
    if pa.types.is_fixed_size_list(t):
        return is_dense(t.value_type)
    return (pa.types.is_integer(t) or pa.types.is_floating(t)) and not pa.types.is_float16(t)


class ArrowGather:
    """Gather rows of ``table`` by physical row number.

    Args:
        table: a ``pyarrow.Table`` (any number of chunks per column).
        read: ``read(array, column_name) -> np.ndarray`` converting one Arrow array
            (one chunk's slice) to numpy, with the caller's null and type rules.
    """

    def __init__(self, table: pa.Table, read: Callable[[Any, str], np.ndarray]):
        self.batches = table.to_batches()  # zero-copy: the table's own chunks
        self.names = table.column_names
        self.schema = table.schema
        self.read = read
        sizes = [b.num_rows for b in self.batches]
        self.starts = np.cumsum([0, *sizes])  # row number of each batch's first row
        types = [f.type for f in table.schema]
        nulls = [table.column(i).null_count for i in range(len(types))]
        self.dense = [is_dense(t) and n == 0 for t, n in zip(types, nulls)]
        self.views: dict[tuple[int, int], np.ndarray] = {}  # (batch, column) -> numpy view

    def _view(self, b: int, c: int) -> np.ndarray:
        key = (b, c)
        v = self.views.get(key)
        if v is None:
            v = self.views[key] = self.read(self.batches[b].column(c), self.names[c])
        return v

    def gather(self, rows: np.ndarray) -> list[np.ndarray]:
        """The columns of ``rows`` (int64 physical row numbers, in that order)."""
        n = len(rows)
        if n == 0:
            empty = pa.table({f.name: pa.array([], f.type) for f in self.schema})
            return [self.read(empty.column(c), name) for c, name in enumerate(self.names)]
        chunk = np.searchsorted(self.starts, rows, side="right") - 1
        local = rows - self.starts[chunk]
        first = int(chunk[0])
        if (chunk == first).all():
            lo = int(local[0])
            if n == 1 or (np.diff(local) == 1).all():  # one contiguous run: views
                return [self._slice(first, c, lo, lo + n) for c in range(len(self.names))]
            return [self._pick(first, c, local) for c in range(len(self.names))]
        order = np.argsort(chunk, kind="stable")
        bounds = np.flatnonzero(np.diff(chunk[order])) + 1
        groups = [
            (int(chunk[g[0]]), g, local[g]) for g in np.split(order, bounds)
        ]  # (batch, output positions, rows within the batch)
        return [self._gather_column(c, groups, n) for c in range(len(self.names))]

    def _slice(self, b: int, c: int, lo: int, hi: int) -> np.ndarray:
        if self.dense[c]:
            return self._view(b, c)[lo:hi]
        return self.read(self.batches[b].column(c).slice(lo, hi - lo), self.names[c])

    def _pick(self, b: int, c: int, local: np.ndarray) -> np.ndarray:
        if self.dense[c]:
            return self._view(b, c)[local]
        return self.read(self.batches[b].column(c).take(pa.array(local)), self.names[c])

    def _gather_column(self, c: int, groups: list, n: int) -> np.ndarray:
        out: np.ndarray | None = None
        for b, positions, local in groups:
            part = self._pick(b, c, local)
            if out is None:
                out = np.empty((n, *part.shape[1:]), dtype=part.dtype)
            out[positions] = part
        assert out is not None
        return out
