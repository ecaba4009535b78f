"""``TFRecordDataset``: the records of TFRecord files (``tf.data.TFRecordDataset``).

The format (TensorFlow's ``core/lib/io/record_writer.cc``): each record is

    uint64 length (little-endian) | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)

with ``masked_crc32c(x) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2**32)`` for
``c = crc32c(x)`` (Castagnoli). Both checksums are verified; CRC32C is computed by
``google-crc32c`` (Google's C library, hardware-accelerated; ``pip install
"datapipe-torch[tfrecord]"``). The framing is a few lines of ``struct``: the ``tfrecord`` package
was left because it does not verify the checksums (it reads and drops them) and pulls
protobuf; ``crc32c`` (ICRAR) is LGPL-licensed, ``google-crc32c`` is Apache-2.0 like this
project.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe._spec import TensorSpec
from datapipe.errors import FileReadError
from datapipe.io._bounded import read_declared
from datapipe.io._record_files import (
    RecordFileSource,
    RecordReader,
    open_stream,
)

_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8


def _crc32c() -> Any:
    try:
        import google_crc32c
    except ImportError as e:
        raise ImportError(
            "TFRecordDataset needs google-crc32c to check records: "
            'pip install "datapipe-torch[tfrecord]"'
        ) from e
    return google_crc32c.value


def masked_crc32c(data: bytes, crc32c: Any = None) -> int:
    """TFRecord's masked CRC32C of ``data`` (module docstring).

    Example:
        >>> hex(masked_crc32c(b""))  # crc32c(b"") is 0
        '0xa282ead8'
    """
    c = (crc32c or _crc32c())(data)
    return (((c >> 15) | (c << 17)) + _MASK_DELTA) & 0xFFFFFFFF


class TFRecordDataset(RecordFileSource):
    """One element per record of each TFRecord file, files read in order
    (``tf.data.TFRecordDataset``).

    Args:
        filenames: a path or URL (``s3://...``, ``https://...``: fsspec, see
            ``datapipe.io._remote``), or a list of them.
        compression_type: ``None`` or ``""`` (uncompressed), ``"GZIP"`` or ``"ZLIB"``
            (``datapipe.io._compression``), as tf.data.
        buffer_size: ignored (kept for tf.data's signature); local files are read through
            Python's buffered I/O, remote ones in 1 MiB range requests.
        num_parallel_reads: read this many files at once, one record from each in turn
            (tf.data's deterministic interleave order; a file that ends frees its slot).
            ``None`` or 1 reads the files one after the other. The reads happen on the
            consumer's thread: to overlap the latency of remote files, use
            ``list_files(...).interleave(TFRecordDataset, cycle_length=k,
            num_parallel_calls=AUTOTUNE)``.

    Elements: ``bytes`` (the serialized record, e.g. a ``tf.train.Example``); spec
    ``TensorSpec((), object)``. Cardinality is unknown. A record whose length field declares
    more than ``datapipe.io.max_file_bytes()`` is refused before it is read, and a length
    within it is read in chunks that grow with the bytes the file holds
    (``datapipe.io._bounded``): a corrupt or hostile length cannot allocate memory.

    State: each open file's byte offset (uncompressed offset when compressed) and record count; a
    checkpoint resumes at the next record. FILE auto-sharding gives each worker its own
    files; checkpoints taken under FILE resume on another number of workers.

    Raises (at iteration):
        FileReadError: a file is missing or unreadable (names it); a record is corrupt or
            truncated: names the file, the record's index in it and its byte offset. A
            record whose data CRC does not match is skipped after its error (its framing
            is intact); a length whose CRC does not match, a truncated record or a broken
            GZIP stream end the file after the error (nothing after it can be trusted).
            tf.data raises ``DataLossError`` at the same record.
        ImportError: google-crc32c is not installed (at construction).

    Example:
        >>> import datapipe as dp, os, tempfile, struct
        >>> from datapipe.io.tfrecord import masked_crc32c
        >>> def frame(data):
        ...     n = struct.pack("<Q", len(data))
        ...     return (n + struct.pack("<I", masked_crc32c(n)) + data
        ...             + struct.pack("<I", masked_crc32c(data)))
        >>> p = os.path.join(tempfile.mkdtemp(), "a.tfrecord")
        >>> _ = open(p, "wb").write(frame(b"one") + frame(b"two"))
        >>> list(dp.TFRecordDataset(p))
        [b'one', b'two']
    """

    _name = "tfrecord"

    def __init__(
        self,
        filenames: str | os.PathLike | Sequence[str | os.PathLike],
        compression_type: str | None = None,
        buffer_size: int | None = None,
        num_parallel_reads: int | None = None,
    ):
        super().__init__()
        self._read_files(filenames, compression_type, num_parallel_reads, "TFRecordDataset")
        _crc32c()  # fail at construction, not at the first record

    @property
    def element_spec(self) -> Any:
        return TensorSpec((), np.dtype(object))

    def open_reader(self, file_index: int, offset: int) -> RecordReader:
        return _TFRecordReader(self._files[file_index], offset, self._compression)


class _TFRecordReader(RecordReader):
    def __init__(self, path: str, offset: int, compression: str):
        self.path, self.offset, self.crc32c = path, offset, _crc32c()
        self.raw, self.f = open_stream(path, compression, offset)

    def _fail(self, what: str, start: int, broken: bool) -> None:
        self.broken = broken
        rest = "; the rest of the file is skipped" if broken else ""
        self.error = FileReadError(
            f"corrupted record {self.records} at byte offset {start}: {what}{rest}", self.path
        )

    def read(self, n: int) -> list:
        out: list = []
        f, crc = self.f, self.crc32c
        while len(out) < n:
            start = self.offset
            try:
                header = f.read(12)
                if not header:
                    break
                if len(header) < 12:
                    return self._end(out, "truncated length header", start)
                (length,) = _LENGTH.unpack_from(header)
                if _mask(crc(header[:8])) != _CRC.unpack_from(header, 8)[0]:
                    return self._end(out, "the CRC of its length does not match", start)
                try:  # bounded; memory grows with the bytes there, not with the length
                    data = read_declared(f, length, "its length field", None)
                except FileReadError as e:
                    return self._end(out, e.reason, start)
                footer = f.read(4)
            except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
                return self._end(out, f"cannot read: {type(e).__name__}: {e}", start)
            if len(data) < length or len(footer) < 4:
                return self._end(out, f"truncated (length {length})", start)
            self.offset += 16 + length
            if _mask(crc(data)) != _CRC.unpack(footer)[0]:
                self._fail("the CRC of its data does not match", start, broken=False)
                self.records += 1
                return out
            self.records += 1
            out.append(data)
        return out

    def _end(self, out: list, what: str, start: int) -> list:
        self._fail(what, start, broken=True)
        return out

    def close(self) -> None:
        self.f.close()
        self.raw.close()


def _mask(c: int) -> int:
    return (((c >> 15) | (c << 17)) + _MASK_DELTA) & 0xFFFFFFFF
