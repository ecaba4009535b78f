"""Keras 3's ``image_preprocessing/random_posterization_test.py``, translated."""

import numpy as np
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_unchanged, assert_values, layer_basics


def test_layer():
    """random_posterization_test.py::test_layer."""
    init = {"factor": 1, "value_range": (20, 200), "seed": 1}
    out = layer_basics(pp.RandomPosterization, init, (8, 3, 4, 3), (8, 3, 4, 3), scale=255)
    assert out.min() >= 20 and out.max() <= 200


def test_random_posterization_inference():
    """random_posterization_test.py::test_random_posterization_inference: eval()."""
    assert_unchanged(pp.RandomPosterization(1, [0, 255], data_format="channels_last").eval())


def test_random_posterization_basic():
    """random_posterization_test.py::test_random_posterization_basic: 1 bit kept."""
    layer = pp.RandomPosterization(1, [0, 255], data_format="channels_last", seed=3481)
    inputs = np.asarray([[[128.0, 235.0, 87.0], [12.0, 1.0, 23.0], [24.0, 18.0, 121.0]]])
    expected = [[[128.0, 128.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]]
    assert_values(layer(inputs), expected)


def test_random_posterization_value_range_0_to_1():
    """random_posterization_test.py::test_random_posterization_value_range_0_to_1."""
    out = pp.RandomPosterization(1, [0, 1.0])(torch.rand(3, 3, 3))
    assert out.min() >= 0 and out.max() <= 1


def test_random_posterization_value_range_0_to_255():
    """random_posterization_test.py::test_random_posterization_value_range_0_to_255."""
    out = pp.RandomPosterization(1, [0, 255])(torch.rand(3, 3, 3) * 255)
    assert out.min() >= 0 and out.max() <= 255


def test_random_posterization_randomness():
    """random_posterization_test.py::test_random_posterization_randomness: [0, 1) values
    in a (0, 255) range keep 1 bit: all become 0."""
    image = torch.rand(3, 3, 3, generator=torch.Generator().manual_seed(0))
    out = pp.RandomPosterization(1, [0, 255])(image)
    assert not torch.allclose(out, image)
    assert torch.equal(out, torch.zeros(3, 3, 3))


def test_tf_data_compatibility():
    """random_posterization_test.py::test_tf_data_compatibility."""
    data = np.random.default_rng(1).random((2, 3, 8, 8))
    layer = pp.RandomPosterization(1, [0, 255])
    assert tuple(next(iter(dp.from_tensor_slices(data).batch(2).map(layer))).shape) == (2, 3, 8, 8)
