"""Keras 3's ``image_preprocessing/random_hue_test.py``, translated."""

import numpy as np
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_unchanged, assert_values, layer_basics


def test_layer():
    """random_hue_test.py::test_layer."""
    init = {"factor": 0.75, "value_range": (20, 200), "seed": 1}
    out = layer_basics(pp.RandomHue, init, (8, 3, 4, 3), (8, 3, 4, 3), scale=255)
    assert out.min() >= 20 and out.max() <= 200


def test_random_hue_inference():
    """random_hue_test.py::test_random_hue_inference: identity in eval()."""
    assert_unchanged(pp.RandomHue(0.2, [0, 1.0], data_format="channels_last").eval())


def test_random_hue_value_range_0_to_1():
    """random_hue_test.py::test_random_hue_value_range_0_to_1."""
    out = pp.RandomHue(0.2, (0, 1))(torch.rand(3, 3, 3))
    assert out.min() >= 0 and out.max() <= 1


def test_random_hue_value_range_0_to_255():
    """random_hue_test.py::test_random_hue_value_range_0_to_255."""
    out = pp.RandomHue(0.2, (0, 255))(torch.rand(3, 3, 3) * 255)
    assert out.min() >= 0 and out.max() <= 255


def test_random_hue_no_change_with_zero_factor():
    """random_hue_test.py::test_random_hue_no_change_with_zero_factor (in train mode too:
    factor 0 moves no hue)."""
    inputs = torch.randint(0, 255, (3, 224, 224))
    layer = pp.RandomHue(0, (0, 255), data_format="channels_first")
    assert_values(layer.eval()(inputs), inputs.float(), atol=1e-3, rtol=1e-5)
    assert_values(layer.train()(inputs), inputs.float(), atol=1e-3, rtol=1e-5)


def test_random_hue_randomness():
    """random_hue_test.py::test_random_hue_randomness."""
    image = torch.rand(3, 3, 3, generator=torch.Generator().manual_seed(0))
    assert not torch.allclose(pp.RandomHue(0.2, (0, 255), seed=1)(image), image)


def test_tf_data_compatibility():
    """random_hue_test.py::test_tf_data_compatibility."""
    layer = pp.RandomHue(factor=0.5, value_range=[0, 1], data_format="channels_first", seed=1337)
    data = np.random.default_rng(2).random((2, 3, 8, 8))
    assert tuple(next(iter(dp.from_tensor_slices(data).batch(2).map(layer))).shape) == (2, 3, 8, 8)
