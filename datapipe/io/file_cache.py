"""``cache(filename)``: cache a dataset's elements in a file on disk (``tf.data`` semantics).

The first iteration that runs to the end writes every element to ``filename`` (a saved
dataset directory: Arrow IPC plus ``spec.json``, see ``datapipe.io.save``); later
iterations (later epochs, later processes) read the file instead of the input. The file is
written under a temporary name and renamed into place only when the pass completed, so an
iteration that stops early, fails or is killed leaves no cache that could be read back as
complete (its temporary directory is removed on ``close``). While a pass writes, a tqdm bar
shows its progress on a terminal (``DATAPIPE_PROGRESS=0`` hides it, see
``datapipe._progress``).
"""

from __future__ import annotations

import os
from typing import Any

from datapipe._iterator import OpIterator
from datapipe._progress import progress_bar
from datapipe._redact import redact_url
from datapipe._spec import common_spec, spec_from_json
from datapipe.dataset_ops import Dataset, UnaryDataset
from datapipe.io._remote import filesystem, is_remote, localize
from datapipe.io.save import DatasetWriter, LoadedDataset, is_complete, read_meta


class FileCacheDataset(UnaryDataset):
    """Elements of the input, cached in ``filename`` after the first complete pass.

    Args:
        filename: directory of the cache (created on the first complete pass; its parent
            must exist), or a URL (``s3://bucket/cache``, ``memory://c``: written through
            fsspec, see ``datapipe.io.save``).

    Raises (at ``iter()``):
        ValueError: an existing cache holds another element spec than the input's (delete
            the directory or use another filename).

    A checkpoint taken while reading the cache resumes in it; one taken while writing
    resumes the input without writing (the next complete pass writes the cache).

    Example:
        >>> import datapipe as dp, os, tempfile
        >>> calls = []
        >>> ds = dp.range(3).map(lambda x: calls.append(x) or x).cache(
        ...     os.path.join(tempfile.mkdtemp(), "c"))
        >>> first = [int(x) for x in ds]; n = len(calls)
        >>> second = [int(x) for x in ds]  # read from the file: the map does not run
        >>> first, second, len(calls) == n
        ([0, 1, 2], [0, 1, 2], True)
    """

    _name = "cache"
    commutes_with_shard = True

    def __init__(self, input_ds: Dataset, filename: str | os.PathLike):
        super().__init__(input_ds)
        filename = localize(os.fspath(filename))
        if is_remote(filename):  # an object store has no directories to check
            filesystem(filename, "cache")  # an unknown scheme fails here, naming the URL
            self._filename = filename.rstrip("/")
            return
        self._filename = os.path.abspath(filename)
        parent = os.path.dirname(self._filename)
        if not os.path.isdir(parent):
            raise FileNotFoundError(f"cache: the directory {parent!r} of the cache does not exist")

    def _for_worker(self, key: tuple) -> Dataset:
        # Above a shard point the file records one worker's share: one file per worker.
        from datapipe._rewrites import copy_node

        out = copy_node(self)
        out._filename = f"{self._filename}.{'-'.join(str(k).lower() for k in key)}"
        return out

    def _make_iterator(self, ctx, epoch):
        if is_complete(self._filename):
            stored = spec_from_json(read_meta(self._filename)["element_spec"])
            # The stored spec covers every element written: it may be less specific than
            # the input's (a spec inferred from the first element), never incompatible.
            if common_spec(stored, self.element_spec) is None:
                raise ValueError(
                    f"cache: {redact_url(self._filename)!r} holds elements of spec {stored}, "
                    "but the input's "
                    f"spec is {self.element_spec}; delete the cache directory or use another "
                    "filename"
                )
            return CacheReadIterator(LoadedDataset(self._filename))
        return CacheWriteIterator(ctx.make(self._inputs[0], epoch), self)


class CacheReadIterator(OpIterator):
    op_name = "cache"

    def __init__(self, loaded: LoadedDataset):
        it = loaded._make_iterator(None, ())
        super().__init__([it])
        self.inner = it

    def next_chunk(self, n: int) -> list:
        return self.inner.next_chunk(n)

    def get_state(self) -> dict:
        return {"mode": "read", "count": self.inner.count}

    def set_state(self, state: dict) -> None:
        self.inner.set_state({"count": state["count"]})


class CacheWriteIterator(OpIterator):
    """Passes the input through and writes it; commits when the input ends."""

    op_name = "cache"

    def __init__(self, inner: OpIterator, ds: FileCacheDataset):
        super().__init__([inner])
        self.inner, self.ds = inner, ds
        self.writer: DatasetWriter | None = DatasetWriter(ds._filename, ds.element_spec)
        self.count = 0
        total = ds._inputs[0].cardinality()
        self.expected = total if total >= 0 else None
        self.bar: Any = None  # opened with the first chunk, so an unused iterator draws nothing

    def next_chunk(self, n: int) -> list:
        chunk = self.inner.next_chunk(n)
        self.count += len(chunk)
        if self.writer is not None:
            if chunk:
                try:
                    self.writer.add(chunk)
                except BaseException:
                    self._abort()
                    raise
                self._progress(len(chunk))
            # Complete at the end, or once every element of an input of known size is
            # written (a consumer may stop at the last element without asking for the end).
            if not chunk or self.count == self.expected:
                writer, self.writer = self.writer, None
                self._close_bar()
                writer.commit(replace=False)
        return chunk

    def _progress(self, k: int) -> None:
        if self.bar is None:
            total = self.ds._inputs[0].cardinality()
            name = f"cache {self.ds._filename.rstrip('/').rsplit('/', 1)[-1]}"
            known = total if total >= 0 else None
            self.bar = progress_bar(total=known, desc=name, unit="el", delay=1.0)
        self.bar.update(k)

    def _close_bar(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def _abort(self) -> None:
        self._close_bar()
        if self.writer is not None:
            self.writer.abort()
            self.writer = None

    def get_state(self) -> dict:
        return {"mode": "write", "count": self.count, "input": self.inner.get_state()}

    def set_state(self, state: dict) -> None:
        if state.get("mode") != "write":
            raise ValueError(
                "cache: the checkpoint was taken while reading the cache "
                f"{redact_url(self.ds._filename)!r}, "
                "which is no longer complete; restart the epoch"
            )
        self._abort()  # the elements before the checkpoint are not in this writer
        self.count = int(state["count"])
        self.inner.set_state(state["input"])

    def close(self) -> None:
        self._abort()
        super().close()
