"""Opening files found on disk without trusting them: only regular files, bounded size.

A folder handed to a reader may hold anything: a FIFO (``open`` blocks until a writer
appears: for ever), a device or a symlink to one (``/dev/zero`` never ends, so reading it
whole exhausts memory), a file far larger than expected. Every reader that opens a file
path goes through ``open_regular``: the path is opened with ``O_NONBLOCK`` (so a FIFO
cannot block), checked to be a regular file with ``fstat`` on the open descriptor (no
window between the check and the read), and, when reading it whole, checked against a
size limit.

The limit: ``max_file_bytes()`` (default 1 GiB), changed with ``set_max_file_bytes(n)``
(``None``: no limit) or per call with ``max_bytes=``.

URLs (``s3://``, ``https://``, ``memory://``, ... see ``datapipe.io._remote``) are read
through fsspec with the equivalent checks: the object must be a file, and its reported
size is checked against the limit before any byte is read (and the bytes received after).
A plain path never imports fsspec.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from datapipe.errors import FileReadError

DEFAULT_MAX_FILE_BYTES = 1 << 30
_max_file_bytes: int | None = DEFAULT_MAX_FILE_BYTES
_USE_DEFAULT = object()


def max_file_bytes() -> int | None:
    """The size limit for files read whole (``read_file``, image decoding), in bytes."""
    return _max_file_bytes


def set_max_file_bytes(limit: int | None) -> None:
    """Set the size limit for files read whole (bytes; ``None`` removes it).

    Raises:
        TypeError / ValueError: ``limit`` is not a positive integer or None.
    """
    global _max_file_bytes
    from datapipe._validate import check_optional_int

    _max_file_bytes = check_optional_int("set_max_file_bytes", "limit", limit, minimum=1)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def not_regular_reason_of(mode: int) -> str:
    return f"{_kind(mode)}, not a regular file; only regular files are read"


def not_regular_reason(path: str) -> str:
    """The message for ``path`` that is not a regular file: what it is ("a FIFO (named
    pipe), not a regular file; ..."), as ``open_regular`` says it."""
    try:
        return not_regular_reason_of(os.stat(path).st_mode)
    except OSError:
        return "a broken link, not a regular file; only regular files are read"


def _is_url(path: str) -> bool:
    if "://" not in path:  # the fast path of every local file
        return False
    from datapipe.io._remote import is_url

    return is_url(path)


def is_regular_file(path: str) -> bool:
    """True for a regular file (after following symlinks) or a remote object that is a
    file; False for anything else (a missing object too)."""
    if _is_url(path):
        from datapipe.io._remote import info

        try:
            return info(path).get("type") == "file"
        except OSError:
            return False
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def open_regular(path: str, max_bytes: int | None | object = None) -> BinaryIO:
    """``path`` opened for binary reading, refusing what is not a regular file.

    Args:
        max_bytes: refuse a file larger than this (None: no check).

    Raises:
        FileReadError: not a regular file (a FIFO, a device, ...) or too large; names it.
        OSError: the file cannot be opened (missing, permissions), with ``filename`` set.
    """
    if _is_url(path):
        from datapipe.io._remote import open_input

        return open_input(path, max_bytes if isinstance(max_bytes, int) else None)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileReadError(not_regular_reason_of(st.st_mode), path)
        if isinstance(max_bytes, int) and st.st_size > max_bytes:
            raise FileReadError(_too_large(st.st_size, max_bytes), path)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _too_large(size: int, limit: int) -> str:
    return (
        f"the file holds {size} bytes, over the limit of {limit} bytes for a file read "
        "whole (datapipe.io.set_max_file_bytes(n) or max_bytes= changes it)"
    )


def read_regular_file(path: str, max_bytes: int | None | object = _USE_DEFAULT) -> bytes:
    """The whole contents of a regular file, at most ``max_bytes`` (default:
    ``max_file_bytes()``); also refused when it grows past the limit while being read."""
    limit = _max_file_bytes if max_bytes is _USE_DEFAULT else max_bytes
    if _is_url(path):
        from datapipe.io._remote import read_bytes

        return read_bytes(path, limit if isinstance(limit, int) else None)
    with open_regular(path, limit) as f:
        if not isinstance(limit, int):
            return f.read()
        data = f.read(limit + 1)
    if len(data) > limit:
        raise FileReadError(_too_large(len(data), limit), path)
    return data
