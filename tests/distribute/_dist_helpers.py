"""Helpers for the distribute tests: a minimal FileSource and option builders."""

from __future__ import annotations

from typing import Any

import numpy as np
from harness import py

import datapipe as dp
from datapipe._iterator import OpIterator
from datapipe._spec import TensorSpec
from datapipe.io.file_source import FileSource


class FakeFiles(FileSource):
    """Reads "files" from a dict name -> list of ints; streaming, like a text reader.

    ``known=True`` reports the total as cardinality (as a Parquet reader with metadata
    would); else the cardinality is unknown (as for text files)."""

    _name = "fake_files"

    def __init__(self, contents: dict[str, list[int]], known: bool = True):
        super().__init__()
        self._contents = contents
        self._files = tuple(contents)
        self._known = known

    @property
    def element_spec(self) -> Any:
        return TensorSpec((), np.dtype("int64"))

    def cardinality(self) -> int:
        if not self._known:
            return dp.UNKNOWN_CARDINALITY
        return sum(len(self._contents[f]) for f in self._files)

    def _make_iterator(self, ctx, epoch):
        flat = [np.int64(v) for f in self._files for v in self._contents[f]]
        return _ListIterator(flat)


class _ListIterator(OpIterator):
    op_name = "fake_files"

    def __init__(self, items: list):
        super().__init__()
        self.items, self.pos = items, 0

    def next_chunk(self, n: int) -> list:
        out = self.items[self.pos : self.pos + n]
        self.pos += len(out)
        return out

    def get_state(self) -> dict:
        return {"pos": self.pos}

    def set_state(self, state: dict) -> None:
        self.pos = int(state["pos"])


def worker_options(count: int, index: int, policy=None, uneven=None, seed=None) -> dp.Options:
    return dp.Options(
        seed=seed,
        distribute=dp.DistributeOptions(
            num_workers=count, worker_index=index, auto_shard_policy=policy, uneven=uneven
        ),
    )


def rewritten(ds: dp.Dataset, count: int = 2, index: int = 0, **kw) -> dp.Dataset:
    """The graph worker ``index`` of ``count`` runs (after every iter()-time rewrite)."""
    from datapipe.dataset_ops import _rewritten

    return _rewritten(ds.with_options(worker_options(count, index, **kw)))


def op_names(ds: dp.Dataset, count: int = 2, index: int = 0, **kw) -> list[str]:
    """Op names of that graph, inputs first (``auto_shard``: a shard point)."""
    from datapipe._context import walk

    return [n._name for n in walk(rewritten(ds, count, index, **kw)) if n._name != "with_options"]


def per_worker(ds: dp.Dataset, count: int, **kw) -> list[list]:
    """Each worker's elements (as Python values, batches as lists)."""
    out = []
    for i in range(count):
        out.append([py(x) for x in ds.with_options(worker_options(count, i, **kw))])
    return out
