"""Reading what a file declares without trusting it: lengths, archive headers, members.

A record file says how long its next record is; a tar header says how many bytes its
member, its GNU long name or its PAX attributes hold; a ``.npy`` header says what shape
its array has. A corrupt or hostile file can declare anything, and a compressed one backs
a small file with gigabytes of zeros (gzip reaches ~1000x on zeros). So every size a file
declares passes ``check_declared`` before a byte of it is read, against a documented bound:

- record lengths (TFRecord) and archive members (tar shards): ``max_file_bytes()``
  (``datapipe.io.set_max_file_bytes``; default 1 GiB);
- archive headers (a GNU long name or long link, a PAX extended header, a global PAX
  header): ``MAX_HEADER_BYTES`` (1 MiB: a header holds a path and a few attributes; Linux
  paths are at most 4 KiB and its extended attribute values 64 KiB), and
  ``max_file_bytes()`` when that is smaller; the same bound for the headers of one chain
  together (the headers before one member), at most ``MAX_HEADER_CHAIN`` (32) headers in
  a chain, and for the global PAX attributes of one stream, which ``tarfile`` keeps until
  the stream ends (their characters; at most ``MAX_GLOBAL_PAX_KEYS`` (1,024) keywords);
- ``.npy`` arrays: their shape times the item size must fit in the bytes that follow the
  header (the array cannot hold more than its bytes).

Then ``read_declared`` reads in chunks that grow only with what the file has delivered,
so a length that passes the bound but that the file does not back (a truncated record)
allocates no more than the bytes that are there. Python's ``tarfile`` reads headers
whole; ``open_tar_stream`` gives it ``BoundedTarInfo``, which checks a header's size
before ``tarfile`` reads it. Errors are ``FileReadError``\\ s naming the file and what
declared the size (the member, the record), raised before anything is allocated.
"""

from __future__ import annotations

import tarfile
from typing import Any

import numpy as np

from datapipe.errors import FileReadError
from datapipe.io._safe_files import max_file_bytes

MAX_HEADER_BYTES = 1 << 20
# Headers before one member: a GNU long name and long link, a PAX extended header, a global
# one, a Solaris one: a handful (``tarfile`` recurses once per header, ~4 frames each).
MAX_HEADER_CHAIN = 32
# Keywords the PAX global headers of one stream may hold together (a dozen standard ones,
# plus extended attributes).
MAX_GLOBAL_PAX_KEYS = 1024
_CHUNK = 1 << 20  # the first read of a declared length; later reads grow with the data
_HEADER_TYPES = {
    tarfile.GNUTYPE_LONGNAME: "a GNU long-name header",
    tarfile.GNUTYPE_LONGLINK: "a GNU long-link header",
    tarfile.XHDTYPE: "a PAX extended header",
    tarfile.XGLTYPE: "a PAX global header",
    tarfile.SOLARIS_XHDTYPE: "a Solaris extended header",
}


_FILE_LIMIT = "datapipe.io.max_file_bytes(); set_max_file_bytes(n) changes it"
_HEADER_LIMIT = "the bound on archive headers, datapipe.io._bounded.MAX_HEADER_BYTES"
_CHAIN_LIMIT = "the bounds on archive headers in datapipe.io._bounded"


def check_declared(
    size: int, what: str, path: str | None, limit: int | None = -1, bound: str = _FILE_LIMIT
) -> int:
    """``size`` when it is a length ``>= 0`` within ``limit`` (default ``max_file_bytes()``;
    None: no bound; ``bound`` names it in the message).

    Raises:
        FileReadError: a negative size or one over the limit; names ``path`` and ``what``
            (e.g. ``"member 'a.jpg' at byte 512"``) and the limit.
    """
    limit_ = max_file_bytes() if limit == -1 else limit
    if size < 0:
        raise FileReadError(f"{what} declares a negative size ({size} bytes)", path)
    if limit_ is not None and size > limit_:
        raise FileReadError(
            f"{what} declares {size} bytes, over the limit of {limit_} bytes ({bound})",
            path,
        )
    return size


def read_declared(f: Any, size: int, what: str, path: str | None) -> bytes:
    """Up to ``size`` bytes of ``f`` (fewer at its end: the caller reports the
    truncation), ``size`` checked by ``check_declared`` first; memory grows with the bytes
    read, never with ``size`` alone (module docstring)."""
    check_declared(size, what, path)
    if size <= _CHUNK:
        return f.read(size)
    parts: list[bytes] = []
    got, step = 0, _CHUNK
    while got < size:
        part = f.read(min(step, size - got))
        if not part:
            break
        parts.append(part)
        got += len(part)
        step = max(step, got)  # double: as much again as the file has proven to hold
    return b"".join(parts)


class BoundedTarInfo(tarfile.TarInfo):
    """``tarfile.TarInfo`` that refuses, before ``tarfile`` reads or keeps it (module
    docstring): a header declaring more than the header bound; a chain of more than
    ``MAX_HEADER_CHAIN`` headers before one member, or one whose headers declare more than
    the header bound together (``tarfile`` reads a chain by recursion, holding every
    header's bytes: 3,000 of them raised an unnamed ``RecursionError``); global PAX
    attributes holding more than the header bound or ``MAX_GLOBAL_PAX_KEYS`` keywords
    (``tarfile`` keeps them for the whole stream and applies them to every member: a
    0.4 MB ``.tar.gz`` of global headers held 384 MB). Use it with
    ``tarfile.open(..., tarinfo=BoundedTarInfo)``. Its ``FileReadError`` names no file
    (``open_tar_stream`` and the readers add it); ``base`` is the byte offset in the file
    of the stream's start (a reader resumed mid-shard)."""

    base = 0

    def _proc_member(self, tarfile_: Any) -> Any:
        kind = _HEADER_TYPES.get(self.type)
        # The chain so far: headers since the last member, and the bytes they declare.
        count, held = getattr(tarfile_, "_dp_chain", (0, 0))
        global_at = getattr(tarfile_, "_dp_global_at", None)
        if global_at is not None:  # the header before this one was global: now it is kept
            tarfile_._dp_global_at = None
            _check_global_pax(tarfile_.pax_headers, global_at)
        if kind is None:
            tarfile_._dp_chain = (0, 0)  # a member ends the chain
            return super()._proc_member(tarfile_)  # type: ignore[misc]  # private, stable API
        limit = max_file_bytes()
        limit, bound = (
            (limit, _FILE_LIMIT)
            if limit is not None and limit < MAX_HEADER_BYTES
            else (MAX_HEADER_BYTES, _HEADER_LIMIT)
        )
        what = f"{kind} (member {self.name!r} at byte {self.base + self.offset})"
        check_declared(self.size, what, None, limit, bound)
        if count >= MAX_HEADER_CHAIN:
            raise FileReadError(
                f"{what} is header {count + 1} of a chain before one member, over the "
                f"limit of {MAX_HEADER_CHAIN} ({_CHAIN_LIMIT})"
            )
        check_declared(
            held + self.size, f"{what} and the {count} header(s) before it", None, limit, bound
        )
        tarfile_._dp_chain = (count + 1, held + self.size)
        if self.type == tarfile.XGLTYPE:
            tarfile_._dp_global_at = what  # checked at the next header, before it is kept
        return super()._proc_member(tarfile_)  # type: ignore[misc]


def _check_global_pax(pax: dict, what: str) -> None:
    """Refuse global PAX attributes over their bounds (``BoundedTarInfo``); ``what``: the
    global header that added the last of them."""
    limit = max_file_bytes()
    limit = MAX_HEADER_BYTES if limit is None else min(limit, MAX_HEADER_BYTES)
    if len(pax) > MAX_GLOBAL_PAX_KEYS:
        raise FileReadError(
            f"{what} brings the global PAX attributes to {len(pax)} keywords, over the "
            f"limit of {MAX_GLOBAL_PAX_KEYS} ({_CHAIN_LIMIT})"
        )
    size = sum(len(k) + len(v) for k, v in pax.items())
    if size > limit:
        raise FileReadError(
            f"{what} brings the global PAX attributes to {size} characters, over the "
            f"limit of {limit} characters ({_HEADER_LIMIT})"
        )


def open_tar_stream(fileobj: Any, path: str, base: int = 0) -> tarfile.TarFile:
    """``fileobj`` opened as a tar stream (``mode="r|"``) whose headers are bounded
    (``BoundedTarInfo``); the first header is read now. ``base``: the file offset the
    stream starts at (for the messages).

    Raises:
        FileReadError: a header over its bound (names ``path`` and the header).
        tarfile.TarError: not a tar stream.
    """
    try:
        info = (
            BoundedTarInfo
            if not base
            else type("BoundedTarInfo", (BoundedTarInfo,), {"base": base})
        )
        return tarfile.open(fileobj=fileobj, mode="r|", tarinfo=info)
    except FileReadError as e:
        raise e.with_path(path) from None


def npy_header(f: Any, available: int, what: str, path: str | None) -> tuple:
    """``(shape, fortran_order, dtype)`` of the ``.npy`` header at ``f``'s position,
    checked to declare no more bytes than the ``available`` ones after the header.

    Raises:
        FileReadError: not a ``.npy`` header, or an array larger than its bytes.
    """
    fmt = np.lib.format
    start = f.tell()
    try:
        version = fmt.read_magic(f)
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran, dtype = read(f)
    except ValueError as e:
        raise FileReadError(f"{what}: not a .npy array ({e})", path) from e
    nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
    held = available - (f.tell() - start)
    if nbytes > held:
        raise FileReadError(
            f"{what} declares an array of shape {shape} and dtype {dtype} ({nbytes} "
            f"bytes) but holds {held} bytes",
            path,
        )
    return shape, fortran, dtype
