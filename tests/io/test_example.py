"""tf.train.Example parsing (issue 33 item 5): ``datapipe.io.parse_single_example`` /
``parse_example`` against ``tf.io``'s, through goldens (``[golden]``) or TensorFlow itself
(``-m differential``), inside ``map`` on every executor, and its errors."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from differential import tf

import datapipe as dp
from datapipe.io import example as ex

# One description, plain values (the golden's input fingerprint reads it): key, kind,
# shape, dtype, default / allow_missing.
SINGLE = [
    ("label", "fixed", [], "int64", None),
    ("pixels", "fixed", [2, 2], "float32", None),
    ("name", "fixed", [], "string", "unknown"),
    ("weight", "fixed", [2], "float32", [0.5, 0.25]),
    ("tags", "varlen", None, "string", None),
    ("ids", "varlen", None, "int64", None),
    ("boxes", "sequence", [2], "float32", True),
]
BATCH = [
    ("label", "fixed", [], "int64", None),
    ("name", "fixed", [], "string", "unknown"),
    ("ids", "varlen", None, "int64", None),
    ("tags", "varlen", None, "string", None),
    ("boxes", "sequence", [2], "float32", True),
    ("words", "sequence", [], "string", True),
]
RECORDS = [
    {"label": [3], "pixels": [0.0, 0.5, 1.0, 1.5], "tags": [b"a", b"bc"], "ids": [7, 8, 9],
     "boxes": [0.1, 0.2, 0.3, 0.4], "words": [b"x"]},
    {"label": [-1], "name": [b"cat"], "pixels": [1.0, 2.0, 3.0, 4.0], "ids": [1],
     "boxes": [1.5, 2.5], "words": [b"y", b"zz", b""], "weight": [2.0, 4.0]},
    {"label": [2**40], "pixels": [9.0, 8.0, 7.0, 6.0], "tags": [b""], "boxes": [],
     "words": []},
]  # fmt: skip
NP_DTYPES = {"int64": np.int64, "float32": np.float32, "string": bytes}


def ours_spec(description):
    out = {}
    for key, kind, shape, dtype, extra in description:
        dtype = NP_DTYPES[dtype]
        if kind == "fixed":
            out[key] = ex.FixedLenFeature(shape, dtype, default_value=extra)
        elif kind == "varlen":
            out[key] = ex.VarLenFeature(dtype)
        else:
            out[key] = ex.FixedLenSequenceFeature(shape, dtype, allow_missing=extra)
    return out


def tf_serialize(values):
    """``tf.train.Example(...).SerializeToString()`` of ``values`` (name -> list); an empty
    list as a ``Feature`` without a list."""
    t = tf()
    feature = {}
    for key, v in values.items():
        if not v:
            feature[key] = t.train.Feature()
        elif isinstance(v[0], bytes):
            feature[key] = t.train.Feature(bytes_list=t.train.BytesList(value=v))
        elif v and isinstance(v[0], int):
            feature[key] = t.train.Feature(int64_list=t.train.Int64List(value=v))
        else:
            feature[key] = t.train.Feature(float_list=t.train.FloatList(value=v))
    return t.train.Example(features=t.train.Features(feature=feature)).SerializeToString()


def tf_parse(records, description, batched):
    """tf.io.parse_(single_)example's result as numpy: sparse values as (indices, values,
    dense_shape); strings as object arrays of bytes."""
    t = tf()
    features = {}
    for key, kind, shape, dtype, extra in description:
        dtype = getattr(t, dtype)
        if kind == "fixed":
            features[key] = t.io.FixedLenFeature(shape, dtype, default_value=extra)
        elif kind == "varlen":
            features[key] = t.io.VarLenFeature(dtype)
        else:
            features[key] = t.io.FixedLenSequenceFeature(shape, dtype, allow_missing=extra)
    if batched:
        parsed = t.io.parse_example(records, features)
    else:
        parsed = t.io.parse_single_example(records, features)
    out = {}
    for key, value in parsed.items():
        if isinstance(value, t.SparseTensor):
            out[key] = (
                value.indices.numpy(),
                as_np(value.values.numpy()),
                value.dense_shape.numpy(),
            )
        else:
            out[key] = as_np(value.numpy())
    return out


def as_np(value):
    return np.asarray(value, dtype=object) if isinstance(value, bytes) else value


def assert_same(ours, theirs):
    """Ours equals tf's: keys, dtypes and shapes exactly; values exactly (parsing copies
    the stored values: no arithmetic between the wire and the array)."""
    assert sorted(ours) == sorted(theirs)
    for key, want in theirs.items():
        got = ours[key]
        if isinstance(want, tuple):  # a VarLenFeature
            assert isinstance(got, ex.SparseTensorValue), key
            got, want = list(got), [want[0], as_np(want[1]), want[2]]
        else:
            got, want = [got], [as_np(want)]
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape, (key, g.dtype, g.shape, w.shape)
            assert g.tolist() == w.tolist(), key  # float32 values round-trip bit for bit


def test_single_example_matches_tf(ref):
    for i, values in enumerate(RECORDS):
        record = ex.serialize_example(values)
        theirs = ref(tf_parse, record, SINGLE, False)
        assert_same(ex.parse_single_example(record, ours_spec(SINGLE)), theirs)
        # and the bytes tf writes parse the same
        tf_record = ref(tf_serialize, values)
        assert_same(ex.parse_single_example(tf_record, ours_spec(SINGLE)), theirs)
        if i == 0:
            out = ex.parse_single_example(record, ours_spec(SINGLE))
            assert out["label"].shape == () and out["label"].dtype == np.int64
            assert out["name"].tolist() == b"unknown"  # the default, as bytes
            assert out["tags"].indices.tolist() == [[0], [1]]


def test_batch_matches_tf(ref):
    records = [ex.serialize_example(v) for v in RECORDS]
    theirs = ref(tf_parse, records, BATCH, True)
    got = ex.parse_example(records, ours_spec(BATCH))
    assert_same(got, theirs)
    # padding: example 2 has no boxes, example 0 one word of the three of example 1
    assert got["boxes"].shape == (3, 2, 2) and got["boxes"][2].tolist() == [[0, 0], [0, 0]]
    assert got["words"].tolist() == [[b"x", b"", b""], [b"y", b"zz", b""], [b"", b"", b""]]
    assert got["ids"].dense_shape.tolist() == [3, 3]
    # a batched TFRecordDataset's element (an object array of records) parses the same
    assert_same(ex.parse_example(np.array(records, dtype=object), ours_spec(BATCH)), theirs)


def test_sequence_default_value_pads():
    records = [ex.serialize_example({"s": [1, 2]}), ex.serialize_example({"s": [5]})]
    spec = {"s": ex.FixedLenSequenceFeature([], np.int64, True, default_value=-1)}
    assert ex.parse_example(records, spec)["s"].tolist() == [[1, 2], [5, -1]]


def write_tfrecord(path, records):
    with open(path, "wb") as f:
        for r in records:
            length = struct.pack("<Q", len(r))
            f.write(length + struct.pack("<I", dp.io.tfrecord.masked_crc32c(length)))
            f.write(r + struct.pack("<I", dp.io.tfrecord.masked_crc32c(r)))


FEATURES = {
    "label": ex.FixedLenFeature([], np.int64),
    "ids": ex.VarLenFeature(np.int64),
}


def parse_record(record):
    out = ex.parse_single_example(record, FEATURES)
    return int(out["label"]), out["ids"].values.tolist()


@pytest.mark.parametrize("executor", [None, "thread", "process"])
def test_parsing_inside_map_on_every_executor(tmp_path, executor):
    pytest.importorskip("google_crc32c")
    path = str(tmp_path / "data.tfrecord")
    write_tfrecord(
        path, [ex.serialize_example({"label": [i], "ids": [i] * (i % 3)}) for i in range(40)]
    )
    kw = {} if executor is None else {"num_parallel_calls": 2, "executor": executor}
    got = list(dp.io.TFRecordDataset(path).map(parse_record, **kw))
    assert got == [(i, [i] * (i % 3)) for i in range(40)]
    # batched records: parse_example over the batch
    batches = dp.io.TFRecordDataset(path).batch(16).map(lambda r: ex.parse_example(r, FEATURES))
    labels = [b["label"].tolist() for b in batches]
    assert labels == [list(range(16)), list(range(16, 32)), list(range(32, 40))]


@pytest.mark.parametrize(
    "values, spec, message",
    [
        ({}, {"a": ex.FixedLenFeature([], np.int64)},
         "parse_single_example: feature 'a' (data type: int64) is required but could not be found"),
        ({"a": [1.5]}, {"a": ex.FixedLenFeature([], np.int64)},
         "parse_single_example: feature 'a': data types don't match: the example holds float "
         "values, the feature expects int64"),
        ({"a": [1, 2]}, {"a": ex.FixedLenFeature([3], np.int64)},
         "parse_single_example: feature 'a': 2 values do not fit shape [3] (3 values)"),
        ({"a": [1, 2, 3]}, {"a": ex.FixedLenSequenceFeature([2], np.int64, True)},
         "parse_single_example: feature 'a': 3 values are not a whole number of items of "
         "shape [2]"),
        ({"a": [1]}, {"a": ex.FixedLenSequenceFeature([], np.int64)},
         "parse_single_example: feature 'a': FixedLenSequenceFeature needs "
         "allow_missing=True (tf.io refuses allow_missing=False too)"),
        ({"a": [1]}, {"a": ex.FixedLenFeature([], np.float64)},
         "parse_single_example: feature 'a' has dtype <class 'numpy.float64'>; "
         "tf.train.Example holds float32, int64 or bytes (string) values"),
        ({"a": [1]}, {"a": ("a", np.int64)},
         "parse_single_example: feature 'a' is a tuple; use FixedLenFeature, VarLenFeature "
         "or FixedLenSequenceFeature"),
    ],
)  # fmt: skip
def test_bad_features_name_the_key(values, spec, message):
    with pytest.raises(ValueError) as info:
        ex.parse_single_example(ex.serialize_example(values), spec)
    assert str(info.value) == message


def test_batch_errors_name_the_example():
    records = [ex.serialize_example({"a": [1]}), ex.serialize_example({})]
    with pytest.raises(ValueError, match=r"^parse_example: feature 'a' of example 1 \(data "):
        ex.parse_example(records, {"a": ex.FixedLenFeature([], np.int64)})
    with pytest.raises(ValueError, match=r"^parse_example: record 1 is not a serialized"):
        ex.parse_example([records[0], b"\xff\xff\xff"], {"a": ex.VarLenFeature(np.int64)})
    with pytest.raises(ValueError, match="serialized must be a 1-D list or array"):
        ex.parse_example(b"abc", {"a": ex.VarLenFeature(np.int64)})


def test_a_record_that_is_not_an_example_is_refused():
    with pytest.raises(ValueError, match=r"^parse_single_example: record is not a serialized"):
        ex.parse_single_example(b"\x0a\x05\x0a\x03", {"a": ex.VarLenFeature(np.int64)})
    with pytest.raises(ValueError, match="serialized must be bytes, got str"):
        ex.parse_single_example("text", {"a": ex.VarLenFeature(np.int64)})
