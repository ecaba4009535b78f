"""The engine shared by the Parquet, Arrow IPC and CSV readers (pyarrow reads the files).

A source reads *units* (a Parquet row group, an Arrow IPC record batch, a CSV file) into
``pyarrow.Table``s and converts each unit's columns to numpy once; rows and batches are
then slices of those arrays, so batch mode has no per-row Python loop and its arrays are
zero-copy views where Arrow allows (read-only then: copy before writing in place).

Type mapping (column -> numpy): integers, floats, bool -> the same numpy dtype; timestamp,
date, duration -> ``datetime64``/``timedelta64``; string/binary -> ``object`` arrays of
``str``/``bytes``; dictionary -> its decoded values; fixed-size list -> one more array
dimension (``(rows, k)``); variable-size list -> an ``object`` array of 1-D arrays.
Struct, map, union and decimal columns are not supported (select the others with
``columns=``). Nulls have no numpy form here: a column holding nulls raises
``NullValueError`` naming the file, the column and the first null's row (fill or drop them
with pyarrow first), unless ``nulls_as_nan=True`` and the column is floating-point: its
nulls are then read as NaN (as pandas does).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from datapipe._functions import raise_pending
from datapipe._iterator import OpIterator
from datapipe._lazy import lazy_module
from datapipe._positions import error_from_state, error_to_state
from datapipe._redact import redact_url
from datapipe._spec import TensorSpec, batched_spec
from datapipe._validate import check_bool, check_optional_int
from datapipe.dataset_ops import UNKNOWN_CARDINALITY
from datapipe.errors import FileReadError, NullValueError, SchemaMismatchError, annotate
from datapipe.io import _remote as remote
from datapipe.io._remote import is_url
from datapipe.io._safe_files import is_regular_file, not_regular_reason
from datapipe.io.file_source import FileSource, unit_path
from datapipe.io.files import match_files

if TYPE_CHECKING:  # pyarrow is imported on first use (datapipe/_lazy.py)
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")

_GLOB_CHARS = set("*?[")


def resolve_paths(paths: Any, op: str) -> list[str]:
    """Files from a path, a directory (its files, recursively, skipping names that start
    with ``.`` or ``_`` as pyarrow's dataset discovery does), a glob, or a list of those."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    out: list[str] = []
    for p in [os.fspath(x) for x in items]:
        if is_url(p):
            out += _resolve_url(p, op)
        elif os.path.isdir(p):
            found = []
            for root, dirs, files in os.walk(p):
                dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
                found += [os.path.join(root, f) for f in files if not f.startswith((".", "_"))]
            found = [f for f in found if is_regular_file(f)]  # FIFOs, devices: skipped
            if not found:
                raise FileNotFoundError(f"{op}: directory {p!r} holds no data files")
            out += sorted(found)
        elif _GLOB_CHARS & set(p):
            out += match_files(p, op)
        elif not os.path.exists(p):
            raise FileNotFoundError(f"{op}: no such file {p!r}")
        elif not is_regular_file(p):  # pyarrow would block on a FIFO, read a device for ever
            raise FileReadError(not_regular_reason(p), p)
        else:
            out.append(p)
    if not out:
        raise ValueError(f"{op}: no files given")
    return out


def _resolve_url(url: str, op: str) -> list[str]:
    """``resolve_paths`` for one URL (through fsspec, see ``datapipe.io._remote``)."""
    if _GLOB_CHARS & set(url.split("://", 1)[1]):
        return match_files(url, op)
    meta = remote.info(url, op)  # FileNotFoundError names the URL
    if meta.get("type") == "file":
        return [url]
    found = [u for rel, u in remote.find(url, op) if not _hidden(rel)]
    if not found:
        raise FileNotFoundError(f"{op}: directory {redact_url(url)!r} holds no data files")
    return found


def _hidden(relative: str) -> bool:
    return any(part.startswith((".", "_")) for part in relative.split("/"))


def source(path: str) -> Any:
    """What pyarrow reads ``path`` from: the path itself when local, else a seekable file
    object over the URL (``datapipe.io._remote.open_input``: size-checked, retried)."""
    return remote.open_input(path) if is_url(path) else path


def _check_nulls(arr: pa.Array, name: str, path: str, nulls_as_nan: bool) -> None:
    if not arr.null_count:
        return
    if nulls_as_nan and pa.types.is_floating(arr.type):
        return  # to_numpy gives NaN for them
    first = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
    hint = (
        "nulls_as_nan=True reads a float column's nulls as NaN; "
        if pa.types.is_floating(arr.type)
        else ""
    )
    raise NullValueError(
        f"column {name!r} holds {arr.null_count} null value(s), the first at row {first} "
        f"of this unit; datapipe has no numpy form for nulls in a {arr.type} column: "
        f"{hint}fill them (pyarrow.compute.fill_null) or drop those rows first",
        path,
    )


def column_to_numpy(
    arr: pa.Array | pa.ChunkedArray, name: str, path: str, nulls_as_nan: bool = False
) -> np.ndarray:
    """One column as a numpy array with one entry per row (see the module docstring)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    _check_nulls(arr, name, path, nulls_as_nan)
    t = arr.type
    if pa.types.is_dictionary(t):
        return column_to_numpy(arr.dictionary_decode(), name, path, nulls_as_nan)
    if pa.types.is_fixed_size_list(t):
        inner = column_to_numpy(arr.flatten(), name, path, nulls_as_nan)
        return inner.reshape(len(arr), t.list_size, *inner.shape[1:])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        values = column_to_numpy(arr.flatten(), name, path, nulls_as_nan)
        offsets = np.asarray(arr.offsets) - arr.offsets[0].as_py()
        out = np.empty(len(arr), dtype=object)
        out[:] = np.split(values, offsets[1:-1]) if len(arr) else []
        if pa.types.is_list(t.value_type) or pa.types.is_large_list(t.value_type):
            return _stack_rows(out, t, name, path)
        return out
    if (
        pa.types.is_struct(t)
        or pa.types.is_map(t)
        or pa.types.is_union(t)
        or pa.types.is_decimal(t)
    ):
        raise SchemaMismatchError(
            f"column {name!r} has type {t}, which datapipe does not convert; select the "
            "other columns with columns=[...] or cast it with pyarrow first",
            path,
        )
    return arr.to_numpy(zero_copy_only=False)


def _stack_rows(rows: np.ndarray, t: pa.DataType, name: str, path: str) -> np.ndarray:
    """Rows of a list-of-lists column (each an object array of its inner lists' arrays) as
    one array each, of the spec's rank and dtype (``field_spec``: a ``list<list<int64>>``
    row is a ``(None, None)`` int64 array, as a Hugging Face ``Sequence(Sequence(int64))``
    declares). A row whose inner lists differ in shape has no such array: refused."""
    inner = field_spec(pa.field(name, t.value_type), path)
    assert inner.shape is not None  # a column's rows have a known rank
    out = np.empty(len(rows), dtype=object)
    for i, parts in enumerate(rows):
        shapes = {p.shape for p in parts}
        if len(shapes) > 1:
            lengths = str([p.shape[0] for p in parts][:8])
            if len(parts) > 8:
                lengths = lengths[:-1] + ", ...]"
            raise SchemaMismatchError(
                f"column {name!r}: a row's inner lists differ in length ({lengths}), so it is no "
                f"{len(inner.shape) + 1}-D {inner.dtype} array, the column's spec "
                f"{(None, *inner.shape)}; pad the inner lists to one length, or read the "
                "column as flat values and lengths with pyarrow (pyarrow.compute."
                "list_flatten, list_value_length) first",
                path,
            )
        out[i] = (
            np.stack(list(parts))
            if len(parts)
            else np.zeros((0,) * (len(inner.shape) + 1), dtype=inner.dtype)
        )
    return out


def field_spec(field: pa.Field, path: str) -> TensorSpec:
    """The per-row spec of a column, from an empty array of its type."""
    t = field.type
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = field_spec(pa.field(field.name, t.value_type), path)
        assert inner.shape is not None  # a column's rows have a known rank
        return TensorSpec((None, *inner.shape), inner.dtype)
    sample = column_to_numpy(pa.array([], t), field.name, path)
    return TensorSpec(sample.shape[1:], sample.dtype)


class ColumnarSource(FileSource):
    """Base of the columnar readers. Subclasses implement ``_inspect(path)`` ->
    ``(schema, units, rows or None)`` and ``_read(unit, handle_cache) -> pa.Table``.

    Elements: a dict ``{column: value}`` per row (numpy scalars; arrays for list columns;
    ``str``/``bytes`` for text/binary), or with ``batch_size`` a dict of arrays of up to
    ``batch_size`` rows (batches continue across units; only the last one is smaller).

    ``nulls_as_nan``: read nulls in floating-point columns as NaN (default False: a null
    raises ``NullValueError``, so missing values are never mistaken for numbers unnoticed);
    nulls in other columns always raise.
    """

    _name = "columnar"

    def __init__(
        self,
        filenames: str | os.PathLike | Sequence[str | os.PathLike],
        columns: Sequence[str] | None = None,
        batch_size: int | None = None,
        nulls_as_nan: bool = False,
    ):
        super().__init__()
        self._batch_size = check_optional_int(self._name, "batch_size", batch_size, minimum=1)
        self._nulls_as_nan = check_bool(self._name, "nulls_as_nan", nulls_as_nan)
        self._columns = None if columns is None else list(columns)
        paths = resolve_paths(filenames, self._name)
        self._schema, units, rows = self._scan(paths)
        self._files = tuple(units)
        self._rows: dict | None = None if rows is None else dict(zip(units, rows))
        self._spec_cache: Any = None

    def _scan(self, paths: list[str]) -> tuple[pa.Schema, list, list | None]:
        first_schema, first_path = None, paths[0]
        units: list = []
        rows: list | None = []
        for p in paths:
            schema, u, r = self._inspect(p)
            schema = self._project(schema, p, first_path)
            if first_schema is None:
                first_schema = schema
            else:
                check_schema(first_schema, schema, p, first_path)
            units += u
            rows = None if r is None or rows is None else rows + r
        return first_schema, units, rows

    def _project(self, schema: pa.Schema, path: str, first_path: str) -> pa.Schema:
        if self._columns is None:
            return schema
        fields = []
        for c in self._columns:
            if schema.get_field_index(c) < 0:
                where = "" if path == first_path else f" (the first file {first_path!r} has it)"
                raise SchemaMismatchError(f"column {c!r} is missing{where}", path)
            fields.append(schema.field(c))
        return pa.schema(fields)

    def _restrict(self, units: tuple) -> None:
        self._spec_cache = None

    @property
    def element_spec(self) -> Any:
        if self._spec_cache is None:
            first = unit_path(self._files[0]) if self._files else "?"
            spec = {f.name: field_spec(f, first) for f in self._schema}
            if self._batch_size is not None:
                spec = batched_spec(spec, None)
                for f in self._schema:  # variable lists batch into object arrays of arrays
                    if pa.types.is_list(f.type) or pa.types.is_large_list(f.type):
                        spec[f.name] = TensorSpec((None,), np.dtype(object))
            self._spec_cache = spec
        return self._spec_cache

    def _total_rows(self) -> int | None:
        if self._rows is None:
            return None
        return sum(self._rows[u] for u in self._files)

    def cardinality(self) -> int:
        n = self._total_rows()
        if n is None:
            return UNKNOWN_CARDINALITY
        return n if self._batch_size is None else -(-n // self._batch_size)

    def _make_iterator(self, ctx, epoch):
        return ColumnarIterator(self)

    # ---- subclass hooks ----------------------------------------------------------------
    def _inspect(self, path: str) -> tuple[pa.Schema, list, list | None]:
        raise NotImplementedError

    def _read(self, unit: Any, handles: dict) -> pa.Table:
        raise NotImplementedError

    def read_unit(self, unit: Any, handles: dict) -> list[np.ndarray]:
        """The unit's projected columns as numpy arrays, checked against the schema."""
        path = unit_path(unit)
        table = self._read(unit, handles)
        names = [f.name for f in self._schema]
        check_schema(self._schema, self._project(table.schema, path, path), path, None)
        return [column_to_numpy(table.column(n), n, path, self._nulls_as_nan) for n in names]


def check_schema(first: pa.Schema, schema: pa.Schema, path: str, first_path: str | None) -> None:
    """Every column of ``first`` must be in ``schema`` with the same type."""
    ref = f"the first file {first_path!r}" if first_path else "the dataset's schema"
    for f in first:
        i = schema.get_field_index(f.name)
        if i < 0:
            raise SchemaMismatchError(f"column {f.name!r} is missing ({ref} has it)", path)
        t = schema.field(i).type
        if t != f.type:
            raise SchemaMismatchError(
                f"column {f.name!r} has type {t}, but {ref} has type {f.type}", path
            )


class ColumnarIterator(OpIterator):
    """Reads units in order; state is (unit index, row within it, units skipped).

    A unit that cannot be read (a corrupt row group or file, a schema or null error)
    raises once, naming the file, and is skipped from then on (``skipped``), so iteration
    may continue past it (``ignore_errors``) instead of failing on it for ever."""

    def __init__(self, ds: ColumnarSource):
        super().__init__()
        self.ds, self.op_name = ds, ds._name
        self.names = [f.name for f in ds._schema]
        self.unit, self.row = 0, 0
        self.cols: list[np.ndarray] | None = None  # the current unit's columns
        self.handles: dict = {}  # open file readers, owned by this iterator
        self.lock = threading.Lock()
        self.pending: BaseException | None = None
        self.skipped: set[int] = set()  # units that failed to load

    def _current(self) -> list[np.ndarray] | None:
        """Columns of the current unit with rows left, advancing past exhausted units."""
        units = self.ds._files
        while self.unit < len(units):
            if self.cols is None and self.unit not in self.skipped:
                try:
                    self.cols = self.ds.read_unit(units[self.unit], self.handles)
                except Exception:
                    self.skipped.add(self.unit)  # raised once, then passed over
                    raise
            if self.row < len(self.cols[0]) if self.cols else False:
                return self.cols
            self.unit, self.row, self.cols = self.unit + 1, 0, None
        return None

    def _take(self, n: int, partial_ok: bool = False) -> list[list[np.ndarray]]:
        """Up to ``n`` rows as pieces (one list of column slices per unit touched). With
        ``partial_ok``, a unit that fails to load after some rows were taken ends the take
        and its error waits in ``pending`` (rows before a failure are delivered first)."""
        pieces: list = []
        need = n
        while need > 0:
            try:
                cols = self._current()
            except Exception as e:  # noqa: BLE001 - see the docstring
                if not (partial_ok and pieces):
                    raise
                unit = self.ds._files[self.unit]
                self.pending = annotate(self.op_name, None, e, unit_path(unit))
                break
            if cols is None:
                break
            k = min(need, len(cols[0]) - self.row)
            pieces.append([c[self.row : self.row + k] for c in cols])
            self.row += k
            need -= k
        return pieces

    def next_chunk(self, n: int) -> list:
        with self.lock:
            raise_pending(self)
            out: list = []
            try:
                self._fill(out, n)
            except Exception as e:  # noqa: BLE001 - located; elements before it come first
                unit = self.ds._files[min(self.unit, len(self.ds._files) - 1)]
                self.pending = annotate(self.op_name, None, e, unit_path(unit))
                if not out:
                    raise_pending(self, cause=e)
            return out

    def _fill(self, out: list, n: int) -> None:
        bs = self.ds._batch_size
        if bs is None:
            while len(out) < n and self.pending is None:
                pieces = self._take(n - len(out), partial_ok=True)
                if not pieces:
                    return
                for piece in pieces:
                    out.extend(dict(zip(self.names, vals)) for vals in zip(*piece))
            return
        while len(out) < n:
            # a failure mid-batch restarts the batch from its first row on the next call
            unit, row, cols = self.unit, self.row, self.cols
            try:
                pieces = self._take(bs)
            except Exception:
                self.unit, self.row, self.cols = unit, row, cols
                raise
            if not pieces:
                return
            cols = pieces[0] if len(pieces) == 1 else [np.concatenate(p) for p in zip(*pieces)]
            out.append(dict(zip(self.names, cols)))

    def units_started(self) -> int:
        """Units begun so far (the unit protocol of auto-sharding's shard points)."""
        begun = self.row > 0 or self.cols is not None
        return min(self.unit + (1 if begun else 0), len(self.ds._files))

    def get_state(self) -> dict:
        return {
            "unit": self.unit,
            "row": self.row,
            "skipped": sorted(self.skipped),
            "pending_error": error_to_state(self.pending),
        }

    def set_state(self, state: dict) -> None:
        with self.lock:
            unit = int(state["unit"])
            if unit != self.unit:
                self.cols = None
            self.unit, self.row = unit, int(state["row"])
            self.skipped = {int(u) for u in state.get("skipped", [])}
            self.pending = error_from_state(state.get("pending_error"), self.op_name)

    def close(self) -> None:
        for h in self.handles.values():
            close = getattr(h, "close", None)
            if close is not None:
                close()
        self.handles.clear()
        super().close()
