"""``tf.train.Example`` parsing: ``parse_single_example`` / ``parse_example`` (``tf.io``).

A TFRecord pipeline starts with ``TFRecordDataset(files).map(parse)``: each record is a
serialized ``tf.train.Example`` (``tensorflow/core/example/example.proto``), a map from
feature name to one of a ``BytesList``, ``FloatList`` or ``Int64List``. The features to read
are declared as in ``tf.io``: ``FixedLenFeature(shape, dtype, default_value)``,
``VarLenFeature(dtype)`` and ``FixedLenSequenceFeature(shape, dtype, allow_missing,
default_value)``; the result is a dict of numpy values:

- ``FixedLenFeature``: an array of ``shape`` (``parse_example``: ``(batch, *shape)``);
- ``VarLenFeature``: a ``SparseTensorValue(indices, values, dense_shape)`` as
  ``tf.compat.v1.SparseTensorValue`` holds a ``tf.SparseTensor``'s numpy parts: ``indices``
  int64 ``(n, 1)`` (``parse_example``: ``(n, 2)``, ``[example, position]``), ``values``
  ``(n,)``, ``dense_shape`` int64 ``(1,)`` (``(2,)``: ``[batch, longest]``);
- ``FixedLenSequenceFeature``: ``(count, *shape)`` (``parse_example``: ``(batch, longest,
  *shape)``, shorter examples padded with ``default_value``, else 0 / ``b""``).

dtypes are tf's three: ``np.float32`` (``FloatList``), ``np.int64`` (``Int64List``) and
``bytes`` (``BytesList``; ``"string"``, ``str`` and ``object`` are accepted), whose arrays
are numpy ``object`` arrays of ``bytes`` (tf's ``tf.string`` as ``.numpy()`` gives it).

The wire format is decoded by Google's protobuf runtime (``pip install
"datapipe-torch[tfrecord]"``), with the two message files built into a private descriptor
pool: no generated code is shipped, and TensorFlow's own registration (in a process that
imports both) is untouched.

Errors follow ``tf.io``'s checks, as ``ValueError`` naming the op, the feature key and, for
``parse_example``, the example's index in the batch: a missing feature without a default,
a feature of another kind than its dtype, a value count that does not fit the shape, a
record that is not an ``Example``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "FixedLenFeature",
    "FixedLenSequenceFeature",
    "SparseTensorValue",
    "VarLenFeature",
    "parse_example",
    "parse_single_example",
    "serialize_example",
]


class FixedLenFeature(NamedTuple):
    """A feature of a fixed number of values (``tf.io.FixedLenFeature``).

    Args:
        shape: the value's shape (``[]`` for a scalar); the example holds ``prod(shape)``
            values.
        dtype: ``np.float32``, ``np.int64`` or ``bytes`` (module docstring).
        default_value: used when the example lacks the feature (broadcast to ``shape``);
            None makes the feature required.
    """

    shape: Sequence[int]
    dtype: Any
    default_value: Any = None


class VarLenFeature(NamedTuple):
    """A feature of any number of values, parsed as a ``SparseTensorValue``
    (``tf.io.VarLenFeature``). ``dtype`` as ``FixedLenFeature``'s."""

    dtype: Any


class FixedLenSequenceFeature(NamedTuple):
    """A feature holding a sequence of fixed-shape items (``tf.io.FixedLenSequenceFeature``):
    ``k * prod(shape)`` values parse to ``(k, *shape)``.

    Args:
        shape: one item's shape.
        dtype: as ``FixedLenFeature``'s.
        allow_missing: a missing feature parses to zero items. It must be True: tf.io
            (2.21) refuses ``allow_missing=False`` ("Unsupported"), and so does this.
        default_value: the padding of shorter sequences in ``parse_example`` (a scalar);
            None pads with 0 / ``b""``.
    """

    shape: Sequence[int]
    dtype: Any
    allow_missing: bool = False
    default_value: Any = None


class SparseTensorValue(NamedTuple):
    """A ``VarLenFeature``'s value: ``tf.compat.v1.SparseTensorValue``'s three arrays."""

    indices: np.ndarray
    values: np.ndarray
    dense_shape: np.ndarray


Feature = FixedLenFeature | VarLenFeature | FixedLenSequenceFeature

# ---- the messages (tensorflow/core/example/feature.proto, example.proto) ----------------------
# (message, wire type of its values as FieldDescriptorProto.Type, Feature's field name)
_LISTS = (
    ("BytesList", 12, "bytes_list"),
    ("FloatList", 2, "float_list"),
    ("Int64List", 3, "int64_list"),
)
_example_class: Any = None


def _message_classes() -> Any:
    """``tensorflow.Example``'s class, built once per process into a private pool."""
    global _example_class
    if _example_class is not None:
        return _example_class
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError as e:
        raise ImportError(
            "parse_example needs protobuf to read tf.train.Example records: "
            'pip install "datapipe-torch[tfrecord]"'
        ) from e
    fdp = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="datapipe_example.proto", package="tensorflow")
    f.syntax = "proto3"  # as feature.proto: repeated numbers are packed on the wire

    def message(name: str, fields: list[tuple], nested: Any = None) -> Any:
        msg = f.message_type.add(name=name) if nested is None else nested.add(name=name)
        for field_name, number, label, kind, type_name in fields:
            field = msg.field.add(name=field_name, number=number, label=label, type=kind)
            if type_name:
                field.type_name = type_name
        return msg

    rep, opt = fdp.LABEL_REPEATED, fdp.LABEL_OPTIONAL
    for name, kind, _ in _LISTS:
        message(name, [("value", 1, rep, kind, None)])
    feature = message(
        "Feature",
        [(field, i + 1, opt, fdp.TYPE_MESSAGE, f".tensorflow.{name}") for i, (name, _, field)
         in enumerate(_LISTS)],
    )  # fmt: skip
    feature.oneof_decl.add(name="kind")
    for field in feature.field:
        field.oneof_index = 0
    features = message("Features", [])
    entry = message(
        "FeatureEntry",
        [("key", 1, opt, fdp.TYPE_STRING, None)]
        + [("value", 2, opt, fdp.TYPE_MESSAGE, ".tensorflow.Feature")],
        features.nested_type,
    )
    entry.options.map_entry = True
    features.field.add(
        name="feature", number=1, label=rep, type=fdp.TYPE_MESSAGE,
        type_name=".tensorflow.Features.FeatureEntry",
    )  # fmt: skip
    message("Example", [("features", 1, opt, fdp.TYPE_MESSAGE, ".tensorflow.Features")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    _example_class = message_factory.GetMessageClass(
        pool.FindMessageTypeByName("tensorflow.Example")
    )
    return _example_class


# ---- dtypes ---------------------------------------------------------------------------------
_KINDS = {np.dtype(np.float32): "float_list", np.dtype(np.int64): "int64_list"}
_TF_NAMES = {"float_list": "float", "int64_list": "int64", "bytes_list": "string"}


def _kind(op: str, key: str, dtype: Any) -> str:
    """The list field a feature of ``dtype`` is read from."""
    if dtype in (bytes, str, object, "string", "str", "bytes"):
        return "bytes_list"
    try:
        kind = _KINDS.get(np.dtype(dtype))
    except TypeError:
        kind = None
    if kind is None:
        raise ValueError(
            f"{op}: feature {key!r} has dtype {dtype!r}; tf.train.Example holds float32, "
            "int64 or bytes (string) values"
        )
    return kind


def _array(kind: str, values: Any) -> np.ndarray:
    if kind == "bytes_list":
        out = np.empty(len(values), dtype=object)
        out[:] = list(values)
        return out
    return np.asarray(values, dtype=np.float32 if kind == "float_list" else np.int64)


def _default(kind: str, value: Any, shape: tuple[int, ...]) -> np.ndarray:
    if kind == "bytes_list":
        value = value.encode() if isinstance(value, str) else value
        out = np.empty(shape, dtype=object)
        out[...] = value
        return out
    dtype = np.float32 if kind == "float_list" else np.int64
    return np.broadcast_to(np.asarray(value, dtype=dtype), shape).copy()


# ---- one example ----------------------------------------------------------------------------
def _where(op: str, key: str, index: int | None) -> str:
    return f"{op}: feature {key!r}" + (f" of example {index}" if index is not None else "")


def _values(op: str, feature_map: Any, key: str, kind: str, index: int | None) -> Any:
    """The example's values of ``key`` (None when absent), checked against ``kind``."""
    if key not in feature_map:
        return None
    feature = feature_map[key]
    have = feature.WhichOneof("kind")
    if have is None:  # a Feature with no list: tf.io reads it as an empty list
        return _array(kind, [])
    if have != kind:
        raise ValueError(
            f"{_where(op, key, index)}: data types don't match: the example holds "
            f"{_TF_NAMES[have]} values, the feature expects {_TF_NAMES[kind]}"
        )
    return _array(kind, getattr(feature, kind).value)


def _fixed(op: str, key: str, spec: FixedLenFeature, values: Any, index: int | None) -> Any:
    kind, shape = _kind(op, key, spec.dtype), tuple(int(d) for d in spec.shape)
    if values is None:
        if spec.default_value is None:
            raise ValueError(
                f"{_where(op, key, index)} (data type: {_TF_NAMES[kind]}) is required but "
                "could not be found"
            )
        return _default(kind, spec.default_value, shape)
    if values.size != math.prod(shape):
        raise ValueError(
            f"{_where(op, key, index)}: {values.size} values do not fit shape {list(shape)} "
            f"({math.prod(shape)} values)"
        )
    return values.reshape(shape)


def _sequence(op: str, key: str, spec: FixedLenSequenceFeature, values: Any, index: Any) -> Any:
    kind, shape = _kind(op, key, spec.dtype), tuple(int(d) for d in spec.shape)
    if values is None:  # allow_missing is True (_check_features)
        values = _array(kind, [])
    per_item = math.prod(shape)
    if per_item == 0 or values.size % per_item:
        raise ValueError(
            f"{_where(op, key, index)}: {values.size} values are not a whole number of "
            f"items of shape {list(shape)}"
        )
    return values.reshape((values.size // per_item, *shape))


def _parse_one(op: str, serialized: Any, features: Mapping[str, Feature], index: Any) -> dict:
    example = _message_classes()()
    try:
        example.ParseFromString(bytes(serialized))
    except Exception as e:  # protobuf's DecodeError (its module varies by runtime)
        where = f"{op}: record" + (f" {index}" if index is not None else "")
        raise ValueError(f"{where} is not a serialized tf.train.Example ({e})") from None
    feature_map = example.features.feature
    out: dict[str, Any] = {}
    for key, spec in features.items():
        values = _values(op, feature_map, key, _kind(op, key, spec.dtype), index)
        if isinstance(spec, FixedLenFeature):
            out[key] = _fixed(op, key, spec, values, index)
        elif isinstance(spec, FixedLenSequenceFeature):
            out[key] = _sequence(op, key, spec, values, index)
        else:
            out[key] = values if values is not None else _array(_kind(op, key, spec.dtype), [])
    return out


def _check_features(op: str, features: Any) -> None:
    if not isinstance(features, Mapping) or not features:
        raise ValueError(f"{op}: features must be a non-empty dict of name -> feature")
    for key, spec in features.items():
        if not isinstance(key, str):
            raise ValueError(f"{op}: feature names must be str, got {key!r}")
        if not isinstance(spec, FixedLenFeature | VarLenFeature | FixedLenSequenceFeature):
            raise ValueError(
                f"{op}: feature {key!r} is a {type(spec).__name__}; use FixedLenFeature, "
                "VarLenFeature or FixedLenSequenceFeature"
            )
        if isinstance(spec, FixedLenSequenceFeature) and not spec.allow_missing:
            raise ValueError(
                f"{op}: feature {key!r}: FixedLenSequenceFeature needs allow_missing=True "
                "(tf.io refuses allow_missing=False too)"
            )


def parse_single_example(serialized: bytes, features: Mapping[str, Feature]) -> dict[str, Any]:
    """Parse one serialized ``tf.train.Example`` (``tf.io.parse_single_example``).

    Args:
        serialized: the record's bytes (a ``TFRecordDataset`` element; a 0-d object array
            of bytes is accepted too).
        features: feature name -> ``FixedLenFeature`` / ``VarLenFeature`` /
            ``FixedLenSequenceFeature`` (with ``allow_missing=True``, as tf.io requires).

    Returns:
        A dict with one entry per feature: an array of the feature's shape and dtype, a
        ``SparseTensorValue`` with ``indices`` ``(n, 1)``, or ``(count, *shape)``.

    Raises:
        ValueError: a missing required feature, a feature of another kind than its dtype,
            a count that does not fit the shape, a record that is not an ``Example``, a
            bad ``features`` dict; each names the feature key.
        ImportError: protobuf is not installed (names the extra).

    Example:
        >>> from datapipe.io import example as ex
        >>> record = ex.serialize_example({"label": [3], "pixels": [0.5, 1.0]})
        >>> out = ex.parse_single_example(record, {
        ...     "label": ex.FixedLenFeature([], np.int64),
        ...     "pixels": ex.VarLenFeature(np.float32),
        ...     "name": ex.FixedLenFeature([], bytes, default_value=b"?"),
        ... })
        >>> out["label"], out["pixels"].values, out["name"]
        (array(3), array([0.5, 1. ], dtype=float32), array(b'?', dtype=object))
    """
    op = "parse_single_example"
    _check_features(op, features)
    out = _parse_one(op, _record(serialized), features, None)
    for key, spec in features.items():
        if isinstance(spec, VarLenFeature):
            values = out[key]
            indices = np.arange(len(values), dtype=np.int64)[:, None]
            out[key] = SparseTensorValue(indices, values, np.array([len(values)], np.int64))
    return out


def _record(x: Any) -> bytes:
    if isinstance(x, np.ndarray) and x.ndim == 0:
        x = x.item()
    if not isinstance(x, bytes | bytearray | memoryview):
        raise ValueError(f"parse_single_example: serialized must be bytes, got {type(x).__name__}")
    return bytes(x)


def parse_example(serialized: Sequence[bytes], features: Mapping[str, Feature]) -> dict[str, Any]:
    """Parse a batch of serialized ``tf.train.Example``s (``tf.io.parse_example``).

    Args:
        serialized: a list, tuple or 1-D object array of records (a batched
            ``TFRecordDataset``'s element).
        features: as ``parse_single_example``'s.

    Returns:
        A dict per feature: ``(batch, *shape)`` arrays; ``SparseTensorValue`` with
        ``indices`` ``(n, 2)`` (``[example, position]``) and ``dense_shape``
        ``[batch, longest]``; ``(batch, longest, *shape)`` for sequences, padded with
        ``default_value`` (else 0 / ``b""``).

    Raises:
        ValueError: as ``parse_single_example``'s, naming the example's index in the
            batch; a ``serialized`` that is not a 1-D sequence of bytes.
        ImportError: protobuf is not installed (names the extra).

    Example:
        >>> from datapipe.io import example as ex
        >>> records = [ex.serialize_example({"ids": v}) for v in ([1, 2], [7])]
        >>> sparse = ex.parse_example(records, {"ids": ex.VarLenFeature(np.int64)})["ids"]
        >>> sparse.indices.tolist(), sparse.values.tolist(), sparse.dense_shape.tolist()
        ([[0, 0], [0, 1], [1, 0]], [1, 2, 7], [2, 2])
    """
    op = "parse_example"
    _check_features(op, features)
    records = list(serialized) if isinstance(serialized, Sequence | np.ndarray) else None
    if records is None or np.ndim(np.asarray(serialized, dtype=object)) != 1:
        raise ValueError(f"{op}: serialized must be a 1-D list or array of bytes records")
    parsed = [_parse_one(op, _record(r), features, i) for i, r in enumerate(records)]
    out: dict[str, Any] = {}
    for key, spec in features.items():
        kind = _kind(op, key, spec.dtype)
        column = [p[key] for p in parsed]
        if isinstance(spec, FixedLenFeature):
            shape = (len(column), *(int(d) for d in spec.shape))
            out[key] = np.stack(column) if column else _array(kind, []).reshape(shape)
        elif isinstance(spec, VarLenFeature):
            out[key] = _sparse_batch(kind, column)
        else:
            out[key] = _padded_batch(kind, spec, column)
    return out


def _sparse_batch(kind: str, column: list[np.ndarray]) -> SparseTensorValue:
    lengths = [len(v) for v in column]
    rows = np.repeat(np.arange(len(column), dtype=np.int64), lengths)
    cols = np.concatenate([np.arange(n, dtype=np.int64) for n in lengths] or [np.zeros(0, int)])
    values = np.concatenate(column) if column else _array(kind, [])
    indices = np.stack([rows, cols.astype(np.int64)], axis=1)
    return SparseTensorValue(indices, values, np.array([len(column), max(lengths, default=0)]))


def _padded_batch(kind: str, spec: FixedLenSequenceFeature, column: list) -> np.ndarray:
    shape = tuple(int(d) for d in spec.shape)
    longest = max((len(v) for v in column), default=0)
    pad = spec.default_value
    if pad is None:
        pad = b"" if kind == "bytes_list" else 0
    out = _default(kind, pad, (len(column), longest, *shape))
    for i, v in enumerate(column):
        out[i, : len(v)] = v
    return out


def serialize_example(features: Mapping[str, Any]) -> bytes:
    """A serialized ``tf.train.Example`` of ``features`` (name -> values): floats become a
    ``FloatList``, ints an ``Int64List``, bytes/str a ``BytesList`` (the inverse of
    parsing, for writing test records and TFRecord files). An empty list is written as a
    ``Feature`` without a list, which tf.io and this module read as empty for any dtype.

    Raises:
        ValueError: a feature whose values are of none of the three kinds, or mixed.

    Example:
        >>> from datapipe.io import example as ex
        >>> len(ex.serialize_example({"label": [3]})) > 0
        True
    """
    example = _message_classes()()
    for key, values in features.items():
        values = np.asarray(values).ravel() if not isinstance(values, bytes | str) else [values]
        items = list(values)
        feature = example.features.feature[key]
        if not items:
            continue  # no kind: empty for any dtype (a kind with no values is typed)
        if all(isinstance(v, bytes | str | np.bytes_ | np.str_) for v in items):
            encoded = (v.encode() if isinstance(v, str) else bytes(v) for v in items)
            feature.bytes_list.value.extend(encoded)
        elif all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in items):
            feature.int64_list.value.extend(int(v) for v in items)
        elif all(isinstance(v, float | np.floating | int | np.integer) for v in items):
            feature.float_list.value.extend(float(v) for v in items)
        else:
            raise ValueError(f"serialize_example: feature {key!r} mixes kinds: {items[:3]!r}")
    return example.SerializeToString(deterministic=True)  # map keys sorted: stable bytes
