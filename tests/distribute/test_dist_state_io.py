"""Iterator state files: JSON plus numpy arrays, loading runs no code, a tampered file gets a
clear ValueError."""

from __future__ import annotations

import collections
import io
import json
import os
import zipfile

import numpy as np
import pytest
import torch
from _dist_helpers import worker_options

import datapipe as dp
from datapipe.distribute.state_io import (
    encode_state,
    load_state,
    save_state,
    state_from_bytes,
    state_to_bytes,
)

Point = collections.namedtuple("Point", ["x", "y"])


pytestmark = pytest.mark.usefixtures("clean_env")


def _advanced(ds, count, index, steps=2):
    it = iter(ds.with_options(worker_options(count, index)))
    for _ in range(steps):
        next(it)
    return it.state_dict()


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def _write(path, **entries):
    buf = io.BytesIO()
    np.savez(buf, **entries)
    path.write_bytes(buf.getvalue())


def test_round_trip_of_every_supported_kind(tmp_path):
    rng_state = np.random.Generator(np.random.PCG64(7)).bit_generator.state
    state = {
        "ints": [0, -5, 2**127 + 3],
        "rng": rng_state,
        "none": None,
        "flag": True,
        "text": "ok",
        "float": 1.5,
        "nan": float("nan"),
        "inf": float("-inf"),
        "bytes": b"\x00\xff",
        "array": np.arange(6, dtype=np.uint16).reshape(2, 3),
        "scalar": np.float32(2.5),
        "strings": np.array(["a", "bc"]),
        "tensor": torch.arange(4, dtype=torch.int32),
        "bf16": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
        "nested": (np.int64(3), {"label": np.int64(1), "img": np.ones((2, 2), np.uint8)}),
        "point": Point(1, np.int8(2)),
        "int_keys": {1: "a", 2: "b"},
        "__dp__": "a user key that collides with the tag",
    }
    path = tmp_path / "state.npz"
    save_state(state, path)
    back = load_state(path)
    assert back["ints"] == [0, -5, 2**127 + 3]
    assert back["rng"] == rng_state
    assert back["none"] is None and back["flag"] is True and back["text"] == "ok"
    assert back["float"] == 1.5 and np.isnan(back["nan"]) and back["inf"] == float("-inf")
    assert back["bytes"] == b"\x00\xff"
    assert back["array"].dtype == np.uint16 and back["array"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert type(back["scalar"]) is np.float32 and back["scalar"] == 2.5
    assert back["strings"].tolist() == ["a", "bc"]
    assert back["tensor"].dtype == torch.int32 and back["tensor"].tolist() == [0, 1, 2, 3]
    assert back["bf16"].dtype == torch.bfloat16 and back["bf16"].tolist() == [1.5, -2.0]
    scalar, inner = back["nested"]
    assert type(scalar) is np.int64 and scalar == 3 and inner["img"].shape == (2, 2)
    assert type(back["point"]).__name__ == "Point" and back["point"].y == 2
    assert back["int_keys"] == {1: "a", 2: "b"}
    assert back["__dp__"] == "a user key that collides with the tag"


def test_file_is_json_plus_plain_arrays(tmp_path):
    path = tmp_path / "s.npz"
    save_state({"buf": [np.arange(3)], "n": 2**70}, path)
    with zipfile.ZipFile(path) as z:
        assert sorted(z.namelist()) == ["__json__.npy", "a0.npy"]
    with np.load(path, allow_pickle=False) as z:  # readable without pickle
        doc = json.loads(str(z["__json__"]))
    assert doc["state"] == {"buf": [{"__dp__": "ndarray", "ref": "a0"}], "n": 2**70}


def test_unsupported_values_name_their_path():
    with pytest.raises(TypeError) as info:
        encode_state({"buffer": [1, object()]})
    assert "state['buffer'][1] has type object" in str(info.value)
    # Object arrays are stored item by item (a batch of strings); an item with no safe
    # encoding is named by its position.
    with pytest.raises(TypeError, match=r"state\['a'\]\.flat\[1\] has type object"):
        encode_state({"a": np.array([1, object()], dtype=object)})


def test_object_arrays_of_text_round_trip(tmp_path):
    # A batch of text lines (object array of str) in a shuffle buffer or pending chunk.
    batch = np.array([["a", "bé"], [b"\x00", None]], dtype=object)
    save_state({"pending": [batch, np.array([], dtype=object)]}, tmp_path / "s")
    back = load_state(tmp_path / "s")["pending"]
    assert back[0].dtype == object and back[0].shape == (2, 2)
    assert back[0].tolist() == [["a", "bé"], [b"\x00", None]]
    assert back[1].shape == (0,) and back[1].dtype == object


def test_pickled_payload_is_refused(tmp_path):
    import io

    buf = io.BytesIO()
    np.savez(
        buf,
        __json__=np.array(
            '{"format": "datapipe-state-1", "state": {"__dp__": "ndarray", "ref": "a0"}}'
        ),
        a0=np.array([{"evil": 1}], dtype=object),
    )
    with pytest.raises(ValueError, match="allow_pickle=False"):
        state_from_bytes(buf.getvalue())
    with pytest.raises(ValueError, match="not a datapipe state archive"):
        buf2 = io.BytesIO()
        np.savez(buf2, x=np.arange(2))
        state_from_bytes(buf2.getvalue())


def test_iterator_state_of_a_shuffle_buffer_round_trips(tmp_path):
    ds = dp.from_tensor_slices(
        {"img": np.arange(40, dtype=np.uint8).reshape(10, 2, 2), "y": np.arange(10)}
    ).shuffle(6, seed=1)
    it = iter(ds)
    head = [next(it) for _ in range(3)]
    save_state(it.state_dict(), tmp_path / "it.npz")
    rest = [int(e["y"]) for e in it]
    it2 = iter(ds)
    it2.load_state_dict(load_state(tmp_path / "it.npz"))
    assert [int(e["y"]) for e in it2] == rest
    assert sorted([int(e["y"]) for e in head] + rest) == list(range(10))


def test_bytes_round_trip_is_stable():
    s = {"a": [1, 2, (3, "x")]}
    assert state_from_bytes(state_to_bytes(s)) == s


# ---- tampered state files -----------------------------------------------------------------
@pytest.mark.parametrize(
    "kind",
    ["garbage", "pickle_entry", "bad_json", "missing_ref", "not_a_dict"],
)
def test_tampered_state_file_gives_a_clear_value_error(tmp_path, kind):
    path = tmp_path / "s.state"
    fmt = '{"format": "datapipe-state-1", "state": %s}'
    if kind == "garbage":
        path.write_bytes(b"hello, not an archive")
    elif kind == "pickle_entry":
        import pickle

        with zipfile.ZipFile(path, "w") as z:
            z.writestr("__json__.npy", pickle.dumps(_Evil()))
    elif kind == "bad_json":
        _write(path, __json__=np.array("{not json"))
    elif kind == "missing_ref":
        _write(path, __json__=np.array(fmt % '{"__dp__": "ndarray", "ref": "a7"}'))
    else:
        _write(path, __json__=np.array("[1, 2]"))
    with pytest.raises(ValueError) as info:
        load_state(path)
    assert "load_state" in str(info.value) and str(path) in str(info.value)


def test_good_state_file_still_loads(tmp_path):
    state = _advanced(dp.range(10).shuffle(4, seed=2), 2, 1)
    save_state(state, tmp_path / "ok.state")
    loaded = load_state(tmp_path / "ok.state")
    assert loaded["epoch"] == state["epoch"] and loaded["root"] == state["root"]
