"""``snapshot``: the input's elements written to disk on the first pass, read back after
(``tf.data.Dataset.snapshot``; its RFC: tensorflow/community rfcs/20200107-tf-data-snapshot).

Layout, as tf.data lays it out: ``path/<fingerprint>/`` per pipeline (the hash of the input
graph, ``datapipe.ops._graph_fingerprint``, or ``path/<name>/`` when ``name=`` is given; a
pipeline above a shard point adds the worker, so each worker snapshots its own share),
holding one directory per writing pass (a *run*,
named by a random id) and ``snapshot.metadata``, the JSON record of the complete run that
readers use. A run holds one directory per shard, ``%08d.shard``, and each shard its
chunks, ``%08d.arrow``: Arrow IPC files (``datapipe.io.save``'s element encoding) of up to
``FLUSH_ELEMENTS`` elements or ``FLUSH_BYTES`` bytes each, written under a temporary name
and renamed into place, so a chunk on disk is always whole.

- **First pass** (no ``snapshot.metadata``): elements pass through while they are written;
  element ``i`` goes to shard ``shard_func(element)`` (default: ``i % os.cpu_count()``, as
  tf.data). When the input ends the run's metadata is renamed into place; a pass that
  stops early leaves its run incomplete (never read; a later pass writes a new run, as
  tf.data does). Two passes writing at once write two runs; the first to finish is read.
- **Later passes** read the complete run: by default one element of each shard in turn
  (tf.data's default ``reader_func``, an interleave over the shards, cycle length = shards,
  block length 1: with the default sharding that is the original order); or
  ``reader_func(shards)``, where ``shards`` is a ``Dataset`` whose elements are one
  ``Dataset`` per shard, in shard order.
- **Checkpoints** resume both: a reading pass at the position of each shard (with a custom
  ``reader_func`` the state is that pipeline's: an ``interleave`` over the shards keeps
  its shard datasets in it, so it restores in process but ``save_state`` refuses it); a
  writing pass continues its run -- a copy of it, made of hard links to the chunks the
  checkpoint counted (so a second resume from one checkpoint, or the old iterator still
  running, cannot mix chunks) -- by restoring the input to the last flush and re-reading
  the elements after it without delivering them (at most one flush's worth).

The fingerprint follows the code (``datapipe.ops._graph_fingerprint`` lists what it
covers): editing a ``map`` function, a function or method it calls (a module attribute such
as ``usermod.transform``, a callable object's ``__call__``), a constant, an argument, or the
state of an object it uses (a compiled pattern, a generator's seed, an array) moves the
pipeline to another directory, so the next pass computes and writes again instead of
serving the old elements. Where the fingerprint cannot read an object it raises
``datapipe.errors.FingerprintError``; ``name=`` then keys the snapshot instead (and the
user changes the name when the pipeline changes).

Checks: a run has at most ``MAX_SHARDS`` shards, and ``snapshot.metadata`` is at most
``MAX_METADATA_BYTES``; both are checked before anything is read, and so is the record
against the shards: the chunks' row counts must add up to ``num_elements`` and every chunk
file must be there (``FileReadError`` naming the snapshot, never a silently short pass). A
write that fails (a full disk: ``OSError`` with its ``errno``) names the file and the
snapshot directory; the failed pass's run stays without a record, so it is never read as
complete. Local directories only; a URL's credentials are redacted in every message.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from datapipe import _structure as nest
from datapipe._iterator import OpIterator, pull_exactly
from datapipe._lazy import lazy_module
from datapipe._redact import redact_url
from datapipe._spec import common_spec, spec_from_json, spec_to_json
from datapipe.dataset_ops import Dataset, UnaryDataset
from datapipe.errors import FileReadError
from datapipe.io._remote import is_remote, localize
from datapipe.io.save import ElementCodec

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")

FORMAT = "datapipe-snapshot-v1"
METADATA = "snapshot.metadata"
MAX_SHARDS = 1 << 16
MAX_METADATA_BYTES = 64 << 20
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # one directory name, never ".."
FLUSH_ELEMENTS = 1024  # elements buffered (over all shards) before chunks are written
FLUSH_BYTES = 16 << 20  # ... or bytes of their arrays
# tf.data's names -> Arrow IPC's codecs (docs/guides/differences.md, D-TF-26).
_COMPRESSION = {
    "AUTO": "lz4",
    "SNAPPY": "lz4",
    "LZ4": "lz4",
    "GZIP": "zstd",
    "ZSTD": "zstd",
    "NONE": None,
    "": None,
}


def _codec_name(compression: str | None) -> str | None:
    key = "NONE" if compression is None else str(compression).upper()
    if key not in _COMPRESSION:
        raise ValueError(
            f"snapshot: compression must be one of {sorted(k for k in _COMPRESSION if k)} or "
            f"None, got {compression!r}"
        )
    return _COMPRESSION[key]


class SnapshotDataset(UnaryDataset):
    """The input's elements, written to ``path`` on the first complete pass and read from
    there on later passes (see the module docstring for the layout and the resume).

    Args:
        path: a local directory (created if missing) holding snapshots of any number of
            pipelines, one subdirectory per pipeline fingerprint.
        compression: ``"AUTO"`` (default), ``"GZIP"``, ``"SNAPPY"``, ``"ZSTD"``, ``"LZ4"``
            or None. Arrow IPC offers LZ4 and ZSTD: ``AUTO`` and ``SNAPPY`` write LZ4,
            ``GZIP`` ZSTD (D-TF-26). A snapshot is read whatever the reader's setting.
        reader_func: ``f(shards: Dataset of Datasets) -> Dataset``, how a later pass reads
            the shards (default: one element of each shard in turn).
        shard_func: ``f(*element) -> int`` (a tuple element is unpacked, as in tf.data), the
            shard an element is written to, in ``[0, MAX_SHARDS)`` (default: the element's
            index modulo ``os.cpu_count()``).
        name: the snapshot's directory name under ``path``, in place of the input's
            fingerprint (letters, digits, ``.``, ``_``, ``-``; at most 128). tf.data's
            ``name`` only names the op; here it keys the snapshot (D-TF-31), for a pipeline
            whose fingerprint is refused (``FingerprintError``) or that must keep its
            snapshot across edits. The name is then the only key: change it when the
            pipeline changes, or a later pass serves the old elements.

    Raises:
        ValueError: (at construction) a remote ``path`` (its credentials redacted), an
            unknown ``compression``, a ``name`` that is not one directory name; (at
            ``iter()``) a snapshot whose element spec does not fit the input's; (at
            ``load_state_dict``) a checkpoint of another run or whose chunks are gone.
        FileReadError: (at ``iter()``, a ``ValueError``) ``snapshot.metadata`` malformed
            or over its bound, its shards' row counts not adding up to ``num_elements``, or
            a chunk it lists missing; names the file and says to delete the snapshot.
        FingerprintError: (at ``iter()``, a ``TypeError``; without ``name``) the input
            reaches an object whose state the fingerprint cannot read; pass ``name``.
        OSError: (while writing) a chunk or the record cannot be written (``errno``
            kept: ``ENOSPC`` for a full disk); names the file and the snapshot directory.
        TypeError: ``reader_func`` / ``shard_func`` is not callable; (at iteration)
            ``shard_func`` returns something other than an int in range, ``reader_func``
            something other than a ``Dataset``.

    Example:
        >>> import datapipe as dp, tempfile
        >>> calls = []
        >>> ds = dp.range(4).map(lambda x: calls.append(int(x)) or x * 10)
        >>> ds = ds.snapshot(tempfile.mkdtemp())
        >>> first = [int(x) for x in ds]  # the first pass computes and writes
        >>> n = len(calls)
        >>> second = [int(x) for x in ds]  # later passes read the files: no map call
        >>> first, second, len(calls) == n
        ([0, 10, 20, 30], [0, 10, 20, 30], True)
    """

    _name = "snapshot"
    commutes_with_shard = True

    def __init__(
        self,
        input_ds: Dataset,
        path: str | os.PathLike,
        compression: str | None = "AUTO",
        reader_func: Callable[[Dataset], Dataset] | None = None,
        shard_func: Callable[..., Any] | None = None,
        name: str | None = None,
    ):
        super().__init__(input_ds)
        path = localize(os.fspath(path))
        if is_remote(path):
            raise ValueError(redact_url(f"snapshot: path must be a local directory, got {path!r}"))
        if name is not None and (not isinstance(name, str) or not _NAME.fullmatch(name)):
            raise ValueError(
                "snapshot: name must be one directory name (letters, digits, '.', '_', '-'; "
                f"at most 128, not starting with '.'), got {name!r}"
            )
        for what, f in (("reader_func", reader_func), ("shard_func", shard_func)):
            if f is not None and not callable(f):
                raise TypeError(f"snapshot: {what} must be callable, got {type(f).__name__}")
        self._path = os.path.abspath(path)
        self._compression = _codec_name(compression)
        self._reader_func, self._shard_func = reader_func, shard_func
        self._key_name = name
        self._worker: tuple | None = None

    def _for_worker(self, key: tuple) -> Dataset:
        from datapipe._rewrites import copy_node

        out = copy_node(self)
        out._worker = key
        return out

    def _snapshot_dir(self) -> str:
        """``path/<fingerprint>`` (or ``path/<name>``): where this pipeline's runs and
        metadata live. Computed at the pipeline object's first ``iter()`` (per worker) and
        kept: a function that changes a list it reads (a counter) does not move its own
        snapshot."""
        from datapipe._context import origin
        from datapipe.ops._graph_fingerprint import fingerprint

        known = origin(self).__dict__.setdefault("_snapshot_dirs", {})
        if self._worker not in known:
            key = self._key_name or fingerprint(self._inputs[0])
            if self._worker is not None:
                key += "-" + "-".join(str(k).lower() for k in self._worker)
            known[self._worker] = os.path.join(self._path, key)
        return known[self._worker]

    def _make_iterator(self, ctx, epoch):
        return SnapshotIterator(self, ctx, epoch)


# ---- the metadata --------------------------------------------------------------------
def read_metadata(directory: str) -> dict | None:
    """The complete run's record, or None when no pass has completed.

    Raises:
        FileReadError: the file is over ``MAX_METADATA_BYTES``, not JSON, or not a record
            of this format (names the file).
    """
    path = os.path.join(directory, METADATA)
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        return None
    if size > MAX_METADATA_BYTES:
        raise FileReadError(f"{METADATA} holds {size} bytes, over {MAX_METADATA_BYTES}", path)
    try:
        with open(path, "rb") as f:
            meta = json.loads(f.read(MAX_METADATA_BYTES + 1))
    except (OSError, ValueError) as e:
        raise FileReadError(f"cannot read {METADATA}: {type(e).__name__}: {e}", path) from e
    _check_metadata(meta, path)
    return meta


def _check_metadata(meta: Any, path: str) -> None:
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise FileReadError(f"not a snapshot record of format {FORMAT!r}", path)
    shards = meta.get("shards")
    if not isinstance(shards, dict) or len(shards) > MAX_SHARDS:
        raise FileReadError(f"'shards' must map at most {MAX_SHARDS} shards to row counts", path)
    for key, rows in shards.items():
        ok = key.isdigit() and int(key) < MAX_SHARDS and isinstance(rows, list)
        if not ok or not all(isinstance(r, int) and r > 0 for r in rows):
            raise FileReadError(f"shard {key!r}: expected a list of positive row counts", path)
    if not isinstance(meta.get("run"), str) or not meta["run"].isalnum():
        raise FileReadError("'run' must name the run's directory", path)
    total, held = meta.get("num_elements"), sum(sum(rows) for rows in shards.values())
    if not isinstance(total, int) or isinstance(total, bool) or total != held:
        raise FileReadError(
            f"snapshot {os.path.dirname(path)!r} is damaged: its shards hold {held} elements, "
            f"its num_elements says {total!r}; delete that directory to compute it again",
            path,
        )


def _check_chunks(directory: str, meta: dict) -> None:
    """Every chunk the record lists is on disk, before a pass delivers anything (a missing
    shard would otherwise end the pass early or fail it half-way)."""
    run_dir = os.path.join(directory, meta["run"])
    for key, rows in sorted(meta["shards"].items()):
        shard_dir = os.path.dirname(_chunk_path(run_dir, int(key), 0))
        try:
            present = set(os.listdir(shard_dir))
        except OSError:
            present = set()
        missing = [k for k in range(len(rows)) if f"{k:08d}.arrow" not in present]
        if missing:
            first = _chunk_path(run_dir, int(key), missing[0])
            raise FileReadError(
                f"snapshot {directory!r} is damaged: shard {int(key)} misses {len(missing)} "
                f"of its {len(rows)} chunks ({sum(rows[k] for k in missing)} of the "
                f"{meta['num_elements']} elements), first {first!r}; "
                "delete that directory to compute it again",
                os.path.join(directory, METADATA),
            )


def _commit(directory: str, meta: dict) -> None:
    """Write ``meta`` as the snapshot's record unless a complete run is recorded already."""
    if os.path.exists(os.path.join(directory, METADATA)):
        return  # the first pass to finish is the one read
    tmp = os.path.join(directory, f".{METADATA}.tmp-{uuid.uuid4().hex[:8]}")
    with _writing(tmp, directory, meta["run"]):
        with open(tmp, "w") as f:
            json.dump(meta, f)
        os.replace(tmp, os.path.join(directory, METADATA))


@contextlib.contextmanager
def _writing(tmp: str, directory: str, run: str) -> Iterator[None]:
    """Writes ``tmp`` (renamed into place inside): on an ``OSError`` (a full disk), removes
    the partial file and raises one that names it and the snapshot, ``errno`` kept."""
    try:
        yield
    except OSError as e:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        reason = e.strerror or str(e)
        err = OSError(
            e.errno,
            redact_url(
                f"snapshot: cannot write {tmp!r} in snapshot {directory!r}: {reason}; the "
                f"pass's run {run!r} stays incomplete and is never read (a later pass writes "
                "a new one): free space there or snapshot to another path"
            ),
        )
        raise err from e


def _write_chunk(path: str, batch: Any, options: Any) -> None:
    """One Arrow IPC file holding ``batch``."""
    with pa.ipc.new_file(path, batch.schema, options=options) as w:
        w.write_batch(batch)


def _chunk_path(run_dir: str, shard: int, chunk: int) -> str:
    return os.path.join(run_dir, f"{shard:08d}.shard", f"{chunk:08d}.arrow")


# ---- the pass-through writer -----------------------------------------------------------
class _Writer:
    """Passes the input through and writes it into run ``run`` (see the module docstring)."""

    def __init__(self, node: SnapshotDataset, directory: str, inner: OpIterator):
        self.node, self.directory, self.inner = node, directory, inner
        self.run = uuid.uuid4().hex[:16]
        self.run_dir = os.path.join(directory, self.run)  # made by the first flush
        self.codec = ElementCodec(node.element_spec)
        self.options = pa.ipc.IpcWriteOptions(compression=node._compression)
        self.num_shards = os.cpu_count() or 1  # the default shard_func's, as tf.data's
        self.index = 0  # elements pulled from the input
        self.flushed = 0  # ... of which written to chunks
        self.flush_input = inner.get_state()  # the input's state at the last flush
        self.rows: dict[int, list[int]] = {}  # shard -> rows of each chunk written
        self.buffers: dict[int, list] = {}
        self.nbytes = 0
        total = node._inputs[0].cardinality()
        self.expected = total if total >= 0 else None
        self.done = False

    def next_chunk(self, n: int) -> list:
        if self.done:
            return []
        chunk = self.inner.next_chunk(n)
        self._add(chunk)
        # Complete at the end, or once every element of an input of known size is here (a
        # consumer may stop at the last element without asking for the end).
        if not chunk or self.index == self.expected:
            self._finish()
        elif len(self.buffers) and (
            self._buffered() >= FLUSH_ELEMENTS or self.nbytes >= FLUSH_BYTES
        ):
            self._flush()
        return chunk

    def _buffered(self) -> int:
        return sum(len(b) for b in self.buffers.values())

    def _add(self, chunk: list) -> None:
        for el in chunk:
            shard = self._shard_of(el)
            self.buffers.setdefault(shard, []).append(el)
            self.nbytes += sum(getattr(v, "nbytes", 0) for v in nest.flatten(el))
            self.index += 1

    def _shard_of(self, el: Any) -> int:
        f = self.node._shard_func
        if f is None:
            return self.index % self.num_shards
        got = f(*el) if isinstance(el, tuple) and not nest.is_namedtuple(el) else f(el)
        value = np.asarray(got.detach().cpu() if hasattr(got, "detach") else got)
        if value.shape != () or value.dtype.kind not in "iu" or not 0 <= int(value) < MAX_SHARDS:
            raise TypeError(
                f"snapshot: shard_func must return an int in [0, {MAX_SHARDS}) (the shard of "
                f"element {self.index}), got {got!r}"
            )
        return int(value)

    def _flush(self) -> None:
        for shard, elements in sorted(self.buffers.items()):
            rows = self.rows.setdefault(shard, [])
            path = _chunk_path(self.run_dir, shard, len(rows))
            tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
            batch = self.codec.encode(elements)
            with _writing(tmp, self.directory, self.run):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                _write_chunk(tmp, batch, self.options)
                os.replace(tmp, path)  # a chunk on disk is always complete
            rows.append(len(elements))
        self.buffers, self.nbytes = {}, 0
        self.flushed, self.flush_input = self.index, self.inner.get_state()

    def _finish(self) -> None:
        self._flush()
        os.makedirs(self.run_dir, exist_ok=True)  # an empty input: a run of no shards
        self.done = True
        meta = {
            "format": FORMAT,
            "run": self.run,
            "element_spec": spec_to_json(self.codec.written_spec()),
            "num_elements": self.index,
            "shards": {str(s): rows for s, rows in sorted(self.rows.items())},
        }
        _commit(self.directory, meta)

    def get_state(self) -> dict:
        # Cheap and free of side effects (a parallel stage above asks for it per chunk):
        # the input's state at the last flush, and how far past it the pass has read.
        return {
            "mode": "write",
            "run": self.run,
            "index": self.index,
            "flushed": self.flushed,
            "input": self.flush_input,
            "rows": {str(s): list(r) for s, r in self.rows.items()},
            "shapes": [None if s is None else list(s) for s in self.codec.shapes],
            "done": self.done,
        }

    def restore(self, state: dict) -> None:
        """Continue the checkpoint's run in a copy of it (this writer's own run)."""
        old = os.path.join(self.directory, str(state["run"]))
        self.rows = {int(s): [int(r) for r in rows] for s, rows in state["rows"].items()}
        for shard, rows in self.rows.items():
            for chunk in range(len(rows)):
                _link(_chunk_path(old, shard, chunk), _chunk_path(self.run_dir, shard, chunk))
        self.codec.shapes = [None if s is None else tuple(s) for s in state["shapes"]]
        self.buffers, self.nbytes, self.done = {}, 0, bool(state["done"])
        self.inner.set_state(state["input"])
        self.index = self.flushed = int(state["flushed"])
        self.flush_input = state["input"]
        again = int(state["index"]) - self.index
        if again > 0 and not self.done:  # delivered before the checkpoint, not yet written
            got = pull_exactly(self.inner, again)
            if len(got) != again:
                raise ValueError(
                    f"snapshot: the input gave {len(got)} of the {again} elements it gave "
                    "before the checkpoint (a nondeterministic input cannot resume a write)"
                )
            self._add(got)

    def close(self) -> None:
        self.buffers = {}


def _link(src: str, dst: str) -> None:
    if not os.path.exists(src):
        raise ValueError(f"snapshot: cannot resume writing: the checkpoint's chunk {src!r} is gone")
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:  # another file system, or no hard links: copy
        shutil.copyfile(src, dst)


# ---- reading a complete run ------------------------------------------------------------
class _ShardReader:
    """One shard's elements in order, a chunk decoded at a time; position = elements read."""

    def __init__(self, run_dir: str, shard: int, rows: list[int], codec: ElementCodec):
        self.run_dir, self.shard, self.rows, self.codec = run_dir, shard, rows, codec
        self.total = sum(rows)
        self.count = 0
        self.chunk = -1  # the chunk decoded now ...
        self.elements: list | None = None  # ... and its elements

    def seek(self, count: int) -> None:
        self.count, self.chunk, self.elements = min(int(count), self.total), -1, None

    def take(self, n: int) -> list:
        """Up to ``n`` next elements of this shard (only those of one chunk)."""
        if self.count >= self.total:
            return []
        chunk, start = self._locate(self.count)
        if chunk != self.chunk:
            self.elements, self.chunk = self._decode(chunk), chunk
        assert self.elements is not None
        out = self.elements[start : start + n]
        self.count += len(out)
        return out

    def _locate(self, count: int) -> tuple[int, int]:
        for k, r in enumerate(self.rows):
            if count < r:
                return k, count
            count -= r
        raise IndexError(count)

    def _decode(self, chunk: int) -> list:
        path = _chunk_path(self.run_dir, self.shard, chunk)
        try:
            batch = pa.ipc.open_file(pa.memory_map(path, "r")).get_batch(0)
            elements = self.codec.decode(batch)
        except (pa.ArrowException, OSError, ValueError, IndexError) as e:
            raise FileReadError(
                f"snapshot: cannot read this chunk (missing, truncated or corrupt?): "
                f"{type(e).__name__}: {e}",
                path,
            ) from e
        if len(elements) != self.rows[chunk]:
            raise FileReadError(
                f"snapshot: the chunk holds {len(elements)} elements, the metadata says "
                f"{self.rows[chunk]}",
                path,
            )
        return elements


class _RoundRobin:
    """tf.data's default reader: one element of each shard in turn, skipping the ended."""

    def __init__(self, readers: list[_ShardReader]):
        self.readers = readers
        self.active = [k for k, r in enumerate(readers) if r.total > 0]
        self.cursor = 0  # index into active

    def next_chunk(self, n: int) -> list:
        out: list = []
        while len(out) < n and self.active:
            reader = self.readers[self.active[self.cursor]]
            got = reader.take(1)
            if not got:  # this shard ended: the cycle goes on without it
                self.active.pop(self.cursor)
                self.cursor = self.cursor % len(self.active) if self.active else 0
                continue
            out += got
            self.cursor = (self.cursor + 1) % len(self.active)
        return out

    def get_state(self) -> dict:
        return {"counts": [r.count for r in self.readers], "cursor": self.cursor}

    def set_state(self, state: dict) -> None:
        counts = [int(c) for c in state["counts"]]
        if len(counts) != len(self.readers):
            raise ValueError("snapshot: the checkpoint has another number of shards")
        for r, c in zip(self.readers, counts):
            r.seek(c)
        self.active = [k for k, r in enumerate(self.readers) if r.count < r.total]
        self.cursor = int(state["cursor"]) % len(self.active) if self.active else 0

    def close(self) -> None:
        self.readers = []


class SnapshotShardDataset(Dataset):
    """One shard of a complete run, as ``reader_func``'s element."""

    _name = "snapshot_shard"

    def __init__(self, run_dir: str, shard: int, rows: list[int], spec: Any):
        super().__init__()
        self._run_dir, self._shard, self._rows, self._stored = run_dir, shard, rows, spec

    @property
    def element_spec(self) -> Any:
        return self._stored

    def cardinality(self) -> int:
        return sum(self._rows)

    def _make_iterator(self, ctx, epoch):
        return _SnapshotShardIterator(
            _ShardReader(self._run_dir, self._shard, self._rows, ElementCodec(self._stored))
        )


class _SnapshotShardIterator(OpIterator):
    op_name = "snapshot"

    def __init__(self, reader: _ShardReader):
        super().__init__()
        self.reader = reader

    def next_chunk(self, n: int) -> list:
        return self.reader.take(n)

    def get_state(self) -> dict:
        return {"count": self.reader.count}

    def set_state(self, state: dict) -> None:
        self.reader.seek(int(state["count"]))


def _reader(node: SnapshotDataset, directory: str, meta: dict, ctx: Any, epoch: tuple) -> Any:
    """The run's elements: the default round robin, or ``reader_func``'s pipeline."""
    stored = spec_from_json(meta["element_spec"])
    if common_spec(stored, node.element_spec) is None:
        raise ValueError(
            f"snapshot: {directory!r} holds elements of spec {stored}, but the input's spec is "
            f"{node.element_spec}; delete the directory or use another path"
        )
    _check_chunks(directory, meta)
    run_dir = os.path.join(directory, meta["run"])
    shards = sorted((int(s), rows) for s, rows in meta["shards"].items())
    if node._reader_func is None:
        codec = ElementCodec(stored)
        return _RoundRobin([_ShardReader(run_dir, s, rows, codec) for s, rows in shards])
    parts = [SnapshotShardDataset(run_dir, s, rows, stored) for s, rows in shards]
    from datapipe.sources.range import RangeDataset

    ds = node._reader_func(RangeDataset(len(parts)).map(lambda i: parts[int(i)]))
    if not isinstance(ds, Dataset):
        raise TypeError(f"snapshot: reader_func must return a Dataset, got {type(ds).__name__}")
    return ctx.make(ds, epoch)


class SnapshotIterator(OpIterator):
    """Reads the complete run when there is one, else writes a new run while passing the
    input through; a checkpoint of either mode restores into either."""

    op_name = "snapshot"

    def __init__(self, node: SnapshotDataset, ctx: Any, epoch: tuple):
        super().__init__()
        self.node, self.ctx, self.epoch = node, ctx, epoch
        self.directory = node._snapshot_dir()
        meta = read_metadata(self.directory)
        self.impl: Any = None
        self._start(meta)

    def _start(self, meta: dict | None) -> None:
        if self.impl is not None:
            self.impl.close()
        for it in self.inputs:
            it.close()
        self.inputs, self.meta = [], meta
        if meta is not None:
            self.impl = _reader(self.node, self.directory, meta, self.ctx, self.epoch)
            if isinstance(self.impl, OpIterator):
                self.inputs = [self.impl]
        else:
            inner = self.ctx.make(self.node._inputs[0], self.epoch)
            self.inputs = [inner]
            self.impl = _Writer(self.node, self.directory, inner)

    def next_chunk(self, n: int) -> list:
        return self.impl.next_chunk(n)

    def get_state(self) -> dict:
        if isinstance(self.impl, _Writer):
            return self.impl.get_state()
        assert self.meta is not None
        return {"mode": "read", "run": self.meta["run"], "reader": self.impl.get_state()}

    def set_state(self, state: dict) -> None:
        if state["mode"] == "write" and state["done"]:
            self._start(None)
            self.impl.done = True  # that pass had written everything: nothing follows
            self.impl.run, self.impl.index = str(state["run"]), int(state["index"])
            return
        if state["mode"] == "write":
            # The checkpoint was writing: go on writing, in a run of this iterator's own.
            self._start(None)
            self.impl.restore(state)
            return
        meta = read_metadata(self.directory)
        if meta is None or meta["run"] != state["run"]:
            now = "no complete run" if meta is None else f"run {meta['run']!r}"
            raise ValueError(
                f"snapshot: the checkpoint was reading run {state['run']!r} of "
                f"{self.directory!r}, which now holds {now}; restart the epoch"
            )
        if self.meta is None or self.meta["run"] != meta["run"]:
            self._start(meta)
        self.impl.set_state(state["reader"])

    def close(self) -> None:
        if self.impl is not None and not isinstance(self.impl, OpIterator):
            self.impl.close()  # an OpIterator reader is in inputs
        super().close()
