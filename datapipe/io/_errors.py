"""Errors of the file readers: each names the file (``path``) and the ``reason``."""

from __future__ import annotations

from datapipe.errors import DatapipeError


class FileReadError(DatapipeError, ValueError):
    """A file could not be read as the format it was asked to be read as.

    Attributes:
        path: the file, or None when the reader was given bytes only.
        reason: what was wrong, in words.

    ``datapipe.errors.annotate`` picks ``path`` up, so the ``PipelineError`` that a failing
    ``map`` raises names the file too.
    """

    needs_location = True  # datapipe.errors.annotate adds the op and element index

    def __init__(self, reason: str, path: str | None = None):
        self.reason, self.path = reason, path
        super().__init__(f"{path}: {reason}" if path else reason)

    def __reduce__(self):
        return (type(self), (self.reason, self.path))

    def with_path(self, path: str) -> FileReadError:
        """A copy of this error that names ``path`` (for readers that only saw bytes)."""
        err = type(self)(self.reason, path)
        err.__cause__ = self.__cause__
        return err


class ImageDecodeError(FileReadError):
    """Bytes that are not a decodable image: empty, unknown format, truncated, corrupt
    (PNG checksum), or over Pillow's decompression-bomb limit."""


class SchemaMismatchError(FileReadError):
    """A columnar file lacks a column of the first file, or holds it with another type."""


class NullValueError(FileReadError):
    """A column holds nulls, which have no numpy representation here (see the readers)."""
