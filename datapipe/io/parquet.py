"""``ParquetDataset``: rows or record batches of Parquet files, read by pyarrow."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from datapipe._lazy import lazy_module
from datapipe.errors import FileReadError
from datapipe.io._columnar import ColumnarSource, source

if TYPE_CHECKING:  # pyarrow is imported on first use (datapipe/_lazy.py)
    import pyarrow as pa
    import pyarrow.parquet as pq
else:
    pa = lazy_module("pyarrow")
    pq = lazy_module("pyarrow.parquet")


class ParquetDataset(ColumnarSource):
    """Rows (or batches of rows) of Parquet files; the unit of reading and of FILE sharding
    is the row group: ``files`` lists ``(path, row_group)`` pairs.

    Args:
        filenames: a file, a directory (its files, recursively; names starting with ``.``
            or ``_`` skipped), a glob pattern, or a list of those. Files are read in the
            given order (directories and globs sorted). Any of them may be a URL
            (``s3://``, ``https://``, ... read through fsspec: ``datapipe-torch[remote]``).
        columns: the columns to read (projection; only these are decoded), in this order
            in the element dict. Default: all columns of the first file.
        batch_size: None yields one dict per row; an int yields dicts of numpy arrays of
            ``batch_size`` rows (the last batch may be smaller), built without a per-row
            Python loop; batches run on across row groups and files.
        nulls_as_nan: read nulls in floating-point columns as NaN (an opt-in; default
            False raises ``NullValueError``, so missing values are never silently numbers).

    Elements: ``{name: value}`` with the types of ``datapipe.io._columnar`` (int/float/bool
    numpy scalars, ``str``/``bytes``, fixed-size lists as arrays of shape ``(k,)``). The
    cardinality is known from the files' footers. The iterator's state is (row group, row),
    so a checkpoint resumes exactly.

    Raises:
        FileNotFoundError: a path or pattern matches nothing.
        SchemaMismatchError: a file lacks a column of the first file or holds it with
            another type (names the file and the column); raised here, at construction.
        NullValueError (at iteration): a column holds nulls (names the file, the column and
            the row), unless ``nulls_as_nan`` and the column is floating-point.
        FileReadError: a file is not Parquet (names it).

    Example:
        >>> import datapipe as dp, os, tempfile, pyarrow as pa, pyarrow.parquet as pq
        >>> p = os.path.join(tempfile.mkdtemp(), "t.parquet")
        >>> pq.write_table(pa.table({"x": [1, 2, 3], "y": [0.5, 1.5, 2.5]}), p, row_group_size=2)
        >>> ds = dp.ParquetDataset(p, batch_size=2)
        >>> ds.files, ds.cardinality()
        (((..., 0), (..., 1)), 2)
        >>> [b["x"].tolist() for b in ds]
        [[1, 2], [3]]
        >>> next(iter(dp.ParquetDataset(p, columns=["y"])))
        {'y': np.float64(0.5)}
    """

    _name = "parquet"

    def _inspect(self, path: str) -> tuple[pa.Schema, list, list]:
        try:
            f = source(path)
            meta = pq.read_metadata(f)
            schema = pq.read_schema(f)
        except (pa.ArrowInvalid, OSError) as e:
            raise FileReadError(f"not a readable Parquet file: {e}", path) from e
        groups = range(meta.num_row_groups)
        return schema, [(path, k) for k in groups], [meta.row_group(k).num_rows for k in groups]

    def _read(self, unit: Any, handles: dict) -> pa.Table:
        path, k = unit
        pf = handles.get(path)
        if pf is None:  # keep one file open: consecutive row groups share its footer
            for h in handles.values():
                h.close()
            handles.clear()
            pf = handles[path] = pq.ParquetFile(source(path))
        cols = [f.name for f in self._schema]
        try:
            return pf.read_row_group(k, columns=cols)
        except (pa.ArrowInvalid, OSError) as e:
            raise FileReadError(f"cannot read row group {k}: {e}", path) from e


def from_parquet(
    filenames: str | os.PathLike | Sequence[str | os.PathLike],
    columns: Sequence[str] | None = None,
    batch_size: int | None = None,
    nulls_as_nan: bool = False,
) -> ParquetDataset:
    """Alias of ``ParquetDataset(filenames, columns, batch_size, nulls_as_nan)``."""
    return ParquetDataset(filenames, columns, batch_size, nulls_as_nan)
