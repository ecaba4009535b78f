"""Keras 3's ``image_preprocessing/random_color_degeneration_test.py``, translated."""

import numpy as np
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_values, layer_basics


def test_layer():
    """random_color_degeneration_test.py::test_layer."""
    init = {"factor": 0.75, "value_range": (0, 1), "seed": 1}
    out = layer_basics(pp.RandomColorDegeneration, init, (8, 3, 4, 3), (8, 3, 4, 3))
    assert out.min() >= 0 and out.max() <= 1


def test_random_color_degeneration_value_range():
    """random_color_degeneration_test.py::test_random_color_degeneration_value_range."""
    image = torch.rand(3, 3, 3)
    out = pp.RandomColorDegeneration(0.2, value_range=(0, 1))(image)
    assert out.min() >= 0 and out.max() <= 1


def test_random_color_degeneration_no_op():
    """random_color_degeneration_test.py::test_random_color_degeneration_no_op: eval()."""
    inputs = np.random.default_rng(0).random((2, 3, 8, 8))
    out = pp.RandomColorDegeneration((0.5, 0.5)).eval()(inputs)
    assert_values(out, inputs, atol=1e-3, rtol=1e-5)


def test_random_color_degeneration_factor_zero():
    """random_color_degeneration_test.py::test_random_color_degeneration_factor_zero."""
    inputs = np.random.default_rng(1).random((2, 3, 8, 8))
    assert_values(
        pp.RandomColorDegeneration(factor=(0.0, 0.0))(inputs), inputs, atol=1e-3, rtol=1e-5
    )


def test_random_color_degeneration_randomness():
    """random_color_degeneration_test.py::test_random_color_degeneration_randomness."""
    image = torch.rand(3, 3, 3, generator=torch.Generator().manual_seed(2))
    out = pp.RandomColorDegeneration(0.2, seed=3)(image)
    assert not torch.allclose(out, image)


def test_tf_data_compatibility():
    """random_color_degeneration_test.py::test_tf_data_compatibility."""
    layer = pp.RandomColorDegeneration(factor=0.5, data_format="channels_first", seed=1337)
    data = np.random.default_rng(4).random((2, 3, 8, 8))
    assert tuple(next(iter(dp.from_tensor_slices(data).batch(2).map(layer))).shape) == (2, 3, 8, 8)
