"""StringLookup and IntegerLookup: vocabularies (given, adapted, from a file, in the
buffers), invert, bounds, and every output mode against Keras 3.

Output dtypes differ on purpose in one place: the lookups' one/multi-hot and count
encodings are float32 here (Keras's declared floatx; its TF path returns int64).

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _layer_helpers import TRICKY, adapted_layers, assert_same, keras_outcomes, outcome, pp_dataset

import datapipe as dp
import preprocessing as pp

STRINGS = [
    np.array("a"),
    np.array(["a", "z", "b"]),
    np.array([["a", "b"], ["c", "a"]]),
    np.array([["a"], ["z"]]),
    np.array([["a", ""], ["", "quux"]]),
]
MODES = ["int", "one_hot", "multi_hot", "count", "tf_idf"]


ADAPT = np.array([["a", "b", "b"], ["c", "c", "c"], ["d", "a", "e"], ["e", "e", "x"]])


def _lookup_state(vocab: list[str]) -> dict:
    return {k: v.clone() for k, v in pp.StringLookup(vocabulary=vocab).state_dict().items()}


def test_vocabulary_buffers_load_into_a_fresh_layer():
    layer, x = adapted_layers()[0]
    fresh = pp.StringLookup(output_mode="tf_idf", num_oov_indices=2, max_tokens=9)
    fresh.load_state_dict(layer.state_dict())
    assert fresh.get_vocabulary() == layer.get_vocabulary()
    torch.testing.assert_close(fresh(x), layer(x))
    # The vocabulary in the buffers is the exact text, control characters included.
    assert set(layer.get_vocabulary(include_special_tokens=False)) <= set(TRICKY)
    assert "nul\x00byte" in fresh.get_vocabulary() and "new\nline" in fresh.get_vocabulary()
    text, _ = adapted_layers()[2]
    assert sorted(k for k in text.state_dict()) == [
        "lookup.idf_weights",
        "lookup.vocabulary_bytes",
        "lookup.vocabulary_ends",
    ]


def test_adapt_counts_and_orders_tokens():
    layer = pp.StringLookup()
    layer.adapt(np.array(["b", "a", "c", "a", "b", "a", "[UNK]"]))
    # By count, ties by token, descending; the OOV token is never learnt.
    assert layer.get_vocabulary() == ["[UNK]", "a", "b", "c"]
    layer = pp.IntegerLookup(max_tokens=3)
    layer.adapt([[4, 4, 9, 9, 1]])
    assert layer.get_vocabulary() == [-1, 9, 4]


def test_invert_round_trips_and_sparse_outputs():
    vocab = ["a", "b", "c"]
    lookup, inverse = (
        pp.StringLookup(vocabulary=vocab),
        pp.StringLookup(vocabulary=vocab, invert=True),
    )
    x = np.array([["c", "a"], ["zz", "b"]])
    assert inverse(lookup(x)).tolist() == [["c", "a"], ["[UNK]", "b"]]
    dense = pp.StringLookup(vocabulary=vocab, output_mode="count")(x)
    sparse = pp.StringLookup(vocabulary=vocab, output_mode="count", sparse=True)(x)
    assert sparse.is_sparse and torch.equal(sparse.to_dense(), dense)
    assert dense.tolist() == [[0.0, 1.0, 0.0, 1.0], [1.0, 0.0, 1.0, 0.0]]


def test_integer_lookup_matches_a_dictionary_on_a_large_vocabulary():
    rng = np.random.default_rng(1)
    vocab = rng.choice(10**9, size=5000, replace=False) - 5 * 10**8
    layer = pp.IntegerLookup(vocabulary=vocab.tolist())
    queries = np.concatenate([vocab[:2000], rng.integers(-(10**9), 10**9, 2000)])
    index = {v: i + 1 for i, v in enumerate(vocab.tolist())}
    expected = [index.get(q, 0) for q in queries.tolist()]
    assert layer(torch.from_numpy(queries)).tolist() == expected


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: pp.StringLookup(vocabulary=["a", "a"]), "repeated"),
        (lambda: pp.StringLookup(vocabulary=["a", ""], mask_token=""), "mask token"),
        (lambda: pp.StringLookup(max_tokens=3, vocabulary=["a", "b", "c"]), "more than max_tokens"),
        (lambda: pp.StringLookup(output_mode="tf_idf", vocabulary=["a"]), "idf_weights"),
        (lambda: pp.StringLookup(invert=True, output_mode="count"), "invert"),
        (lambda: pp.StringLookup(pad_to_max_tokens=True), "max_tokens"),
        (lambda: pp.StringLookup(vocabulary="/no/such/vocab.txt"), "does not exist"),
        (lambda: pp.IntegerLookup(salt=3), "farmhash"),
        (lambda: pp.IntegerLookup(vocabulary_dtype="int32"), "int64"),
    ],
)
def test_bad_arguments_name_the_argument(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_vocabulary_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("earth\nwind\nfire\n", encoding="utf-8")
    layer = pp.StringLookup(vocabulary=str(path))
    assert layer.get_vocabulary() == ["[UNK]", "earth", "wind", "fire"]
    # The config keeps the tokens, not the path: the file may be gone when it is loaded.
    path.unlink()
    again = pp.layer_from_config(pp.serialize_layer(layer))
    assert again(["fire", "air"]).tolist() == [3, 0]


@pytest.mark.parametrize(
    "make, data",
    [
        (pp.StringLookup, np.array([], dtype=str)),
        (pp.StringLookup, np.zeros((0, 3), dtype=str)),
        (pp.StringLookup, []),
        (pp.IntegerLookup, np.zeros((0,), np.int64)),
        (pp.IntegerLookup, torch.zeros(0, 2, dtype=torch.int64)),
        (pp.TextVectorization, []),
        (pp.TextVectorization, np.array([], dtype=str)),
    ],
)
def test_adapt_on_empty_data_keeps_the_vocabulary_like_an_empty_dataset(make, data):
    # An empty array failed in numpy's reshape, an empty list on its float64 dtype; an
    # empty Dataset already left the vocabulary as it was (Keras's rule).
    layer = make()
    before = layer.get_vocabulary()
    layer.adapt(data)
    assert layer.get_vocabulary() == before
    layer.adapt(
        dp.from_tensor_slices(np.array([], dtype=np.int64 if make is pp.IntegerLookup else str))
    )
    assert layer.get_vocabulary() == before


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("mask", [None, ""])
@pytest.mark.parametrize("num_oov", [0, 1, 3])
def test_string_lookup_given_vocabulary(ref, mode, mask, num_oov):
    for salt in (None, 7):
        kw = dict(
            vocabulary=["a", "b", "c"],
            output_mode=mode,
            mask_token=mask,
            num_oov_indices=num_oov,
            salt=salt,
        )
        if mode == "tf_idf":
            kw["idf_weights"] = [0.5, 1.0, 2.0]
        ours, theirs = pp.StringLookup(**kw), ref(keras_outcomes, "StringLookup", kw, STRINGS)
        assert ours.get_vocabulary() == theirs["vocabulary"]
        for x, expected in zip(STRINGS, theirs["outcomes"], strict=True):
            assert_same(expected, outcome(ours, x))


@pytest.mark.parametrize("mode", ["int", "multi_hot", "tf_idf"])
@pytest.mark.parametrize("max_tokens,pad", [(None, False), (4, False), (4, True), (9, True)])
def test_string_lookup_adapt(ref, mode, max_tokens, pad):
    kw = dict(output_mode=mode, max_tokens=max_tokens, pad_to_max_tokens=pad)
    ours = pp.StringLookup(**kw)
    ours.adapt(ADAPT)
    theirs = ref(keras_outcomes, "StringLookup", kw, [ADAPT], ADAPT)
    assert ours.get_vocabulary() == theirs["vocabulary"]
    assert_same(theirs["outcomes"][0], ours(ADAPT).numpy())
    if mode == "tf_idf":
        np.testing.assert_allclose(ours.idf_weights.numpy(), theirs["idf_weights"], rtol=1e-6)


def test_string_lookup_adapt_streams_like_keras_over_batches(ref):
    rows = np.array([f"t{i % 7}" for i in range(60)]).reshape(20, 3)
    kw = dict(output_mode="tf_idf")
    theirs = ref(keras_outcomes, "StringLookup", kw, [], rows, 4)
    ours = pp.StringLookup(**kw)
    ours.adapt(pp_dataset(rows).batch(4), progress=False)
    assert ours.get_vocabulary() == theirs["vocabulary"]
    np.testing.assert_allclose(ours.idf_weights.numpy(), theirs["idf_weights"])


@pytest.mark.parametrize("mode", ["int", "one_hot", "multi_hot", "tf_idf"])
@pytest.mark.parametrize("mask", [None, 0])
@pytest.mark.parametrize(
    "num_oov,method,salt",
    [
        (0, "floormod", None),
        (1, "floormod", None),
        (3, "floormod", None),
        (3, "farmhash", None),
        (3, "farmhash", [3, 4]),
    ],
)
def test_integer_lookup(ref, mode, mask, num_oov, method, salt):
    kw = dict(
        vocabulary=[10, 20, 30],
        output_mode=mode,
        mask_token=mask,
        num_oov_indices=num_oov,
        oov_method=method,
        salt=salt,
    )
    if mode == "tf_idf":
        kw["idf_weights"] = [0.5, 1.0, 2.0]
    inputs = [np.array([10, -7, 31, 30, 8]), np.array([[10, 20], [0, 5]]), np.array(20)]
    ours, theirs = pp.IntegerLookup(**kw), ref(keras_outcomes, "IntegerLookup", kw, inputs)
    for x, expected in zip(inputs, theirs["outcomes"], strict=True):
        assert_same(expected, outcome(ours, torch.from_numpy(x)))


@pytest.mark.parametrize("mask", [None, 0])
def test_lookups_invert(ref, mask):
    idx = np.array([0, 1, 2, 3, 4, 5, -1])
    kw = dict(vocabulary=[10, 20, 30], invert=True, mask_token=mask)
    theirs = ref(keras_outcomes, "IntegerLookup", kw, [idx])["outcomes"][0]
    np.testing.assert_array_equal(pp.IntegerLookup(**kw)(idx).numpy(), theirs)
    kw = dict(vocabulary=["a", "b"], invert=True, mask_token=None if mask is None else "")
    theirs = ref(keras_outcomes, "StringLookup", kw, [idx])["outcomes"][0]
    assert pp.StringLookup(**kw)(idx).tolist() == [t.decode() for t in theirs.tolist()]


def test_integer_lookup_adapt(ref):
    data = np.array([[5, 5, 7], [7, 7, 9], [1, 1, 1], [-1, 5, 2]])
    for kw in (dict(), dict(max_tokens=4), dict(mask_token=1, output_mode="count")):
        ours = pp.IntegerLookup(**kw)
        ours.adapt(data)
        theirs = ref(keras_outcomes, "IntegerLookup", kw, [data], data)
        assert ours.get_vocabulary() == theirs["vocabulary"]
        assert_same(theirs["outcomes"][0], ours(torch.from_numpy(data)).numpy())


def test_lookups_refuse_a_vocabulary_over_max_tokens():
    ten = _lookup_state([f"t{i}" for i in range(10)])
    small = pp.StringLookup(max_tokens=4)
    with pytest.raises(ValueError, match="StringLookup: vocabulary has 11 entries, more than "
                       "max_tokens; got 4"):  # fmt: skip
        small.load_state_dict(ten)
    assert small.get_vocabulary() == ["[UNK]"]
    text = pp.TextVectorization()
    text.adapt(["a b c d e f g h i j k"])
    assert text.vocabulary_size() == 13
    with pytest.raises(ValueError, match="13 entries, more than max_tokens; got 5"):
        pp.TextVectorization(max_tokens=5).load_state_dict(text.state_dict())
    ints = pp.IntegerLookup(vocabulary=list(range(20)))
    with pytest.raises(ValueError, match="IntegerLookup: vocabulary has 21 entries"):
        pp.IntegerLookup(max_tokens=8).load_state_dict(ints.state_dict())
    # within max_tokens it loads, and the layer is the source's
    ok = pp.StringLookup(max_tokens=11)
    ok.load_state_dict(ten)
    assert ok(["t3", "zz"]).tolist() == [4, 0]


@pytest.mark.parametrize(
    "ends, why",
    [
        ([2, 1, 4], "decreasing"),
        ([2, 4, 100], "past the bytes"),
        ([-2, 4, 6], "negative"),
    ],
)
def test_string_lookup_refuses_vocabulary_ends_that_do_not_index_the_bytes(ends, why):
    sd = _lookup_state(["aa", "bb", "cc"])
    sd["vocabulary_ends"] = torch.tensor(ends, dtype=torch.int64)
    layer = pp.StringLookup(vocabulary=["x"])
    with pytest.raises(ValueError, match=r"vocabulary_ends'\] must be non-negative, "
                       r"non-decreasing end offsets within the 6 vocabulary bytes"):  # fmt: skip
        layer.load_state_dict(sd)
    assert layer.get_vocabulary() == ["[UNK]", "x"], why


def test_lookups_refuse_non_utf8_bytes_repeats_and_bad_idf_weights():
    sd = _lookup_state(["aa", "bb"])
    sd["vocabulary_bytes"] = torch.tensor([0xFF, 0xFE, 98, 98], dtype=torch.uint8)
    with pytest.raises(ValueError, match=r"vocabulary_bytes'\] must be UTF-8 text"):
        pp.StringLookup().load_state_dict(sd)
    sd = _lookup_state(["aa", "bb"])
    sd["vocabulary_bytes"] = torch.tensor([97, 97, 97, 97], dtype=torch.uint8)
    with pytest.raises(ValueError, match="has repeated tokens"):
        pp.StringLookup().load_state_dict(sd)
    tfidf = pp.StringLookup(vocabulary=["a", "b"], idf_weights=[0.5, 0.25], output_mode="tf_idf")
    sd = {k: v.clone() for k, v in tfidf.state_dict().items()}
    sd["idf_weights"][1] = float("nan")
    with pytest.raises(ValueError, match=r"idf_weights'\] must be finite"):
        pp.StringLookup(output_mode="tf_idf").load_state_dict(sd)
    sd["idf_weights"] = torch.ones(7)
    with pytest.raises(ValueError, match=r"idf_weights'\] must be 1-D with 3 entries"):
        pp.StringLookup(output_mode="tf_idf").load_state_dict(sd)
