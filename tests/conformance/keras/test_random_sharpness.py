"""Keras 3's ``image_preprocessing/random_sharpness_test.py``, translated."""

import numpy as np
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_values, layer_basics


def test_layer():
    """random_sharpness_test.py::test_layer."""
    layer_basics(
        pp.RandomSharpness, {"factor": 0.75, "seed": 1}, (8, 3, 4, 3), (8, 3, 4, 3), scale=255
    )


def test_random_sharpness_value_range():
    """random_sharpness_test.py::test_random_sharpness_value_range."""
    out = pp.RandomSharpness(0.2)(torch.rand(3, 3, 3))
    assert out.min() >= 0 and out.max() <= 1


def test_random_sharpness_no_op():
    """random_sharpness_test.py::test_random_sharpness_no_op: eval(); and f = 0.5 in train
    mode changes nothing either (s = 1)."""
    inputs = np.random.default_rng(0).random((2, 3, 8, 8))
    layer = pp.RandomSharpness((0.5, 0.5))
    assert_values(layer.eval()(inputs), inputs, atol=1e-3, rtol=1e-5)
    assert_values(layer.train()(inputs), inputs, atol=1e-6)


def test_random_sharpness_randomness():
    """random_sharpness_test.py::test_random_sharpness_randomness (a 3x3 image: its
    centre is the one pixel whose kernel stays inside; the border is kept: D-K-15)."""
    image = torch.rand(3, 3, 3, generator=torch.Generator().manual_seed(1))
    out = pp.RandomSharpness(0.2, seed=2)(image)
    assert not torch.allclose(out, image)
    border = torch.ones(3, 3, dtype=torch.bool)
    border[1, 1] = False
    assert torch.equal(out[:, border], image[:, border])


def test_tf_data_compatibility():
    """random_sharpness_test.py::test_tf_data_compatibility."""
    layer = pp.RandomSharpness(factor=0.5, data_format="channels_first", seed=1337)
    data = np.random.default_rng(3).random((2, 3, 8, 8))
    assert tuple(next(iter(dp.from_tensor_slices(data).batch(2).map(layer))).shape) == (2, 3, 8, 8)
