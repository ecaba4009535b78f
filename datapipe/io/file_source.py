"""``FileSource``: the common interface of every file-based source (the FILE shard contract).

Every source that reads files (``list_files``, ``TextLineDataset``, the Parquet, Arrow IPC
and CSV readers, ``Dataset.load``, ``image_dataset_from_directory``'s file list) is a
subclass of ``FileSource`` and exposes:

- ``files``: the tuple of *units* it reads, in reading order before any shuffle. A unit is
  a path (``str``) for sources that read whole files, or ``(path, k)`` for sources that
  can split a file (Parquet row group ``k``, Arrow IPC record batch ``k``).
- ``with_files(units) -> FileSource``: a copy of the source that reads only ``units`` (a
  subset of ``files``, in the given order), leaving the original untouched. All other
  arguments (columns, batch size, compression, shuffle seed, labels) carry over.

The FILE auto-shard policy (``Options.distribute.auto_shard_policy``) finds file sources
in the graph with ``isinstance(node, FileSource)`` and replaces each by
``node.with_files(node.files[index::num_workers])``, so each worker reads its own files
(tf.data's ``AutoShardPolicy.FILE``).

Example:
    >>> import datapipe as dp, os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> for name in "abc":
    ...     _ = open(os.path.join(d, name + ".txt"), "w").write(name)
    >>> src = dp.list_files(os.path.join(d, "*.txt"), shuffle=False)
    >>> [os.path.basename(f) for f in src.with_files(src.files[1::2]).files]
    ['b.txt']
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence
from typing import Any, TypeVar

from datapipe._redact import redact_url
from datapipe.dataset_ops import Dataset

Unit = Any  # str | tuple[str, int]


def unit_path(unit: Unit) -> str:
    """The file path of a unit (a path, or a ``(path, k)`` pair)."""
    return unit if isinstance(unit, str) else unit[0]


_S = TypeVar("_S", bound="FileSource")


class FileSource(Dataset):
    """Base class of sources that read a list of file units (see the module docstring).

    Subclasses set ``self._files`` (a tuple of units) in ``__init__`` and may override
    ``_restrict(units)`` to update derived state (per-unit lengths, labels) in the copy.
    """

    _files: tuple = ()

    @property
    def files(self) -> tuple:
        """The units this source reads: paths, or ``(path, k)`` pairs."""
        return self._files

    def with_files(self: _S, units: Sequence[Unit]) -> _S:
        """A copy that reads only ``units`` (each must be one of ``self.files``).

        Raises:
            ValueError: a unit is not one of this source's units (names it).
        """
        known = set(self._files)
        units = tuple(tuple(u) if isinstance(u, list) else u for u in units)
        for u in units:
            if u not in known:
                raise ValueError(
                    redact_url(f"{self._name}: with_files got {u!r}, which is not one of its files")
                )
        out = copy.copy(self)
        out._iterations = itertools.count()
        out._restrict(units)
        out._files = units
        return out

    def _restrict(self, units: tuple) -> None:
        """Hook for subclasses: update state derived from the unit list (called on the copy)."""
