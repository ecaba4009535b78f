"""``from_arrow_ipc``: rows or record batches of Arrow IPC files (Feather v2), memory-mapped."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from datapipe._lazy import lazy_module
from datapipe.errors import FileReadError
from datapipe.io._columnar import ColumnarSource, source
from datapipe.io._remote import is_url

if TYPE_CHECKING:  # pyarrow is imported on first use (datapipe/_lazy.py)
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")


def _open(path: str) -> pa.ipc.RecordBatchFileReader:
    try:
        if is_url(path):  # a seekable, retried reader over the object's byte ranges
            return pa.ipc.open_file(source(path))
        return pa.ipc.open_file(pa.memory_map(path, "r"))
    except (pa.ArrowInvalid, OSError) as e:
        raise FileReadError(f"not an Arrow IPC file (or Feather v2): {e}", path) from e


class ArrowIPCDataset(ColumnarSource):
    """Rows (or batches) of Arrow IPC *file* format files, which Feather v2 files are.

    The unit of reading and of FILE sharding is the record batch: ``files`` lists
    ``(path, batch_index)``. Files are memory-mapped, so uncompressed columns reach numpy
    without a copy. Arguments, elements and errors are those of ``ParquetDataset``; the
    cardinality is counted on first use (reading every record batch's length).

    Example:
        >>> import datapipe as dp, os, tempfile, pyarrow as pa, pyarrow.feather as feather
        >>> p = os.path.join(tempfile.mkdtemp(), "t.feather")
        >>> feather.write_feather(pa.table({"x": [1, 2, 3]}), p)
        >>> [r["x"].item() for r in dp.from_arrow_ipc(p)]
        [1, 2, 3]
    """

    _name = "arrow_ipc"

    def _inspect(self, path: str) -> tuple[pa.Schema, list, None]:
        reader = _open(path)
        return reader.schema, [(path, k) for k in range(reader.num_record_batches)], None

    def _total_rows(self) -> int | None:
        if self._rows is None:
            rows: dict = {}
            readers: dict = {}
            for u in self._files:
                r = readers.get(u[0]) or readers.setdefault(u[0], _open(u[0]))
                rows[u] = r.get_batch(u[1]).num_rows
            self._rows = rows
        return sum(self._rows[u] for u in self._files)

    def _read(self, unit: Any, handles: dict) -> pa.Table:
        path, k = unit
        reader = handles.get(path)
        if reader is None:
            handles.clear()  # memory maps close when their last reference goes
            reader = handles[path] = _open(path)
        batch = reader.get_batch(k)
        return pa.Table.from_batches([batch]).select([f.name for f in self._schema])


def from_arrow_ipc(
    filenames: str | os.PathLike | Sequence[str | os.PathLike],
    columns: Sequence[str] | None = None,
    batch_size: int | None = None,
    nulls_as_nan: bool = False,
) -> ArrowIPCDataset:
    """Rows or batches of Arrow IPC / Feather v2 files (see ``ArrowIPCDataset``)."""
    return ArrowIPCDataset(filenames, columns, batch_size, nulls_as_nan)


from_feather = from_arrow_ipc
