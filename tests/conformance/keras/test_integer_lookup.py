"""Keras 3's ``integer_lookup_test.py`` (keras/src/layers/preprocessing/), translated."""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_values


def test_config():
    """integer_lookup_test.py::test_config: the class's serialization round trip."""
    layer = pp.IntegerLookup(output_mode="int", vocabulary=[1, 2, 3], oov_token=1, mask_token=0)
    config = layer.get_config()
    again = pp.IntegerLookup.from_config(config)
    assert again.get_config() == config
    assert again.get_vocabulary() == layer.get_vocabulary() == [0, 1, 1, 2, 3]
    x = torch.tensor([0, 1, 2, 3, 9])
    assert torch.equal(again(x), layer(x))


ADAPT = [1, 1, 1, 2, 2, 3]
SINGLE = [1, 2, 4]


def test_adapt_flow():
    """integer_lookup_test.py::test_adapt_flow: int, one_hot, multi_hot, tf_idf, count."""
    layer = pp.IntegerLookup(output_mode="int")
    layer.adapt(ADAPT)
    assert isinstance(layer(SINGLE), torch.Tensor)
    assert_values(layer(SINGLE), [1, 2, 0])
    assert_values(layer([[1, 2, 4], [2, 3, 5]]), [[1, 2, 0], [2, 3, 0]])
    expected = {
        "one_hot": [[0, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 0]],
        "multi_hot": [1, 1, 1, 0],
        "tf_idf": [1.133732, 0.916291, 1.098612, 0.0],
    }
    for mode, want in expected.items():
        layer = pp.IntegerLookup(output_mode=mode)
        layer.adapt(ADAPT)
        assert_values(layer(SINGLE), want, atol=1e-6, rtol=1e-6)
    layer = pp.IntegerLookup(output_mode="count")
    layer.adapt(ADAPT)
    assert_values(layer([1, 2, 3, 4, 1, 2, 1]), [1, 3, 2, 1])


def test_fixed_vocabulary():
    """integer_lookup_test.py::test_fixed_vocabulary."""
    out = pp.IntegerLookup(output_mode="int", vocabulary=[1, 2, 3, 4])([2, 3, 4, 5])
    assert_values(out, [2, 3, 4, 0])


def test_set_vocabulary():
    """integer_lookup_test.py::test_set_vocabulary."""
    layer = pp.IntegerLookup(output_mode="int")
    layer.set_vocabulary([1, 2, 3, 4])
    assert_values(layer([2, 3, 4, 5]), [2, 3, 4, 0])


def test_tf_data_compatibility():
    """integer_lookup_test.py::test_tf_data_compatibility: in a pipeline's map."""
    layer = pp.IntegerLookup(output_mode="int", vocabulary=[1, 2, 3, 4])
    ds = dp.from_tensor_slices(np.array([2, 3, 4, 5])).batch(4).map(layer)
    assert_values(next(iter(ds)), [2, 3, 4, 0])


def test_one_hot_output_with_higher_rank_input():
    """integer_lookup_test.py::test_one_hot_output_with_higher_rank_input."""
    layer = pp.IntegerLookup(vocabulary=[1, 2, 3], output_mode="one_hot")
    x = np.array([[1, 2], [3, 0]])
    expected = [[[0, 1, 0, 0], [0, 0, 1, 0]], [[0, 0, 0, 1], [1, 0, 0, 0]]]
    out = layer(x)
    assert tuple(out.shape) == (2, 2, 4)
    assert_values(out, expected)
    out3 = layer(np.expand_dims(x, axis=0))
    assert tuple(out3.shape) == (1, 2, 2, 4)
    assert_values(out3, [expected])


@pytest.mark.parametrize("mode", ["multi_hot", "count"])
def test_multi_hot_output_shape(mode):
    """integer_lookup_test.py::test_multi_hot_output_shape and ::test_count_output_shape."""
    out = pp.IntegerLookup(vocabulary=[1, 2, 3], output_mode=mode)(np.array([[1, 2], [3, 0]]))
    assert tuple(out.shape) == (2, 4)
    assert_values(out, [[0, 1, 1, 0], [1, 0, 0, 1]])


def test_tf_idf_output_shape():
    """integer_lookup_test.py::test_tf_idf_output_shape (the idf weights of the
    vocabulary are 1, the OOV index gets their mean, 1)."""
    layer = pp.IntegerLookup(
        vocabulary=[1, 2, 3], idf_weights=[1.0, 1.0, 1.0], output_mode="tf_idf"
    )
    out = layer(np.array([[1, 2], [3, 0]]))
    assert tuple(out.shape) == (2, 4)
    assert_values(out, [[0, 1, 1, 0], [1, 0, 0, 1]])


def test_max_tokens():
    """integer_lookup_test.py::test_max_tokens."""
    layer = pp.IntegerLookup(output_mode="int", max_tokens=4)
    layer.adapt([1, 2, 3, 4, 5, 6, 1, 1, 2, 2])
    assert len(layer.get_vocabulary()) == 4
    assert layer.get_vocabulary()[:3] == [-1, 2, 1]  # by count; the tie 3..6 by value, desc


def test_mask_token():
    """integer_lookup_test.py::test_mask_token."""
    layer = pp.IntegerLookup(output_mode="int", vocabulary=[1, 2, 3], mask_token=0)
    assert_values(layer([0, 1, 2, 3]), [0, 2, 3, 4])


def test_invert():
    """integer_lookup_test.py::test_invert."""
    layer = pp.IntegerLookup(vocabulary=[10, 20, 30], invert=True)
    assert_values(layer([1, 2, 3, 0]), [10, 20, 30, -1])


def test_pad_to_max_tokens():
    """integer_lookup_test.py::test_pad_to_max_tokens."""
    layer = pp.IntegerLookup(
        vocabulary=[1, 2], output_mode="multi_hot", max_tokens=5, pad_to_max_tokens=True
    )
    out = layer([1, 2])
    assert out.shape[-1] == 5
    assert_values(out, [0, 1, 1, 0, 0])


def test_num_oov_indices():
    """integer_lookup_test.py::test_num_oov_indices (floormod: 999 % 2 = 1, 1000 % 2 = 0)."""
    out = pp.IntegerLookup(vocabulary=[1, 2, 3], num_oov_indices=2, output_mode="int")(
        [1, 2, 3, 999, 1000]
    )
    assert_values(out[:3], [2, 3, 4])
    assert_values(out[3:], [1, 0])


def test_get_vocabulary():
    """integer_lookup_test.py::test_get_vocabulary."""
    layer = pp.IntegerLookup(output_mode="int")
    layer.adapt([5, 5, 5, 10, 10, 15])
    assert layer.get_vocabulary() == [-1, 5, 10, 15]


def test_invalid_max_tokens():
    """integer_lookup_test.py::test_invalid_max_tokens."""
    with pytest.raises(ValueError, match="max_tokens must be an int >= 2"):
        pp.IntegerLookup(max_tokens=1)


def test_invalid_num_oov_indices():
    """integer_lookup_test.py::test_invalid_num_oov_indices."""
    with pytest.raises(ValueError, match="num_oov_indices must be an int >= 0"):
        pp.IntegerLookup(num_oov_indices=-1)


def test_sparse_output():
    """integer_lookup_test.py::test_sparse_output: a torch sparse COO tensor."""
    out = pp.IntegerLookup(vocabulary=[1, 2, 3], output_mode="multi_hot", sparse=True)([1, 2])
    assert out.is_sparse
    assert_values(out, [0, 1, 1, 0])


def test_invalid_vocabulary_dtype():
    """integer_lookup_test.py::test_invalid_vocabulary_dtype."""
    with pytest.raises(ValueError, match="vocabulary_dtype must be 'int64'"):
        pp.IntegerLookup(vocabulary_dtype="int32")


def test_num_oov_indices_zero():
    """integer_lookup_test.py::test_num_oov_indices_zero."""
    layer = pp.IntegerLookup(vocabulary=[1, 2, 3], num_oov_indices=0, output_mode="int")
    assert_values(layer([1, 2, 3]), [0, 1, 2])


def test_adapt_with_steps():
    """integer_lookup_test.py::test_adapt_with_steps: two batches of 2 of a pipeline."""
    layer = pp.IntegerLookup(output_mode="int")
    layer.adapt(dp.from_tensor_slices(np.array([1, 2, 3, 1, 1])).batch(2), steps=2)
    assert layer.get_vocabulary() == [-1, 1, 3, 2]  # 3 and 2 tie: by value, descending


def test_vocabulary_from_file(tmp_path):
    """integer_lookup_test.py::test_vocabulary_from_file: a file of integer lines."""
    path = tmp_path / "vocab.txt"
    path.write_text("10\n20\n30\n")
    layer = pp.IntegerLookup(vocabulary=str(path), output_mode="int")
    assert layer.get_vocabulary() == [-1, 10, 20, 30]
    assert_values(layer([10, 20, 30, 999]), [1, 2, 3, 0])


def test_vocabulary_file_with_a_non_integer_line(tmp_path):
    """integer_lookup_test.py::test_vocabulary_from_file's file rule: a line that is no
    int64 is refused, naming the file and the line."""
    path = tmp_path / "vocab.txt"
    path.write_text("10\nabc\n")
    with pytest.raises(ValueError, match=r"vocab.txt' line 2 is not an int64"):
        pp.IntegerLookup(vocabulary=str(path))


def test_oov_method_farmhash():
    """integer_lookup_test.py::test_oov_method_farmhash."""
    layer = pp.IntegerLookup(
        vocabulary=[12, 36, 1138, 42], num_oov_indices=2, oov_method="farmhash"
    )
    out = layer(np.array([12, 36, 1138, 42, 100, 200]))
    assert_values(out[:4], [2, 3, 4, 5])
    assert set(out[4:].tolist()) <= {0, 1}


def test_oov_method_invalid_value():
    """integer_lookup_test.py::test_oov_method_invalid_value."""
    with pytest.raises(ValueError, match="oov_method must be one of"):
        pp.IntegerLookup(vocabulary=[1, 2, 3], num_oov_indices=2, oov_method="invalid_method")


def test_oov_method_ignored_when_single_oov_index():
    """integer_lookup_test.py::test_oov_method_ignored_when_single_oov_index."""
    floormod = pp.IntegerLookup(vocabulary=[1, 2, 3], num_oov_indices=1, oov_method="floormod")
    farmhash = pp.IntegerLookup(vocabulary=[1, 2, 3], num_oov_indices=1, oov_method="farmhash")
    assert torch.equal(floormod([99, 100, 101]), farmhash([99, 100, 101]))
    assert_values(floormod([99, 100, 101]), [0, 0, 0])


def test_oov_method_farmhash_output_is_correct():
    """integer_lookup_test.py::test_oov_method_farmhash_output_is_correct."""
    layer = pp.IntegerLookup(vocabulary=[10, 20, 30], num_oov_indices=4, oov_method="farmhash")
    assert_values(layer([100, 200, 300, 400]), [3, 1, 3, 1])


def test_salt_siphash():
    """integer_lookup_test.py::test_salt_siphash."""
    oov = np.array([100, 300, 700, 1100, 1700, 2000])
    farm = pp.IntegerLookup(vocabulary=[10, 20, 30], num_oov_indices=4, oov_method="farmhash")
    sip = pp.IntegerLookup(
        vocabulary=[10, 20, 30], num_oov_indices=4, oov_method="farmhash", salt=[137, 42]
    )
    assert not torch.equal(farm(oov), sip(oov))
    assert set(sip(oov).tolist()) <= {0, 1, 2, 3}
