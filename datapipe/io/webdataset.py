"""``WebDataset``: samples of WebDataset-style tar shards, and ``decode_sample``.

The format (webdataset's, https://github.com/webdataset/webdataset): a shard is a POSIX tar
file; a *sample* is the run of consecutive members that share a *key*, the member name
up to the first dot of its base name (``train/000123.jpg`` and ``train/000123.seg.png``
are fields ``jpg`` and ``seg.png`` of key ``train/000123``). Field names are
lower-cased, members that are not regular files or have no extension are skipped, as are
names like ``__meta__`` (webdataset's ``skip_meta``); a sample never spans two shards.

Reading uses Python's ``tarfile`` in stream mode. The ``webdataset`` package itself was
inspected and left: its readers are generator pipelines with no position to checkpoint
(a resume re-reads the shard from its start), its ``ShardWriter`` counts only payload
bytes against ``maxsize`` and may overshoot it by a sample, opens an empty first shard,
prints to stdout and encodes ``.pyd`` fields with pickle; it also pulls ``braceexpand``
and ``pyyaml``. Its conventions (``base_plus_ext``, ``__key__``/``__url__``, lower-cased
suffixes, duplicate fields as errors) are kept here, so shards written by either are read
by either.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import tarfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from datapipe._spec import TensorSpec
from datapipe.errors import FileReadError
from datapipe.io._bounded import check_declared, npy_header, open_tar_stream
from datapipe.io._record_files import (
    END,
    RecordFileSource,
    RecordReader,
    cycle_of,
    file_list,
)
from datapipe.io._safe_files import open_regular

KEY, URL = "__key__", "__url__"
_SKIP_META = re.compile(r"__[^/]*__($|/)")
_BASE_EXT = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")  # webdataset's base_plus_ext
IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "bmp", "gif", "webp", "tif", "tiff", "ppm", "pgm", "pbm")
_INT_EXTENSIONS = ("cls", "cls2", "class", "count", "index", "inx", "id")
_TEXT_EXTENSIONS = ("txt", "text", "transcript")


def split_name(name: str) -> tuple[str | None, str | None]:
    """``(key, field)`` of a member name (webdataset's ``base_plus_ext``), or ``(None,
    None)`` for a name whose base has no dot."""
    m = _BASE_EXT.match(name)
    return (None, None) if m is None else (m.group(1), m.group(2))


# ---- decoding by extension --------------------------------------------------------------------
def _image(data: bytes) -> np.ndarray:
    from datapipe.io.images import decode_image

    return decode_image(data)


def _npy(data: bytes) -> np.ndarray:
    f = io.BytesIO(data)
    npy_header(f, len(data), "the .npy field", None)  # a shape larger than its bytes: refused
    f.seek(0)
    return np.load(f, allow_pickle=False)


DEFAULT_DECODERS: dict[str, Callable[[bytes], Any]] = {
    **{ext: _image for ext in IMAGE_EXTENSIONS},
    **{ext: lambda b: np.int64(int(b)) for ext in _INT_EXTENSIONS},
    **{ext: lambda b: b.decode("utf-8") for ext in _TEXT_EXTENSIONS},
    "json": lambda b: json.loads(b),
    "jsn": lambda b: json.loads(b),
    "npy": _npy,
}


def _decoders(
    decode: bool | Mapping[str, Callable | None],
) -> dict[str, Callable[[bytes], Any] | None] | None:
    if isinstance(decode, (bool, np.bool_)):
        return dict(DEFAULT_DECODERS) if decode else None
    if not isinstance(decode, Mapping):
        raise TypeError(
            "webdataset: decode must be a bool or a dict of extension -> function, got "
            f"{type(decode).__name__}"
        )
    out: dict[str, Callable[[bytes], Any] | None] = dict(DEFAULT_DECODERS)
    for ext, fn in decode.items():
        if fn is not None and not callable(fn):
            raise TypeError(f"webdataset: decode[{ext!r}] must be callable or None, got {fn!r}")
        out[str(ext).lower()] = fn
    return out


def decode_sample(
    sample: Mapping[str, Any], decoders: bool | Mapping[str, Callable | None] | None = None
) -> dict:
    """``sample`` with each ``bytes`` field decoded by the extension after its last dot.

    Defaults (webdataset's ``autodecode`` names): images (``jpg jpeg png bmp gif webp tif
    tiff ppm pgm pbm``) by ``datapipe.io.decode_image`` to ``uint8`` ``(height, width,
    channels)`` arrays with the file's channels; ``cls cls2 class count index inx id`` to
    ``np.int64``; ``txt text transcript`` to ``str`` (UTF-8); ``json jsn`` to the parsed
    value; ``npy`` by ``np.load(allow_pickle=False)``. Other fields stay ``bytes``; no
    decoder unpickles. ``decoders`` adds or overrides entries (``None`` keeps an extension
    as bytes); ``False`` decodes nothing and ``True`` is the defaults, as ``WebDataset``'s
    ``decode``. Usable as ``WebDataset(...).map(decode_sample, num_parallel_calls=AUTOTUNE)``
    to decode in parallel.

    Raises:
        FileReadError (``ImageDecodeError`` for images): a field does not decode; names
            the field and the sample's key, and the shard (``path``) when the sample
            carries ``__url__``.

    Example:
        >>> decode_sample({"__key__": "a", "cls": b"3", "txt": b"hi", "bin": b"\\x00"})
        {'__key__': 'a', 'cls': np.int64(3), 'txt': 'hi', 'bin': b'\\x00'}
    """
    table = DEFAULT_DECODERS if decoders is None else _decoders(decoders)
    if table is None:  # decoders=False, as WebDataset(decode=False): every field as read
        return dict(sample)
    out = {}
    for name, value in sample.items():
        fn = table.get(name.rsplit(".", 1)[-1]) if isinstance(value, bytes) else None
        if fn is None:
            out[name] = value
            continue
        try:
            out[name] = fn(value)
        except Exception as e:  # noqa: BLE001 - named: the field, the key, the shard
            raise _decode_error(e, name, sample) from e
    return out


def _decode_error(e: Exception, field: str, sample: Mapping) -> FileReadError:
    reason = getattr(e, "reason", None) or f"{type(e).__name__}: {e}"
    msg = f"sample {sample.get(KEY)!r}, field {field!r}: cannot decode: {reason}"
    cls = type(e) if isinstance(e, FileReadError) else FileReadError
    return cls(msg, sample.get(URL))


def _relaxed(value: Any) -> TensorSpec:
    """The spec of a decoded field value, every dimension unknown (sizes vary by sample)."""
    if isinstance(value, np.ndarray):
        return TensorSpec((None,) * value.ndim, value.dtype)
    if isinstance(value, np.generic):
        return TensorSpec((), value.dtype)
    return TensorSpec((), np.dtype(object))


# ---- the source ---------------------------------------------------------------------------------
class WebDataset(RecordFileSource):
    """One dict per sample of WebDataset tar shards, shards read in order (module docstring).

    Args:
        urls: a shard path or URL (``s3://bucket/train-000000.tar``, ``https://...``:
            fsspec, see ``datapipe.io._remote``), or a list of them; e.g.
            ``list_files("s3://bucket/train-*.tar", shuffle=False).files``. Shards may be
            gzip-compressed (``.tar.gz``; detected from the bytes).
        fields: the fields to keep (by name, e.g. ``["jpg", "cls"]``); members of other
            fields are skipped without being read. A sample that lacks one raises
            ``FileReadError``. Default None: the fields of the first sample of the first
            shard (of the first shard that reads, when one fails: that shard raises where
            it is read, which ``ignore_errors()`` skips), and a sample with another set of
            fields raises (nothing is dropped silently).
        decode: False (default) keeps every field as ``bytes``; True decodes by
            extension with ``decode_sample``'s table (images through datapipe's image
            decoders); a dict ``{extension: function or None}`` adds to or overrides it.
            Decoding runs on the reading thread: for parallel decoding keep ``decode=False``
            and ``.map(decode_sample, num_parallel_calls=AUTOTUNE)``.
        num_parallel_reads: read this many shards at once, one sample from each in turn
            (tf.data's deterministic interleave order); None or 1: one after the other. To
            overlap remote latency, use ``list_files(...).interleave(WebDataset, ...,
            num_parallel_calls=AUTOTUNE)``.

    Elements: ``{"__key__": str, "__url__": str, <field>: bytes | decoded value}``. The
    spec is read from the first sample (``TensorSpec((), object)`` for ``bytes``/``str``;
    decoded arrays keep their rank and dtype with unknown sizes). Cardinality is unknown.

    Bounds (``datapipe.io._bounded``): every size a shard declares is checked before it
    is read, so a small hostile shard (a ``.tar.gz`` inflates ~1000x) cannot allocate
    more: a member against ``datapipe.io.max_file_bytes()`` (1 GiB by default); a GNU
    long-name or PAX header against 1 MiB (``MAX_HEADER_BYTES``), and so are the headers
    before one member together (at most 32 of them) and a shard's global PAX attributes
    (at most 1,024 keywords); a ``.npy`` field's shape against its bytes. The error names
    the shard and the header or member with its byte offset.

    State: each open shard's byte offset of its next sample's first member (in the
    uncompressed stream for ``.tar.gz``, which is re-read up to it on resume) and sample
    count; FILE auto-sharding gives each worker its own shards, and checkpoints taken under
    FILE resume on another number of workers.

    Raises (at iteration):
        FileReadError: a shard is missing, not a tar file, truncated or corrupt, or
            declares a member or header over its bound (names the shard, the member and
            the byte offset; the rest of the shard is skipped); a sample repeats a field,
            lacks one of ``fields``, or (``fields=None``) has another set of fields than
            the first sample (names the key, its fields and the expected ones; that
            sample is skipped); a field does not decode.

    Example:
        >>> import datapipe as dp, os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> samples = [{"__key__": f"{i:03d}", "cls": i, "txt": f"s{i}"} for i in range(3)]
        >>> shards = dp.io.write_webdataset(samples, os.path.join(d, "s-%04d.tar"), max_count=2)
        >>> [os.path.basename(s) for s in shards]
        ['s-0000.tar', 's-0001.tar']
        >>> [(s["__key__"], s["cls"], s["txt"]) for s in dp.WebDataset(shards, decode=True)]
        [('000', np.int64(0), 's0'), ('001', np.int64(1), 's1'), ('002', np.int64(2), 's2')]
    """

    _name = "webdataset"

    def __init__(
        self,
        urls: str | os.PathLike | Sequence[str | os.PathLike],
        fields: Sequence[str] | None = None,
        decode: bool | Mapping[str, Callable | None] = False,
        num_parallel_reads: int | None = None,
    ):
        super().__init__()
        self._files = file_list(urls, self._name)
        if fields is not None:
            if isinstance(fields, str) or not all(isinstance(f, str) for f in fields):
                raise TypeError(f"{self._name}: fields must be a list of str, got {fields!r}")
            fields = [f.lower() for f in fields]
            if not fields or len(set(fields)) != len(fields) or {KEY, URL} & set(fields):
                raise ValueError(
                    f"{self._name}: fields must be distinct field names, got {fields!r}"
                )
        self._fields: tuple | None = None if fields is None else tuple(fields)
        self._explicit = fields is not None
        self._decoders = _decoders(decode)
        self._cycle = cycle_of(self._name, num_parallel_reads)
        self._spec_cache: Any = None

    def _first_sample(self) -> dict:
        """The first sample of the first shard that yields one, with all its fields
        (decoded if asked). A shard that fails to read is passed over here: it raises its
        own error where the pipeline reads it, so ``ignore_errors()`` skips it and reads the
        shards after it. The first such error is raised when no shard yields a sample."""
        first_error: FileReadError | None = None
        for path in self._files:
            try:
                reader = _TarReader(self, path, 0, fields=None)
                try:
                    got = reader.read(1)
                    if reader.error is not None and not got:
                        raise reader.error
                finally:
                    reader.close()
            except FileReadError as e:
                first_error = first_error or e
                continue
            if got:
                return got[0]
        if first_error is not None:
            raise first_error
        many = len(self._files) > 1
        why = "nor any shard after it holds a sample" if many else "holds no samples"
        raise FileReadError(f"{why} (cannot tell the fields)", self._files[0])

    def _resolve_fields(self) -> tuple:
        if self._fields is None:
            self._fields = tuple(k for k in self._first_sample() if k not in (KEY, URL))
        return self._fields

    @property
    def element_spec(self) -> Any:
        if self._spec_cache is None:
            spec = {KEY: TensorSpec((), np.dtype(object)), URL: TensorSpec((), np.dtype(object))}
            if self._decoders is None:
                spec.update({f: TensorSpec((), np.dtype(object)) for f in self._resolve_fields()})
            else:
                first = self._first_sample()
                if self._fields is None:
                    self._fields = tuple(k for k in first if k not in (KEY, URL))
                spec.update({f: _relaxed(first.get(f)) for f in self._fields})
            self._spec_cache = spec
        return self._spec_cache

    def open_reader(self, file_index: int, offset: int) -> RecordReader:
        return _TarReader(self, self._files[file_index], offset, self._resolve_fields())


class _TarReader(RecordReader):
    """One shard: samples from the member at ``offset`` on (see ``WebDataset``)."""

    def __init__(self, ds: WebDataset, path: str, offset: int, fields: tuple | None):
        self.ds, self.path, self.offset, self.fields = ds, path, offset, fields
        self.keep = None if fields is None else set(fields)
        self.ahead: tuple | None = None  # the next sample's first member, already read
        # A member header that failed after a whole sample was read: raised after it.
        self.deferred: Exception | None = None
        self.raw = open_regular(path)  # local: regular files only; URL: size-checked, retried
        try:
            magic = self.raw.read(2)
            self.raw.seek(0)
            self.f = (
                gzip.GzipFile(fileobj=self.raw, mode="rb") if magic == b"\x1f\x8b" else self.raw
            )
            if offset:
                self.f.seek(offset)
            self.base = offset
            self.tar = open_tar_stream(self.f, path, offset)  # bounded (datapipe.io._bounded)
        except (tarfile.TarError, EOFError, zlib.error) as e:
            self.raw.close()
            raise FileReadError(f"not a readable tar shard at byte {offset}: {e}", path) from e
        except BaseException:
            self.raw.close()
            raise

    def _member(self) -> tuple | None:
        """``(key, field, header or None, header offset)`` of the next member that belongs
        to a sample (header None: a field not kept), or None at the end of the shard. Its
        data is read by ``_data`` before the next call (tar's stream order)."""
        while True:
            info = self.tar.next()
            self.tar.members = []  # type: ignore[attr-defined]  # stream mode keeps every header
            if info is None:
                return None
            key, field = split_name(info.name)
            if not info.isreg() or key is None or field is None or _SKIP_META.match(info.name):
                continue
            field = field.lower()
            keep = self.keep is None or field in self.keep
            return key, field, info if keep else None, self.base + info.offset

    def _data(self, info: tarfile.TarInfo, at: int) -> bytes:
        check_declared(info.size, f"member {info.name!r} at byte {at}", self.path)
        member = self.tar.extractfile(info)
        assert member is not None  # a regular file (_next keeps no other kind)
        data = member.read()
        if len(data) != info.size:
            raise tarfile.ReadError(f"member {info.name!r} at byte {at} is truncated")
        return data

    def _sample(self) -> tuple[dict, list] | None:
        """``(sample, the names of all its fields)``: fields not kept are named, not read."""
        member = self.ahead if self.ahead is not None else self._member()
        self.ahead = None
        if member is None:
            return None
        key, start = member[0], member[3]
        sample: dict = {KEY: key, URL: self.path}
        names: list = []
        while member is not None and member[0] == key:
            field, info = member[1], member[2]
            if field in names:
                raise _SampleError(
                    key, f"sample {key!r} at byte {start} repeats the field {field!r}"
                )
            names.append(field)
            if info is not None:
                sample[field] = self._data(info, member[3])
            try:
                member = self._member()
            except _READ_ERRORS as e:  # the next header: this sample's members are read
                self.deferred, self.ahead = e, None
                self.offset = self.base + self.tar.offset  # the header that failed
                return sample, names
        self.ahead = member
        self.offset = END if member is None else member[3]
        return sample, names

    def read(self, n: int) -> list:
        out: list = []
        while len(out) < n and self.offset != END:
            start = self.offset
            try:
                try:
                    if self.deferred is not None:  # after the sample before it
                        failed, self.deferred = self.deferred, None
                        raise failed
                    sample = self._sample()
                except _SampleError as e:
                    self._skip_bad(e)
                    return out
            except _READ_ERRORS as e:
                self.broken = True
                why = (
                    e.reason
                    if isinstance(e, FileReadError)
                    else f"corrupt or truncated tar shard after byte {start} (sample "
                    f"{self.records}): {type(e).__name__}: {e}"
                )
                self.error = FileReadError(f"{why}; the rest of the shard is skipped", self.path)
                return out
            if sample is None:
                self.offset = END
                break
            self.records += 1
            try:
                out.append(self._finish(*sample))
            except FileReadError as e:
                self.error = e
                return out
        return out

    def _skip_bad(self, e: _SampleError) -> None:
        """A sample that repeats a field: skip the rest of its members, go on after it."""
        member = self._member()
        while member is not None and member[0] == e.key:
            member = self._member()
        self.ahead = member
        self.offset = END if member is None else member[3]
        self.records += 1
        self.error = FileReadError(f"{e}; the sample is skipped", self.path)

    def _finish(self, sample: dict, names: list) -> dict:
        """Check the fields (and decode): ``FileReadError`` names the key, the sample's
        fields and the shard. ``fields=``: each must be there (others are not read);
        ``fields=None``: exactly the first sample's."""
        if self.fields is not None:
            missing = [f for f in self.fields if f not in names]
            extra = [] if self.ds._explicit else sorted(set(names) - set(self.fields))
            if missing or extra:
                why = (
                    f"it lacks {missing}"
                    if missing
                    else f"{extra} would be dropped (fields=None reads samples with the "
                    "first sample's fields; pass fields= to read a subset)"
                )
                raise FileReadError(
                    f"sample {sample[KEY]!r} has the fields {sorted(names)}, expected "
                    f"{sorted(self.fields)}"
                    + ("" if self.ds._explicit else " (the first sample's)")
                    + f": {why}",
                    self.path,
                )
            sample = {KEY: sample[KEY], URL: sample[URL], **{f: sample[f] for f in self.fields}}
        if self.ds._decoders is not None:
            sample = decode_sample(sample, self.ds._decoders)
        return sample

    def close(self) -> None:
        try:
            self.tar.close()
        finally:
            if self.f is not self.raw:
                self.f.close()
            self.raw.close()


_READ_ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error, FileReadError)


class _SampleError(Exception):
    """A sample whose members break the format (a repeated field)."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key
