"""The one reader of a list of files, for sources whose files are sequences of records:
the lines of text files (``TextLineDataset``), TFRecord records, tar shards' samples.

A source (``RecordFileSource``) lists its files (the units of FILE sharding) and opens
one *reader* per file at a byte offset (each format's per-file record iterator; a reader
of a byte stream opens it with ``open_stream``: a local regular file or a URL through
fsspec, decompressed from that offset); the iterator reads the files in order, or
``cycle_length`` of them at once in tf.data's deterministic interleave order (block length
1: one record from each open file in turn; a file that ends frees its slot for the next).

A reader (``RecordReader``) has ``offset`` (where its next record starts: a byte offset
in the file, in the uncompressed stream for a compressed file, or ``END`` once it has
seen the end), ``records`` (records read so far) and ``read(n)``, which returns up to
``n`` records and, on a bad record, keeps the records before it and leaves the failure in
``error``: ``broken`` says whether the file can be read past it (a record whose framing is
intact but whose payload is bad is skipped; a broken frame ends the file).

State: each open file's ``(file index, offset, records)``, the next file to open, the
cycle position, the records delivered and a held-back failure; a checkpoint resumes at
the record after the last one delivered. ``units_started()`` (files opened so far) is the
unit protocol of auto-sharding's shard points, so a checkpoint taken under FILE sharding
resumes on another number of workers (``datapipe.distribute.elastic``).
"""

from __future__ import annotations

import os
import zlib
from typing import Any

from datapipe._functions import raise_pending
from datapipe._iterator import OpIterator
from datapipe._positions import error_from_state, error_to_state
from datapipe._validate import check_int
from datapipe.dataset_ops import Dataset
from datapipe.errors import FileReadError, annotate
from datapipe.io._compression import open_compressed
from datapipe.io._safe_files import open_regular
from datapipe.io.file_source import FileSource

END = -1  # a reader's offset once it has seen the end of its file


class RecordReader:
    """One open file of a ``RecordFileSource`` (see the module docstring)."""

    path: str
    file_index: int = 0
    offset: int = 0
    records: int = 0
    error: FileReadError | None = None
    broken: bool = False

    def read(self, n: int) -> list:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def open_stream(path: str, compression: str, offset: int) -> tuple[Any, Any]:
    """``(raw, f)``: ``path`` opened (``open_regular``: a local regular file, since a FIFO
    or a device would block or never end; a URL through fsspec, size-checked and retried)
    and ``f`` the byte stream read from ``offset`` (``open_compressed``: ``compression``
    ``""``, ``"GZIP"`` or ``"ZLIB"``; an offset in the uncompressed stream). Close both.

    Raises:
        OSError: the file cannot be opened (the iterator names it: "cannot open").
        FileReadError: the stream cannot be read from ``offset`` (names the file).
    """
    raw = open_regular(path)
    try:
        return raw, open_compressed(raw, compression, offset)
    except (OSError, EOFError, zlib.error) as e:
        raw.close()
        raise FileReadError(f"cannot read from offset {offset}: {e}", path) from e
    except BaseException:
        raw.close()
        raise


class _Ended(RecordReader):
    """A file restored from a checkpoint taken after its last record: nothing to read."""

    def __init__(self, path: str, records: int):
        self.path, self.records, self.offset = path, records, END

    def read(self, n: int) -> list:
        return []

    def close(self) -> None:
        pass


def file_list(filenames: Any, op: str, reader: str | None = None) -> tuple[str, ...]:
    """The paths of ``filenames`` (a path, a URL or a list of them) as ``str``; ``reader``
    (the source's class name) goes into the hint for a Dataset of paths."""
    if isinstance(filenames, Dataset):
        raise TypeError(
            f"{op}: filenames must be a path or a list of paths, not a Dataset; for a "
            f"Dataset of paths use ds.interleave(lambda p: {reader or f'<{op} reader>'}(p))"
        )
    if isinstance(filenames, (str, bytes, os.PathLike)):
        filenames = [filenames]
    files = tuple(os.fsdecode(f) if isinstance(f, bytes) else os.fspath(f) for f in filenames)
    if not files:
        raise ValueError(f"{op}: filenames is empty")
    return files


def cycle_of(op: str, num_parallel_reads: int | None) -> int:
    """The number of files read at once for tf.data's ``num_parallel_reads``."""
    k = 1 if num_parallel_reads is None else num_parallel_reads
    k = check_int(op, "num_parallel_reads", k, 1, (-1,), ">= 1 or AUTOTUNE")
    return 2 if k == -1 else k  # AUTOTUNE: two files at once, as TextLineDataset


class RecordFileSource(FileSource):
    """Base of the record file sources: subclasses set ``_files``, ``_cycle`` and
    implement ``open_reader(file_index, offset)`` and ``element_spec``.

    Traits (``Dataset``): a stream (records are found by reading, not by index), so no
    random access; no randomness; a source, so none of the op traits apply. As a
    ``FileSource`` its ``files`` are the units FILE auto-sharding splits, and its iterator
    reports ``units_started()``."""

    keeps_random_access = False
    uses_randomness = False
    elementwise = False
    _cycle = 1
    _compression = ""

    def _read_files(
        self, filenames: Any, compression_type: Any, num_parallel_reads: Any, reader: str
    ) -> None:
        """Check and set tf.data's file-reader arguments: ``_files`` (``file_list``),
        ``_compression`` (``None``/``""``, ``"GZIP"`` or ``"ZLIB"``, any case) and
        ``_cycle`` (``cycle_of``); ``reader`` is the class name, for the messages.

        Raises:
            TypeError: ``filenames`` is a Dataset, ``compression_type`` not a str or None,
                ``num_parallel_reads`` not an int.
            ValueError: no files, another compression, ``num_parallel_reads`` < 1.
        """
        self._files = file_list(filenames, self._name, reader)
        if compression_type is not None and not isinstance(compression_type, str):
            raise TypeError(
                f"{self._name}: compression_type must be a str or None, got "
                f"{type(compression_type).__name__}"
            )
        comp = (compression_type or "").upper()
        if comp not in ("", "GZIP", "ZLIB"):
            raise ValueError(
                f"{self._name}: compression_type must be None, '', 'GZIP' or 'ZLIB', got "
                f"{compression_type!r}"
            )
        self._compression = comp
        self._cycle = cycle_of(self._name, num_parallel_reads)

    def open_reader(self, file_index: int, offset: int) -> RecordReader:
        raise NotImplementedError

    def _make_iterator(self, ctx, epoch):
        return RecordFileIterator(self)


class RecordFileIterator(OpIterator):
    """Reads the files of a ``RecordFileSource`` (module docstring)."""

    def __init__(self, ds: RecordFileSource):
        super().__init__()
        self.op_name = ds._name
        self.ds = ds
        self.slots: list[RecordReader | None] = [None] * ds._cycle
        self.cursor = 0
        self.next_file = 0
        self.count = 0  # records delivered, for error locations
        self.pending: BaseException | None = None

    def _open(self, file_index: int, offset: int, records: int) -> RecordReader:
        path = self.ds._files[file_index]
        if offset == END:
            reader: RecordReader = _Ended(path, records)
        else:
            try:
                reader = self.ds.open_reader(file_index, offset)
            except FileReadError:
                raise
            except OSError as e:  # missing, unreadable, or given up after retries
                raise FileReadError(f"cannot open: {e.strerror or e}", path) from e
        reader.file_index, reader.records = file_index, records
        return reader

    def next_chunk(self, n: int) -> list:
        raise_pending(self)
        out: list = []
        try:
            self._fill(out, n)
        except Exception as e:  # noqa: BLE001 - located; records read before it come first
            slot = self.slots[self.cursor]
            path = getattr(e, "path", None) or (slot.path if slot else None)
            if slot is not None and slot.broken:
                slot.close()
                self.slots[self.cursor] = None
            if len(self.slots) > 1:
                self.cursor = (self.cursor + 1) % len(self.slots)
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
                got = slot.read(n - len(out) if single else 1)
                out.extend(got)
                if slot.error is not None:
                    raise_pending(slot, "error")  # no local keeps it (see raise_pending)
                if not got:
                    slot.close()
                    self.slots[self.cursor] = None
                if not single:
                    self.cursor = (self.cursor + 1) % len(self.slots)
            elif self.next_file < nfiles:
                index = self.next_file
                self.next_file += 1  # a file that cannot be opened is skipped after its error
                self.slots[self.cursor] = self._open(index, 0, 0)
            elif all(s is None for s in self.slots):
                break
            else:
                self.cursor = (self.cursor + 1) % len(self.slots)

    def units_started(self) -> int:
        """Files opened so far (the unit protocol of auto-sharding's shard points)."""
        return self.next_file

    def get_state(self) -> dict:
        slots = [None if s is None else [s.file_index, s.offset, s.records] for s in self.slots]
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
            if s is None:
                continue
            try:
                self.slots[i] = self._open(int(s[0]), int(s[1]), int(s[2]))
            except FileReadError as e:  # e.g. a corrupt header where the file resumes:
                if self.pending is None:  # raised at the next element, as when reading
                    self.pending = annotate(self.op_name, self.count, e, e.path)

    def _close_slots(self) -> None:
        for i, s in enumerate(self.slots):
            if s is not None:
                s.close()
            self.slots[i] = None

    def close(self) -> None:
        self._close_slots()
        super().close()
