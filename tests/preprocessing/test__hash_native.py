"""The compiled string hashes (``preprocessing/_hash_native.py``, the ``hashing`` extra)
agree bit for bit with the numpy code they replace, and the layers give the same outputs
on either path; without the bindings the numpy path runs (checked in every run)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import preprocessing as pp
from preprocessing import _hash, _hash_native


def _need(salt):
    if not _hash_native.available(salt):
        name = "pyfarmhash" if salt is None else "siphashc"
        pytest.skip(f"{name} is not installed (pip install datapipe-torch[hashing])")


def _random_strings() -> list:
    """Bytes of every length class of both hashes (FarmHash: 0, 1-3, 4-7, 8-16, 17-32,
    33-64, > 64 with 1-3 blocks; SipHash: every remainder mod 8), random text with
    non-ASCII code points, and the exact boundaries."""
    rng = np.random.default_rng(5)
    out: list = [b"", "", "a", "é", "🐍" * 17, "x" * 64, "x" * 65, "x" * 128, "x" * 129]
    for length in list(range(0, 70)) + [100, 127, 128, 129, 200, 255, 300]:
        for _ in range(3):
            out.append(rng.integers(0, 256, length).astype(np.uint8).tobytes())
    alphabet = list("abcxyz019 \n\x00") + ["é", "ß", "中", "🐍", "\u0301"]
    for _ in range(300):
        out.append("".join(rng.choice(alphabet, rng.integers(0, 90))))
    return out


SALTS = [None, (7, 7), (0, 0), (-1, 2**63), (2**64 - 1, 1), (2**70 + 5, -(2**63))]


@pytest.mark.parametrize("salt", SALTS)
def test_bindings_equal_the_numpy_hashes_bit_for_bit(salt):
    _need(salt)
    strings = _random_strings()
    native = _hash.hash_strings_numpy(strings, salt, backend="native")
    numpy_ = _hash.hash_strings_numpy(strings, salt, backend="numpy")
    assert native.dtype == numpy_.dtype == np.int64
    np.testing.assert_array_equal(native, numpy_)
    # A numpy U array (the numpy path's vectorised ASCII conversion) hashes the same.
    words = np.array(["cat", "dog", "", "a" * 70, "hello world"])
    np.testing.assert_array_equal(
        _hash.hash_strings_numpy(words, salt, backend="native"),
        _hash.hash_strings_numpy(words, salt, backend="numpy"),
    )


def test_the_bindings_compute_tensorflows_values():
    # Fingerprint64("") is FarmHash's k2 (0x9AE16A3B2F90404F); Keras's documented example:
    # Hashing(num_bins=3) of [["A"], ["B"], ["C"], ["D"], ["E"]] -> [1, 0, 1, 1, 2], and
    # with salt=[133, 137] -> [1, 2, 1, 0, 2] (keras.layers.Hashing's docstring).
    _need(None)
    _need((1, 1))
    assert _hash.hash_strings_numpy([""], None, backend="native").view(np.uint64)[0] == (
        0x9AE16A3B2F90404F
    )
    data = [["A"], ["B"], ["C"], ["D"], ["E"]]
    assert pp.Hashing(num_bins=3)(data).reshape(-1).tolist() == [1, 0, 1, 1, 2]
    assert pp.Hashing(num_bins=3, salt=[133, 137])(data).reshape(-1).tolist() == [1, 2, 1, 0, 2]


@pytest.mark.parametrize("salt", [None, 7, [1, 2**64 - 3]])
def test_layers_give_the_same_outputs_on_both_paths(salt):
    words = np.array(["plain", "emoji 🐍", "ß", "", "nul\x00byte", "x" * 100] * 5).reshape(10, 3)
    vocab = ["plain", "ß"]

    def outputs():
        return (
            pp.Hashing(num_bins=2**20, salt=salt)(words),
            pp.Hashing(num_bins=5, salt=salt, mask_value="ß")(words),
            pp.StringLookup(vocabulary=vocab, num_oov_indices=4, salt=salt)(words),
            pp.StringLookup(vocabulary=vocab, num_oov_indices=3, encoding="latin-1")(
                np.array([b"caf\xe9", b"plain", b"\xff\xfe"], dtype=object)
            ),
            pp.HashedCrossing(num_bins=97)((words[:, 0], np.arange(10))),
        )

    with _hash_native.disabled():
        assert not _hash_native.available(None)
        want = outputs()
    got = outputs()
    for a, b in zip(want, got):
        assert a.dtype == b.dtype == torch.int64
        assert torch.equal(a, b)


def test_values_the_bindings_refuse_fall_back_to_the_numpy_path():
    # An object array mixing ints and strings reaches HashedCrossing's string path: the
    # numpy code hashes str(value); the bindings raise TypeError, so the numpy path runs.
    mixed = np.array([1, "a", 22], dtype=object)
    with _hash_native.disabled():
        want = _hash.hash_strings_numpy(mixed, None)
    assert np.array_equal(_hash.hash_strings_numpy(mixed, None), want)
    assert np.array_equal(want, _hash.hash_strings_numpy(["1", "a", "22"], None, backend="numpy"))


def test_a_lone_surrogate_fails_on_both_paths():
    for backend in ("numpy", "auto"):
        with pytest.raises(UnicodeEncodeError):
            _hash.hash_strings_numpy(["ok", "\ud800"], None, backend=backend)


def test_native_backend_without_the_binding_says_what_to_install(monkeypatch):
    monkeypatch.setattr(_hash_native, "_bindings", lambda: (None, None))
    assert not _hash_native.available(None) and not _hash_native.available((1, 2))
    with pytest.raises(RuntimeError, match=r'pip install "datapipe-torch\[hashing\]"'):
        _hash.hash_strings_numpy(["a"], None, backend="native")
    # "auto" falls back to numpy: the same bits as before the bindings existed.
    assert _hash.hash_strings_numpy([""], None).view(np.uint64)[0] == 0x9AE16A3B2F90404F


def test_sip_key_packs_the_low_64_bits_of_each_salt_little_endian():
    assert _hash_native.sip_key((1, 2)) == (1).to_bytes(8, "little") + (2).to_bytes(8, "little")
    assert _hash_native.sip_key((-1, 2**64 + 3)) == b"\xff" * 8 + (3).to_bytes(8, "little")


def test_a_strided_column_of_strings_hashes_like_a_copy():
    # The numpy path viewed a U array's code points with .view(np.uint32), which fails on
    # a strided column (words[:, 0]): HashedCrossing and Hashing of a column raised
    # "To change to a dtype of a different size, the last axis must be contiguous".
    words = np.array([["cat", "x"], ["dog", "y"], ["", "z"]])
    column = words[:, 0]
    assert not column.flags.c_contiguous
    with _hash_native.disabled():
        assert (
            pp.Hashing(num_bins=1000)(column).tolist()
            == pp.Hashing(num_bins=1000)(column.copy()).tolist()
        )
        crossed = pp.HashedCrossing(num_bins=97)((column, np.arange(3)))
        assert torch.equal(crossed, pp.HashedCrossing(num_bins=97)((column.copy(), np.arange(3))))
