"""``TextLineDataset``: the lines of text files (``tf.data.TextLineDataset``)."""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe._functions import raise_pending
from datapipe._iterator import OpIterator
from datapipe._positions import error_from_state, error_to_state
from datapipe._spec import TensorSpec
from datapipe._validate import check_int
from datapipe.dataset_ops import Dataset
from datapipe.errors import FileReadError, annotate
from datapipe.io._compression import open_compressed
from datapipe.io._safe_files import max_file_bytes, open_regular
from datapipe.io.file_source import FileSource

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


def _file_list(filenames: Any, op: str) -> tuple[str, ...]:
    if isinstance(filenames, Dataset):
        raise TypeError(
            f"{op}: filenames must be a path or a list of paths, not a Dataset; for a "
            "Dataset of paths use ds.interleave(lambda p: TextLineDataset(p))"
        )
    if isinstance(filenames, (str, bytes, os.PathLike)):
        filenames = [filenames]
    files = tuple(os.fsdecode(f) if isinstance(f, bytes) else os.fspath(f) for f in filenames)
    if not files:
        raise ValueError(f"{op}: filenames is empty")
    return files


class TextLineDataset(FileSource):
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
        self._files = _file_list(filenames, self._name)
        comp = (compression_type or "").upper()
        if comp not in ("", "GZIP", "ZLIB"):
            raise ValueError(
                f"{self._name}: compression_type must be None, '', 'GZIP' or 'ZLIB', "
                f"got {compression_type!r}"
            )
        self._compression = comp
        k = 1 if num_parallel_reads is None else num_parallel_reads
        k = check_int(self._name, "num_parallel_reads", k, 1, (-1,), ">= 1 or AUTOTUNE")
        self._cycle = 2 if k == -1 else k  # AUTOTUNE: two files at once
        self._encoding = encoding

    @property
    def element_spec(self) -> Any:
        return TensorSpec((), np.dtype(object))

    def _make_iterator(self, ctx, epoch):
        return TextLineIterator(self)


class _OpenFile:
    """One open file: its buffered raw lines and the byte offset of the next line."""

    def __init__(self, ds: TextLineDataset, file_index: int, offset: int = 0):
        self.ds, self.file_index, self.path = ds, file_index, ds._files[file_index]
        self.lines_read = 0
        raw = open_regular(self.path)  # a FIFO or a device would block or never end
        self.raw = raw
        try:
            self.f: Any = open_compressed(raw, ds._compression, offset)
        except (OSError, EOFError, zlib.error) as e:
            raw.close()
            raise FileReadError(f"cannot read from offset {offset}: {e}", self.path) from e
        self.lines = _LineReader(self.f, self.path)
        self.offset = offset
        self.buf: list[bytes] = []
        self.pos = 0
        self.error: FileReadError | None = None  # a bad line, raised after the lines before it
        self.broken = False  # the file cannot be read further: its slot ends

    def take(self, n: int) -> list:
        """Up to ``n`` decoded lines; [] at the end of the file. A line that does not decode
        is consumed and left in ``error`` after the lines before it; a read failure raises
        and marks the file ``broken`` (the rest of it is skipped)."""
        if self.pos >= len(self.buf):
            try:
                self.buf, self.pos = self.lines.read(_READ_HINT, self.lines_read + 1), 0
            except FileReadError:
                self.broken = True
                raise
            except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as e:
                self.broken = True
                raise FileReadError(
                    f"cannot read line {self.lines_read + 1}: {e}", self.path
                ) from e
            if not self.buf:
                return []
        raw = self.buf[self.pos : self.pos + n]
        lines = [_strip(x) for x in raw]
        out: list[bytes] | list[str] = lines
        enc = self.ds._encoding
        if enc is not None:
            decoded: list[str] = []
            for x in lines:
                try:
                    decoded.append(x.decode(enc))
                except UnicodeDecodeError as e:
                    line = self.lines_read + len(decoded) + 1
                    self.error = FileReadError(
                        f"line {line} is not valid {enc} text: {e}", self.path
                    )
                    raw = raw[: len(decoded) + 1]  # the bad line is consumed, the rest kept
                    break
            out = decoded
        self.pos += len(raw)
        self.offset += sum(map(len, raw))
        self.lines_read += len(raw)
        return out

    def close(self) -> None:
        self.f.close()
        self.raw.close()


def _strip(line: bytes) -> bytes:
    if line.endswith(b"\n"):
        line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
    return line


class TextLineIterator(OpIterator):
    """tf.data's deterministic interleave over files with cycle length ``num_parallel_reads``
    and block length 1; with one slot it reads file after file in chunks of lines."""

    op_name = "text_line"

    def __init__(self, ds: TextLineDataset):
        super().__init__()
        self.ds = ds
        self.slots: list[_OpenFile | None] = [None] * ds._cycle
        self.cursor = 0
        self.next_file = 0
        self.count = 0  # lines delivered, for error locations
        self.pending: BaseException | None = None

    def _open_next(self) -> None:
        index = self.next_file
        self.next_file += 1  # a file that cannot be opened is skipped after its error
        path = self.ds._files[index]
        try:
            self.slots[self.cursor] = _OpenFile(self.ds, index)
        except FileReadError:
            raise
        except OSError as e:
            raise FileReadError(f"cannot open: {e.strerror or e}", path) from e

    def next_chunk(self, n: int) -> list:
        raise_pending(self)
        out: list = []
        try:
            self._fill(out, n)
        except Exception as e:  # noqa: BLE001 - located; lines read before it come first
            slot = self.slots[self.cursor]
            path = getattr(e, "path", None) or (slot.path if slot else None)
            if slot is not None and slot.broken:
                slot.close()
                self.slots[self.cursor] = None
            self.pending = annotate(self.op_name, self.count + len(out), e, path)
            if not out:
                raise_pending(self, cause=e)
        self.count += len(out)
        return out

    def _fill(self, out: list, n: int) -> None:
        nfiles = len(self.ds._files)
        single = len(self.slots) == 1
        while len(out) < n:
            slot = self.slots[self.cursor]
            if slot is not None:
                got = slot.take(n - len(out) if single else 1)
                out.extend(got)
                if slot.error is not None:
                    if not single:
                        self.cursor = (self.cursor + 1) % len(self.slots)
                    raise_pending(slot, "error")  # no local keeps it (see raise_pending)
                if not got:
                    slot.close()
                    self.slots[self.cursor] = None
                if not single:
                    self.cursor = (self.cursor + 1) % len(self.slots)
            elif self.next_file < nfiles:
                self._open_next()
            elif all(s is None for s in self.slots):
                break
            else:
                self.cursor = (self.cursor + 1) % len(self.slots)

    def units_started(self) -> int:
        """Files opened so far (the unit protocol of auto-sharding's shard points: the
        state resumes in a list of files that starts with these)."""
        return self.next_file

    def get_state(self) -> dict:
        slots = [None if s is None else [s.file_index, s.offset, s.lines_read] for s in self.slots]
        return {
            "next_file": self.next_file,
            "cursor": self.cursor,
            "slots": slots,
            "count": self.count,
            "pending_error": error_to_state(self.pending),
        }

    def set_state(self, state: dict) -> None:
        self._close_slots()
        self.next_file, self.cursor = int(state["next_file"]), int(state["cursor"])
        self.count = int(state["count"])
        self.pending = error_from_state(state.get("pending_error"), self.op_name)
        for i, s in enumerate(state["slots"]):
            if s is not None:
                slot = _OpenFile(self.ds, int(s[0]), int(s[1]))
                slot.lines_read = int(s[2])
                self.slots[i] = slot

    def _close_slots(self) -> None:
        for i, s in enumerate(self.slots):
            if s is not None:
                s.close()
            self.slots[i] = None

    def close(self) -> None:
        self._close_slots()
        super().close()
