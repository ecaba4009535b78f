"""Iterator state in a safe file format: JSON for structure, numpy arrays beside it.

An iterator's ``state_dict()`` holds ints (PCG64 states are 128-bit: JSON keeps them
exact), strings, lists, dicts, and elements (numpy arrays and scalars, torch tensors,
nested tuples and dicts) sitting in shuffle buffers. ``encode_state`` turns that into a
JSON document in which each array is a tagged reference into a dict of numpy arrays;
``save_state`` writes both into one ``.npz`` file (the JSON as a text array). Loading uses
``numpy.load(allow_pickle=False)`` and ``json.loads``: no code runs, unlike pickle.

Tags (objects with the key ``"__dp__"``): ``ndarray``, ``np_scalar``, ``torch``, ``tuple``,
``namedtuple`` (restored as a ``collections.namedtuple`` of the same name and fields: the
user's class itself is not imported), ``dict`` (non-string keys), ``bytes``, ``float``
(NaN and infinities), ``object_array`` (a numpy array of Python objects — strings, bytes,
arrays — stored item by item, e.g. a batch of strings), ``window`` (one component of a
``window`` element: its values and spec).
"""

from __future__ import annotations

import base64
import collections
import io
import json
import math
import os
import tempfile
import zipfile
from typing import Any, cast

import numpy as np

from datapipe._redact import redact_url
from datapipe.io._bounded import npy_header

TAG = "__dp__"
_FORMAT = "datapipe-state-1"


def _torch() -> Any:
    import torch

    return torch


def _encode(x: Any, arrays: dict[str, np.ndarray], path: str) -> Any:
    # numpy first: np.float64 is a float and np.str_ a str, whose types must come back.
    if not isinstance(x, (np.ndarray, np.generic)):
        if x is None or isinstance(x, (bool, int, str)):
            return x
        if isinstance(x, float):
            return x if math.isfinite(x) else {TAG: "float", "value": repr(x)}
    if isinstance(x, (np.ndarray, np.generic)):
        arr = np.asarray(x)
        if arr.dtype.hasobject:  # item by item: np.save would pickle them
            items = [_encode(v, arrays, f"{path}.flat[{i}]") for i, v in enumerate(arr.flat)]
            return {TAG: "object_array", "shape": list(arr.shape), "items": items}
        key = f"a{len(arrays)}"
        arrays[key] = arr
        return {TAG: "ndarray" if isinstance(x, np.ndarray) else "np_scalar", "ref": key}
    if type(x).__module__.startswith("torch") and hasattr(x, "detach"):
        t = x.detach().cpu()
        dtype = str(t.dtype).removeprefix("torch.")
        if dtype == "bfloat16":  # no numpy dtype: keep the bits
            t = t.view(_torch().int16)
        key = f"a{len(arrays)}"
        arrays[key] = t.numpy()
        return {TAG: "torch", "ref": key, "dtype": dtype}
    if isinstance(x, bytes):
        return {TAG: "bytes", "b64": base64.b64encode(x).decode("ascii")}
    if isinstance(x, tuple):
        items = [_encode(v, arrays, f"{path}[{i}]") for i, v in enumerate(x)]
        if hasattr(type(x), "_fields"):
            return {
                TAG: "namedtuple",
                "name": type(x).__name__,
                "fields": list(cast(Any, x)._fields),
                "items": items,
            }
        return {TAG: "tuple", "items": items}
    if isinstance(x, list):
        return [_encode(v, arrays, f"{path}[{i}]") for i, v in enumerate(x)]
    if isinstance(x, dict):
        if all(isinstance(k, str) for k in x) and TAG not in x:
            return {k: _encode(v, arrays, f"{path}[{k!r}]") for k, v in x.items()}
        return {
            TAG: "dict",
            "items": [[_encode(k, arrays, path), _encode(v, arrays, path)] for k, v in x.items()],
        }
    window = _encode_window(x, arrays, path)
    if window is not None:
        return window
    hint = "; pass its state_dict()" if hasattr(x, "state_dict") else ""
    raise TypeError(
        f"save_state: {path} has type {type(x).__name__}, which has no safe encoding "
        f"(supported: None, bool, int, float, str, bytes, numpy, torch, tuple, list, dict){hint}"
    )


def _encode_window(x: Any, arrays: dict[str, np.ndarray], path: str) -> Any:
    """A component of a ``window`` element (a Dataset over computed values), or None."""
    from datapipe.ops.window import WindowComponentDataset

    if type(x) is not WindowComponentDataset:
        return None
    return {
        TAG: "window",
        "values": _encode(list(x._values), arrays, f"{path}.values"),
        "spec": _encode_spec(x._spec),
    }


def _encode_spec(spec: Any) -> Any:
    from datapipe._spec import DatasetSpec

    if isinstance(spec, DatasetSpec):
        return {"dataset": _encode_spec(spec.element_spec)}
    if isinstance(spec, (tuple, dict)):
        from datapipe._spec import spec_to_json

        return {"nested": spec_to_json(spec)}
    return spec.to_json()


def _decode_spec(d: Any) -> Any:
    from datapipe._spec import DatasetSpec, TensorSpec, spec_from_json

    if "dataset" in d:
        return DatasetSpec(_decode_spec(d["dataset"]))
    if "nested" in d:
        return spec_from_json(d["nested"])
    return TensorSpec.from_json(d)


def encode_state(state: Any) -> tuple[Any, dict[str, np.ndarray]]:
    """``(json_document, arrays)`` for ``state`` (see the module docstring).

    Raises:
        TypeError: a value has no safe encoding (names its path in the state).
    """
    arrays: dict[str, np.ndarray] = {}
    return _encode(state, arrays, "state"), arrays


def _decode(x: Any, arrays: Any) -> Any:
    if isinstance(x, list):
        return [_decode(v, arrays) for v in x]
    if not isinstance(x, dict):
        return x
    tag = x.get(TAG)
    if tag is None:
        return {k: _decode(v, arrays) for k, v in x.items()}
    if tag == "ndarray":
        return arrays[x["ref"]]
    if tag == "np_scalar":
        return arrays[x["ref"]][()]
    if tag == "torch":
        torch = _torch()
        t = torch.from_numpy(np.array(arrays[x["ref"]]))
        return t.view(torch.bfloat16) if x["dtype"] == "bfloat16" else t
    if tag == "float":
        return float(x["value"])
    if tag == "bytes":
        return base64.b64decode(x["b64"])
    if tag == "tuple":
        return tuple(_decode(v, arrays) for v in x["items"])
    if tag == "namedtuple":
        cls = collections.namedtuple(x["name"], x["fields"])  # type: ignore[misc]  # made at run time
        return cls(*[_decode(v, arrays) for v in x["items"]])
    if tag == "dict":
        return {_hashable(_decode(k, arrays)): _decode(v, arrays) for k, v in x["items"]}
    if tag == "object_array":
        out = np.empty(len(x["items"]), dtype=object)
        for i, v in enumerate(x["items"]):  # one by one: equal-size arrays must not broadcast
            out[i] = _decode(v, arrays)
        return out.reshape([int(d) for d in x["shape"]])
    if tag == "window":
        from datapipe.ops.window import WindowComponentDataset

        return WindowComponentDataset(_decode(x["values"], arrays), _decode_spec(x["spec"]))
    raise ValueError(f"unknown tag {tag!r} in the state file")


def _hashable(k: Any) -> Any:
    return k.item() if isinstance(k, np.generic) else k


def decode_state(doc: Any, arrays: Any) -> Any:
    """Inverse of ``encode_state``."""
    return _decode(doc, arrays)


def state_to_bytes(state: Any) -> bytes:
    """``state`` as the bytes of an ``.npz`` archive (JSON document + arrays)."""
    doc, arrays = encode_state(state)
    text = json.dumps({"format": _FORMAT, "state": doc})
    buf = io.BytesIO()
    np.savez(buf, __json__=np.array(text), **cast(dict[str, Any], arrays))
    return buf.getvalue()


# Without an explicit max_bytes, an archive may expand to this many times its own size (our
# archives are stored, not deflated: they expand by 1x), or this many bytes if more.
_EXPANSION, _MIN_LIMIT = 4, 64 << 20


def state_from_bytes(
    data: bytes, source: str = "the state bytes", max_bytes: int | None = None
) -> Any:
    """Inverse of ``state_to_bytes``; runs no code (``allow_pickle=False``).

    Args:
        max_bytes: the most bytes the archive's entries may hold once decompressed; default
            ``max(4 * len(data), 64 MiB)``, so a small archive cannot inflate to gigabytes.
            Every array's declared shape must also fit in the bytes its entry holds.

    Raises:
        ValueError: the bytes are not a datapipe state archive, or exceed those limits
            (names ``source`` and why).
    """
    limit = max(_EXPANSION * len(data), _MIN_LIMIT) if max_bytes is None else int(max_bytes)
    try:
        _check_archive(data, limit)
        return _read_archive(data)
    except (ValueError, KeyError, TypeError, AttributeError, OSError, zipfile.BadZipFile) as e:
        # Truncated, tampered or foreign files fail deep inside numpy/zipfile/json; say
        # which file it was and that it is not a state archive.
        raise ValueError(
            f"load_state: {source} is not a valid datapipe state archive ({type(e).__name__}: {e})"
        ) from e


def _check_archive(data: bytes, limit: int) -> None:
    """Refuse, before anything is decompressed or allocated, an archive whose entries
    declare more than ``limit`` bytes in all, or an array whose header declares a shape
    larger than the bytes its entry holds (``np.load`` would allocate it first)."""
    total = 0
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for info in zf.infolist():
            total += info.file_size
            if total > limit:
                raise ValueError(
                    f"its entries hold over {limit} bytes once decompressed (entry "
                    f"{info.filename!r} brings them to {total}); pass max_bytes= to allow more"
                )
            with zf.open(info) as f:  # np.load would allocate the declared shape first
                npy_header(f, info.file_size, f"entry {info.filename!r}", None)


def _read_archive(data: bytes) -> Any:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        if "__json__" not in z.files:
            raise ValueError("not a datapipe state archive (no __json__ entry)")
        meta = json.loads(str(z["__json__"]))
        if meta.get("format") != _FORMAT:
            raise ValueError(f"unsupported state format {meta.get('format')!r}")
        arrays = {k: z[k] for k in z.files if k != "__json__"}
    return decode_state(meta["state"], arrays)


def save_state(state: Any, path: str | os.PathLike) -> None:
    """Write ``state`` (e.g. ``iterator.state_dict()``) to ``path`` atomically.

    The file is an ``.npz`` archive: entry ``__json__`` holds the JSON document, the other
    entries the arrays it refers to. A crash mid-write leaves the previous file intact.
    ``path`` may be a URL (``s3://bucket/ckpt/rank0.state``; fsspec, ``datapipe-torch[remote]``),
    stored in one request (retried on transient errors).

    Raises:
        TypeError: a value has no safe encoding (names its path in the state).

    Example:
        >>> import datapipe as dp, os, tempfile
        >>> it = iter(dp.range(10).shuffle(4, seed=1))
        >>> _ = [next(it) for _ in range(3)]
        >>> path = os.path.join(tempfile.mkdtemp(), "it.state")
        >>> save_state(it.state_dict(), path)
        >>> it2 = iter(dp.range(10).shuffle(4, seed=1))
        >>> it2.load_state_dict(load_state(path))
        >>> [int(x) for x in it2] == [int(x) for x in it]
        True
    """
    from datapipe.io._remote import is_remote, localize, write_bytes

    path = localize(os.fspath(path))
    data = state_to_bytes(state)
    if is_remote(path):  # one PUT: an object store stores it whole or not at all
        write_bytes(path, data)
        return
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_state(path: str | os.PathLike, max_bytes: int | None = None) -> Any:
    """Read a state written by ``save_state``; runs no code.

    Args:
        max_bytes: the most bytes the file and its decompressed entries may hold (default:
            no limit on the file, its entries at most ``max(4 x its size, 64 MiB)``).
            A URL's object is refused from its reported size, before it is read.

    Raises:
        ValueError: the file is not a regular file, is not a datapipe state archive, or
            exceeds those limits (a zip bomb; an array header declaring an absurd shape);
            the message names the file.
    """
    from datapipe.io._safe_files import read_regular_file

    path = os.fspath(path)
    try:
        data = read_regular_file(path, max_bytes)
    except OSError as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise ValueError(redact_url(f"load_state: cannot read {path!r}: {e}")) from e
    return state_from_bytes(data, repr(redact_url(path)), max_bytes)
