"""Keras 3's ``index_lookup_test.py`` (keras/src/layers/preprocessing/), translated.

Keras tests its private ``IndexLookup`` base with ``vocabulary_dtype="string"`` or
``"int64"``; its public faces are ``StringLookup`` and ``IntegerLookup``, and so are ours:
each case runs on the one of the two its vocabulary dtype names (``oov_method`` is an
``IntegerLookup`` argument, as in Keras's public layers).
"""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_values

STRING = {"max_tokens": 7, "num_oov_indices": 1, "mask_token": "", "oov_token": "[OOV]"}
INTEGER = {"max_tokens": 7, "num_oov_indices": 1, "mask_token": 0, "oov_token": -1}


def _round_trip(layer):
    config = layer.get_config()
    again = type(layer).from_config(config)
    assert again.get_config() == config
    return again


def _basics(cls, kwargs, adapt_data, vocabulary, specials, input_data, expected):
    layers = []
    adapted = cls(**kwargs)
    adapted.adapt(adapt_data)
    layers.append(adapted)
    layers.append(cls(vocabulary=vocabulary, **kwargs))
    layers.append(cls(vocabulary=specials + vocabulary, **kwargs))
    for given in (vocabulary, specials + vocabulary):
        layer = cls(**kwargs)
        layer.set_vocabulary(given)
        layers.append(layer)
    for layer in layers:
        assert layer.get_vocabulary() == specials + vocabulary
        assert layer.get_vocabulary(include_special_tokens=False) == vocabulary
        assert layer(input_data).tolist() == expected
        assert layer(np.array(input_data)).tolist() == expected
        assert _round_trip(layer)(input_data).tolist() == expected


def test_basics_string_vocab():
    """index_lookup_test.py::test_basics_string_vocab: adapt, a fixed vocabulary with and
    without the special tokens, set_vocabulary both ways; lists and arrays; round trip."""
    _basics(
        pp.StringLookup,
        STRING,
        ["one", "one", "one", "two", "two", "three"],
        ["one", "two", "three"],
        ["", "[OOV]"],
        ["one", "two", "four"],
        [2, 3, 1],
    )


def test_basics_integer_vocab():
    """index_lookup_test.py::test_basics_integer_vocab (the same cases, int64 tokens)."""
    _basics(pp.IntegerLookup, INTEGER, [1, 1, 1, 2, 2, 3], [1, 2, 3], [0, -1], [1, 2, 4], [2, 3, 1])


def test_max_tokens_adapt():
    """index_lookup_test.py::test_max_tokens_adapt."""
    layer = pp.IntegerLookup(**{**INTEGER, "max_tokens": 4})
    layer.adapt([1, 1, 1, 2, 2, 3])
    assert layer.get_vocabulary() == [0, -1, 1, 2]
    assert layer.get_vocabulary(include_special_tokens=False) == [1, 2]
    assert layer([1, 2, 3, 4]).tolist() == [2, 3, 1, 1]
    _round_trip(layer)


def test_pad_to_max_tokens():
    """index_lookup_test.py::test_pad_to_max_tokens (multi_hot drops the mask index)."""
    layer = pp.IntegerLookup(
        **{**INTEGER, "max_tokens": 5},
        vocabulary=[1, 2],
        pad_to_max_tokens=True,
        output_mode="multi_hot",
    )
    assert_values(layer([1, 2]), [0, 1, 1, 0, 0])
    assert_values(_round_trip(layer)([1, 2]), [0, 1, 1, 0, 0])


SINGLE = ["one", "two", "four"]
BATCH = [["one", "two", "four", "two"]]


@pytest.mark.parametrize(
    "mode,single,batch",
    [
        ("int", [2, 3, 1], [[2, 3, 1, 3]]),
        ("multi_hot", [1, 1, 1, 0], [[1, 1, 1, 0]]),
        ("one_hot", [[0, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 0]], None),
        ("count", [1, 1, 1, 0], [[1, 1, 2, 0]]),
        ("tf_idf", [0.2, 0.1, 0.2, 0.0], [[0.2, 0.1, 0.4, 0.0]]),
    ],
)
def test_output_modes(mode, single, batch):
    """index_lookup_test.py::test_output_modes (tf_idf: the OOV index gets the mean idf
    weight, 0.2; the mask token is no encoding index)."""
    extra = {"idf_weights": np.array([0.1, 0.2, 0.3])} if mode == "tf_idf" else {}
    layer = pp.StringLookup(**STRING, vocabulary=["one", "two", "three"], output_mode=mode, **extra)
    assert_values(layer(SINGLE), single, atol=1e-6)
    if batch is not None:
        assert_values(layer(BATCH), batch, atol=1e-6)


def test_one_hot_symbolic_output_shape_with_higher_rank_input():
    """index_lookup_test.py::test_one_hot_symbolic_output_shape_with_higher_rank_input:
    the eager (2, 2, 2) -> (2, 2, 2, 4) half (the symbolic half is Keras's)."""
    layer = pp.IntegerLookup(vocabulary=[1, 2, 3], output_mode="one_hot")
    out = layer(np.array([[[1, 2], [3, 0]], [[1, 2], [3, 0]]]))
    assert tuple(out.shape) == (2, 2, 2, 4)
    assert_values(out[0, 1], [[0, 0, 0, 1], [1, 0, 0, 0]])


def test_one_hot_compute_output_shape_multi_hot_consistency():
    """index_lookup_test.py::test_one_hot_compute_output_shape_multi_hot_consistency:
    multi_hot (2, 5) -> (2, depth), one_hot (2, 2, 2) -> (2, 2, 2, depth), depth 4."""
    kwargs = dict(
        max_tokens=10,
        num_oov_indices=1,
        mask_token=None,
        oov_token="[OOV]",
        vocabulary=["a", "b", "c"],
    )
    multi = pp.StringLookup(**kwargs, output_mode="multi_hot")
    assert tuple(multi(np.full((2, 5), "a")).shape) == (2, 4)
    one = pp.StringLookup(**kwargs, output_mode="one_hot")
    assert tuple(one(np.full((2, 2, 2), "b")).shape) == (2, 2, 2, 4)


def test_one_hot_compute_output_spec_preserves_input_dims():
    """index_lookup_test.py::test_one_hot_compute_output_spec_preserves_input_dims:
    (2, 3, 4) -> (2, 3, 4, 4) in floatx (float32)."""
    out = pp.IntegerLookup(vocabulary=[1, 2, 3], output_mode="one_hot")(np.ones((2, 3, 4), int))
    assert tuple(out.shape) == (2, 3, 4, 4) and out.dtype == torch.float32


def test_sparse_outputs():
    """index_lookup_test.py::test_sparse_outputs: a torch sparse COO tensor."""
    layer = pp.IntegerLookup(vocabulary=[1, 2, 3], output_mode="multi_hot", sparse=True)
    out = layer([[1, 2], [3, 4]])
    assert out.is_sparse
    assert_values(out, [[0, 1, 1, 0], [1, 0, 0, 1]])


def test_adapt_tf_idf():
    """index_lookup_test.py::test_adapt_tf_idf: unbatched then batched adapt data; the
    idf weights are log(1 + documents / (1 + document count))."""
    layer = pp.StringLookup(**STRING, output_mode="tf_idf")
    adapt = ["one", "one", "one", "two", "two", "three"]
    layer.adapt(adapt)
    idf = np.log(1 + len(adapt) / (1 + np.array([3, 2, 1])))
    assert_values(layer.idf_weights[1:], idf, atol=1e-6, rtol=1e-6)
    assert_values(layer(["one", "two", "four"]), [1.1337324, 0.91629076, 1.0986123, 0.0], atol=1e-6)
    layer = pp.StringLookup(**STRING, output_mode="tf_idf")
    adapt = [["one", "one"], ["one", "two"], ["two", "three"]]
    layer.adapt(adapt)
    idf = np.log(1 + len(adapt) / (1 + np.array([2, 2, 1])))
    assert_values(layer.idf_weights[1:], idf, atol=1e-6, rtol=1e-6)
    out = layer([["one", "two"], ["two", "four"]])
    expected = [[0.0, 0.6931472, 0.6931472, 0.0], [0.76752836, 0.0, 0.6931472, 0.0]]
    assert_values(out, expected, atol=1e-6)


def test_invert():
    """index_lookup_test.py::test_invert: numpy strings out."""
    layer = pp.StringLookup(**STRING, vocabulary=["one", "two", "three"], invert=True)
    assert layer([2, 3, 1]).tolist() == ["one", "two", "[OOV]"]
    assert layer([[2, 3, 1, 3]]).tolist() == [["one", "two", "[OOV]", "two"]]


def test_saving(tmp_path):
    """index_lookup_test.py::test_saving: a ``.keras`` file there; here the layer's
    state_dict through torch.save into a layer built with the same arguments (adapted),
    and the JSON config alone (given a vocabulary)."""
    batch = np.array([["one", "two", "four"]])
    layer = pp.StringLookup(**STRING)
    layer.adapt(["one", "one", "one", "two", "two", "three"])
    torch.save(layer.state_dict(), tmp_path / "lookup.pt")
    loaded = pp.StringLookup(**STRING)
    loaded.load_state_dict(torch.load(tmp_path / "lookup.pt"))
    assert_values(loaded(batch), layer(batch))
    given = pp.StringLookup(**STRING, vocabulary=["one", "two", "three"])
    again = pp.layer_from_config(pp.serialize_layer(given))
    assert_values(again(batch), [[2, 3, 1]])


def test_adapt_with_tf_data():
    """index_lookup_test.py::test_adapt_with_tf_data: a pipeline batched by 2."""
    ds = dp.from_tensor_slices(np.array(["one", "one", "one", "two", "two", "three"])).batch(2)
    layer = pp.StringLookup(**STRING)
    layer.adapt(ds)
    assert layer.get_vocabulary() == ["", "[OOV]", "one", "two", "three"]
    assert layer(["one", "two", "four"]).tolist() == [2, 3, 1]
    _round_trip(layer)


def test_max_tokens_less_than_two():
    """index_lookup_test.py::test_max_tokens_less_than_two."""
    with pytest.raises(ValueError, match="max_tokens must be an int >= 2"):
        pp.IntegerLookup(max_tokens=1, num_oov_indices=1, mask_token=None, oov_token=None)


def test_max_tokens_none_with_pad_to_max_tokens():
    """index_lookup_test.py::test_max_tokens_none_with_pad_to_max_tokens."""
    with pytest.raises(ValueError, match="pad_to_max_tokens needs max_tokens"):
        pp.IntegerLookup(mask_token=None, oov_token=None, pad_to_max_tokens=True)


def test_negative_num_oov_indices():
    """index_lookup_test.py::test_negative_num_oov_indices."""
    with pytest.raises(ValueError, match="num_oov_indices must be an int >= 0"):
        pp.IntegerLookup(max_tokens=10, num_oov_indices=-1, mask_token=None, oov_token=None)


def test_invert_with_non_int_output_mode():
    """index_lookup_test.py::test_invert_with_non_int_output_mode."""
    with pytest.raises(ValueError, match="output_mode must be 'int' when invert=True"):
        pp.StringLookup(mask_token=None, oov_token=None, invert=True, output_mode="one_hot")


def test_sparse_true_with_int_output_mode():
    """index_lookup_test.py::test_sparse_true_with_int_output_mode."""
    with pytest.raises(ValueError, match="sparse needs output_mode other than 'int'"):
        pp.StringLookup(sparse=True, output_mode="int")


@pytest.mark.parametrize("mode", ["int", "multi_hot"])
def test_idf_weights_set_with_non_tfidf_output_mode(mode):
    """index_lookup_test.py::test_idf_weights_set_with_non_tfidf_output_mode (int) and
    ::test_non_tf_idf_with_idf_weights (multi_hot)."""
    with pytest.raises(ValueError, match="idf_weights is only used with output_mode='tf_idf'"):
        pp.StringLookup(idf_weights=[0.5, 0.1, 0.3], output_mode=mode)


def test_unrecognized_kwargs():
    """index_lookup_test.py::test_unrecognized_kwargs: an argument that is neither the
    layer's nor a Keras base-layer argument is refused."""
    with pytest.raises(ValueError, match="unrecognized keyword argument 'extra_arg'"):
        pp.StringLookup(output_mode="int", extra_arg=True)


def test_vocabulary_file_does_not_exist():
    """index_lookup_test.py::test_vocabulary_file_does_not_exist."""
    with pytest.raises(ValueError, match="file does not exist.*path/to/missing_vocab.txt"):
        pp.StringLookup(vocabulary="path/to/missing_vocab.txt")


def test_repeated_tokens_in_vocabulary():
    """index_lookup_test.py::test_repeated_tokens_in_vocabulary."""
    with pytest.raises(ValueError, match="vocabulary has repeated tokens; got \\['token'\\]"):
        pp.StringLookup(vocabulary=["token", "token", "unique"])


def test_mask_token_in_wrong_position():
    """index_lookup_test.py::test_mask_token_in_wrong_position."""
    with pytest.raises(ValueError, match="holds the mask token away from the start"):
        pp.StringLookup(mask_token="mask", oov_token=None, vocabulary=["token", "mask", "unique"])


def test_ensure_known_vocab_size_without_vocabulary():
    """index_lookup_test.py::test_ensure_known_vocab_size_without_vocabulary (Keras raises
    RuntimeError; ValueError here, the package's one error type for bad calls: D-K-3)."""
    layer = pp.StringLookup(mask_token="", oov_token="[OOV]", output_mode="multi_hot")
    with pytest.raises(ValueError, match="no vocabulary"):
        layer(["sample", "data"])


def _assets_round_trip(kwargs, vocabulary, sample):
    """Keras's save_assets/load_assets writes the vocabulary file; the torch way is the
    state_dict (vocabulary buffers) loaded into a layer built with the same arguments."""
    layer = pp.StringLookup(**kwargs)
    layer.set_vocabulary(vocabulary)
    other = pp.StringLookup(**kwargs)
    other.load_state_dict(layer.state_dict())
    assert other.get_vocabulary() == layer.get_vocabulary()
    assert other.get_vocabulary(False) == layer.get_vocabulary(False)
    assert torch.equal(other(sample), layer(sample))
    return layer.get_vocabulary()


def test_save_and_load_assets_string_vocab():
    """index_lookup_test.py::test_save_and_load_assets_string_vocab."""
    kwargs = dict(max_tokens=10, num_oov_indices=1, mask_token="<mask>", oov_token="[OOV]")
    vocab = _assets_round_trip(
        kwargs, ["apple", "banana", "cherry"], ["apple", "banana", "unknown"]
    )
    assert vocab == ["<mask>", "[OOV]", "apple", "banana", "cherry"]


def test_save_and_load_assets_with_multiple_oov_indices():
    """index_lookup_test.py::test_save_and_load_assets_with_multiple_oov_indices."""
    kwargs = dict(max_tokens=10, num_oov_indices=2, mask_token="<mask>", oov_token="[OOV]")
    vocab = _assets_round_trip(kwargs, ["apple", "banana"], ["apple", "kiwi"])
    assert vocab == ["<mask>", "[OOV]", "[OOV]", "apple", "banana"]


def test_load_assets_handles_trailing_newlines(tmp_path):
    """index_lookup_test.py::test_load_assets_handles_trailing_newlines: a vocabulary file
    with the special tokens first and a trailing newline gives the same vocabulary."""
    kwargs = dict(max_tokens=10, num_oov_indices=1, mask_token="<mask>", oov_token="[OOV]")
    expected = pp.StringLookup(**kwargs, vocabulary=["apple", "banana", "cherry"]).get_vocabulary()
    path = tmp_path / "vocabulary.txt"
    path.write_text("<mask>\n[OOV]\napple\nbanana\ncherry\n")
    assert pp.StringLookup(**kwargs, vocabulary=str(path)).get_vocabulary() == expected


def test_oov_method_ignored_for_string_dtype():
    """index_lookup_test.py::test_oov_method_ignored_for_string_dtype: OOV strings always
    go to the OOV indices by FarmHash64, whatever the oov_method (StringLookup has none:
    floormod means nothing for strings), the same bucket on every call."""
    layer = pp.StringLookup(
        max_tokens=10,
        num_oov_indices=4,
        mask_token="",
        oov_token="[OOV]",
        vocabulary=["cat", "dog", "fish"],
    )
    out = layer(["aaa", "bbb", "ccc", "ddd", "eee", "fff"])
    assert set(out.tolist()) <= {1, 2, 3, 4}
    assert torch.equal(out, layer(["aaa", "bbb", "ccc", "ddd", "eee", "fff"]))


def test_salt_config_serialization():
    """index_lookup_test.py::test_salt_config_serialization."""
    layer = pp.IntegerLookup(
        max_tokens=10,
        num_oov_indices=2,
        mask_token=None,
        oov_token=-1,
        vocabulary=[1, 2, 3],
        oov_method="farmhash",
        salt=[137, 42],
    )
    again = _round_trip(layer)
    assert again.salt == [137, 42]
    assert torch.equal(again(torch.tensor([5, 6, 7])), layer(torch.tensor([5, 6, 7])))


def test_salt_valid_and_invalid_formats():
    """index_lookup_test.py::test_salt_valid_and_invalid_formats."""
    base = dict(
        max_tokens=10, num_oov_indices=2, mask_token=None, oov_token=-1, oov_method="farmhash"
    )
    assert pp.IntegerLookup(salt=[137, 42], **base).salt == [137, 42]
    assert pp.IntegerLookup(salt=99, **base).salt == [99, 99]
    for bad in ("bad", [1, 2, 3]):
        with pytest.raises(ValueError, match="salt must be an int, a pair of ints or None"):
            pp.IntegerLookup(salt=bad, **base)


def test_salt_requires_farmhash():
    """index_lookup_test.py::test_salt_requires_farmhash."""
    with pytest.raises(ValueError, match="salt can only be used with oov_method='farmhash'"):
        pp.IntegerLookup(num_oov_indices=2, oov_method="floormod", salt=[137, 42])


@pytest.mark.parametrize(
    "cls,vocab,oov_data,extra",
    [
        (pp.IntegerLookup, [1, 2, 3], [100, 200, 300, 400, 500, 600], {"oov_method": "farmhash"}),
        (pp.StringLookup, ["a", "b", "c"], ["x", "y", "z", "w", "v", "u"], {}),
    ],
    ids=["int64", "string"],
)
def test_salt_produces_different_output_than_farmhash(cls, vocab, oov_data, extra):
    """index_lookup_test.py::test_salt_produces_different_output_than_farmhash."""
    base = dict(max_tokens=10, num_oov_indices=4, mask_token=None, vocabulary=vocab, **extra)
    assert not torch.equal(cls(**base)(oov_data), cls(salt=[137, 42], **base)(oov_data))
