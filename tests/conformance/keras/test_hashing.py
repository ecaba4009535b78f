"""Keras 3's ``hashing_test.py`` (keras/src/layers/preprocessing/), translated.

The hashes are TensorFlow's (FarmHash64 / SipHash-2-4 of the values' strings): the
expected bins are upstream's literals.
"""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_values

FIVE = [["A"], ["B"], ["C"], ["D"], ["E"]]
WIRE = [["omar"], ["stringer"], ["marlo"], ["wire"], ["skywalker"]]


class ArrayLike:
    """upstream's ArrayLike: an object with ``__array__``."""

    def __init__(self, values):
        self.values = values

    def __array__(self, dtype=None, copy=None):
        return np.array(self.values)


def test_config():
    """hashing_test.py::test_config: the config round-trips."""
    layer = pp.Hashing(num_bins=8, output_mode="int")
    config = layer.get_config()
    assert pp.Hashing.from_config(config).get_config() == config
    assert pp.layer_from_config(pp.serialize_layer(layer)).num_bins == 8


@pytest.mark.parametrize(
    "kwargs,inputs,expected",
    [
        ({"num_bins": 3}, FIVE, [[1], [0], [1], [1], [2]]),
        (
            {"num_bins": 3, "mask_value": ""},
            [["A"], ["B"], [""], ["C"], ["D"]],
            [[1], [1], [0], [2], [2]],
        ),
        ({"num_bins": 3, "salt": [133, 137]}, FIVE, [[1], [2], [1], [0], [2]]),
        ({"num_bins": 3, "salt": 133}, FIVE, [[0], [0], [2], [1], [0]]),
    ],
    ids=["farmhash", "mask_value", "salt_pair", "salt_int"],
)
def test_correctness(kwargs, inputs, expected):
    """hashing_test.py::test_correctness (its four layers)."""
    out = pp.Hashing(**kwargs)(inputs)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.int64
    assert_values(out, expected)


def test_tf_data_compatibility():
    """hashing_test.py::test_tf_data_compatibility: in a pipeline's map."""
    ds = dp.from_tensor_slices(np.array(FIVE)).batch(5).map(pp.Hashing(num_bins=3))
    assert_values(next(iter(ds)), [[1], [0], [1], [1], [2]])


@pytest.mark.parametrize("data_fn", [list, tuple, np.array, ArrayLike, torch.tensor])
def test_tensor_like_inputs(data_fn):
    """hashing_test.py::test_tensor_like_inputs (plus a torch tensor)."""
    out = pp.Hashing(num_bins=3)(data_fn([0, 1, 2, 3, 4]))
    assert_values(out, [1, 0, 1, 0, 2])


def test_hash_single_bin():
    """hashing_test.py::test_hash_single_bin."""
    assert_values(pp.Hashing(num_bins=1)(np.asarray(FIVE)), [[0]] * 5)


def test_hash_dense_input_farmhash():
    """hashing_test.py::test_hash_dense_input_farmhash."""
    assert_values(pp.Hashing(num_bins=2)(np.asarray(WIRE)), [[0], [0], [1], [0], [0]])


def test_hash_dense_input_mask_value_farmhash():
    """hashing_test.py::test_hash_dense_input_mask_value_farmhash."""
    inp = np.asarray(WIRE)
    assert_values(pp.Hashing(num_bins=3, mask_value="")(inp), [[1], [1], [2], [1], [1]])
    assert_values(pp.Hashing(num_bins=3, mask_value="omar")(inp), [[0], [1], [2], [1], [1]])


def test_hash_dense_list_input_farmhash():
    """hashing_test.py::test_hash_dense_list_input_farmhash."""
    layer = pp.Hashing(num_bins=2)
    assert_values(layer(WIRE), [[0], [0], [1], [0], [0]])
    assert_values(layer([w[0] for w in WIRE]), [0, 0, 1, 0, 0])


def test_hash_dense_int_input_farmhash():
    """hashing_test.py::test_hash_dense_int_input_farmhash."""
    out = pp.Hashing(num_bins=3)(np.asarray([[0], [1], [2], [3], [4]]))
    assert_values(out, [[1], [0], [1], [0], [2]])


def test_hash_dense_input_siphash():
    """hashing_test.py::test_hash_dense_input_siphash."""
    inp = np.asarray(WIRE)
    assert_values(pp.Hashing(num_bins=2, salt=[133, 137])(inp), [[0], [1], [0], [1], [0]])
    assert_values(pp.Hashing(num_bins=2, salt=[211, 137])(inp), [[1], [0], [1], [0], [1]])


def test_hash_dense_int_input_siphash():
    """hashing_test.py::test_hash_dense_int_input_siphash."""
    out = pp.Hashing(num_bins=3, salt=[133, 137])(np.asarray([[0], [1], [2], [3], [4]]))
    assert_values(out, [[1], [1], [2], [0], [1]])


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"num_bins": None}, "num_bins must be an int in"),
        ({"num_bins": -1}, "num_bins must be an int in"),
        ({"num_bins": 2, "salt": "string"}, "salt must be an int, a pair of ints or None"),
        ({"num_bins": 2, "salt": [1]}, "salt must be an int, a pair of ints or None"),
        ({"num_bins": 1, "salt": [133, 137, 177]}, "salt must be an int, a pair of ints"),
    ],
)
def test_invalid_inputs(kwargs, match):
    """hashing_test.py::test_invalid_inputs."""
    with pytest.raises(ValueError, match=match):
        pp.Hashing(**kwargs)


@pytest.mark.parametrize("mode", ["int", "one_hot", "multi_hot", "count"])
@pytest.mark.parametrize("sample", [(4,), (4, 1), (3, 4)])
def test_compute_output_shape(mode, sample):
    """hashing_test.py::test_compute_output_shape: the eager shape of a batch of 2 per
    mode (Keras's axis rule: multi_hot/count reduce axis 1)."""
    out = pp.Hashing(num_bins=5, output_mode=mode)(np.zeros((2, *sample), dtype=np.int64))
    expected = {
        "int": (2, *sample),
        "one_hot": (2, *(sample[:-1] if sample[-1] == 1 else sample), 5),
        "multi_hot": (2, *sample[1:], 5),
        "count": (2, *sample[1:], 5),
    }[mode]
    assert tuple(out.shape) == expected


def test_one_hot_output():
    """hashing_test.py::test_one_hot_output: (5,) and its (5, 1) column give (5, 3)."""
    expected = [[0, 1, 0], [1, 0, 0], [0, 1, 0], [1, 0, 0], [0, 0, 1]]
    layer = pp.Hashing(num_bins=3, output_mode="one_hot")
    assert_values(layer(np.array([0, 1, 2, 3, 4])), expected)
    assert_values(layer(np.array([[0], [1], [2], [3], [4]])), expected)


def test_multi_hot_output():
    """hashing_test.py::test_multi_hot_output."""
    out = pp.Hashing(num_bins=3, output_mode="multi_hot")(np.array([[0, 1, 2, 3, 4]]))
    assert_values(out, [[1.0, 1.0, 1.0]])


@pytest.mark.parametrize(
    "value,expected",
    [([0, 1, 2, 3, 4], [2.0, 2.0, 1.0]), ([[0, 1, 2, 3, 4]], [[2.0, 2.0, 1.0]])],
    ids=["1d_input", "2d_input"],
)
def test_count_output(value, expected):
    """hashing_test.py::test_count_output."""
    assert_values(pp.Hashing(num_bins=3, output_mode="count")(np.array(value)), expected)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_int_output_dtype(dtype):
    """hashing_test.py::test_int_output_dtype: strings of a (16, 4) batch."""
    out = pp.Hashing(num_bins=3, output_mode="int", dtype=dtype)(np.full((16, 4), "a"))
    assert out.dtype == getattr(torch, dtype) and out.shape == (16, 4)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_hot_output_dtype(dtype):
    """hashing_test.py::test_one_hot_output_dtype."""
    out = pp.Hashing(num_bins=3, output_mode="one_hot", dtype=dtype)(np.full((16, 1), "a"))
    assert out.dtype == getattr(torch, dtype) and out.shape == (16, 3)


def test_config_with_custom_name():
    """hashing_test.py::test_config_with_custom_name: Keras's ``name`` round-trips."""
    layer = pp.Hashing(num_bins=2, name="hashing")
    again = pp.Hashing.from_config(layer.get_config())
    assert again.name == layer.name == "hashing"


def test_saving():
    """hashing_test.py::test_saving: a ``.keras`` file there; here the JSON config alone
    rebuilds the layer (it has no state) and gives the same bins."""
    data = np.array(["omar", "stringer", "marlo", "wire", "skywalker"])
    layer = pp.Hashing(num_bins=100)
    again = pp.layer_from_config(pp.serialize_layer(layer))
    assert again is not layer
    assert torch.equal(again(data), layer(data))


@pytest.mark.parametrize(
    "data,expected",
    [
        ([1, 2, 3], [1, 1, 1]),
        ([[1], [2], [3]], [[1], [1], [1]]),
        ([[1, 2], [2, 3], [3, 4]], [[1, 1], [1, 1], [1, 1]]),
        ([[[1], [2]], [[2], [3]], [[3], [4]]], [[[1], [1]], [[1], [1]], [[1], [1]]]),
    ],
    ids=["list_input", "list_input_2d", "list_input_2d_multiple", "list_input_3d"],
)
def test_hash_list_input(data, expected):
    """hashing_test.py::test_hash_list_input."""
    assert_values(pp.Hashing(num_bins=2)(data), expected)


@pytest.mark.parametrize("num_bins", [None, 0])
def test_hashing_invalid_num_bins(num_bins):
    """hashing_test.py::test_hashing_invalid_num_bins."""
    with pytest.raises(ValueError, match="num_bins must be an int in"):
        pp.Hashing(num_bins=num_bins)


def test_hashing_invalid_output_mode():
    """hashing_test.py::test_hashing_invalid_output_mode."""
    with pytest.raises(ValueError, match="output_mode must be one of"):
        pp.Hashing(num_bins=3, output_mode="unsupported_mode")


def test_hashing_invalid_dtype_for_int_mode():
    """hashing_test.py::test_hashing_invalid_dtype_for_int_mode."""
    with pytest.raises(ValueError, match="dtype with output_mode='int' must be one of"):
        pp.Hashing(num_bins=3, output_mode="int", dtype="float32")


def test_hashing_sparse_with_int_mode():
    """hashing_test.py::test_hashing_sparse_with_int_mode."""
    with pytest.raises(ValueError, match="sparse needs output_mode other than 'int'"):
        pp.Hashing(num_bins=3, output_mode="int", sparse=True)
