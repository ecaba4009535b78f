"""Keras 3's ``string_lookup_test.py`` (keras/src/layers/preprocessing/), translated.

Strings live in numpy here (datapipe's strings); ``invert=True`` returns a numpy ``str``
array (Keras's TensorFlow backend a string tensor, its torch backend a list).
"""

import numpy as np
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_values


def test_config():
    """string_lookup_test.py::test_config."""
    layer = pp.StringLookup(
        output_mode="int", vocabulary=["a", "b", "c"], oov_token="[OOV]", mask_token="[MASK]"
    )
    config = layer.get_config()
    assert pp.StringLookup.from_config(config).get_config() == config
    # Keras reports the vocabulary without its special tokens; here with them, first
    # (``get_vocabulary()``'s list, which from_config recognises): D-K-12.
    assert config["vocabulary"] == ["[MASK]", "[OOV]", "a", "b", "c"]
    assert layer.get_vocabulary(include_special_tokens=False) == ["a", "b", "c"]


def test_vocabulary_file(tmp_path):
    """string_lookup_test.py::test_vocabulary_file: the vocabulary is read from the file
    when the layer is built, so a layer saved after the file is gone keeps it (Keras: the
    ``.keras`` archive's asset; here the JSON config, which holds the list: D-K-12)."""
    path = tmp_path / "vocab.txt"
    path.write_text("a\nb\nc\n")
    layer = pp.StringLookup(
        output_mode="int",
        vocabulary=str(path),
        oov_token="[OOV]",
        mask_token="[MASK]",
        name="index",
    )
    assert layer.get_vocabulary() == ["[MASK]", "[OOV]", "a", "b", "c"]
    path.unlink()
    again = pp.layer_from_config(pp.serialize_layer(layer))
    assert again.name == "index"
    assert again.get_vocabulary() == ["[MASK]", "[OOV]", "a", "b", "c"]


def test_adapt_flow():
    """string_lookup_test.py::test_adapt_flow."""
    layer = pp.StringLookup(output_mode="int")
    layer.adapt(["a", "a", "a", "b", "b", "c"])
    out = layer(["b", "c", "d"])
    assert isinstance(out, torch.Tensor)
    assert_values(out, [2, 3, 0])
    assert "a" in layer.get_vocabulary()


def test_adapt_with_generator():
    """string_lookup_test.py::test_adapt_with_generator."""

    def vocab_gen():
        yield ["cat", "dog"]
        yield ["bird", "cat"]

    layer = pp.StringLookup()
    layer.adapt(vocab_gen())
    assert layer.get_vocabulary() == ["[UNK]", "cat", "dog", "bird"]


def test_adapt_with_infinite_generator_and_steps():
    """string_lookup_test.py::test_adapt_with_infinite_generator_and_steps."""

    def vocab_gen():
        while True:
            yield ["cat", "dog", "bird"]

    layer = pp.StringLookup()
    layer.adapt(vocab_gen(), steps=3)
    assert layer.get_vocabulary() == ["[UNK]", "dog", "cat", "bird"]  # ties: desc order


def test_adapt_with_grain_dataset():
    """string_lookup_test.py::test_adapt_with_grain_dataset: a random-access source batched
    by 2, here a datapipe Dataset."""
    words = ["cat", "dog", "bird", "cat", "dog", "bird"]
    layer = pp.StringLookup()
    layer.adapt(dp.from_tensor_slices(np.array(words)).batch(2))
    assert "cat" in layer.get_vocabulary()


def test_fixed_vocabulary():
    """string_lookup_test.py::test_fixed_vocabulary."""
    out = pp.StringLookup(output_mode="int", vocabulary=["a", "b", "c"])(["b", "c", "d"])
    assert_values(out, [2, 3, 0])


def test_set_vocabulary():
    """string_lookup_test.py::test_set_vocabulary."""
    layer = pp.StringLookup(output_mode="int")
    layer.set_vocabulary(["a", "b", "c"])
    assert_values(layer(["b", "c", "d"]), [2, 3, 0])


def test_tf_data_compatibility():
    """string_lookup_test.py::test_tf_data_compatibility: in a pipeline's map."""
    layer = pp.StringLookup(output_mode="int", vocabulary=["a", "b", "c"])
    ds = dp.from_tensor_slices(np.array(["b", "c", "d"])).batch(3).map(layer)
    assert_values(next(iter(ds)), [2, 3, 0])


def test_tensor_as_vocab():
    """string_lookup_test.py::test_tensor_as_vocab: the vocabulary as an array (strings
    have no tensor here: numpy's is the array type)."""
    layer = pp.StringLookup(vocabulary=np.array(["a", "b", "c", "d"]))
    assert_values(layer([["a", "c", "d"], ["d", "z", "b"]]), [[1, 3, 4], [4, 0, 2]])


def test_torch_backend_compatibility():
    """string_lookup_test.py::test_torch_backend_compatibility: forward to a torch tensor,
    inverse from one (Keras's torch backend returns a list; here numpy strings)."""
    forward = pp.StringLookup(vocabulary=["a", "b", "c"], oov_token="[OOV]")
    out = forward(["a", "b", "[OOV]", "d"])
    assert isinstance(out, torch.Tensor)
    assert_values(out, [1, 2, 0, 0])
    inverse = pp.StringLookup(vocabulary=["a", "b", "c"], oov_token="[OOV]", invert=True)
    assert inverse(torch.tensor([1, 2, 0], dtype=torch.int64)).tolist() == ["a", "b", "[OOV]"]


def test_invert_lookup_basic():
    """string_lookup_test.py::test_invert_lookup_basic."""
    out = pp.StringLookup(vocabulary=["a", "b", "c"], invert=True)([1, 2, 0])
    assert out.tolist() == ["a", "b", "[UNK]"]


def test_output_mode_count_shape():
    """string_lookup_test.py::test_output_mode_count_shape."""
    layer = pp.StringLookup(vocabulary=["a", "b"], output_mode="count")
    out = layer(["a", "a", "a", "b", "b"])
    assert out.shape[-1] == len(layer.get_vocabulary())
    assert_values(out, [0, 3, 2])


def test_output_mode_multi_hot_binary():
    """string_lookup_test.py::test_output_mode_multi_hot_binary."""
    assert_values(
        pp.StringLookup(vocabulary=["a", "b"], output_mode="multi_hot")(["a", "b"]), [0, 1, 1]
    )


def test_mask_token_basic():
    """string_lookup_test.py::test_mask_token_basic."""
    out = pp.StringLookup(vocabulary=["a"], mask_token="[MASK]")(["[MASK]", "a"])
    assert_values(out, [0, 2])


def test_sparse_output_in_multi_hot():
    """string_lookup_test.py::test_sparse_output_in_multi_hot (the ragged rows have equal
    lengths here: a (2, 2) array)."""
    layer = pp.StringLookup(vocabulary=["a", "b", "c"], output_mode="multi_hot", sparse=True)
    out = layer(np.array([["a", "b"], ["c", "a"]]))
    assert out.is_sparse
    assert_values(out, [[0, 1, 1, 0], [0, 1, 0, 1]])


def test_get_vocabulary_include_special_tokens_false():
    """string_lookup_test.py::test_get_vocabulary_include_special_tokens_false."""
    layer = pp.StringLookup(vocabulary=["a", "b", "c"])
    assert layer.get_vocabulary(include_special_tokens=False) == ["a", "b", "c"]


def test_one_hot_symbolic_output_shape_nested_input():
    """string_lookup_test.py::test_one_hot_symbolic_output_shape_nested_input: (2, 2, 2)
    strings give (2, 2, 2, 20) with pad_to_max_tokens."""
    layer = pp.StringLookup(
        max_tokens=20,
        num_oov_indices=4,
        oov_token="[UNK]",
        vocabulary=list("abcdefghi"),
        output_mode="one_hot",
        pad_to_max_tokens=True,
        sparse=False,
    )
    out = layer(np.array([[["a", "b"], ["c", "d"]], [["a", "b"], ["c", "d"]]]))
    assert tuple(out.shape) == (2, 2, 2, 20)
    assert out[0, 0, 0].argmax() == 4 and out[0, 1, 1].argmax() == 7  # "a" -> 4, "d" -> 7


def test_salt_siphash():
    """string_lookup_test.py::test_salt_siphash."""
    oov = ["x", "y", "z", "w", "v", "u"]
    farm = pp.StringLookup(vocabulary=["a", "b", "c"], num_oov_indices=4)
    sip = pp.StringLookup(vocabulary=["a", "b", "c"], num_oov_indices=4, salt=[137, 42])
    assert not torch.equal(farm(oov), sip(oov))
