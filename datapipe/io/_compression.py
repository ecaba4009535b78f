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
    decompressing up to it). A stream cut before its end marker raises ``EOFError``.

    Each read decompresses at most the bytes asked for (``max_length``; the compressed rest
    waits in ``unconsumed_tail``): zlib inflates up to ~1000x, so 64 KiB of a hostile
    file would otherwise be 64 MiB at once (``datapipe.io._bounded``)."""

    def __init__(self, raw: BinaryIO):
        self.raw, self.z, self.tail = raw, zlib.decompressobj(), b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        want = len(b)
        while want and not self.z.eof:
            data = self.tail or self.raw.read(_READ_HINT)
            if not data:
                raise EOFError("the ZLIB stream ended before its end marker")
            out = self.z.decompress(data, want)
            self.tail = self.z.unconsumed_tail
            if out:
                b[: len(out)] = out
                return len(out)
        return 0


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
