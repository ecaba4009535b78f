"""Hashing and HashedCrossing: bins past 2**62 exactly, bounds, and against Keras 3.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

from __future__ import annotations

import contextlib
import tracemalloc

import numpy as np
import pytest
import torch
from _layer_helpers import assert_same, keras_outcomes

import preprocessing as pp
from preprocessing import _hash


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: pp.Hashing(num_bins=0), "num_bins"),
        (lambda: pp.Hashing(num_bins=3, salt=[1, 2, 3]), "salt"),
    ],
)
def test_bad_arguments_name_the_argument(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("num_bins", [2**62 + 3, 2**64 // 3 + 1, 2**63 - 1])
def test_hashing_into_more_than_2_to_the_62_bins_is_exact(num_bins):
    # The unsigned remainder overflowed int64 past 2**62 bins: Hashing(num_bins=2**63 - 25)
    # returned negative bins; 2**64 // 3 + 1 bins, wrong ones half the time.
    words = ["a", "b", "cat", "é", "", "dog", "x" * 40, "🐍"]
    raw = _hash.hash_strings(words, None).tolist()
    want = [(h % 2**64) % num_bins for h in raw]
    assert pp.Hashing(num_bins=num_bins)(words).tolist() == want
    ints = torch.tensor([0, -1, 7, 2**62, -(2**63)])
    raw = _hash.hash_int64(ints, None).tolist()
    assert pp.Hashing(num_bins=num_bins)(ints).tolist() == [(h % 2**64) % num_bins for h in raw]


def test_hashing_refuses_bins_past_int64():
    with pytest.raises(ValueError, match=r"Hashing: num_bins must be an int in \[1, 2\*\*63 - 1\]"):
        pp.Hashing(num_bins=2**63)
    with pytest.raises(
        ValueError, match=r"HashedCrossing: num_bins must be an int in \[1, 2\*\*63"
    ):
        pp.HashedCrossing(num_bins=2**64)


@pytest.mark.parametrize("mode", ["int", "one_hot", "multi_hot", "count"])
@pytest.mark.parametrize("salt", [None, 133, [5, 6]])
@pytest.mark.parametrize("mask", [None, "", 0, "A"])
def test_hashing(ref, mode, salt, mask):
    inputs = [
        np.array([["A", "B"], ["", "héllo"], ["a" * 70, "x" * 33]]),
        np.array([[1, -5], [0, 123456789012]]),
        np.array([[1.7, -5.2], [0.0, 3.9]]),
    ]
    inputs = [x for x in inputs if mask is None or isinstance(mask, str) == (x.dtype.kind == "U")]
    for num_bins in (1, 3, 1000):
        kw = dict(num_bins=num_bins, mask_value=mask, salt=salt, output_mode=mode)
        theirs = ref(keras_outcomes, "Hashing", kw, inputs)["outcomes"]
        for x, expected in zip(inputs, theirs, strict=True):
            assert_same(expected, pp.Hashing(**kw)(x).numpy())


@pytest.mark.parametrize("mode", ["int", "one_hot"])
def test_hashed_crossing(ref, mode):
    pairs = [
        (np.array([1, 2, 3]), np.array(["A", "B", "C"])),
        (np.array([[1], [-2]]), np.array([[7], [8]])),
        (np.array(["x", "y"]), np.array(["y", "x"])),
        (np.array(5), np.array("q")),
        (np.array([1, 2]), np.array(["p", "q"]), np.array([9, 9])),
    ]
    for num_bins in (1, 5, 10**6):
        kw = dict(num_bins=num_bins, output_mode=mode)
        theirs = ref(keras_outcomes, "HashedCrossing", kw, pairs)["outcomes"]
        for features, expected in zip(pairs, theirs, strict=True):
            assert_same(expected, pp.HashedCrossing(**kw)(features).numpy())


@pytest.mark.parametrize("backend", ["native", "numpy"])
@pytest.mark.parametrize("salt, long_bytes", [(None, 200_000), ([5, 6], 20_000)])
def test_one_long_string_among_words_takes_bounded_memory(backend, salt, long_bytes):
    """Issue 35 item 8: one 200 kB string among 1,000 words took +800 MB on main (a list
    became a fixed-width ``U`` array: every word padded to the longest) on the compiled
    path, and 4.2 GB (or MemoryError) on the numpy path (a padded byte matrix, 8 bytes per
    byte for its words). Now strings stay Python objects and the numpy code groups them
    by length. SipHash runs 8-byte blocks one after another: its long string is 20 kB."""
    from preprocessing import _hash_native

    if backend == "native" and not _hash_native.available(salt):
        pytest.skip("the compiled binding (datapipe-torch[hashing]) is not installed")
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(1000)]
    words[500] = "".join(rng.choice(list("abcdefgh"), long_bytes).tolist())
    words[700] = "é" * 40 + words[500][:100]  # non-ASCII, over 64 bytes
    layer = pp.Hashing(num_bins=2**62 + 3, salt=salt)
    tracemalloc.start()
    try:
        if backend == "numpy":
            with _hash_native.disabled():
                got = layer(words)
        else:
            got = layer(words)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, peak  # main: ~800 MB (compiled), ~4.2 GB (numpy)
    assert got.dtype == torch.int64 and got.shape == (1000,)
    # The long strings hashed alone and the words without them (nothing padded to the
    # long width), by the other backend where it is installed.
    other = contextlib.nullcontext() if backend == "numpy" else _hash_native.disabled()
    short = [w for i, w in enumerate(words) if i not in (500, 700)]
    with other:
        alone = _hash.hash_strings(short, salt).tolist()
        for i in (500, 700):
            alone.insert(i, _hash.hash_strings([words[i]], salt).item())
    expected = [(h & (2**64 - 1)) % (2**62 + 3) for h in alone]
    assert got.tolist() == expected
