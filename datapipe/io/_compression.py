"""Reading files compressed as tf.data's readers compress them: ``compression_type`` is
``""`` (none), ``"GZIP"`` (a gzip stream) or ``"ZLIB"`` (a zlib stream, as
``zlib.compress`` writes it), for ``TextLineDataset`` and ``TFRecordDataset``."""

from __future__ import annotations

import gzip
import io
import zlib
from typing import Any, BinaryIO

_READ_HINT = 1 << 16  # compressed bytes read at a time


class _ZlibStream(io.RawIOBase):
    """The uncompressed bytes of a ZLIB stream (``compression_type="ZLIB"``: what
    ``zlib.compress`` writes), read forward only (``open_compressed`` reaches an offset by
    decompressing up to it). A stream cut before its end marker raises ``EOFError``."""

    def __init__(self, raw: BinaryIO):
        self.raw, self.z, self.pending = raw, zlib.decompressobj(), b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self.pending and not self.z.eof:
            chunk = self.raw.read(_READ_HINT)
            self.pending = self.z.decompress(chunk) if chunk else self.z.flush()
            if not chunk:
                if not self.z.eof:
                    raise EOFError("the ZLIB stream ended before its end marker")
                break
        n = min(len(b), len(self.pending))
        b[:n], self.pending = self.pending[:n], self.pending[n:]
        return n


def open_compressed(raw: BinaryIO, compression: str, offset: int) -> Any:
    """``raw`` decompressed as ``compression`` ("", "GZIP", "ZLIB": tf.data's compression
    types), positioned at uncompressed ``offset`` (where a checkpoint resumes)."""
    if compression == "GZIP":
        f: Any = gzip.GzipFile(fileobj=raw, mode="rb")
    elif compression == "ZLIB":
        f = io.BufferedReader(_ZlibStream(raw), _READ_HINT)
    else:
        f = raw
    if offset and compression == "ZLIB":
        left = offset
        while left > 0:  # forward only: decompress and drop
            got = f.read(min(left, _READ_HINT))
            if not got:
                break
            left -= len(got)
    elif offset:
        f.seek(offset)
    return f
