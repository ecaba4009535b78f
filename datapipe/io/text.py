"""``TextLineDataset``: the lines of text files (``tf.data.TextLineDataset``).

The files are read by the one reader of a list of files (``datapipe.io._record_files``:
opening, the interleave of ``num_parallel_reads`` files, the state, errors naming the
file); this module is the per-file part: the bounded line splitter and the decoding."""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe._spec import TensorSpec
from datapipe.errors import FileReadError
from datapipe.io._record_files import (
    RecordFileSource,
    RecordReader,
    open_stream,
)
from datapipe.io._safe_files import max_file_bytes

_READ_HINT = 1 << 16  # bytes of lines read per refill of one file's buffer


class _LineReader:
    """Whole lines (with their ``"\\n"``) of a binary stream, none longer than
    ``max_file_bytes()``, in blocks of about ``hint`` bytes.

    ``readlines(hint)`` reads a line whole however long it is: a gzip stream of zeros
    (~1000x) with no newline is gigabytes from a few megabytes on disk. Here a line that
    has no end within the bound raises before more is read: memory stays within the bound
    plus one block. (About the cost of ``readlines``: one ``split`` per block.)"""

    def __init__(self, f: Any, path: str):
        self.f, self.path = f, path
        self.pieces: list[bytes] = []  # the start of a line that continues past a block
        self.held = 0  # their bytes
        self.error: FileReadError | None = None  # a long line, after the lines before it

    def read(self, hint: int, line: int) -> list[bytes]:
        """The next whole lines (at least one; [] at the end); ``line`` is the number of
        the first of them, for the error. A line over the bound raises after the lines
        before it were returned (at the next call).

        Raises:
            FileReadError: a line longer than ``max_file_bytes()`` (names the file, the
                line and the bound).
        """
        if self.error is not None:
            raise self.error
        limit = max_file_bytes()
        while True:
            data = self.f.read(hint)
            if not data:  # the end: a last line without "\n"
                tail, self.pieces, self.held = b"".join(self.pieces), [], 0
                return [tail] if tail else []
            cut = data.rfind(b"\n")
            first = (data.find(b"\n") if cut >= 0 else len(data)) + self.held
            if limit is not None and first > limit:
                raise self._too_long(line, limit)
            if cut < 0:
                self.pieces.append(data)
                self.held += len(data)
                continue
            block = b"".join([*self.pieces, data[: cut + 1]])
            self.pieces, self.held = [data[cut + 1 :]], len(data) - cut - 1
            lines = [part + b"\n" for part in block.split(b"\n")[:-1]]
            if limit is not None and limit < hint:  # a block may hold a longer line
                long = next((i for i, x in enumerate(lines) if len(x) - 1 > limit), None)
                if long is not None:
                    self.error = self._too_long(line + long, limit)
                    return lines[:long]  # at least the first line: it passed above
            return lines

    def _too_long(self, line: int, limit: int) -> FileReadError:
        return FileReadError(
            f"line {line} is longer than max_file_bytes() ({limit} bytes; "
            "datapipe.io.set_max_file_bytes changes it)",
            self.path,
        )


class TextLineDataset(RecordFileSource):
    """One element per line of each file, files read in order (``tf.data.TextLineDataset``).

    Args:
        filenames: a path or a list of paths.
        compression_type: ``None`` or ``""`` (plain text), ``"GZIP"`` or ``"ZLIB"`` (a
            zlib stream, ``zlib.compress``'s format), as tf.data.
        buffer_size: ignored (kept for tf.data's signature); files are read in 64 KiB
            blocks of lines.
        num_parallel_reads: read this many files at once, interleaving their lines one by
            one in tf.data's deterministic ``interleave`` order (a file that ends frees its
            slot for the next file). ``None`` or 1 reads the files one after the other.
        encoding: lines are decoded to ``str`` with this encoding (default UTF-8);
            ``None`` keeps ``bytes`` as tf.data does.

    Elements: ``str`` (or ``bytes``) with the trailing ``"\\n"`` or ``"\\r\\n"`` removed;
    spec ``TensorSpec((), object)``. Cardinality is unknown. The iterator's state is each
    open file's byte offset (uncompressed offset for GZIP), so a checkpoint resumes exactly.

    Raises (at iteration):
        OSError: a file is missing or unreadable (names it).
        FileReadError: a line is not valid text in ``encoding``, a line is longer than
            ``datapipe.io.max_file_bytes()`` (default 1 GiB: a compressed file of one
            endless line would otherwise be read whole), or a GZIP file is corrupt
            (names the file and the line number).

    Example:
        >>> import datapipe as dp, os, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "a.txt")
        >>> _ = open(p, "w").write("one\\ntwo\\n")
        >>> list(dp.TextLineDataset(p))
        ['one', 'two']
    """

    _name = "text_line"

    def __init__(
        self,
        filenames: str | os.PathLike | Sequence[str | os.PathLike],
        compression_type: str | None = None,
        buffer_size: int | None = None,
        num_parallel_reads: int | None = None,
        encoding: str | None = "utf-8",
    ):
        super().__init__()
        self._read_files(filenames, compression_type, num_parallel_reads, "TextLineDataset")
        self._encoding = encoding

    @property
    def element_spec(self) -> Any:
        return TensorSpec((), np.dtype(object))

    def open_reader(self, file_index: int, offset: int) -> RecordReader:
        return _TextLineReader(self._files[file_index], offset, self._compression, self._encoding)


class _TextLineReader(RecordReader):
    """The lines of one file from byte ``offset`` (the record file reader's protocol, see
    ``datapipe.io._record_files``): ``records`` counts the lines read, for line numbers."""

    def __init__(self, path: str, offset: int, compression: str, encoding: str | None):
        self.path, self.offset, self.encoding = path, offset, encoding
        self.raw, self.f = open_stream(path, compression, offset)
        self.lines = _LineReader(self.f, path)
        self.buf: list[bytes] = []
        self.pos = 0

    def read(self, n: int) -> list:
        """Up to ``n`` decoded lines; [] at the end of the file. A line that does not decode
        is consumed and left in ``error`` after the lines before it (the file goes on); a
        read failure is left in ``error`` and marks the file ``broken`` (the rest of it is
        skipped)."""
        if self.pos >= len(self.buf):
            try:
                self.buf, self.pos = self.lines.read(_READ_HINT, self.records + 1), 0
            except FileReadError as e:
                self.error, self.broken = e, True
                return []
            except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as e:
                self.broken = True
                self.error = FileReadError(f"cannot read line {self.records + 1}: {e}", self.path)
                self.error.__cause__ = e
                return []
            if not self.buf:
                return []
        raw = self.buf[self.pos : self.pos + n]
        out, raw = self._decode([_strip(x) for x in raw], raw)
        self.pos += len(raw)
        self.offset += sum(map(len, raw))
        self.records += len(raw)
        return out

    def _decode(self, lines: list[bytes], raw: list[bytes]) -> tuple[list, list[bytes]]:
        """(the lines as ``str``, the raw lines consumed): up to and including the first
        that does not decode, whose error is left in ``error``."""
        if self.encoding is None:
            return lines, raw
        decoded: list[str] = []
        for x in lines:
            try:
                decoded.append(x.decode(self.encoding))
            except UnicodeDecodeError as e:
                line = self.records + len(decoded) + 1
                self.error = FileReadError(
                    f"line {line} is not valid {self.encoding} text: {e}", self.path
                )
                return decoded, raw[: len(decoded) + 1]  # the bad line is consumed
        return decoded, raw

    def close(self) -> None:
        self.f.close()
        self.raw.close()


def _strip(line: bytes) -> bytes:
    if line.endswith(b"\n"):
        line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
    return line
