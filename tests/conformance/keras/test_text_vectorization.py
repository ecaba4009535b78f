"""Keras 3's ``text_vectorization_test.py`` (keras/src/layers/preprocessing/), translated.

Strings live in numpy (datapipe's strings). A callable ``standardize`` / ``split`` receives
one Python string at a time here, so upstream's TensorFlow callables become their Python
equivalents (D-K-14).
"""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_values

QUERY = [["foo qux bar"], ["qux baz"]]


def test_config():
    """text_vectorization_test.py::test_config."""
    layer = pp.TextVectorization(
        output_mode="int", vocabulary=["one", "two"], output_sequence_length=5
    )
    config = layer.get_config()
    again = pp.TextVectorization.from_config(config)
    assert again.get_config() == config
    assert_values(again(["one three two"]), [[2, 1, 3, 0, 0]])


def test_adapt_flow():
    """text_vectorization_test.py::test_adapt_flow."""
    layer = pp.TextVectorization(max_tokens=5000, output_mode="int", output_sequence_length=4)
    layer.adapt(["foo bar", "bar baz", "baz bada boom"])
    out = layer(QUERY)
    assert isinstance(out, torch.Tensor)
    assert_values(out, [[4, 1, 3, 0], [1, 2, 0, 0]])
    assert "foo" in layer.get_vocabulary()


def test_adapt_with_generator():
    """text_vectorization_test.py::test_adapt_with_generator."""

    def text_gen():
        yield ["hello world", "foo bar"]
        yield ["baz qux", "hello foo"]

    layer = pp.TextVectorization()
    layer.adapt(text_gen())
    vocab = layer.get_vocabulary()
    assert vocab[:4] == ["", "[UNK]", "hello", "foo"]
    assert set(vocab[4:]) == {"world", "qux", "baz", "bar"}


def test_adapt_with_infinite_generator_and_steps():
    """text_vectorization_test.py::test_adapt_with_infinite_generator_and_steps."""

    def text_gen():
        while True:
            yield ["hello world", "foo bar"]

    layer = pp.TextVectorization()
    layer.adapt(text_gen(), steps=3)
    assert "hello" in layer.get_vocabulary()


def test_adapt_with_grain_dataset():
    """text_vectorization_test.py::test_adapt_with_grain_dataset: a random-access source
    batched by 2, here a datapipe Dataset."""
    texts = np.array(["hello world", "foo bar", "baz qux", "hello foo"])
    layer = pp.TextVectorization()
    layer.adapt(dp.from_tensor_slices(texts).batch(2))
    assert "hello" in layer.get_vocabulary()


def test_fixed_vocabulary():
    """text_vectorization_test.py::test_fixed_vocabulary."""
    layer = pp.TextVectorization(
        max_tokens=5000,
        output_mode="int",
        output_sequence_length=4,
        vocabulary=["baz", "bar", "foo"],
    )
    assert_values(layer(QUERY), [[4, 1, 3, 0], [1, 2, 0, 0]])


def test_set_vocabulary():
    """text_vectorization_test.py::test_set_vocabulary."""
    layer = pp.TextVectorization(max_tokens=5000, output_mode="int", output_sequence_length=4)
    layer.set_vocabulary(["baz", "bar", "foo"])
    assert_values(layer(QUERY), [[4, 1, 3, 0], [1, 2, 0, 0]])


@pytest.mark.parametrize("ngrams", [(1, 2), 2])
def test_save_load_with_ngrams_flow(ngrams):
    """text_vectorization_test.py::test_save_load_with_ngrams_flow: a ``.keras`` file
    there; here the JSON config alone rebuilds the adapted layer."""
    data = np.array(["foo bar", "bar baz", "baz bada boom"])
    layer = pp.TextVectorization(ngrams=ngrams)
    layer.adapt(data)
    again = pp.layer_from_config(pp.serialize_layer(layer))
    assert torch.equal(again(data), layer(data))
    assert "bar baz" in layer.get_vocabulary()


def test_save_load_tf_idf_mode(tmp_path):
    """text_vectorization_test.py::test_save_load_tf_idf_mode: state_dict through
    torch.save into a layer built with the same arguments."""
    data = np.array(["foo bar", "bar baz", "baz bada boom"])
    layer = pp.TextVectorization(max_tokens=100, output_mode="tf_idf")
    layer.adapt(data)
    torch.save(layer.state_dict(), tmp_path / "tv.pt")
    loaded = pp.TextVectorization(max_tokens=100, output_mode="tf_idf")
    loaded.load_state_dict(torch.load(tmp_path / "tv.pt"))
    assert torch.allclose(loaded(data), layer(data))
    assert layer(data).abs().sum() > 0


def test_tf_data_compatibility():
    """text_vectorization_test.py::test_tf_data_compatibility: in a pipeline's map, with a
    given vocabulary and adapted."""
    kwargs = dict(max_tokens=5000, output_mode="int", output_sequence_length=4)
    layer = pp.TextVectorization(**kwargs, vocabulary=["baz", "bar", "foo"])
    ds = dp.from_tensor_slices(np.array(QUERY)).batch(2).map(layer)
    assert_values(next(iter(ds)), [[4, 1, 3, 0], [1, 2, 0, 0]])
    adapted = pp.TextVectorization(**kwargs)
    adapted.adapt(np.array(QUERY))
    out = next(iter(dp.from_tensor_slices(np.array(QUERY)).batch(2).map(adapted)))
    assert tuple(out.shape) == (2, 4)


@pytest.mark.parametrize("split", ["whitespace", None], ids=["from_ragged", "from_dense"])
def test_static_output_sequence_length(split):
    """text_vectorization_test.py::test_static_output_sequence_length: (2, 4) either way."""
    layer = pp.TextVectorization(
        max_tokens=5000,
        output_mode="int",
        output_sequence_length=4,
        split=split,
        vocabulary=["baz", "bar", "foo"],
    )
    data = np.array(QUERY if split else [["foo"], ["baz"]])
    out = next(iter(dp.from_tensor_slices(data).batch(2).map(layer)))
    assert tuple(out.shape) == (2, 4)
    if split is None:
        assert_values(out, [[4, 0, 0, 0], [2, 0, 0, 0]])


def test_tf_as_first_sequential_layer():
    """text_vectorization_test.py::test_tf_as_first_sequential_layer: the layer's ids feed
    an embedding (the string step runs before the torch model, as it must here)."""
    layer = pp.TextVectorization(max_tokens=10, output_mode="int", output_sequence_length=3)
    layer.set_vocabulary(["baz", "bar", "foo"])
    out = torch.nn.Embedding(5, 4)(layer(QUERY))
    assert tuple(out.shape) == (2, 3, 4)


def test_ragged_tensor():
    """text_vectorization_test.py::test_ragged_tensor: rows unpadded (an object array)."""
    layer = pp.TextVectorization(output_mode="int", vocabulary=["baz", "bar", "foo"], ragged=True)
    out = layer([["foo qux bar"], ["qux baz"], ["foo"]])
    assert out.shape == (3,)
    assert [row.tolist() for row in out] == [[4, 1, 3], [1, 2], [4]]


def test_ragged_tensor_output_length():
    """text_vectorization_test.py::test_ragged_tensor_output_length: rows cut to 2."""
    layer = pp.TextVectorization(
        output_mode="int", vocabulary=["baz", "bar", "foo"], ragged=True, output_sequence_length=2
    )
    out = layer([["foo qux bar"], ["qux baz"], ["foo"]])
    assert [row.tolist() for row in out] == [[4, 1], [1, 2], [4]]


def test_raises_exception_ragged_tensor():
    """text_vectorization_test.py::test_raises_exception_ragged_tensor: Keras's non-TF
    backends refuse ragged=True; here ragged rows exist (object arrays), and what is
    refused is ragged outside int mode (Keras refuses it on every backend)."""
    with pytest.raises(ValueError, match="ragged needs output_mode='int'"):
        pp.TextVectorization(output_mode="multi_hot", vocabulary=["baz"], ragged=True)


def test_multi_hot_output():
    """text_vectorization_test.py::test_multi_hot_output."""
    layer = pp.TextVectorization(output_mode="multi_hot", vocabulary=["foo", "bar", "baz"])
    assert_values(layer([["foo bar"], ["baz foo foo"]]), [[0, 1, 1, 0], [0, 1, 0, 1]])


def test_output_mode_count_output():
    """text_vectorization_test.py::test_output_mode_count_output."""
    layer = pp.TextVectorization(output_mode="count", vocabulary=["foo", "bar", "baz"])
    assert_values(layer(["foo bar", "baz foo foo"]), [[0, 1, 1, 0], [0, 2, 0, 1]])


def test_output_mode_tf_idf_output():
    """text_vectorization_test.py::test_output_mode_tf_idf_output."""
    layer = pp.TextVectorization(
        output_mode="tf_idf", vocabulary=["foo", "bar", "baz"], idf_weights=[0.3, 0.5, 0.2]
    )
    out = layer(["foo bar", "baz foo foo"])
    assert_values(out, [[0.0, 0.3, 0.5, 0.0], [0.0, 0.6, 0.0, 0.2]], atol=1e-6)


SENTENCE = ["Hello, World!. This is just a nice test!"]


def test_lower_and_strip_punctuation_standardization():
    """text_vectorization_test.py::test_lower_and_strip_punctuation_standardization."""
    layer = pp.TextVectorization(
        standardize="lower_and_strip_punctuation",
        vocabulary=["hello", "world", "this", "is", "nice", "test"],
    )
    out = layer(SENTENCE)
    assert len(out[0]) == 8
    assert_values(out, [[2, 3, 4, 5, 1, 1, 6, 7]])


def test_lower_standardization():
    """text_vectorization_test.py::test_lower_standardization."""
    layer = pp.TextVectorization(
        standardize="lower", vocabulary=["hello,", "hello", "world", "this", "is", "nice", "test"]
    )
    assert_values(layer(SENTENCE), [[2, 1, 5, 6, 1, 1, 7, 1]])


def test_char_splitting():
    """text_vectorization_test.py::test_char_splitting."""
    layer = pp.TextVectorization(split="character", vocabulary=list("abcde"), output_mode="int")
    assert_values(layer(["abcf"]), [[2, 3, 4, 1]])


def test_custom_splitting():
    """text_vectorization_test.py::test_custom_splitting: a split on "|" (a Python
    callable of one string: D-K-14). The default standardization strips "|" first, so
    the one token is "foobar", the vocabulary's last entry; without it, two tokens."""
    kwargs = dict(split=lambda text: text.split("|"), vocabulary=["foo", "bar", "foobar"])
    assert_values(pp.TextVectorization(**kwargs, output_mode="int")(["foo|bar"]), [[4]])
    assert_values(pp.TextVectorization(**kwargs, standardize=None)(["foo|bar"]), [[2, 3]])


def test_strip_punctuation_standardization():
    """text_vectorization_test.py::test_strip_punctuation_standardization."""
    layer = pp.TextVectorization(
        standardize="strip_punctuation", vocabulary=["Hello", "World", "Test"]
    )
    assert_values(layer(["Hello, World! Test."]), [[2, 3, 4]])


def test_no_standardization():
    """text_vectorization_test.py::test_no_standardization."""
    layer = pp.TextVectorization(standardize=None, vocabulary=["Hello", "world"])
    assert_values(layer(["Hello hello"]), [[2, 1]])


def test_custom_standardize_callable():
    """text_vectorization_test.py::test_custom_standardize_callable ("-" -> " ")."""
    layer = pp.TextVectorization(
        standardize=lambda text: text.replace("-", " "),
        split="whitespace",
        vocabulary=["foo", "bar"],
    )
    assert_values(layer(["foo-bar"]), [[2, 3]])


def test_python_standardize_callable_non_tf_backend():
    """text_vectorization_test.py::test_python_standardize_callable_non_tf_backend: a
    Python callable standardizes (Keras hands it a numpy unicode array; here each ``str``:
    D-K-14), during adapt and call."""
    seen = []

    def standardize(text):
        seen.append(type(text))
        return text.lower().replace(",", "")

    layer = pp.TextVectorization(standardize=standardize)
    layer.adapt(["Hello, world."])
    assert seen and set(seen) == {str}
    assert layer.get_vocabulary() == ["", "[UNK]", "world.", "hello"]
    assert_values(layer(["Hello, world."]), [[3, 2]])


def test_no_split():
    """text_vectorization_test.py::test_no_split."""
    layer = pp.TextVectorization(split=None, vocabulary=["foo", "bar", "baz"], output_mode="int")
    assert_values(layer([["foo"], ["bar"], ["unknown"]]), [[2], [3], [1]])


def test_ngrams_integer():
    """text_vectorization_test.py::test_ngrams_integer."""
    layer = pp.TextVectorization(ngrams=2, output_mode="int")
    layer.adapt(["foo bar baz"])
    vocab = layer.get_vocabulary()
    assert {"foo", "bar", "baz", "foo bar", "bar baz"} == set(vocab[2:])


def test_ngrams_tuple():
    """text_vectorization_test.py::test_ngrams_tuple."""
    layer = pp.TextVectorization(ngrams=(1, 3), output_mode="int")
    layer.adapt(["foo bar baz"])
    vocab = layer.get_vocabulary()
    assert "foo" in vocab and "foo bar baz" in vocab and "foo bar" not in vocab


def test_max_tokens():
    """text_vectorization_test.py::test_max_tokens."""
    layer = pp.TextVectorization(output_mode="int", max_tokens=5)
    layer.adapt(["a b c d e f g h i j"])
    assert layer.get_vocabulary() == ["", "[UNK]", "j", "i", "h"]


def test_pad_to_max_tokens():
    """text_vectorization_test.py::test_pad_to_max_tokens."""
    layer = pp.TextVectorization(
        output_mode="multi_hot", vocabulary=["foo", "bar"], max_tokens=8, pad_to_max_tokens=True
    )
    out = layer(["foo bar"])
    assert out.shape[-1] == 8
    assert_values(out, [[0, 1, 1, 0, 0, 0, 0, 0]])


def test_get_vocabulary():
    """text_vectorization_test.py::test_get_vocabulary."""
    layer = pp.TextVectorization(output_mode="int", vocabulary=["foo", "bar", "baz"])
    assert layer.get_vocabulary() == ["", "[UNK]", "foo", "bar", "baz"]


def test_get_vocabulary_no_special_tokens():
    """text_vectorization_test.py::test_get_vocabulary_no_special_tokens."""
    layer = pp.TextVectorization(output_mode="int", vocabulary=["foo", "bar", "baz"])
    assert layer.get_vocabulary(include_special_tokens=False) == ["foo", "bar", "baz"]


def test_vocabulary_size():
    """text_vectorization_test.py::test_vocabulary_size."""
    layer = pp.TextVectorization(output_mode="int", vocabulary=["foo", "bar", "baz"])
    assert layer.vocabulary_size() == 5


def test_vocabulary_from_file(tmp_path):
    """text_vectorization_test.py::test_vocabulary_from_file."""
    path = tmp_path / "vocab.txt"
    path.write_text("foo\nbar\nbaz\n")
    layer = pp.TextVectorization(vocabulary=str(path), output_mode="int")
    assert_values(layer(["foo bar baz unknown"]), [[2, 3, 4, 1]])


def test_one_hot_output():
    """text_vectorization_test.py::test_one_hot_output: Keras's TF backend one-hot
    encodes every token of a split sentence; here one_hot means one token per string and
    needs split=None (D-K-13), where it gives (batch, depth)."""
    with pytest.raises(ValueError, match="'one_hot' needs split=None"):
        pp.TextVectorization(output_mode="one_hot", vocabulary=["foo", "bar", "baz"])
    layer = pp.TextVectorization(
        output_mode="one_hot", split=None, vocabulary=["foo", "bar", "baz"]
    )
    out = layer(["foo", "bar"])
    assert out.shape[-1] == 4
    assert_values(out, [[0, 1, 0, 0], [0, 0, 1, 0]])


def test_sparse_output():
    """text_vectorization_test.py::test_sparse_output: a torch sparse COO tensor."""
    layer = pp.TextVectorization(
        output_mode="multi_hot", vocabulary=["foo", "bar", "baz"], sparse=True
    )
    out = layer(["foo bar"])
    assert out.is_sparse
    assert_values(out, [[0, 1, 1, 0]])


def test_adapt_with_tf_dataset():
    """text_vectorization_test.py::test_adapt_with_tf_dataset (a datapipe Dataset)."""
    ds = dp.from_tensor_slices(np.array(["foo bar", "bar baz", "baz foo"])).batch(2)
    layer = pp.TextVectorization(output_mode="int")
    layer.adapt(ds)
    assert set(layer.get_vocabulary()[2:]) == {"foo", "bar", "baz"}


def test_adapt_with_steps():
    """text_vectorization_test.py::test_adapt_with_steps."""
    ds = dp.from_tensor_slices(np.array(["foo bar", "bar baz", "unique_word"])).batch(1)
    layer = pp.TextVectorization(output_mode="int")
    layer.adapt(ds, steps=2)
    assert "bar" in layer.get_vocabulary() and "unique_word" not in layer.get_vocabulary()


def test_invalid_ngrams():
    """text_vectorization_test.py::test_invalid_ngrams."""
    with pytest.raises(ValueError, match="ngrams must be None, an int >= 1 or a tuple"):
        pp.TextVectorization(ngrams="invalid")


def test_output_sequence_length_with_non_int_mode():
    """text_vectorization_test.py::test_output_sequence_length_with_non_int_mode."""
    with pytest.raises(
        ValueError, match="output_sequence_length is only used with output_mode='int'"
    ):
        pp.TextVectorization(output_mode="multi_hot", output_sequence_length=5)
