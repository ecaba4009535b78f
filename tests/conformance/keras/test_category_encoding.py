"""Keras 3's ``category_encoding_test.py`` (keras/src/layers/preprocessing/), translated.

Inputs and expected values are upstream's; the code is ours, against ``preprocessing``.
"""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_values


@pytest.mark.parametrize("sparse", [False, True])
def test_count_output(sparse):
    """category_encoding_test.py::test_count_output (dense and sparse)."""
    layer = pp.CategoryEncoding(num_tokens=6, output_mode="count", sparse=sparse)
    out = layer(np.array([1, 2, 3, 1]))
    assert out.is_sparse == sparse
    assert out.shape == (6,) and out.dtype == torch.float32
    assert_values(out, [0, 2, 1, 1, 0, 0])


@pytest.mark.parametrize("sparse", [False, True])
def test_count_weighted_output(sparse):
    """category_encoding_test.py::test_count_weighted_output."""
    layer = pp.CategoryEncoding(num_tokens=6, output_mode="count", sparse=sparse)
    inputs = np.array([[0, 1], [0, 0], [1, 2], [3, 1]])
    weights = np.array([[0.1, 0.2], [0.1, 0.1], [0.2, 0.3], [0.4, 0.2]])
    out = layer(inputs, count_weights=weights)
    assert out.shape == (4, 6) and out.dtype == torch.float32
    expected = [
        [0.1, 0.2, 0.0, 0.0, 0.0, 0.0],
        [0.2, 0.0, 0.0, 0.0, 0.0, 0.0],
        [0.0, 0.2, 0.3, 0.0, 0.0, 0.0],
        [0.0, 0.2, 0.0, 0.4, 0.0, 0.0],
    ]
    assert_values(out, expected, atol=1e-6)


@pytest.mark.parametrize("sparse", [False, True])
def test_batched_count_output(sparse):
    """category_encoding_test.py::test_batched_count_output."""
    layer = pp.CategoryEncoding(num_tokens=6, output_mode="count", sparse=sparse)
    out = layer(np.array([[1, 2, 3, 1], [0, 3, 1, 0]]))
    assert out.shape == (2, 6)
    assert_values(out, [[0, 2, 1, 1, 0, 0], [2, 1, 0, 1, 0, 0]])


@pytest.mark.parametrize("sparse", [False, True])
def test_multi_hot(sparse):
    """category_encoding_test.py::test_multi_hot."""
    layer = pp.CategoryEncoding(num_tokens=6, output_mode="multi_hot", sparse=sparse)
    out = layer(np.array([3, 2, 0, 1]))
    assert out.shape == (6,) and out.dtype == torch.float32
    assert_values(out, [1, 1, 1, 1, 0, 0])


@pytest.mark.parametrize("sparse", [False, True])
def test_batched_multi_hot(sparse):
    """category_encoding_test.py::test_batched_multi_hot: a batch, then a scalar input
    (one sample of one element: upstream's compute_output_shape check, eagerly)."""
    layer = pp.CategoryEncoding(num_tokens=6, output_mode="multi_hot", sparse=sparse)
    out = layer(np.array([[3, 2, 0, 1], [3, 2, 0, 1]]))
    assert out.shape == (2, 6)
    assert_values(out, [[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 0, 0]])
    scalar = layer(np.array(4))
    assert scalar.shape == (6,)
    assert_values(scalar, [0, 0, 0, 0, 1, 0])


@pytest.mark.parametrize("sparse", [False, True])
def test_one_hot(sparse):
    """category_encoding_test.py::test_one_hot: rank 1, (n, 1) and a one-element input
    (upstream's compute_output_shape checks, eagerly)."""
    layer = pp.CategoryEncoding(num_tokens=6, output_mode="one_hot", sparse=sparse)
    expected = [
        [0, 0, 0, 1, 0, 0],
        [0, 0, 1, 0, 0, 0],
        [1, 0, 0, 0, 0, 0],
        [0, 1, 0, 0, 0, 0],
    ]
    out = layer(np.array([3, 2, 0, 1]))
    assert out.shape == (4, 6) and out.dtype == torch.float32
    assert_values(out, expected)
    column = layer(np.array([[3], [2], [0], [1]]))  # a trailing axis of 1 is replaced
    assert column.shape == (4, 6)
    assert_values(column, expected)
    assert layer(np.array((4,))).shape == (1, 6)


@pytest.mark.parametrize("sparse", [False, True])
def test_batched_one_hot(sparse):
    """category_encoding_test.py::test_batched_one_hot."""
    layer = pp.CategoryEncoding(num_tokens=6, output_mode="one_hot", sparse=sparse)
    out = layer(np.array([[3, 2, 0, 1], [3, 2, 0, 1]]))
    one = [
        [0, 0, 0, 1, 0, 0],
        [0, 0, 1, 0, 0, 0],
        [1, 0, 0, 0, 0, 0],
        [0, 1, 0, 0, 0, 0],
    ]
    assert out.shape == (2, 4, 6)
    assert_values(out, [one, one])


def test_tf_data_compatibility():
    """category_encoding_test.py::test_tf_data_compatibility: the layer (dtype="int32")
    mapped over a batched pipeline, here a datapipe ``Dataset``."""
    layer = pp.CategoryEncoding(num_tokens=4, output_mode="one_hot", dtype="int32")
    ds = dp.from_tensor_slices(np.array([3, 2, 0, 1])).batch(4).map(layer)
    out = next(iter(ds))
    assert out.dtype == torch.int32
    assert out.tolist() == [[0, 0, 0, 1], [0, 0, 1, 0], [1, 0, 0, 0], [0, 1, 0, 0]]


@pytest.mark.parametrize("sparse", [False, True])
def test_get_config(sparse):
    """category_encoding_test.py::test_get_config."""
    layer = pp.CategoryEncoding(num_tokens=4, output_mode="count", sparse=sparse)
    config = layer.get_config()
    assert (config["num_tokens"], config["output_mode"], config["sparse"]) == (4, "count", sparse)
    revived = pp.CategoryEncoding.from_config(config)
    assert (revived.num_tokens, revived.output_mode, revived.sparse) == (4, "count", sparse)
    assert revived.get_config() == config


def test_category_encoding_without_num_tokens():
    """category_encoding_test.py::test_category_encoding_without_num_tokens."""
    with pytest.raises(ValueError, match="num_tokens must be set"):
        pp.CategoryEncoding(output_mode="multi_hot")


@pytest.mark.parametrize("num_tokens", [0, -1])
def test_category_encoding_with_invalid_num_tokens(num_tokens):
    """category_encoding_test.py::test_category_encoding_with_invalid_num_tokens."""
    with pytest.raises(ValueError, match="num_tokens must be an int >= 1"):
        pp.CategoryEncoding(num_tokens=num_tokens, output_mode="multi_hot")


def test_category_encoding_with_unnecessary_count_weights():
    """category_encoding_test.py::test_category_encoding_with_unnecessary_count_weights."""
    layer = pp.CategoryEncoding(num_tokens=4, output_mode="multi_hot")
    with pytest.raises(ValueError, match="count_weights is only used with output_mode='count'"):
        layer(np.array([0, 1, 2, 3]), count_weights=np.array([0.1, 0.2, 0.3, 0.4]))


def test_invalid_output_mode_raises_error():
    """category_encoding_test.py::test_invalid_output_mode_raises_error."""
    with pytest.raises(ValueError, match="output_mode must be one of .*'invalid_mode'"):
        pp.CategoryEncoding(num_tokens=4, output_mode="invalid_mode")


def test_encode_one_hot_single_sample():
    """category_encoding_test.py::test_encode_one_hot_single_sample (upstream calls the
    private ``_encode``; the public call is the same encoding)."""
    out = pp.CategoryEncoding(num_tokens=4, output_mode="one_hot")(np.array([1, 2, 3, 1]))
    assert_values(out, [[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 1, 0, 0]])


def test_encode_one_hot_batched_samples():
    """category_encoding_test.py::test_encode_one_hot_batched_samples."""
    layer = pp.CategoryEncoding(num_tokens=4, output_mode="one_hot")
    out = layer(np.array([[3, 2, 0, 1], [3, 2, 0, 1]]))
    one = [[0, 0, 0, 1], [0, 0, 1, 0], [1, 0, 0, 0], [0, 1, 0, 0]]
    assert_values(out, [one, one])


def test_count_single_sample():
    """category_encoding_test.py::test_count_single_sample."""
    out = pp.CategoryEncoding(num_tokens=4, output_mode="count")(np.array([1, 2, 3, 1]))
    assert_values(out, [0, 2, 1, 1])


def test_count_batched_samples():
    """category_encoding_test.py::test_count_batched_samples."""
    layer = pp.CategoryEncoding(num_tokens=4, output_mode="count")
    out = layer(np.array([[1, 2, 3, 1], [0, 3, 1, 0]]))
    assert_values(out, [[0, 2, 1, 1], [2, 1, 0, 1]])


@pytest.mark.parametrize("mode", ["multi_hot", "count"])
def test_rank_3_reduces_axis_1(mode):
    """discretization_test.py::test_symbolic_tensor_output_shape's axis rule (Keras's
    ``encode_categorical_inputs``: axis 1 of a rank-3 input), on CategoryEncoding: each
    ``[:, :, j]`` column is one sample."""
    x = np.array([[[0, 1, 1, 2], [3, 1, 0, 0], [2, 2, 2, 0]]])  # (1, 3, 4)
    out = pp.CategoryEncoding(num_tokens=4, output_mode=mode)(x)
    assert out.shape == (1, 4, 4)
    counts = [[1, 0, 1, 1], [0, 2, 1, 0], [1, 1, 1, 0], [2, 0, 1, 0]]
    expected = counts if mode == "count" else np.minimum(counts, 1).tolist()
    assert_values(out, [expected])
