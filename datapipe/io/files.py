"""``list_files``: the file names matching glob patterns (``tf.data.Dataset.list_files``)."""

from __future__ import annotations

import copy
import glob
import itertools
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from datapipe._redact import redact_url
from datapipe._spec import TensorSpec
from datapipe._validate import check_bool, check_seed
from datapipe.io._path_list import PathList
from datapipe.io._remote import glob as remote_glob
from datapipe.io._remote import is_url
from datapipe.io.file_source import FileSource


def match_files(
    file_pattern: str | os.PathLike | Sequence[str | os.PathLike], op: str
) -> list[str]:
    """Sorted, de-duplicated paths matching one pattern or a list of patterns.

    Raises:
        FileNotFoundError: no file matches any pattern (the message lists the patterns).
    """
    given = [file_pattern] if isinstance(file_pattern, (str, os.PathLike)) else file_pattern
    patterns = [str(os.fspath(p)) for p in given]
    if not patterns:
        raise ValueError(f"{op}: file_pattern is an empty list")
    found: set[str] = set()
    for p in patterns:
        if "://" in p and is_url(p):  # s3://, https://, memory://, ...: fsspec's glob
            found.update(remote_glob(p, op))
            continue
        found.update(f for f in glob.glob(p, recursive=True) if os.path.isfile(f))
    if not found:
        listing = ", ".join(repr(redact_url(p)) for p in patterns)
        raise FileNotFoundError(f"{op}: no files match the pattern(s) {listing}")
    return sorted(found)


class FileListDataset(FileSource):
    """A list of file paths (``str``), optionally paired with labels and shuffled per epoch.

    Elements are ``path`` (``labels`` is None) or ``(path, label)``. Keeps random access:
    the shuffle is a permutation of indices drawn per epoch, so state is one integer and
    ``with_files`` (FILE sharding) restricts the list before shuffling.

    The paths are held in numpy buffers (``datapipe.io._path_list.PathList``: ~35 bytes
    per ImageNet-style path instead of ~120 as Python strings), and ``files`` is that
    ``PathList`` (a read-only sequence of ``str``).

    Args:
        files: the paths, in the order read when not shuffled (a sequence of ``str`` or
            a ``PathList``).
        labels: optional array, one label per file.
        shuffle: draw a new permutation of the files each epoch.
        seed: op seed (default: derived from ``Options.seed`` and the op's position).
    """

    _name = "list_files"
    keeps_random_access = True

    def __init__(
        self,
        files: Sequence[str] | PathList,
        labels: np.ndarray | None = None,
        shuffle: bool = False,
        seed: int | None = None,
    ):
        super().__init__()
        self._files: PathList = PathList.from_paths(files)  # type: ignore[assignment]
        self._labels = None if labels is None else np.asarray(labels)
        if self._labels is not None and len(self._labels) != len(self._files):
            raise ValueError(
                f"{self._name}: got {len(self._labels)} labels for {len(self._files)} files"
            )
        self._shuffle = check_bool("list_files", "shuffle", shuffle)
        self.uses_randomness = self._shuffle  # the trait depends on the argument
        self._seed = check_seed("list_files", seed)

    @property
    def shuffles(self) -> bool:
        """Whether the paths are read in a new random order each epoch."""
        return self._shuffle

    def in_order(self, units: Sequence[str]) -> FileListDataset:
        """A copy that reads ``units`` in the given order and never shuffles: the pool an
        auto-shard point splits (it orders each worker's share itself)."""
        out = self.with_files(units)
        out._shuffle = False
        out.uses_randomness = False
        return out

    def with_seed(self, seed: int) -> FileListDataset:
        """A copy that shuffles with ``seed`` (auto-sharding gives every worker one order
        when the pipeline gave none)."""
        out = self.with_files(self._files)
        out._seed = int(seed)
        return out

    def sorted_files(self) -> PathList:
        """The paths in sorted order (FILE auto-sharding's pool), computed in numpy."""
        return self._files.sorted_view()

    def with_files(self, units: Sequence[Any]) -> FileListDataset:
        """A copy that reads only ``units`` (each must be one of ``self.files``), in that
        order: a view of the same ``PathList`` (no strings made), or any sequence of paths.

        Raises:
            ValueError: a unit is not one of this source's files (names it).
        """
        mine = self._files
        if not mine.same_table(units):
            units = self._view_of(units)
        assert isinstance(units, PathList)
        at = np.full(mine.table_size(), -1, dtype=np.int64)  # table row -> our position
        at[mine.rows()] = np.arange(len(mine))
        pos = at[units.rows()]
        if len(pos) and pos.min() < 0:
            bad = units[int(np.flatnonzero(pos < 0)[0])]
            raise ValueError(f"{self._name}: with_files got {bad!r}, which is not one of its files")
        out = copy.copy(self)
        out._iterations = itertools.count()
        out._files = units
        out._labels = None if self._labels is None else self._labels[pos]
        return out

    def _view_of(self, units: Sequence[Any]) -> PathList:
        """``units`` (paths) as a view of our ``PathList``: a path listed twice is the same
        position each time (its last)."""
        where = {p: j for j, p in enumerate(self._files)}
        pos = []
        for u in units:
            if u not in where:
                raise ValueError(
                    f"{self._name}: with_files got {u!r}, which is not one of its files"
                )
            pos.append(where[u])
        return self._files.take(np.asarray(pos, dtype=np.int64))

    @property
    def element_spec(self) -> Any:
        path = TensorSpec((), np.dtype(object))
        if self._labels is None:
            return path
        return (path, TensorSpec(self._labels.shape[1:], self._labels.dtype))

    def cardinality(self) -> int:
        return len(self._files)

    def _make_random_access(self, ctx):
        return _FileListAccess(self, ctx)

    def _make_iterator(self, ctx, epoch):
        return self._ra_iterator(ctx, epoch)


class _FileListAccess:
    def __init__(self, ds: FileListDataset, ctx: Any):
        self.ds, self.ctx = ds, ctx
        self._perm: tuple[tuple, np.ndarray] | None = None
        if not ds._shuffle:  # the requested index is the file's (datapipe._identity)
            self.index_base = (1, 0)

    def __len__(self) -> int:
        return len(self.ds._files)

    def _order(self, epoch: tuple) -> np.ndarray | None:
        if not self.ds._shuffle:
            return None
        if self._perm is None or self._perm[0] != epoch:
            rng = self.ctx.rng(self.ds, epoch)
            self._perm = (epoch, rng.permutation(len(self.ds._files)))
        return self._perm[1]

    def identities(self, indices: Sequence[int], epoch: tuple) -> np.ndarray:
        """The files' indices in the sorted list (not in this epoch's order): the
        identities that draws in a map above key by (``datapipe._identity``), the same
        whether the list is shuffled here or split among workers by auto-sharding."""
        idx = np.asarray(indices, dtype=np.int64)
        order = self._order(epoch)
        return idx if order is None else order[idx]

    def get_many(self, indices: Sequence[int], epoch: tuple) -> list:
        order = self._order(epoch)
        idx = indices if order is None else order[np.asarray(indices, dtype=np.int64)]
        files, labels = self.ds._files, self.ds._labels
        paths = files.paths(idx)
        if labels is None:
            return paths
        return list(zip(paths, labels[np.asarray(idx, dtype=np.int64)]))


def list_files(
    file_pattern: str | os.PathLike | Sequence[str | os.PathLike],
    shuffle: bool | None = None,
    seed: int | None = None,
) -> FileListDataset:
    """A dataset of the paths matching ``file_pattern`` (``tf.data.Dataset.list_files``).

    Args:
        file_pattern: a glob pattern (``*``, ``?``, ``[..]``; ``**`` matches directories
            recursively) or a list of patterns. Only regular files are listed, each once:
            a file matched by several patterns is not repeated (tf.data lists it once per
            matching pattern). A URL (``s3://bucket/train-*.tar``, ``memory://``,
            ``https://`` where the server lists directories) is matched by fsspec's
            ``glob`` (``pip install "datapipe-torch[remote]"``) and listed as URLs in fsspec's
            form (``memory://d/a`` as ``memory:///d/a``).
        shuffle: shuffle the paths, with a new order each epoch. ``None`` means True, as in
            tf.data. When False, the paths are sorted.
        seed: shuffle seed (default: derived from ``Options.seed``).

    Returns:
        A ``FileSource`` whose elements are ``str`` paths (spec ``TensorSpec((), object)``);
        it keeps random access and is restricted by FILE auto-sharding.

    Raises:
        FileNotFoundError: no file matches; the message names the pattern(s).
        ValueError / ImportError: a URL whose scheme fsspec does not know / whose
            filesystem is not installed (names the URL).

    Example:
        >>> import datapipe as dp, os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> for name in ["b.csv", "a.csv", "c.txt"]:
        ...     _ = open(os.path.join(d, name), "w").write("x")
        >>> [os.path.basename(p) for p in dp.list_files(os.path.join(d, "*.csv"), shuffle=False)]
        ['a.csv', 'b.csv']
    """
    files = match_files(file_pattern, "list_files")
    shuffle = True if shuffle is None else check_bool("list_files", "shuffle", shuffle)
    return FileListDataset(files, shuffle=shuffle, seed=seed)
