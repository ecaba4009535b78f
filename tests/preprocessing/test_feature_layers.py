"""The feature layers: state round-trips, adapt from a pipeline, use inside Dataset.map,
argument and input errors, the hashes (no TensorFlow needed here; the Keras differential
tests are in test_keras_differential_features.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp
from preprocessing import _hash

TRICKY = ["plain", "new\nline", "tab\there", "nul\x00byte", "emoji 🐍", "ß", "  ", "[UNK]x"]


def rebuilt(layer):
    """What a saved model gets back: a layer from its JSON config, then its state_dict."""
    config = json.loads(json.dumps(pp.serialize_layer(layer)))
    other = pp.layer_from_config(config)
    other.load_state_dict(layer.state_dict())
    return other


def adapted_layers():
    rng = np.random.default_rng(0)
    words = np.array(TRICKY * 3 + ["plain", "ß"]).reshape(-1, 1)
    string = pp.StringLookup(output_mode="tf_idf", num_oov_indices=2, max_tokens=9)
    string.adapt(words)
    integer = pp.IntegerLookup(mask_token=0, output_mode="count")
    integer.adapt(rng.integers(0, 30, size=(50, 4)))
    text = pp.TextVectorization(ngrams=2, output_mode="int", output_sequence_length=6)
    text.adapt(["The cat sat.", "the dog, the cat!", "Ünïcode\nlines"])
    bins = pp.Discretization(num_bins=5, output_mode="one_hot")
    bins.adapt(rng.normal(size=(300, 2)))
    norm = pp.Normalization()
    norm.adapt(rng.normal(size=(40, 3)))
    return [
        (string, np.array([["plain", "emoji 🐍"], ["nul\x00byte", "unseen"]])),
        (integer, torch.tensor([[0, 1, 2, 99], [5, 5, 5, 7]])),
        (text, np.array(["the cat and the dog", "unseen words"])),
        (bins, torch.tensor([[-2.0, 0.1], [0.0, 3.0]])),
        (norm, torch.tensor([[1.0, 2.0, 3.0]])),
        (pp.Hashing(num_bins=7, salt=3, output_mode="count"), np.array([["a", "b", "a"]])),
        (pp.HashedCrossing(num_bins=9, output_mode="one_hot"), (np.array(["x"]), np.array([4]))),
        (pp.CategoryEncoding(num_tokens=5, output_mode="one_hot"), torch.tensor([4, 0])),
        (pp.MelSpectrogram(fft_length=32, sequence_stride=8, num_mel_bins=4), torch.ones(40)),
        (pp.STFTSpectrogram(mode="psd", frame_length=8), torch.ones(1, 2, 20)),
    ]


def test_round_trip_cases_cover_every_feature_layer():
    # test_config.py's hypothesis strategies cover the image layers; these cases the rest.
    names = {type(layer).__name__ for layer, _ in adapted_layers()}
    assert names == {
        "CategoryEncoding",
        "Discretization",
        "HashedCrossing",
        "Hashing",
        "IntegerLookup",
        "MelSpectrogram",
        "Normalization",
        "STFTSpectrogram",
        "StringLookup",
        "TextVectorization",
    }


@pytest.mark.parametrize("index", range(10))
def test_config_plus_state_dict_round_trip_exactly(index):
    layer, x = adapted_layers()[index]
    other = rebuilt(layer)
    torch.testing.assert_close(other(x), layer(x), rtol=0, atol=0)
    assert other.get_config() == layer.get_config()
    for key, value in layer.state_dict().items():
        assert torch.equal(other.state_dict()[key], value), key


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


def test_adapt_streams_over_a_dataset_of_feature_label_pairs():
    texts = np.array(["a b", "b c", "c c c", "d"] * 5)
    labels = np.arange(20)
    ds = dp.Dataset.from_tensor_slices((texts, labels)).batch(3)
    layer = pp.TextVectorization()
    layer.adapt(ds, steps=1, progress=False)  # the first 3 texts only: no "d"
    assert layer.get_vocabulary() == ["", "[UNK]", "c", "b", "a"]
    norm = pp.Normalization()
    rows = np.arange(12, dtype=np.float64).reshape(6, 2)
    norm.adapt(dp.Dataset.from_tensor_slices((rows, labels[:6])).batch(4), progress=False)
    np.testing.assert_allclose(norm.mean.reshape(-1).numpy(), rows.mean(0))
    np.testing.assert_allclose(norm.variance.reshape(-1).numpy(), rows.var(0))


def test_string_layers_inside_dataset_map_and_bucketing():
    texts = ["a b c d e f", "a", "b c", "a a a a a a a a", "c", "d e"]
    vec = pp.TextVectorization(vocabulary=["a", "b", "c", "d"], ragged=True)
    ds = (
        dp.Dataset.from_tensor_slices(np.array(texts))
        .map(vec, num_parallel_calls=2)
        .bucket_by_sequence_length(lambda t: len(t), [3], [2, 2])
    )
    # Ids: "" 0, [UNK] 1, a 2, b 3, c 4, d 5; rows shorter than 3 in one bucket.
    assert [np.asarray(b).tolist() for b in ds] == [
        [[2, 0], [3, 4]],
        [[2, 3, 4, 5, 1, 1, 0, 0], [2] * 8],
        [[4, 0], [5, 1]],
    ]
    lookup = pp.StringLookup(vocabulary=["x", "y"])
    hashed = pp.Hashing(num_bins=5)
    ds = dp.Dataset.from_tensor_slices(np.array(["x", "q", "y"])).map(
        lambda s: (lookup(s), hashed(s))
    )
    got = [(int(a), int(b)) for a, b in ds]
    assert [a for a, _ in got] == [1, 0, 2]
    assert [b for _, b in got] == pp.Hashing(num_bins=5)(["x", "q", "y"]).tolist()


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


def test_text_vectorization_standardize_split_and_ngrams():
    layer = pp.TextVectorization(ngrams=(1, 2), split="whitespace")
    # ASCII-only lowering (tf.strings.lower), Keras's punctuation, ASCII whitespace only.
    assert layer.tokenize("Hello, ÄB\u00a0x!  y") == [
        "hello",
        "Äb\u00a0x",
        "y",
        "hello Äb\u00a0x",
        "Äb\u00a0x y",
    ]
    chars = pp.TextVectorization(split="character", standardize=None)
    assert chars.tokenize("añ b") == ["a", "ñ", " ", "b"]
    custom = pp.TextVectorization(standardize=str.upper, split=lambda s: s.split("-"))
    assert custom.tokenize("a-b") == ["A", "B"]
    with pytest.raises(ValueError, match="callable standardize/split"):
        custom.get_config()
    assert "standardize='upper'" in repr(custom)


def test_hashes_known_values_without_tensorflow():
    # Keras's documented examples (hashing.py docstring).
    assert pp.Hashing(num_bins=3)(["A", "B", "C", "D", "E"]).tolist() == [1, 0, 1, 1, 2]
    masked = pp.Hashing(num_bins=3, mask_value="")(["A", "B", "", "C", "D"])
    assert masked.tolist() == [1, 1, 0, 2, 2]
    assert pp.Hashing(num_bins=3, salt=[133, 137])(["A", "B", "C", "D", "E"]).tolist() == [
        1,
        2,
        1,
        0,
        2,
    ]
    # Integers hash as their decimal strings (bytes and str are the same string).
    ints = pp.Hashing(num_bins=1000)(torch.tensor([-12, 0, 2**63 - 1]))
    assert ints.tolist() == pp.Hashing(num_bins=1000)([b"-12", "0", str(2**63 - 1)]).tolist()
    b, n = _hash.int64_to_decimal(torch.tensor([-(2**63), 7, -40]))
    assert [bytes(b[i, : n[i]].numpy()).decode() for i in range(3)] == [str(-(2**63)), "7", "-40"]
    # uint64 modulo of negative int64 bit patterns.
    h = torch.tensor([-1, -(2**63), 5])
    assert _hash.unsigned_mod(h, 1000).tolist() == [(2**64 - 1) % 1000, 2**63 % 1000, 5]


def test_discretization_and_encoding_values():
    layer = pp.Discretization(bin_boundaries=[0.0, 1.0])
    assert layer(torch.tensor([-0.5, 0.0, 0.99, 1.0, 7.0])).tolist() == [0, 1, 1, 2, 2]
    assert layer(torch.tensor([0.5])).dtype == torch.int32
    enc = pp.CategoryEncoding(num_tokens=3, output_mode="count")
    assert enc(
        torch.tensor([[0, 2, 2]]), count_weights=torch.tensor([[0.5, 1.0, 2.0]])
    ).tolist() == [[0.5, 0.0, 3.0]]
    # An adapted config holds num_bins and the learnt boundaries; the boundaries win.
    adapted = pp.Discretization(num_bins=3)
    adapted.adapt(np.arange(100.0))
    config = adapted.get_config()
    assert config["num_bins"] == 3 and len(config["bin_boundaries"]) == 2
    assert pp.Discretization.from_config(config).bin_boundaries.tolist() == config["bin_boundaries"]


def test_normalization_tabular_keeps_image_rules():
    norm = pp.Normalization(mean=[1.0, 10.0], variance=[4.0, 0.0])
    # Zero variance: centred only (issue 11's rule) on tables too.
    assert norm(torch.tensor([[3.0, 15.0]])).tolist() == [[1.0, 5.0]]
    assert norm(np.array([5.0, 10.0], dtype=np.float32)).tolist() == [2.0, 0.0]
    with pytest.raises(ValueError, match="2 entries but the input has 3 features"):
        norm(torch.ones(4, 3))
    with pytest.raises(ValueError, match="tabular"):
        pp.Normalization(axis=-2, mean=1.0, variance=1.0)(torch.ones(2, 3))
    # An image still normalises per channel.
    image = torch.stack([torch.full((2, 2), 3.0), torch.full((2, 2), 20.0)])
    assert norm(image)[:, 0, 0].tolist() == [1.0, 10.0]


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
        (lambda: pp.Hashing(num_bins=0), "num_bins"),
        (lambda: pp.Hashing(num_bins=3, salt=[1, 2, 3]), "salt"),
        (lambda: pp.CategoryEncoding(), "num_tokens"),
        (lambda: pp.Discretization(), "exactly one"),
        (lambda: pp.Discretization(bin_boundaries=[2.0, 1.0]), "sorted"),
        (
            lambda: pp.TextVectorization(output_mode="count", output_sequence_length=3),
            "output_sequence_length",
        ),
        (lambda: pp.TextVectorization(split=None, ngrams=2), "ngrams"),
        (lambda: pp.MelSpectrogram(fft_length=64, sequence_length=128), "fft_length"),
        (lambda: pp.STFTSpectrogram(window="blackman"), "window"),
        (lambda: pp.STFTSpectrogram(frame_length=8, frame_step=9), "frame_step"),
    ],
)
def test_bad_arguments_name_the_argument(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="num_oov_indices=0"):
        pp.StringLookup(vocabulary=["a"], num_oov_indices=0)(["a", "b"])
    with pytest.raises(ValueError, match=r"found \[99\]"):
        pp.IntegerLookup(vocabulary=[1], num_oov_indices=0)(torch.tensor([1, 99]))
    with pytest.raises(ValueError, match=r"must lie in \[0, 3\); got \[3, -1\]"):
        pp.CategoryEncoding(num_tokens=3)(torch.tensor([0, 3, -1]))
    with pytest.raises(ValueError, match="no vocabulary"):
        pp.StringLookup(output_mode="multi_hot")(["a"])
    with pytest.raises(ValueError, match="no bin boundaries"):
        pp.Discretization(num_bins=3)(torch.ones(2))
    with pytest.raises(ValueError, match="must be strings"):
        pp.StringLookup(vocabulary=["a"])(torch.ones(2))
    with pytest.raises(ValueError, match="at least two"):
        pp.HashedCrossing(num_bins=3)((torch.ones(2, dtype=torch.int64),))
    with pytest.raises(ValueError, match="built with a vocabulary"):
        pp.StringLookup(vocabulary=["a"]).adapt(["a"])
    with pytest.raises(ValueError, match="no values"):
        pp.Discretization(num_bins=2).adapt(np.zeros((0, 2)))
    with pytest.raises(ValueError, match=r"\(batch,\) or \(batch, 1\)"):
        pp.TextVectorization()(np.array([["a", "b"]]))


def test_vocabulary_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("earth\nwind\nfire\n", encoding="utf-8")
    layer = pp.StringLookup(vocabulary=str(path))
    assert layer.get_vocabulary() == ["[UNK]", "earth", "wind", "fire"]
    # The config keeps the tokens, not the path: the file may be gone when it is loaded.
    path.unlink()
    again = pp.layer_from_config(pp.serialize_layer(layer))
    assert again(["fire", "air"]).tolist() == [3, 0]


# ------------------------------------------------------------------ review (issue 16)
def test_multi_hot_of_empty_input_is_zeros():
    # amax over an empty axis failed: a batch of 0 rows, or rows of 0 tokens.
    encode = pp.CategoryEncoding(num_tokens=4, output_mode="multi_hot")
    assert encode(torch.zeros(0, 3, dtype=torch.int64)).shape == (0, 4)
    assert encode(torch.zeros(2, 0, dtype=torch.int64)).tolist() == [[0.0] * 4] * 2
    assert encode(torch.zeros(0, dtype=torch.int64)).tolist() == [0.0] * 4
    lookup = pp.StringLookup(vocabulary=["a", "b"], output_mode="multi_hot")
    assert lookup(np.zeros((0, 2), dtype=str)).shape == (0, 3)
    assert pp.Hashing(num_bins=3, output_mode="multi_hot")(np.zeros((0, 2), str)).shape == (0, 3)


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


def test_spectrograms_take_empty_batches_and_name_short_signals():
    mel = pp.MelSpectrogram(
        fft_length=64, sequence_stride=16, sequence_length=64, num_mel_bins=16, sampling_rate=8000
    )
    # A batch of 0 signals failed in the FFT library ("DFTI ERROR") or in amax.
    full = mel(torch.rand(2, 1000))
    assert full.shape == (2, 16, 63)
    empty = mel(torch.rand(0, 1000))
    assert empty.shape == (0, 16, 63) and empty.dtype == torch.float32
    stft = pp.STFTSpectrogram(frame_length=64, frame_step=16)
    assert stft(torch.rand(0, 1, 1000)).shape == (0, 33, 59)
    # A signal shorter than one frame failed inside conv1d, naming no layer.
    with pytest.raises(ValueError, match=r"STFTSpectrogram: input .*at least frame_length=64"):
        stft(torch.rand(2, 1, 10))
    assert pp.STFTSpectrogram(frame_length=64, padding="same")(torch.rand(2, 1, 10)).shape == (
        2,
        33,
        1,
    )


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


def test_bytes_that_are_not_utf8():
    # Hashing hashes raw bytes (as Keras), but a mask_value made it decode them and fail
    # with a bare UnicodeDecodeError; the lookups failed the same way, naming nothing.
    raw = np.array([b"\xff", b"a", b"b"])
    masked = pp.Hashing(num_bins=5, mask_value="a")(raw)
    plain = pp.Hashing(num_bins=4)(np.array([b"\xff", b"b"]))
    assert masked.tolist() == [plain[0] + 1, 0, plain[1] + 1]
    with pytest.raises(ValueError, match=r"StringLookup: input .*not valid utf-8.*b'\\xff'"):
        pp.StringLookup(vocabulary=["a"])(raw)
    with pytest.raises(ValueError, match=r"StringLookup: adapt data .*not valid utf-8"):
        pp.StringLookup().adapt(raw)
    with pytest.raises(ValueError, match=r"TextVectorization: input .*not valid utf-8"):
        pp.TextVectorization(vocabulary=["a"])(raw)
