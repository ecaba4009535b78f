"""``PathList``: a file list held in numpy buffers, not as Python strings.

A Python ``str`` of a 60-character path costs ~110 bytes, plus 8 for its slot in a list;
ImageNet's 1.28M files would hold ~150 MB in a list of paths before a single image is
read, and every copy, sort, shuffle or shard of the list (a tuple, a dict of positions, a
set for a membership check) costs as much again. A ``PathList`` stores each directory
once (a tuple of ``str`` prefixes) and the file names as bytes in one ``uint8`` buffer
(``os.fsencode``, so any name round-trips), with per-file ``int64`` offsets, ``uint16``
lengths and ``int32`` directory numbers: ~35 bytes per ImageNet file. Views (a shuffle, a
split, a shard: ``take``) share those buffers and add one ``int64`` row number per file.
Paths are made (``dirs[d] + name``) only for the files read.

``sorted_order()`` gives the order that sorts the paths as strings (FILE auto-sharding's
pool order) with numpy, without making the strings: a list built by directory with each
directory's names sorted (``PathListBuilder.add``) is already in sorted order within each
directory, and directories that do not nest order their files as their prefixes order
(two paths in different directories first differ inside the shorter prefix). Lists built
otherwise fall back to Python's sort of the strings.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import numpy as np

_MAX_NAME = 2**16 - 1  # bytes of one name (POSIX allows 255; URLs may be longer)
_FS_ENCODING, _FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()


class _Table:
    """The shared buffers of one listing (never changed after ``build``)."""

    __slots__ = ("dirs", "names", "starts", "lens", "dir_of", "by_dir_sorted", "_rank")

    def __init__(self, dirs, names, starts, lens, dir_of, by_dir_sorted):
        self.dirs: tuple[str, ...] = dirs
        self.names: np.ndarray = names
        self.starts: np.ndarray = starts
        self.lens: np.ndarray = lens
        self.dir_of: np.ndarray = dir_of
        self.by_dir_sorted: bool = by_dir_sorted  # each dir added once, its names sorted
        self._rank: np.ndarray | None = None

    def sorted_rank(self) -> np.ndarray | None:
        """Each row's position in the sorted order of all paths (computed once), or None
        when numpy cannot tell it (names not sorted by directory, nested directories)."""
        if self._rank is not None or not self.by_dir_sorted:
            return self._rank
        by_prefix = sorted(range(len(self.dirs)), key=lambda d: self.dirs[d])
        ordered = [self.dirs[d] for d in by_prefix]
        if any(b.startswith(a) for a, b in zip(ordered, ordered[1:])):
            return None  # a nested directory's files interleave with its parent's
        # Each directory is one block of rows (added once), its names in order: the sorted
        # order is the blocks in prefix order, each kept as it is.
        sizes = np.bincount(self.dir_of, minlength=len(self.dirs))
        first = np.zeros(len(self.dirs), dtype=np.int64)  # each block's first row
        if len(self.dirs) > 1:
            np.cumsum(sizes[:-1], out=first[1:])
        new_first = np.zeros(len(self.dirs), dtype=np.int64)
        new_first[by_prefix] = np.concatenate([[0], np.cumsum(sizes[by_prefix])[:-1]])
        rows = np.arange(len(self.dir_of), dtype=np.int64)
        self._rank = new_first[self.dir_of] + rows - first[self.dir_of]
        return self._rank

    @property
    def nbytes(self) -> int:
        arrays = (self.names, self.starts, self.lens, self.dir_of)
        return sum(a.nbytes for a in arrays) + sum(len(d) + 49 for d in self.dirs)


class PathListBuilder:
    """Collects paths directory by directory; ``build()`` makes the ``PathList``."""

    def __init__(self) -> None:
        self._dirs: list[str] = []
        self._dir_index: dict[str, int] = {}
        self._chunks: list[bytes] = []
        self._lens: list[np.ndarray] = []
        self._dir_of: list[np.ndarray] = []
        self._by_dir_sorted = True

    def add(self, directory: str, names: Sequence[str], is_sorted: bool = False) -> None:
        """Append ``directory + name`` for each name (``directory`` ends with the
        separator, or is ``""``), in the order given; ``is_sorted``: the caller sorted
        ``names`` (else it is checked)."""
        if not names:
            return
        d = self._dir_index.get(directory)
        if d is None:
            d = self._dir_index[directory] = len(self._dirs)
            self._dirs.append(directory)
        else:
            self._by_dir_sorted = False  # a directory's names arrive in two runs
        if self._by_dir_sorted and not is_sorted:
            self._by_dir_sorted = all(a <= b for a, b in zip(names, names[1:]))
        # One encode per directory; byte lengths are the str lengths when all is ASCII.
        blob = "".join(names).encode(_FS_ENCODING, _FS_ERRORS)
        lens = np.fromiter(map(len, names), dtype=np.int64, count=len(names))
        if len(blob) != int(lens.sum()):
            encoded = [os.fsencode(n) for n in names]
            blob = b"".join(encoded)
            lens = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        if lens.max() > _MAX_NAME:
            raise ValueError(f"a file name of {int(lens.max())} bytes in {directory!r}")
        self._chunks.append(blob)
        self._lens.append(lens.astype(np.uint16))
        self._dir_of.append(np.full(len(names), d, dtype=np.int32))

    def add_paths(self, paths: Iterable[str]) -> None:
        """Append full paths (split at their last ``/`` or ``os.sep``), in order."""
        run_dir: str | None = None
        run_names: list[str] = []
        for p in paths:
            cut = max(p.rfind("/"), p.rfind(os.sep)) + 1
            d, name = p[:cut], p[cut:]
            if d != run_dir:
                if run_dir is not None:
                    self.add(run_dir, run_names)
                run_dir, run_names = d, []
            run_names.append(name)
        if run_dir is not None:
            self.add(run_dir, run_names)

    def build(self) -> PathList:
        lens = np.concatenate(self._lens) if self._lens else np.zeros(0, np.uint16)
        starts = np.zeros(len(lens), dtype=np.int64)
        if len(lens):
            np.cumsum(lens[:-1], out=starts[1:])
        names = np.frombuffer(b"".join(self._chunks), dtype=np.uint8)
        dir_of = np.concatenate(self._dir_of) if self._dir_of else np.zeros(0, np.int32)
        table = _Table(tuple(self._dirs), names, starts, lens, dir_of, self._by_dir_sorted)
        self._chunks, self._lens, self._dir_of = [], [], []  # the buffers now hold them
        return PathList(table, None)


class PathList(Sequence[str]):
    """An immutable sequence of paths (``str``) in numpy buffers (module docstring).

    Indexing gives a ``str``; a slice, ``take(indices)`` and ``sorted_view()`` give a
    ``PathList`` view sharing the buffers. ``nbytes`` is the memory held (the shared
    buffers and this view's rows).
    """

    __slots__ = ("_t", "_rows")

    def __init__(self, table: _Table, rows: np.ndarray | None):
        self._t = table
        self._rows = rows  # rows of the table, in this view's order (None: all, in order)

    @staticmethod
    def from_paths(paths: Iterable[str]) -> PathList:
        if isinstance(paths, PathList):
            return paths
        b = PathListBuilder()
        b.add_paths(paths)
        return b.build()

    # ---- Sequence ------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._t.lens) if self._rows is None else len(self._rows)

    def _row(self, i: int) -> int:
        return i if self._rows is None else int(self._rows[i])

    def _path(self, r: int) -> str:
        t = self._t
        s = int(t.starts[r])
        return t.dirs[t.dir_of[r]] + os.fsdecode(t.names[s : s + int(t.lens[r])].tobytes())

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> PathList: ...

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return self.take(np.arange(len(self))[i])
        n = len(self)
        j = int(i) + n if int(i) < 0 else int(i)
        if not 0 <= j < n:
            raise IndexError(f"path index {int(i)} out of range for {n} paths")
        return self._path(self._row(j))

    def __iter__(self) -> Iterator[str]:
        for j in range(len(self)):
            yield self._path(self._row(j))

    def __repr__(self) -> str:
        head = ", ".join(repr(p) for p in self[:3])
        return f"PathList([{head}{', ...' if len(self) > 3 else ''}], {len(self)} paths)"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PathList) and other._t is self._t:
            return np.array_equal(self.rows(), other.rows())
        if isinstance(other, (PathList, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable-looking sequences are unhashable

    # ---- views ---------------------------------------------------------------------------
    def rows(self) -> np.ndarray:
        """The table rows of this view, in order (int64)."""
        return np.arange(len(self._t.lens)) if self._rows is None else self._rows

    def take(self, indices: Any) -> PathList:
        """The paths at ``indices`` (positions in this list), as a view."""
        idx = np.asarray(indices, dtype=np.int64)
        rows = idx if self._rows is None else self._rows[idx]
        return PathList(self._t, rows)

    def paths(self, indices: Any) -> list[str]:
        """The ``str`` paths at ``indices`` (positions in this list)."""
        return [self._path(self._row(int(i))) for i in indices]

    def same_table(self, other: Any) -> bool:
        """Whether ``other`` is a view of the same listing (rows comparable)."""
        return isinstance(other, PathList) and other._t is self._t

    def table_size(self) -> int:
        return len(self._t.lens)

    @property
    def nbytes(self) -> int:
        return self._t.nbytes + (0 if self._rows is None else self._rows.nbytes)

    # ---- order ---------------------------------------------------------------------------
    def sorted_order(self) -> np.ndarray:
        """Positions that put the paths in sorted (string) order, ties by position."""
        rank = self._t.sorted_rank()
        if rank is None:
            return np.asarray(sorted(range(len(self)), key=lambda j: (self[j], j)), np.int64)
        keys = rank[self.rows()]
        n = len(keys)
        if n == len(rank) and (np.bincount(keys, minlength=n) == 1).all():
            order = np.empty(n, dtype=np.int64)  # a permutation of all rows: invert it
            order[keys] = np.arange(n)
            return order
        return np.argsort(keys, kind="stable")

    def sorted_view(self) -> PathList:
        return self.take(self.sorted_order())
