"""``TarShardWriter`` / ``write_webdataset``: samples into WebDataset-style tar shards.

One sample (a dict) becomes one tar member per field, named ``<key>.<field>``; a shard is
closed and the next one opened before a sample would take it past ``max_count`` samples
or ``max_size`` bytes (the exact size of the finished tar file: headers, padding and the
end-of-archive blocks included), so no shard is over either bound unless one sample alone
is (it then gets a shard of its own). Shards are named ``pattern % index``
(``"train-%06d.tar"``, webdataset's ``ShardWriter`` convention). A local shard is written
under a temporary name and renamed into place when complete; a remote one (a URL: fsspec,
see ``datapipe.io._remote``) is stored by the object store when it is closed, and an
aborted one is discarded. Members get mode 0o444 and a fixed ``mtime`` (default 0), so
the same samples give byte-identical shards. ``pattern`` ending in ``.gz`` writes
gzip-compressed shards (``max_size`` then bounds the uncompressed tar).

Why not webdataset's ``ShardWriter``: see ``datapipe.io.webdataset``.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import tarfile
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import numpy as np

from datapipe._redact import redact_url
from datapipe._validate import check_int
from datapipe.io import _remote as remote
from datapipe.io._bounded import MAX_HEADER_BYTES
from datapipe.io._remote import is_remote, localize
from datapipe.io.webdataset import IMAGE_EXTENSIONS, KEY, split_name

_OP = "TarShardWriter"
_PIL_FORMATS = {"jpg": "JPEG", "jpeg": "JPEG", "tif": "TIFF", "pgm": "PPM", "pbm": "PPM"}


def _image_bytes(value: np.ndarray, ext: str, where: str) -> bytes:
    from PIL import Image

    arr = np.asarray(value)
    if arr.dtype != np.uint8 or arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] == 2):
        raise TypeError(
            f"{_OP}: {where}: an image field takes a uint8 array of shape (height, width) or "
            f"(height, width, 1|3|4), got {arr.dtype} {arr.shape}"
        )
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, _PIL_FORMATS.get(ext, ext.upper()), **_quality(ext))
    return buf.getvalue()


def _quality(ext: str) -> dict:
    return {"quality": 95} if ext in ("jpg", "jpeg") else {}


def encode_value(value: Any, field: str, where: str) -> bytes:
    """The bytes stored for ``value`` in the member of ``field`` (by type and the extension
    after its last dot): bytes as they are; ``str`` as UTF-8; integers as decimal digits;
    arrays as ``.npy`` (``npy``), as an encoded image (image extensions: uint8 HW or HWC,
    PNG lossless, JPEG quality 95) or as JSON lists (``json``); dicts/lists/numbers as JSON
    (``json``). Never pickled.

    Raises:
        TypeError: no encoding for this type and extension (names ``where``).
    """
    ext = field.rsplit(".", 1)[-1]
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        value = value.detach().cpu().numpy()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, np.ndarray) and value.ndim == 0 and ext not in ("npy", "json"):
        value = value.item()
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and ext != "json":
        return str(int(value)).encode("ascii")
    if ext == "npy" and isinstance(value, np.ndarray):
        if value.dtype == object:
            raise TypeError(f"{_OP}: {where}: an object array has no .npy form without pickle")
        buf = io.BytesIO()
        np.save(buf, value, allow_pickle=False)
        return buf.getvalue()
    if ext in IMAGE_EXTENSIONS and isinstance(value, np.ndarray):
        return _image_bytes(value, ext, where)
    if ext in ("json", "jsn"):
        plain = value.tolist() if isinstance(value, (np.ndarray, np.generic)) else value
        return json.dumps(plain).encode("utf-8")
    raise TypeError(
        f"{_OP}: {where}: no encoding for a {type(value).__name__} in a {ext!r} field (bytes, "
        "str, int, or an array in a npy / image / json field)"
    )


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _faithful(name: str) -> str | None:
    """Why the member name ``name`` would not come back as written (from this library's
    reader, webdataset's, or ``tar -x`` into a directory), or None when it would."""
    if _CONTROL.search(name):
        return "holds a control character (tar cuts a name at NUL; others garble listings)"
    if name.startswith("/"):
        return "is absolute (extracting it would write outside the target directory)"
    if "\\" in name:
        return "holds '\\' (a path separator on Windows: extraction would split it)"
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return (
            "has an empty, '.' or '..' path component ('..' escapes the target directory "
            "on extraction; tar -x drops the others, so a re-packed shard changes the key)"
        )
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode text (it has no UTF-8 form for the tar header)"
    if len(encoded) > MAX_HEADER_BYTES // 2:
        return (
            f"is {len(encoded)} bytes long; a reader refuses headers over "
            f"{MAX_HEADER_BYTES} bytes (datapipe.io._bounded)"
        )
    return None


def _check_name(key: Any, field: str) -> None:
    """Refuse a key or field that a shard cannot hold faithfully, naming it."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"{_OP}: a sample's __key__ must be a non-empty str, got {key!r}")
    why = _faithful(f"{key}.{field}")
    if why is not None:
        shown = key if len(key) <= 200 else f"{key[:200]}... ({len(key)} characters)"
        raise ValueError(
            f"{_OP}: sample {shown!r}, field {field[:200]!r}: the member name {why}; "
            "choose another key or field name"
        )
    k, f = split_name(f"{key}.{field}")
    if k != key or f != field or "/" in field:
        raise ValueError(
            f"{_OP}: sample {key!r}, field {field!r}: the key's base name must not contain "
            "'.', and a field must not be empty or contain '/' (a reader splits "
            "'<key>.<field>' at the first dot of the base name)"
        )
    if field != field.lower():
        raise ValueError(
            f"{_OP}: sample {key!r}, field {field!r}: fields are lower-case (readers "
            "lower-case them, as webdataset does)"
        )


class TarShardWriter:
    """Writes samples (dicts with a ``"__key__"``) into tar shards (module docstring).

    Args:
        pattern: shard names, with one ``%``-format for the shard index
            (``"out/train-%06d.tar"``, ``"s3://bucket/train-%06d.tar"``).
        max_count: samples per shard at most.
        max_size: bytes per shard file at most (default 3 GiB).
        encode: True encodes values by type and extension (``encode_value``); False
            accepts only ``bytes`` and ``str`` values.
        start_shard: the index of the first shard.
        mtime: the modification time stored in every member (whole seconds since the
            epoch; a float would cost every member an extra PAX header).

    Fields whose name starts with ``_`` (``__url__``, ...) are not written, so samples
    read by ``WebDataset`` can be written again as they are.

    Keys are refused when their member name ``<key>.<field>`` could not be read back as
    written or would escape a directory it is extracted into: a control character (tar
    cuts names at NUL), a leading ``/``, a ``\\``, an empty, ``.`` or ``..`` component,
    text with no UTF-8 form, more than 512 KiB (half the readers' header bound). So
    ``tar -x`` of a shard writes only below its target directory.

    Raises:
        ValueError: a bad pattern or bound (here); a bad key or field name (at ``write``,
            naming them and why).
        TypeError: a value with no encoding (at ``write``, naming the key and field).
        FileNotFoundError: the local directory of ``pattern`` does not exist.

    Example:
        >>> import datapipe as dp, os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> with dp.io.TarShardWriter(os.path.join(d, "s-%02d.tar"), max_count=2) as w:
        ...     for i in range(5):
        ...         w.write({"__key__": f"k{i}", "txt": f"line {i}"})
        >>> [os.path.basename(p) for p in w.shards]
        ['s-00.tar', 's-01.tar', 's-02.tar']
    """

    def __init__(
        self,
        pattern: str | os.PathLike,
        max_count: int = 100_000,
        max_size: int = 3 << 30,
        encode: bool = True,
        start_shard: int = 0,
        mtime: int = 0,
    ):
        pattern = localize(os.fspath(pattern))
        try:
            pattern % 0
        except (TypeError, ValueError) as e:
            raise ValueError(
                f"{_OP}: pattern must hold one %-format for the shard index, e.g. "
                f"'train-%06d.tar'; got {redact_url(pattern)!r} ({e})"
            ) from None
        if pattern % 0 == pattern % 1:
            raise ValueError(
                f"{_OP}: pattern {redact_url(pattern)!r} gives every shard the same name"
            )
        self.remote = is_remote(pattern)
        parent = os.path.dirname(os.path.abspath(pattern % 0))
        if not self.remote and not os.path.isdir(parent):
            raise FileNotFoundError(f"{_OP}: the directory {parent!r} does not exist")
        self.pattern = pattern
        self.max_count = check_int(_OP, "max_count", max_count, minimum=1)
        self.max_size = check_int(_OP, "max_size", max_size, minimum=1)
        self.encode = bool(encode)
        self.index = check_int(_OP, "start_shard", start_shard, minimum=0)
        self.mtime = check_int(_OP, "mtime", mtime, minimum=0)  # an int: no PAX header
        self.mode: Literal["w|gz", "w|"] = "w|gz" if pattern.endswith(".gz") else "w|"
        self.shards: list[str] = []  # finished shards, in order
        self.tar: tarfile.TarFile | None = None
        self.file: Any = None
        self.name = self.tmp = ""
        self.existed = False  # a remote shard of that name was there before this one
        self.count = self.size = 0  # samples and member bytes in the open shard

    # -- shards --
    def _open(self) -> None:
        self.name = self.pattern % self.index
        self.index += 1
        if self.remote:  # an object store has no rename: the shard is stored on close
            self.existed = remote.exists(self.name)
            self.tmp, self.file = "", remote.open_output(self.name)
        else:
            self.tmp = f"{self.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            self.file = open(self.tmp, "wb")  # noqa: SIM115 - closed in _finish/_abort
        self.tar = tarfile.open(fileobj=self.file, mode=self.mode, format=tarfile.PAX_FORMAT)
        self.count = self.size = 0

    def _finish(self) -> None:
        if self.tar is None:
            return
        self.tar.close()
        self.file.close()  # an object store stores the object now
        if not self.remote:
            os.replace(self.tmp, self.name)
        self.shards.append(self.name)
        self.tar = self.file = None

    def _abort(self) -> None:
        if self.tar is None:
            return
        self.tar, file = None, self.file
        self.file = None
        if self.remote:
            discard = getattr(file, "discard", None)  # fsspec: cancel the upload
            if discard is not None:
                discard()
            else:
                file.close()
            if not self.existed:  # a filesystem that stores on open (memory://) has it
                remote.remove(self.name)
        else:
            file.close()
            os.unlink(self.tmp)

    @staticmethod
    def _final_size(member_bytes: int) -> int:
        """The file size of a tar holding ``member_bytes``: end blocks, record padding."""
        rec = tarfile.RECORDSIZE
        return math.ceil((member_bytes + 2 * tarfile.BLOCKSIZE) / rec) * rec

    # -- samples --
    def _members(self, sample: Mapping[str, Any]) -> list[tuple[tarfile.TarInfo, bytes]]:
        if not isinstance(sample, Mapping):
            raise TypeError(f"{_OP}: a sample is a dict of fields, got {type(sample).__name__}")
        key = sample.get(KEY)
        out = []
        for field, value in sample.items():
            if not isinstance(field, str) or field.startswith("_"):
                continue
            _check_name(key, field)
            where = f"sample {key!r}, field {field!r}"
            if not self.encode and not isinstance(value, (bytes, str)):
                raise TypeError(f"{_OP}: {where}: encode=False takes bytes or str values")
            data = encode_value(value, field, where)
            info = tarfile.TarInfo(f"{key}.{field}")
            info.size, info.mtime, info.mode = len(data), self.mtime, 0o444
            out.append((info, data))
        if not out:
            raise ValueError(f"{_OP}: sample {key!r} has no fields to write")
        return out

    def _bytes(self, members: list) -> int:
        assert self.tar is not None
        fmt, enc, err = self.tar.format, self.tar.encoding, self.tar.errors
        blocks = sum(-(-info.size // tarfile.BLOCKSIZE) for info, _ in members)
        headers = sum(len(info.tobuf(fmt, enc, err)) for info, _ in members)
        return headers + blocks * tarfile.BLOCKSIZE

    def write(self, sample: Mapping[str, Any]) -> None:
        """Add one sample (see the class docstring for errors)."""
        members = self._members(sample)
        if self.tar is None:
            self._open()
        nbytes = self._bytes(members)
        full = self.count >= self.max_count
        if self.count and (full or self._final_size(self.size + nbytes) > self.max_size):
            self._finish()
            self._open()
        tar = self.tar
        assert tar is not None  # _open made one
        for info, data in members:
            tar.addfile(info, io.BytesIO(data))
        self.count += 1
        self.size += nbytes

    def close(self) -> list[str]:
        """Finish the open shard; returns every shard written, in order."""
        self._finish()
        return list(self.shards)

    def __enter__(self) -> TarShardWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:  # the shard in progress is incomplete: no reader may see it
            self._abort()


def write_webdataset(
    samples: Iterable[Mapping[str, Any]],
    pattern: str | os.PathLike,
    max_count: int = 100_000,
    max_size: int = 3 << 30,
    encode: bool = True,
) -> list[str]:
    """Write ``samples`` (a Dataset or any iterable of dicts) into tar shards with
    ``TarShardWriter`` and return the shard paths. A sample without ``"__key__"`` gets its
    index as key (``"%09d"``). If writing fails, the shard in progress is removed and the
    error raised; the shards finished before it stay.

    Example:
        >>> import datapipe as dp, os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> ds = dp.from_tensor_slices({"cls": [1, 2, 3]})
        >>> shards = dp.io.write_webdataset(ds, os.path.join(d, "t-%03d.tar"))
        >>> [(s["__key__"], s["cls"]) for s in dp.WebDataset(shards)]
        [('000000000', b'1'), ('000000001', b'2'), ('000000002', b'3')]
    """
    it = iter(samples)
    try:
        with TarShardWriter(pattern, max_count, max_size, encode) as writer:
            for i, sample in enumerate(it):
                if isinstance(sample, Mapping) and KEY not in sample:
                    sample = {KEY: f"{i:09d}", **sample}
                writer.write(sample)
    finally:
        close = getattr(it, "close", None)  # a Dataset's iterator: stop its threads now
        if close is not None:
            close()
    return writer.shards
