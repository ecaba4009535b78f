"""``Dataset.save`` / ``Dataset.load``: a dataset on disk as Arrow IPC plus its element spec.

Layout of a saved dataset (a directory; tf.data's ``save`` also writes a directory):

- ``data.arrow``: an Arrow IPC file (readable by any Arrow library). Column ``c{i}`` holds
  leaf ``i`` of the flattened element (``datapipe._structure.flatten`` order): scalars as
  primitive, ``string`` or ``binary`` columns; arrays as a ``large_list`` of their flattened
  values plus a ``c{i}.shape`` column (``list<int64>``) with each element's shape.
- ``spec.json``: the format name, the ``element_spec`` (``datapipe._spec.spec_to_json``),
  the element count and each record batch's length.
- ``_COMPLETE``: written last. The directory is built under a temporary name and renamed
  into place only once complete, so a reader never sees a half-written dataset; a
  directory without the marker is refused.

``path`` may be a URL (``s3://bucket/ds``, ``memory://ds``, ...; fsspec, see
``datapipe.io._remote``). An object store has no atomic rename, so there the files are
written under the temporary prefix, an existing dataset's marker is deleted first (it
reads as incomplete from then on), its files are replaced, and the new marker is written
last: a reader sees the old dataset, an incomplete one (refused), or the new one, never
a mix.

torch leaves are stored as numpy and come back as torch tensors (the spec says which).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from typing import TYPE_CHECKING, Any

import numpy as np

from datapipe import _structure as nest
from datapipe._iterator import OpIterator
from datapipe._lazy import lazy_module
from datapipe._progress import progress_bar
from datapipe._redact import redact_url
from datapipe._spec import (
    TensorSpec,
    cast_without_loss,
    is_torch,
    is_torch_dtype,
    most_specific_common_shape,
    spec_from_json,
    spec_to_json,
)
from datapipe.errors import FileReadError
from datapipe.io import _remote as remote
from datapipe.io._remote import is_remote, localize
from datapipe.io._safe_files import open_regular
from datapipe.io.file_source import FileSource

if TYPE_CHECKING:  # pyarrow is imported on first use (datapipe/_lazy.py)
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")

FORMAT = "datapipe-arrow-ipc-v1"
DATA_FILE, SPEC_FILE, MARKER = "data.arrow", "spec.json", "_COMPLETE"
_ROWS_PER_BATCH = 1024
_COMPRESSION = {None: None, "": None, "zstd": "zstd", "lz4": "lz4"}


def _numpy_dtype(spec: TensorSpec) -> np.dtype:
    if is_torch_dtype(spec.dtype):
        import torch

        return torch.empty(0, dtype=spec.dtype).numpy().dtype
    return np.dtype(spec.dtype)


def _leaf_numpy(x: Any) -> Any:
    return x.detach().cpu().numpy() if is_torch(x) else x


def _exactly(values: np.ndarray, dtype: np.dtype, i: int, spec: TensorSpec) -> np.ndarray:
    """``values`` as ``dtype``, refusing a conversion that changes values (0.5 -> 0, 300 ->
    uint8 44): the spec may have been inferred from the first element only (``map`` is
    not traced), and writing the other elements in its dtype would change them silently."""
    out = cast_without_loss(values, dtype)
    if out is None:
        raise TypeError(
            f"save: component {i} of an element has dtype {values.dtype}, which does not fit "
            f"the dataset's element_spec {spec} without changing values (an element_spec "
            "inferred from the first element: make the function return the same dtype for "
            "every element, e.g. with .astype)"
        )
    return out


class ElementCodec:
    """Elements <-> Arrow record batches, leaf by leaf (see the module docstring).

    While encoding, the shapes seen per leaf are merged (``shapes``): a spec inferred from
    the first element may be more specific than the data (variable-size arrays), and the
    saved spec (``written_spec``) must describe every element written."""

    def __init__(self, spec: Any):
        self.spec = spec
        self.leaves: list[TensorSpec] = nest.flatten(spec)
        self.shapes: list = [s.shape for s in self.leaves]

    def written_spec(self) -> Any:
        """``spec`` with each leaf's shape relaxed to cover every element encoded."""
        leaves = [
            s if shape == s.shape else TensorSpec(shape, s.dtype)
            for s, shape in zip(self.leaves, self.shapes)
        ]
        return nest.pack_as(self.spec, leaves) if nest.is_nested(self.spec) else leaves[0]

    def _scalar_column(self, i: int, s: TensorSpec, vals: list) -> pa.Array:
        if s.dtype == np.dtype(object):
            kinds = {type(v) for v in vals}
            if not kinds <= {str, np.str_} and not kinds <= {bytes, np.bytes_}:
                raise TypeError(f"component {i}: expected all str or all bytes, got {kinds}")
            return pa.array([v for v in vals])
        leaves = [_leaf_numpy(v) for v in vals]
        shape = next((np.shape(v) for v in leaves if np.shape(v) != ()), None)
        if shape is not None:
            raise TypeError(
                f"save: component {i} of an element has shape {shape}, but the "
                f"dataset's element_spec {s} says a scalar (an element_spec inferred from the "
                "first element: make the function return the same structure for every element)"
            )
        return pa.array(_exactly(np.asarray(leaves), _numpy_dtype(s), i, s))

    def _array_columns(self, i: int, s: TensorSpec, vals: list) -> tuple[pa.Array, pa.Array]:
        arrs = [np.asarray(_leaf_numpy(v)) for v in vals]
        for a in arrs:
            if a.shape != self.shapes[i]:
                self.shapes[i] = most_specific_common_shape(self.shapes[i], a.shape)
        sizes = np.fromiter((a.size for a in arrs), np.int64, len(arrs))
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        if s.dtype == np.dtype(object):
            flat = pa.array([x for a in arrs for x in a.ravel().tolist()])
        else:
            dt = _numpy_dtype(s)
            flat = pa.array(_exactly(np.concatenate([a.ravel() for a in arrs]), dt, i, s))
        values = pa.LargeListArray.from_arrays(pa.array(offsets), flat)
        ranks = np.fromiter((a.ndim for a in arrs), np.int32, len(arrs))
        dims = np.concatenate([np.asarray(a.shape, np.int64) for a in arrs])
        shape_off = np.concatenate([[0], np.cumsum(ranks)]).astype(np.int32)
        return values, pa.ListArray.from_arrays(pa.array(shape_off), pa.array(dims, pa.int64()))

    def encode(self, elements: list) -> pa.RecordBatch:
        cols = list(zip(*[nest.flatten(e) for e in elements]))
        arrays, names = [], []
        for i, (s, vals) in enumerate(zip(self.leaves, cols)):
            if s.shape == ():
                arrays.append(self._scalar_column(i, s, list(vals)))
                names.append(f"c{i}")
            else:
                values, shapes = self._array_columns(i, s, list(vals))
                arrays += [values, shapes]
                names += [f"c{i}", f"c{i}.shape"]
        return pa.RecordBatch.from_arrays(arrays, names=names)

    def _decode_leaf(self, s: TensorSpec, batch: pa.RecordBatch, i: int) -> list:
        col = batch.column(f"c{i}")
        torch_out = is_torch_dtype(s.dtype)
        if s.shape == ():
            if s.dtype == np.dtype(object):
                return col.to_pylist()
            vals = list(col.to_numpy(zero_copy_only=False).copy())
        else:
            if s.dtype == np.dtype(object):
                flat = np.array(col.flatten().to_pylist(), dtype=object)
            else:  # one copy per record batch: elements are writable, independent of the file
                flat = col.flatten().to_numpy(zero_copy_only=False).copy()
            off = np.asarray(col.offsets) - col.offsets[0].as_py()
            shapes = batch.column(f"c{i}.shape").to_pylist()
            vals = [flat[off[j] : off[j + 1]].reshape(shapes[j]) for j in range(len(shapes))]
        if torch_out:
            import torch

            return [torch.from_numpy(np.asarray(v)) for v in vals]
        return vals

    def decode(self, batch: pa.RecordBatch) -> list:
        cols = [self._decode_leaf(s, batch, i) for i, s in enumerate(self.leaves)]
        if not nest.is_nested(self.spec):
            return cols[0]
        return [nest.pack_as(self.spec, list(v)) for v in zip(*cols)]


class DatasetWriter:
    """Writes elements into a temporary directory next to ``path`` and renames it into
    place on ``commit()``; ``abort()`` (or an exception) removes it."""

    def __init__(self, path: str, spec: Any, compression: str | None = None):
        if compression not in _COMPRESSION:
            raise ValueError(
                f"save: compression must be None, 'zstd' or 'lz4' (Arrow IPC's codecs), "
                f"got {compression!r}"
            )
        path = localize(path)
        self.remote = is_remote(path)
        self.path = path.rstrip("/") if self.remote else os.path.abspath(path)
        self.tmp = f"{self.path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        if not self.remote:  # an object store has no directories to create
            os.makedirs(self.tmp)
        self.sink: Any = None  # the remote data file, open while the writer writes
        self.codec = ElementCodec(spec)
        self.options = pa.ipc.IpcWriteOptions(compression=_COMPRESSION[compression])
        self.writer: Any = None
        self.pending: list = []
        self.batch_rows: list[int] = []
        self.count = 0

    def add(self, elements: list) -> None:
        self.pending.extend(elements)
        while len(self.pending) >= _ROWS_PER_BATCH:
            self._flush(self.pending[:_ROWS_PER_BATCH])
            self.pending = self.pending[_ROWS_PER_BATCH:]

    def _flush(self, elements: list) -> None:
        batch = self.codec.encode(elements)
        if self.writer is None:
            self.writer = pa.ipc.new_file(self._sink(), batch.schema, options=self.options)
        self.writer.write_batch(batch)
        self.batch_rows.append(len(elements))
        self.count += len(elements)

    def _sink(self) -> Any:
        if not self.remote:
            return os.path.join(self.tmp, DATA_FILE)
        self.sink = remote.open_output(remote.join(self.tmp, DATA_FILE))
        return self.sink

    def commit(self, replace: bool) -> bool:
        """Finish and rename into place. With ``replace`` an existing directory is swapped
        out; without, an existing complete one wins and ours is dropped (returns False)."""
        if self.pending:
            self._flush(self.pending)
            self.pending = []
        if self.writer is None:  # an empty dataset still gets a (schema-less) data file
            pa.ipc.new_file(self._sink(), pa.schema([])).close()
        else:
            self.writer.close()
        if self.sink is not None:
            self.sink.close()  # an object store stores the object now
            self.sink = None
        meta = {
            "format": FORMAT,
            "element_spec": spec_to_json(self.codec.written_spec()),
            "num_elements": self.count,
            "batch_rows": self.batch_rows,
        }
        if self.remote:
            remote.write_bytes(remote.join(self.tmp, SPEC_FILE), json.dumps(meta).encode())
            return _move_into_place_remote(self.tmp, self.path, replace)
        with open(os.path.join(self.tmp, SPEC_FILE), "w") as f:
            json.dump(meta, f)
        open(os.path.join(self.tmp, MARKER), "w").close()
        return _move_into_place(self.tmp, self.path, replace)

    def abort(self) -> None:
        for closable in (self.writer, self.sink):
            if closable is not None:
                try:
                    closable.close()
                except (OSError, pa.ArrowException, ValueError):
                    pass
        self.sink = None
        if self.remote:
            remote.remove(self.tmp, recursive=True)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def _move_into_place_remote(tmp: str, path: str, replace: bool) -> bool:
    """``_move_into_place`` on an object store (see the module docstring: no rename)."""
    if is_complete(path) and not replace:
        remote.remove(tmp, recursive=True)
        return False
    remote.remove(remote.join(path, MARKER))  # from here on the old one reads as incomplete
    remote.remove(path, recursive=True)
    for name in (DATA_FILE, SPEC_FILE):
        remote.move(remote.join(tmp, name), remote.join(path, name))
    remote.write_bytes(remote.join(path, MARKER), b"")
    remote.remove(tmp, recursive=True)
    return True


def _move_into_place(tmp: str, path: str, replace: bool) -> bool:
    if os.path.exists(path):
        if not replace and is_complete(path):
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        trash = f"{path}.old-{uuid.uuid4().hex[:8]}"
        os.replace(path, trash)
        os.replace(tmp, path)
        shutil.rmtree(trash, ignore_errors=True)
        return True
    os.replace(tmp, path)
    return True


def is_complete(path: str) -> bool:
    """True when ``path`` is a completely written saved dataset (marker and spec present)."""
    if is_remote(path):
        return remote.exists(remote.join(path, MARKER)) and remote.exists(
            remote.join(path, SPEC_FILE)
        )
    return os.path.isfile(os.path.join(path, MARKER)) and os.path.isfile(
        os.path.join(path, SPEC_FILE)
    )


def save_dataset(
    dataset: Any,
    path: str | os.PathLike,
    compression: str | None = None,
    progress: bool | None = None,
) -> None:
    """Write every element of ``dataset`` to the directory ``path`` (``tf.data.Dataset.save``).

    Args:
        dataset: a finite Dataset.
        path: the directory to create; an existing saved dataset there is replaced
            (atomically: readers see the old or the new one, never a mix). A URL
            (``s3://...``, ``memory://...``) is written through fsspec (module docstring).
        compression: None, ``"zstd"`` or ``"lz4"`` (Arrow IPC buffer compression).
        progress: ``False`` hides the tqdm progress bar, which is otherwise drawn when
            stderr is a terminal (``DATAPIPE_PROGRESS``, see ``datapipe._progress``).

    Raises:
        ValueError: bad ``compression``, or an infinite dataset.
        TypeError: a component that Arrow cannot hold (e.g. mixed ``str``/``bytes``).

    Example:
        >>> import datapipe as dp, os, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "saved")
        >>> dp.from_tensor_slices({"x": [1, 2, 3]}).save(p)
        >>> [e["x"].item() for e in dp.Dataset.load(p)]
        [1, 2, 3]
    """
    n = dataset.cardinality()
    if n == -1:
        raise ValueError("save: the dataset is infinite")
    writer = DatasetWriter(os.fspath(path), dataset.element_spec, compression)
    it = iter(dataset)
    try:
        total = n if n >= 0 else None
        with progress_bar(total=total, desc="save", unit="el", enabled=progress) as bar:
            for x in it:
                writer.add([x])
                bar.update(1)
        writer.commit(replace=True)
    except BaseException:
        writer.abort()
        raise
    finally:
        it.close()


def read_meta(path: str) -> dict:
    """``spec.json`` of a complete saved dataset.

    Raises:
        FileReadError: ``path`` is not a complete saved dataset (names it and says why).
    """
    if not (remote.isdir(path) if is_remote(path) else os.path.isdir(path)):
        raise FileNotFoundError(f"load: no saved dataset at {redact_url(path)!r}")
    if not is_complete(path):
        raise FileReadError(
            "not a complete saved dataset (no _COMPLETE marker: the writer did not finish)",
            path,
        )
    try:
        if is_remote(path):
            meta = json.loads(remote.read_bytes(remote.join(path, SPEC_FILE), 64 << 20))
        else:
            with open(os.path.join(path, SPEC_FILE)) as f:
                meta = json.load(f)
    except (OSError, ValueError) as e:  # ValueError: not JSON (truncated, not text)
        raise FileReadError(f"cannot read {SPEC_FILE}: {type(e).__name__}: {e}", path) from e
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise FileReadError(f"unknown format {got!r}, expected {FORMAT!r}", path)
    rows = meta.get("batch_rows")
    if not isinstance(rows, list) or not all(isinstance(r, int) and r >= 0 for r in rows):
        raise FileReadError(f"{SPEC_FILE} has no valid batch_rows list", path)
    return meta


class LoadedDataset(FileSource):
    """The elements of a saved dataset; units are the record batches of ``data.arrow``."""

    _name = "load"

    def __init__(self, path: str | os.PathLike):
        super().__init__()
        path = localize(os.fspath(path))
        self._path = path.rstrip("/") if is_remote(path) else os.path.abspath(path)
        meta = read_meta(self._path)
        try:
            self._spec = spec_from_json(meta["element_spec"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise FileReadError(
                f"{SPEC_FILE} holds no valid element_spec: {e!r}", self._path
            ) from e
        join = remote.join if is_remote(self._path) else os.path.join
        data = join(self._path, DATA_FILE)
        self._files = tuple((data, k) for k in range(len(meta["batch_rows"])))
        self._rows = dict(zip(self._files, meta["batch_rows"]))

    @property
    def element_spec(self) -> Any:
        return self._spec

    def cardinality(self) -> int:
        return sum(self._rows[u] for u in self._files)

    def _make_iterator(self, ctx, epoch):
        return LoadedIterator(self)


class LoadedIterator(OpIterator):
    """Decodes one record batch at a time; state is the number of elements delivered.

    A record batch that cannot be read (a truncated or corrupt ``data.arrow``) raises a
    ``FileReadError`` naming the file once and is skipped, its elements counted as
    consumed, so ``ignore_errors`` moves on; a file that cannot be opened at all skips
    every record batch at once.
    """

    op_name = "load"

    def __init__(self, ds: LoadedDataset):
        super().__init__()
        self.ds, self.codec = ds, ElementCodec(ds._spec)
        self.count, self.unit, self.row = 0, 0, 0
        self.elements: list | None = None
        self.reader: Any = None

    def _read_unit(self) -> list:
        path, k = self.ds._files[self.unit]
        try:
            if self.reader is None:
                # a URL: a seekable, retried reader over the object's byte ranges
                src = open_regular(path) if is_remote(path) else pa.memory_map(path, "r")
                self.reader = pa.ipc.open_file(src)
            return self.codec.decode(self.reader.get_batch(k))
        except (pa.ArrowException, OSError, ValueError, IndexError) as e:
            opened = self.reader is not None
            skip = 1 if opened else len(self.ds._files) - self.unit  # all: one data file
            for u in self.ds._files[self.unit : self.unit + skip]:
                self.count += self.ds._rows[u]
            self.unit, self.row = self.unit + skip, 0
            what = f"record batch {k}" if opened else "the file"
            raise FileReadError(
                f"cannot read {what} of this saved dataset (truncated or corrupt?): "
                f"{type(e).__name__}: {e}",
                path,
            ) from e

    def _batch(self) -> list | None:
        units = self.ds._files
        while self.unit < len(units):
            if self.elements is None:
                self.elements = self._read_unit()
            if self.row < len(self.elements):
                return self.elements
            self.unit, self.row, self.elements = self.unit + 1, 0, None
        return None

    def next_chunk(self, n: int) -> list:
        els = self._batch()
        if els is None:
            return []
        out = els[self.row : self.row + n]
        self.row += len(out)
        self.count += len(out)
        return out

    def units_started(self) -> int:
        """Record batches begun so far (the unit protocol of auto-sharding's shard points)."""
        begun = self.row > 0 or self.elements is not None
        return min(self.unit + (1 if begun else 0), len(self.ds._files))

    def get_state(self) -> dict:
        return {"count": self.count}

    def set_state(self, state: dict) -> None:
        count = int(state["count"])
        self.count, self.unit, self.row, self.elements = count, 0, count, None
        for u in self.ds._files:  # find the record batch that holds element `count`
            n = self.ds._rows[u]
            if self.row < n:
                break
            self.row -= n
            self.unit += 1

    def close(self) -> None:
        self.reader = None
        super().close()


def load_dataset(path: str | os.PathLike) -> LoadedDataset:
    """A dataset saved by ``save_dataset`` / ``Dataset.save`` (``tf.data.Dataset.load``).

    Raises:
        FileNotFoundError: no directory at ``path``.
        FileReadError: the directory is not a complete saved dataset.

    Example:
        >>> import datapipe as dp, os, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "squares")
        >>> dp.range(4).map(lambda x: x * x).save(p)
        >>> ds = dp.Dataset.load(p)
        >>> [int(x) for x in ds], ds.element_spec
        ([0, 1, 4, 9], TensorSpec(shape=(), dtype=int64))
    """
    return LoadedDataset(path)
