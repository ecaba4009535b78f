"""``read_file``: the whole contents of a file as bytes (``tf.io.read_file``)."""

from __future__ import annotations

import os

import numpy as np


def as_path(filename: str | bytes | os.PathLike | np.ndarray) -> str:
    """A ``str`` path from the ways pipelines carry one (str, bytes, PathLike, 0-d array)."""
    if isinstance(filename, np.ndarray) and filename.ndim == 0:
        filename = filename.item()
    if isinstance(filename, bytes):
        return os.fsdecode(filename)
    return str(os.fspath(filename))  # a plain str: np.str_ would show as np.str_('...')


def read_file(filename: str | bytes | os.PathLike) -> bytes:
    """The bytes of ``filename``; usable as ``ds.map(datapipe.io.read_file)``.

    Args:
        filename: path as ``str``, ``bytes``, ``os.PathLike`` or a 0-d numpy string array.

    Returns:
        ``bytes``: the file's contents.

    Raises:
        OSError (``FileNotFoundError``, ``IsADirectoryError``, ``PermissionError``, ...):
            with ``filename`` set, so inside a ``map`` the ``PipelineError`` names the file.

    Example:
        >>> import datapipe as dp, os, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "x.bin")
        >>> _ = open(p, "wb").write(b"abc")
        >>> list(dp.from_tensor_slices([p]).map(dp.read_file))
        [b'abc']
    """
    path = as_path(filename)
    with open(path, "rb") as f:
        return f.read()
