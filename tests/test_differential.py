"""tests/differential.py: golden values come back as they went in, and a golden computed for
other inputs is reported stale instead of compared."""

from __future__ import annotations

import json
from types import SimpleNamespace

import differential
import numpy as np
import pytest
import torch
from differential import Reference, decode, encode, fingerprint


@pytest.mark.parametrize(
    "value",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.arange(200, dtype=np.int64).reshape(10, 20),  # long: compressed
        np.array([[1, 2], [3, 4]], np.uint8),  # short: as numbers
        np.array(3.5),
        np.zeros((2, 0), np.float64),
        np.arange(6.0).reshape(2, 3).T,  # not contiguous
        np.array(["a", "bc"]),
        np.array([b"x", b"yz"]),
        np.float32(2.5),
        np.float64([np.nan, np.inf, -0.0]),
    ],
    ids=lambda v: f"{type(v).__name__}-{getattr(v, 'dtype', '')}-{getattr(v, 'shape', '')}",
)
def test_arrays_keep_dtype_shape_and_bits(value):
    back = decode(json.loads(json.dumps(encode(value))))
    assert type(back) is type(value)
    assert back.dtype == value.dtype and back.shape == value.shape
    assert np.asarray(back).tobytes() == np.asarray(value).tobytes()


def test_structures_tensors_bytes_and_vocabularies_round_trip():
    value = (1, b"\x00q", {"a": [None, 2.0, "s"], (1, 2): True}, [f"t{i}" for i in range(70)])
    assert decode(json.loads(json.dumps(encode(value)))) == value
    t = decode(json.loads(json.dumps(encode(torch.arange(4, dtype=torch.int16)))))
    assert isinstance(t, torch.Tensor) and t.dtype == torch.int16 and t.tolist() == [0, 1, 2, 3]
    assert decode(encode(np.str_("x"))) == "x" and type(decode(encode(np.str_("x")))) is str
    with pytest.raises(TypeError, match="cannot store a object in a golden file"):
        encode(object())


def _same(a, b):
    return differential._same_fingerprint(fingerprint(a), json.loads(json.dumps(fingerprint(b))))


def test_fingerprints_allow_ulps_but_not_changes():
    x = np.random.default_rng(0).random((4, 5)).astype(np.float32)
    ulp = np.nextafter(x, np.float32(2))  # every value one ulp up (another CPU's rounding)
    assert _same([x, {"k": 1}], [ulp, {"k": 1}])
    assert not _same(x, x * 1.001)  # a real change of the values
    assert not _same(x, x[::-1])  # the same values in another order
    assert not _same(x, x.reshape(5, 4))
    assert not _same(x, x.astype(np.float64))
    assert not _same([x, {"k": 1}], [x, {"k": 2}])
    assert not _same(np.array(["a", "b"]), np.array(["a", "c"]))


def _reference(tmp_path, monkeypatch, live, name="test_x[golden-a]"):
    monkeypatch.setattr(differential, "GOLDENS", tmp_path)
    monkeypatch.setattr(differential, "_loaded", {})
    request = SimpleNamespace(node=SimpleNamespace(path=tmp_path / "test_mod.py", name=name))
    return Reference(request, live=live)


def double(x):
    return x * 2


def test_golden_reads_what_live_wrote_and_reports_stale_inputs(tmp_path, monkeypatch):
    monkeypatch.setattr(differential, "WRITE", True)
    monkeypatch.setattr(differential, "_written", {})
    live = _reference(tmp_path, monkeypatch, live=True, name="test_x[live-a]")
    x = np.arange(5.0)
    assert live(double, x).tolist() == [0, 2, 4, 6, 8]
    assert differential.write_goldens() == [tmp_path / "test_mod.json"]
    golden = _reference(tmp_path, monkeypatch, live=False)  # [golden-a]: the same key
    assert golden.test == live.test == "test_x[a]"
    assert golden(double, x).tolist() == [0, 2, 4, 6, 8]
    stale = _reference(tmp_path, monkeypatch, live=False)
    with pytest.raises(pytest.fail.Exception, match="the inputs of 'test_x\\[a\\]#1' differ"):
        stale(double, x + 1)
    missing = _reference(tmp_path, monkeypatch, live=False)
    missing(double, x)
    with pytest.raises(pytest.fail.Exception, match="has no entry 'test_x\\[a\\]#2'"):
        missing(double, x)


# ---- no bit-exact float comparisons in differential tests (issue 33 item 7) ----------------
EXACT_FLOAT_CALLS = [
    lambda a, b: np.testing.assert_array_equal(a, b),
    lambda a, b: np.testing.assert_equal(a, b),
    lambda a, b: np.array_equal(a, b),
    lambda a, b: torch.equal(torch.from_numpy(a), torch.from_numpy(b)),
]


EXACT_IDS = ["assert_array_equal", "assert_equal", "array_equal", "torch.equal"]


@pytest.mark.parametrize("call", EXACT_FLOAT_CALLS, ids=EXACT_IDS)
def test_a_golden_test_comparing_floats_bit_for_bit_fails(ref, call):
    # ``ref`` is what marks a differential test: while it is active, a float comparison
    # from test code fails, naming the bounded comparison to use.
    a = np.float32([1.0, 2.0])
    with pytest.raises(pytest.fail.Exception, match="floats in a differential test"):
        call(a, a.copy())
    # Integers stay exact; so does a float comparison made by library code (not tests/).
    call(np.int64([1, 2]), np.int64([1, 2]))
    library = compile("same = np.array_equal(a, a.copy())", "/site-packages/lib.py", "exec")
    scope = {"np": np, "a": a}
    exec(library, scope)
    assert scope["same"] is True


def test_outside_golden_tests_float_comparisons_are_untouched():
    a = np.float32([1.0, 2.0])
    np.testing.assert_array_equal(a, a.copy())
    assert torch.equal(torch.from_numpy(a), torch.from_numpy(a.copy()))


def test_golden_test_modules_compare_through_the_guarded_names():
    # ``from numpy.testing import assert_array_equal`` (or ``from torch import equal``)
    # binds the function before the guard patches it: a module with ``ref`` tests must
    # reach the exact comparisons through their modules.
    import ast
    from pathlib import Path

    names = {name for _, name in differential.EXACT_COMPARISONS}
    offenders = []
    for path in Path(differential.GOLDENS.parent).rglob("test_*.py"):
        tree = ast.parse(path.read_text())
        uses_ref = any(
            isinstance(node, ast.FunctionDef) and any(a.arg == "ref" for a in node.args.args)
            for node in ast.walk(tree)
        )
        for node in ast.walk(tree):
            if uses_ref and isinstance(node, ast.ImportFrom) and node.module in (
                "numpy", "numpy.testing", "torch"
            ):  # fmt: skip
                offenders += [f"{path.name}: {a.name}" for a in node.names if a.name in names]
    assert offenders == []
