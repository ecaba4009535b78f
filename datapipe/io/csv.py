"""``from_csv``: rows or batches of CSV files, parsed by pyarrow (multi-threaded, typed)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from datapipe._lazy import lazy_module
from datapipe.errors import FileReadError, SchemaMismatchError
from datapipe.io._columnar import ColumnarSource, source

if TYPE_CHECKING:  # pyarrow is imported on first use (datapipe/_lazy.py)
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv
else:
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")
    pacsv = lazy_module("pyarrow.csv")

# A number as pyarrow's CSV reader parses one (ints, decimals, exponents, inf).
_NUMBER = r"^\s*[-+]?((\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|(?i:inf|infinity))\s*$"


def _arrow_type(name: str, t: Any) -> pa.DataType:
    if isinstance(t, pa.DataType):
        return t
    try:
        if isinstance(t, str):
            return pa.type_for_alias(t)
        return pa.from_numpy_dtype(np.dtype(t))
    except (TypeError, ValueError, KeyError, pa.ArrowNotImplementedError) as e:
        raise TypeError(
            f"csv: column_types[{name!r}] must be a pyarrow type, a numpy dtype or a type name "
            f"such as 'int64', 'float32', 'string', 'bool'; got {t!r}"
        ) from e


class CsvDataset(ColumnarSource):
    """Rows (or batches) of CSV files with a header row; one file is one unit.

    Column types: ``column_types`` (``{name: type}``, a pyarrow type, numpy dtype or name
    such as ``"float32"`` / ``"string"``) fixes a column's type; the others are inferred by
    pyarrow from the first file's first block (1 MB) and imposed on every file, so all
    files yield the same dtypes. The outcome never depends on where a bad value falls
    (within that first block or after it, i.e. on the file's size): a column whose values
    are mostly numbers but that holds a value which is not one raises ``FileReadError``
    naming the file, the data row (counted from 1 after the header) and the column — at
    construction when the value is in the first block, else when that file is read — and
    ``column_types={name: "string"}`` reads such a column as text. Columns with fewer
    numbers than other values are text. A quoted value may hold line breaks (RFC 4180, as
    tf.data's ``CsvDataset``). The cardinality is unknown until read. Other arguments,
    elements and errors are those of ``ParquetDataset``; ``delimiter`` and
    ``read_options`` / ``parse_options`` / ``convert_options`` (pyarrow.csv objects) pass
    through to pyarrow. Differences from tf.data's ``CsvDataset``: D-TF-24 of
    ``docs/guides/differences.md``.

    Example:
        >>> import datapipe as dp, os, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "t.csv")
        >>> _ = open(p, "w").write("a,b\\n1,x\\n2,y\\n")
        >>> [(r["a"].item(), r["b"]) for r in dp.from_csv(p)]
        [(1, 'x'), (2, 'y')]
        >>> [r["a"] for r in dp.from_csv(p, column_types={"a": "float32"})]
        [np.float32(1.0), np.float32(2.0)]
    """

    _name = "csv"

    def __init__(
        self,
        filenames: str | os.PathLike | Sequence[str | os.PathLike],
        columns: Sequence[str] | None = None,
        batch_size: int | None = None,
        delimiter: str = ",",
        read_options: pacsv.ReadOptions | None = None,
        parse_options: pacsv.ParseOptions | None = None,
        convert_options: pacsv.ConvertOptions | None = None,
        column_types: Mapping[str, Any] | None = None,
        nulls_as_nan: bool = False,
    ):
        self._read_options = read_options
        # Quoted values may hold line breaks (tf.data's CsvDataset and RFC 4180 allow them);
        # without newlines_in_values pyarrow splits a file into blocks at any line break, and
        # a value that spans a block boundary breaks the file's parse (the outcome would
        # depend on where the blocks fall, i.e. on the file's size).
        self._parse_options = parse_options or pacsv.ParseOptions(
            delimiter=delimiter, newlines_in_values=True
        )
        conv = convert_options or pacsv.ConvertOptions()
        if column_types is not None:
            if not isinstance(column_types, Mapping):
                raise TypeError(
                    f"csv: column_types must be a dict of column name -> type, got "
                    f"{type(column_types).__name__}"
                )
            types = dict(conv.column_types)
            types.update({str(k): _arrow_type(str(k), v) for k, v in column_types.items()})
            conv.column_types = types
        self._convert_options = conv
        self._first_schema: pa.Schema | None = None
        super().__init__(filenames, columns, batch_size, nulls_as_nan)

    def _inspect(self, path: str) -> tuple[pa.Schema, list, None]:
        if self._first_schema is not None:  # later files are checked when read
            return self._first_schema, [path], None
        try:
            reader = pacsv.open_csv(
                source(path), self._read_options, self._parse_options, self._convert_options
            )
            try:
                first_block = reader.read_next_batch()
            except StopIteration:
                first_block = None
            names = reader.schema.names  # the header's bytes decoded: not text, not a CSV
        except (pa.ArrowInvalid, OSError, UnicodeDecodeError) as e:
            raise FileReadError(f"cannot parse as CSV: {e}", path) from e
        self._first_schema = reader.schema
        reader.close()
        missing = set(self._convert_options.column_types) - set(names)
        if missing:
            raise SchemaMismatchError(
                f"column_types names columns the file does not have: {sorted(missing)}", path
            )
        if first_block is not None:
            self._check_mixed(first_block, path)
        return self._first_schema, [path], None

    def _check_mixed(self, block: pa.RecordBatch, path: str) -> None:
        """A column pyarrow inferred as text from the first block although most of its
        values are numbers holds a bad number: past the first block the same value would
        fail to parse, so it fails here too (the outcome must not depend on file size)."""
        nulls = pa.array(self._convert_options.null_values, pa.string())
        for field in block.schema:
            fixed = field.name in self._convert_options.column_types
            if fixed or not (
                pa.types.is_string(field.type) or pa.types.is_large_string(field.type)
            ):
                continue
            col = block.column(field.name)
            present = pc.invert(pc.fill_null(pc.is_in(col, value_set=nulls), True))
            numeric = pc.fill_null(pc.match_substring_regex(col, _NUMBER), False)
            n_num = pc.sum(pc.and_(present, numeric)).as_py() or 0
            text = pc.and_(present, pc.invert(numeric))
            n_text = pc.sum(text).as_py() or 0
            if 0 < n_text < n_num:
                row = int(np.flatnonzero(text.to_numpy(zero_copy_only=False))[0])
                raise FileReadError(_bad_value(field.name, row, col[row].as_py(), "a number"), path)

    def _read(self, unit: Any, handles: dict) -> pa.Table:
        opts = self._read_convert_options({f.name: f.type for f in self._schema})
        try:
            return pacsv.read_csv(source(unit), self._read_options, self._parse_options, opts)
        except pa.ArrowKeyError as e:  # a column of the first file is missing
            raise SchemaMismatchError(f"{e} (the first file has it)", unit) from e
        except pa.ArrowInvalid as e:
            located = self._locate(unit, str(e))
            raise FileReadError(
                located or f"cannot parse with the first file's column types: {e}", unit
            ) from e

    def _read_convert_options(self, types: dict) -> pacsv.ConvertOptions:
        conv = self._convert_options
        return pacsv.ConvertOptions(
            column_types=types,
            include_columns=list(types),
            null_values=conv.null_values,
            true_values=conv.true_values,
            false_values=conv.false_values,
            strings_can_be_null=conv.strings_can_be_null,
        )

    def _locate(self, path: str, message: str) -> str | None:
        """The row and column of a value pyarrow could not convert (its message names
        only the column's position and the value): re-read that column as text."""
        m = re.search(r"CSV column #(\d+).*invalid value '(.*)'", message, re.S)
        if m is None:
            return None
        try:
            header = pacsv.open_csv(
                source(path), self._read_options, self._parse_options
            ).schema.names
            name = header[int(m.group(1))]
            want = next(f.type for f in self._schema if f.name == name)
            table = pacsv.read_csv(
                source(path),
                self._read_options,
                self._parse_options,
                self._read_convert_options({name: pa.string()}),
            )
        except (pa.ArrowException, OSError, IndexError, StopIteration):
            return None
        col = table.column(name).to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(col == m.group(2))
        if not rows.size:
            return None
        return _bad_value(name, int(rows[0]), m.group(2), f"a {want} (the column's type)")


def _bad_value(column: str, row: int, value: Any, expected: str) -> str:
    return (
        f"column {column!r}, data row {row + 1} (counted from 1 after the header): "
        f"{value!r} is not {expected}; fix the value, or give "
        f"column_types={{{column!r}: 'string'}} (or another type) to read the column as that"
    )


def from_csv(
    filenames: str | os.PathLike | Sequence[str | os.PathLike],
    columns: Sequence[str] | None = None,
    batch_size: int | None = None,
    delimiter: str = ",",
    column_types: Mapping[str, Any] | None = None,
    nulls_as_nan: bool = False,
) -> CsvDataset:
    """Rows or batches of CSV files (see ``CsvDataset``)."""
    return CsvDataset(
        filenames,
        columns,
        batch_size,
        delimiter,
        column_types=column_types,
        nulls_as_nan=nulls_as_nan,
    )
