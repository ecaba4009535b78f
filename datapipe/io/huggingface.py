"""``from_huggingface``: a Hugging Face ``datasets`` dataset as a datapipe source.

A map-style ``datasets.Dataset`` is an Arrow table (memory-mapped from its cache files, or
in memory) plus, after ``select`` / ``shuffle`` / ``filter``, an *indices mapping* (a
column of row numbers, ``datasets``' ``Dataset._indices``). ``HuggingFaceDataset`` reads
that table directly: random access by row number through the mapping, so ``global_shuffle``
(a permutation of indices), auto-sharding (by index, exact), ``ds[i]`` and a resume state
of one integer all work; rows are gathered per Arrow chunk (``_arrow_gather.py``: numpy
views of fixed-width columns, Arrow ``take`` of the others) and converted column by column
(``datapipe/io/_columnar.py``'s mapping: numbers -> the same numpy dtype, strings ->
``str``, binary -> ``bytes``, lists -> arrays).
With ``batch_size`` the elements are batches read as one Arrow slice each: numeric columns
of a contiguous, null-free range are numpy views of the Arrow buffers (zero-copy,
read-only), not per-row Python objects stacked again.

``datasets.Image`` and ``datasets.Audio`` columns (Arrow structs of ``bytes`` and
``path``) are read as their encoded ``bytes``: decode them in a ``map`` (``decode_image``,
``decode_jpeg``), in parallel, instead of in ``datasets``' per-row formatter.

``datasets.IterableDataset`` (streaming) is read by
``datapipe/io/huggingface_iterable.py``. ``datasets`` itself is an optional extra
(``pip install datapipe-torch[huggingface]``); this module never imports it: an input can only
be one of its datasets when the caller has imported it (``sys.modules``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from datapipe._lazy import lazy_module
from datapipe._spec import TensorSpec, batched_spec
from datapipe._validate import check_bool, check_optional_int
from datapipe.dataset_ops import Dataset
from datapipe.errors import SchemaMismatchError
from datapipe.io._arrow_gather import ArrowGather

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")

LABEL = "<Hugging Face dataset>"  # where errors point: the table has no file of its own


def binary_child(t: pa.DataType) -> int | None:
    """The index of the ``bytes`` field of an Image/Audio struct, else None."""
    if not pa.types.is_struct(t):
        return None
    names = [t.field(i).name for i in range(t.num_fields)]
    return names.index("bytes") if "bytes" in names else None


def read_column(arr: Any, name: str, nulls_as_nan: bool) -> np.ndarray:
    """One column of a table slice as numpy (an Image/Audio struct: its ``bytes``)."""
    from datapipe.io._columnar import column_to_numpy

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    child = binary_child(arr.type)
    if child is not None:
        arr = arr.field(child)
    return column_to_numpy(arr, name, LABEL, nulls_as_nan)


def table_spec(schema: pa.Schema, batch_dim: int | None, batched: bool) -> dict:
    """``{column: TensorSpec}`` of one row, or of a batch (variable-length lists batch
    into object arrays of arrays, as the columnar readers do)."""
    from datapipe.io._columnar import field_spec

    spec = {}
    for f in schema:
        child = binary_child(f.type)
        field = f if child is None else pa.field(f.name, f.type.field(child).type)
        spec[f.name] = field_spec(field, LABEL)
    if not batched:
        return spec
    spec = batched_spec(spec, batch_dim)
    for f in schema:
        if pa.types.is_list(f.type) or pa.types.is_large_list(f.type):
            spec[f.name] = TensorSpec((batch_dim,), np.dtype(object))
    return spec


def read_args(
    op: str, batch_size: Any, drop_remainder: Any, nulls_as_nan: Any
) -> tuple[int | None, bool, bool]:
    """The arguments both Hugging Face sources share, checked."""
    return (
        check_optional_int(op, "batch_size", batch_size, minimum=1),
        check_bool(op, "drop_remainder", drop_remainder),
        check_bool(op, "nulls_as_nan", nulls_as_nan),
    )


def _project(table: pa.Table, columns: Sequence[str] | None, op: str) -> pa.Table:
    if columns is None:
        return table
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise ValueError(
            f"{op}: columns {missing} are not in the dataset (it has {table.column_names})"
        )
    return table.select(list(columns))


class HuggingFaceDataset(Dataset):
    """The rows (or batches) of a map-style ``datasets.Dataset``, by random access.

    Args:
        dataset: a ``datasets.Dataset`` (its Arrow table and indices mapping are read;
            ``datasets``' format, ``with_format``/``set_transform``, is not applied).
        columns: the columns to read, in this order (default: all).
        batch_size: None (default): one element per row, a dict ``{column: value}``
            (numpy scalars, arrays for list columns, ``str``/``bytes``); an int: one
            element per ``batch_size`` rows, a dict of arrays with a leading dimension
            (the last batch shorter unless ``drop_remainder``).
        drop_remainder: with ``batch_size``, drop the last, short batch (tf.data's name).
        nulls_as_nan: read nulls of float columns as NaN (default False: a null raises
            ``NullValueError`` naming the column; nulls elsewhere always raise).

    Raises:
        TypeError: ``dataset`` is not a ``datasets.Dataset``.
        ValueError: a column is not in the dataset; ``batch_size`` < 1.

    Cardinality: the dataset's rows (or batches). Keeps random access (``global_shuffle``,
    ``shard``, ``ds[i]``; with ``batch_size`` these act on whole batches). Batches of a
    contiguous range hold zero-copy, read-only numpy views of the Arrow buffers where
    Arrow allows (one chunk, no nulls, numeric); copy before writing in place.

    Example:
        >>> import datasets  # doctest: +SKIP
        >>> hf = datasets.Dataset.from_dict({"x": [1, 2], "y": ["a", "b"]})  # doctest: +SKIP
        >>> [e["y"] for e in from_huggingface(hf, batch_size=2)]  # doctest: +SKIP
        [array(['a', 'b'], dtype=object)]
    """

    _name = "from_huggingface"
    keeps_random_access = True

    def __init__(
        self,
        dataset: Any,
        columns: Sequence[str] | None = None,
        batch_size: int | None = None,
        drop_remainder: bool = False,
        nulls_as_nan: bool = False,
    ):
        super().__init__()
        op = self._name
        self._batch_size, self._drop_remainder, self._nulls_as_nan = read_args(
            op, batch_size, drop_remainder, nulls_as_nan
        )
        table, mapping = _table_and_mapping(dataset, op)
        self._table = _project(table, columns, op)
        self._mapping = mapping
        self._rows = len(mapping) if mapping is not None else self._table.num_rows
        dim = batch_size if drop_remainder else None
        self._spec = table_spec(self._table.schema, dim, batch_size is not None)

    @property
    def element_spec(self) -> Any:
        return self._spec

    def cardinality(self) -> int:
        b = self._batch_size
        if b is None:
            return self._rows
        return self._rows // b if self._drop_remainder else -(-self._rows // b)

    def _make_random_access(self, ctx):
        return _ArrowAccess(self)

    def _make_iterator(self, ctx, epoch):
        return self._ra_iterator(ctx, epoch)


def _table_and_mapping(dataset: Any, op: str) -> tuple[pa.Table, np.ndarray | None]:
    """The underlying ``pyarrow.Table`` and the indices mapping (uint64 row numbers, a
    zero-copy view) or None."""
    datasets = sys.modules.get("datasets")  # not imported: nothing can be its Dataset
    if datasets is None or not isinstance(dataset, datasets.Dataset):
        raise TypeError(
            f"{op}: expected a datasets.Dataset or datasets.IterableDataset, got "
            f"{type(dataset).__name__}"
        )
    table = dataset.data.table  # datasets.table.Table wraps the pyarrow.Table
    # datasets keeps select/shuffle/filter as a table of row numbers (_indices) instead
    # of copying rows; its own __getitem__ reads through it the same way.
    indices = getattr(dataset, "_indices", None)
    if indices is None:
        return table, None
    column = indices.table.column(0) if hasattr(indices, "table") else indices.column(0)
    return table, column.to_numpy()


class _ArrowAccess:
    """Random access to the rows (or batches) of the table."""

    def __init__(self, ds: HuggingFaceDataset):
        self.mapping = ds._mapping
        self.names = ds._table.column_names
        nan = ds._nulls_as_nan
        self.gather = ArrowGather(ds._table, lambda arr, name: read_column(arr, name, nan))
        self.b, self.nan = ds._batch_size, ds._nulls_as_nan
        self.rows = ds._rows
        self.n = ds.cardinality()

    def __len__(self) -> int:
        return self.n

    def _name_row(self, indices: Sequence[int], e: SchemaMismatchError) -> Exception:
        """``e`` (a row no array can hold: ``_columnar._stack_rows``) naming the row: the
        rows are read again one by one, on this error path only."""
        for i in indices:
            try:
                self._read([i])
            except SchemaMismatchError as one:
                return SchemaMismatchError(f"row {int(i)}: {one.reason}", one.path)
        return e

    def _read(self, rows: Sequence[int]) -> list[np.ndarray]:
        """The columns of ``rows`` (dataset row numbers) as numpy arrays."""
        if isinstance(rows, range):
            physical = np.arange(rows.start, rows.stop, rows.step, dtype=np.int64)
        else:
            physical = np.asarray(rows, dtype=np.int64)
        if self.mapping is not None:
            physical = self.mapping[physical].astype(np.int64)
        return self.gather.gather(physical)

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        names = self.names
        if self.b is None:
            try:
                cols = self._read(indices)
            except SchemaMismatchError as e:
                raise self._name_row(indices, e) from None
            return [dict(zip(names, vals)) for vals in zip(*cols)]
        out = []
        for i in indices:
            start = int(i) * self.b
            cols = self._read(range(start, min(start + self.b, self.rows)))
            out.append(dict(zip(names, cols)))
        return out


def from_huggingface(
    dataset: Any,
    columns: Sequence[str] | None = None,
    batch_size: int | None = None,
    drop_remainder: bool = False,
    nulls_as_nan: bool = False,
    read_rows: int = 1024,
) -> Dataset:
    """A Hugging Face dataset as a datapipe source.

    A ``datasets.Dataset`` becomes a ``HuggingFaceDataset`` (random access); a
    ``datasets.IterableDataset`` a ``HuggingFaceIterableDataset`` (a stream with an exact
    resume state; ``read_rows``, the rows per Arrow table it reads, applies to streams
    only). The other arguments are those classes'.

    Raises:
        TypeError: ``dataset`` is neither.
    """
    datasets = sys.modules.get("datasets")  # a datasets object means it is imported
    if datasets is not None and isinstance(dataset, datasets.IterableDataset):
        from datapipe.io.huggingface_iterable import HuggingFaceIterableDataset

        return HuggingFaceIterableDataset(
            dataset, columns, batch_size, drop_remainder, nulls_as_nan, read_rows
        )
    return HuggingFaceDataset(dataset, columns, batch_size, drop_remainder, nulls_as_nan)
