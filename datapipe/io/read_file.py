"""``read_file``: the whole contents of a file as bytes (``tf.io.read_file``)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from datapipe.io._safe_files import _USE_DEFAULT, read_regular_file


def as_path(filename: str | bytes | os.PathLike | np.ndarray) -> str:
    """A ``str`` path from the ways pipelines carry one (str, bytes, PathLike, 0-d array)."""
    value: Any = filename
    if isinstance(filename, np.ndarray) and filename.ndim == 0:
        value = filename.item()
    if isinstance(value, bytes):
        return os.fsdecode(value)
    return str(os.fspath(value))  # a plain str: np.str_ would show as np.str_('...')


def read_file(filename: str | bytes | os.PathLike, max_bytes: Any = _USE_DEFAULT) -> bytes:
    """The bytes of ``filename``; usable as ``ds.map(datapipe.io.read_file)``.

    Only regular files are read (a FIFO would block for ever, ``/dev/zero`` never ends),
    and at most ``max_bytes`` of them.

    Args:
        filename: path as ``str``, ``bytes``, ``os.PathLike`` or a 0-d numpy string array.
        max_bytes: the largest file accepted, in bytes; default
            ``datapipe.io.max_file_bytes()`` (1 GiB unless ``set_max_file_bytes`` changed
            it); None: no limit.

    Returns:
        ``bytes``: the file's contents.

    Raises:
        FileReadError: not a regular file (a FIFO, a device, a directory), or larger than
            the limit; ``path`` names it.
        OSError (``FileNotFoundError``, ``PermissionError``, ...): with ``filename`` set, so
            inside a ``map`` the ``PipelineError`` names the file.

    Example:
        >>> import datapipe as dp, os, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "x.bin")
        >>> _ = open(p, "wb").write(b"abc")
        >>> list(dp.from_tensor_slices([p]).map(dp.read_file))
        [b'abc']
    """
    return read_regular_file(as_path(filename), max_bytes)
