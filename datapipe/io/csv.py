"""``from_csv``: rows or batches of CSV files, parsed by pyarrow (multi-threaded, typed)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv

from datapipe.io._columnar import ColumnarSource
from datapipe.io._errors import FileReadError, SchemaMismatchError


class CsvDataset(ColumnarSource):
    """Rows (or batches) of CSV files with a header row; one file is one unit.

    Column types are inferred by pyarrow from the first file's first block and then
    imposed on every file, so all files yield the same dtypes (a value that does not
    parse as that type raises ``FileReadError`` naming the file). The cardinality is
    unknown until read. Other arguments, elements and errors are those of
    ``ParquetDataset``; ``delimiter`` and ``read_options`` / ``parse_options`` /
    ``convert_options`` (pyarrow.csv objects) pass through to pyarrow.

    Example:
        >>> import datapipe as dp, os, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "t.csv")
        >>> _ = open(p, "w").write("a,b\\n1,x\\n2,y\\n")
        >>> [(r["a"].item(), r["b"]) for r in dp.from_csv(p)]
        [(1, 'x'), (2, 'y')]
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
    ):
        self._read_options = read_options
        self._parse_options = parse_options or pacsv.ParseOptions(delimiter=delimiter)
        self._convert_options = convert_options or pacsv.ConvertOptions()
        self._first_schema: pa.Schema | None = None
        super().__init__(filenames, columns, batch_size)

    def _inspect(self, path: str) -> tuple[pa.Schema, list, None]:
        if self._first_schema is not None:  # later files are checked when read
            return self._first_schema, [path], None
        try:
            reader = pacsv.open_csv(
                path, self._read_options, self._parse_options, self._convert_options
            )
        except (pa.ArrowInvalid, OSError) as e:
            raise FileReadError(f"cannot parse as CSV: {e}", path) from e
        self._first_schema = reader.schema
        reader.close()
        return self._first_schema, [path], None

    def _read(self, unit: Any, handles: dict) -> pa.Table:
        types = {f.name: f.type for f in self._schema}
        conv = self._convert_options
        opts = pacsv.ConvertOptions(
            column_types=types,
            include_columns=list(types),
            null_values=conv.null_values,
            true_values=conv.true_values,
            false_values=conv.false_values,
            strings_can_be_null=conv.strings_can_be_null,
        )
        try:
            return pacsv.read_csv(unit, self._read_options, self._parse_options, opts)
        except pa.ArrowKeyError as e:  # a column of the first file is missing
            raise SchemaMismatchError(f"{e} (the first file has it)", unit) from e
        except pa.ArrowInvalid as e:
            raise FileReadError(
                f"cannot parse with the first file's column types: {e}", unit
            ) from e


def from_csv(
    filenames: str | os.PathLike | Sequence[str | os.PathLike],
    columns: Sequence[str] | None = None,
    batch_size: int | None = None,
    delimiter: str = ",",
) -> CsvDataset:
    """Rows or batches of CSV files (see ``CsvDataset``)."""
    return CsvDataset(filenames, columns, batch_size, delimiter)
