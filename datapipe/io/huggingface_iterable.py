"""``from_huggingface`` of a ``datasets.IterableDataset``: a stream with an exact state.

The stream is read as Arrow tables of ``read_rows`` rows (``with_format("arrow")``,
``iter(batch_size=...)``: one C conversion per table, not ``datasets``' per-row Python
formatter) and converted column by column as the map-style source does
(``datapipe/io/huggingface.py``). The resume state is ``datasets``' own
``state_dict()`` taken before the current table, plus the rows of it already delivered:
restoring loads that state into a fresh copy, reads the table again and skips those rows.
So it is exact wherever ``datasets``' state is, which its ``IterableDataset.state_dict``
documents: except that examples in a ``shuffle`` buffer are lost on resume (the buffer
refills with new data) and that an Arrow-formatted batched ``map`` may skip a batch.

Each ``iter()`` sets the stream's epoch (``set_epoch``, on datapipe's own copy: the
caller's dataset is not changed) to the dataset's epoch plus datapipe's, so a shuffled
stream (``IterableDataset.shuffle``) draws a new order each epoch.

Auto-sharding: a stream has no random access, so under a worker context the DATA policy
gives each worker every ``k``-th element (every worker reads the whole stream); to read
only a share, split it with ``datasets.distributed.split_dataset_by_node`` first and turn
auto-sharding off (``Options.auto_shard_policy = AutoShardPolicy.OFF``).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from datapipe._iterator import OpIterator
from datapipe._lazy import lazy_module
from datapipe._spec import UnknownSpec
from datapipe._validate import check_int
from datapipe.dataset_ops import UNKNOWN_CARDINALITY, Dataset
from datapipe.io.huggingface import read_args, read_column, table_spec

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")


MAX_READ_ROWS = 2**24  # the bound on rows held per table (and re-read on resume)


class HuggingFaceIterableDataset(Dataset):
    """The rows (or batches) of a ``datasets.IterableDataset``, streamed.

    Args:
        dataset: a ``datasets.IterableDataset``.
        columns: the columns to read, in this order (default: all).
        batch_size: None (default): one element per row, a dict ``{column: value}``; an
            int: one element per ``batch_size`` rows, a dict of arrays.
        drop_remainder: with ``batch_size``, drop the stream's last, short batch.
        nulls_as_nan: read nulls of float columns as NaN (default False: they raise
            ``NullValueError``).
        read_rows: rows per Arrow table read from the stream without ``batch_size``
            (default 1,024; at most 2**24). It bounds the rows held and the rows read
            again on resume.

    Raises:
        TypeError: ``dataset`` is not a ``datasets.IterableDataset``.
        ValueError: ``batch_size`` or ``read_rows`` out of range; a column is not in the
            stream (at iteration, when its features are unknown beforehand).

    ``element_spec`` comes from the stream's ``features`` (unknown when ``datasets`` does
    not know them); cardinality is unknown. The state is ``datasets``' ``state_dict()``
    plus a row offset (see the module docstring for where it is exact).
    """

    _name = "from_huggingface"

    def __init__(
        self,
        dataset: Any,
        columns: Sequence[str] | None = None,
        batch_size: int | None = None,
        drop_remainder: bool = False,
        nulls_as_nan: bool = False,
        read_rows: int = 1024,
    ):
        super().__init__()
        op = self._name
        import datasets  # the caller has it: dataset is one of its objects

        if not isinstance(dataset, datasets.IterableDataset):
            raise TypeError(f"{op}: expected a datasets.IterableDataset, got {type(dataset)}")
        self._ds = dataset
        self._columns = None if columns is None else list(columns)
        self._batch_size, self._drop_remainder, self._nulls_as_nan = read_args(
            op, batch_size, drop_remainder, nulls_as_nan
        )
        self._read_rows = check_int(op, "read_rows", read_rows, minimum=1)
        if self._read_rows > MAX_READ_ROWS:
            raise ValueError(f"{op}: read_rows must be at most 2**24, got {read_rows}")
        self._spec = self._features_spec()

    def _features_spec(self) -> Any:
        features = self._ds.features
        if features is None:
            return UnknownSpec()
        schema = features.arrow_schema
        if self._columns is not None:
            missing = [c for c in self._columns if c not in schema.names]
            if missing:
                raise ValueError(
                    f"{self._name}: columns {missing} are not in the dataset (it has "
                    f"{schema.names})"
                )
            schema = pa.schema([schema.field(c) for c in self._columns])
        dim = self._batch_size if self._drop_remainder else None
        return table_spec(schema, dim, self._batch_size is not None)

    @property
    def element_spec(self) -> Any:
        return self._spec

    def cardinality(self) -> int:
        return UNKNOWN_CARDINALITY

    def _make_iterator(self, ctx, epoch):
        return _StreamIterator(self, int(epoch[0]) if epoch else 0)


class _StreamIterator(OpIterator):
    """Tables from ``datasets``' Arrow iterator, delivered row by row (or whole)."""

    op_name = "from_huggingface"

    def __init__(self, node: HuggingFaceIterableDataset, epoch: int):
        super().__init__()
        self.node, self.epoch = node, epoch
        self.cols: list[np.ndarray] | None = None  # the current table's columns
        self.names: list[str] = []
        self.offset = 0  # rows of the current table delivered
        self.before: dict | None = None  # datasets' state before the current table
        self.after: dict | None = None  # ... and after it
        self.done = False
        self._open(None)

    def _open(self, state: dict | None) -> None:
        node = self.node
        stream = node._ds.with_format("arrow")  # a copy: set_epoch leaves the caller's
        stream.set_epoch(node._ds.epoch + self.epoch)
        if state is not None:
            stream.load_state_dict(copy.deepcopy(state))
        self.stream = stream
        rows = node._batch_size or node._read_rows
        drop = node._batch_size is not None and node._drop_remainder
        self.tables = iter(stream.iter(batch_size=rows, drop_last_batch=drop))

    def _next_table(self) -> bool:
        """Read the next table into ``cols``; False at the end of the stream."""
        try:
            table = next(self.tables)
        except StopIteration:
            self.done, self.cols = True, None
            return False
        self.before, self.after = self.after, copy.deepcopy(self.stream.state_dict())
        if self.node._columns is not None:
            missing = [c for c in self.node._columns if c not in table.column_names]
            if missing:
                raise ValueError(f"{self.op_name}: columns {missing} are not in the stream")
            table = table.select(self.node._columns)
        self.names = table.column_names
        nan = self.node._nulls_as_nan
        self.cols = [read_column(table.column(i), n, nan) for i, n in enumerate(self.names)]
        self.offset = 0
        return True

    def next_chunk(self, n: int) -> list:
        out: list = []
        batched = self.node._batch_size is not None
        while len(out) < n and not self.done:
            if self.cols is None or self.offset >= len(self.cols[0]):
                if not self._next_table():
                    break
            cols = self.cols
            assert cols is not None
            if batched:
                out.append(dict(zip(self.names, cols)))
                self.offset = len(cols[0])
                continue
            stop = min(len(cols[0]), self.offset + n - len(out))
            piece = [c[self.offset : stop] for c in cols]
            out.extend(dict(zip(self.names, vals)) for vals in zip(*piece))
            self.offset = stop
        return out

    def get_state(self) -> dict:
        # The current table is read again from `before` on resume, its first `offset`
        # rows skipped; with no table yet, the stream starts from its beginning.
        have = self.cols is not None
        return {
            "stream": self.before if have else self.after,
            "offset": self.offset if have else 0,
            "done": self.done,
        }

    def set_state(self, state: dict) -> None:
        self.cols, self.before, self.after = None, None, state["stream"]
        self.done = bool(state["done"])
        self._open(state["stream"])
        offset = int(state["offset"])
        if offset and not self.done and self._next_table():
            self.before = state["stream"]
            self.offset = offset
