"""Keras 3's ``image_preprocessing/random_saturation_test.py``, translated."""

import numpy as np
import torch

import datapipe as dp
import preprocessing as pp

from ._util import as_numpy, assert_values, layer_basics


def test_layer():
    """random_saturation_test.py::test_layer."""
    layer_basics(
        pp.RandomSaturation, {"factor": 0.75, "seed": 1}, (8, 3, 4, 3), (8, 3, 4, 3), scale=255
    )


def test_random_saturation_value_range():
    """random_saturation_test.py::test_random_saturation_value_range."""
    out = pp.RandomSaturation(0.2)(torch.rand(3, 3, 3))
    assert out.min() >= 0 and out.max() <= 1


def test_random_saturation_no_op():
    """random_saturation_test.py::test_random_saturation_no_op: eval()."""
    inputs = np.random.default_rng(0).random((2, 3, 8, 8))
    assert_values(pp.RandomSaturation((0.5, 0.5)).eval()(inputs), inputs, atol=1e-3, rtol=1e-5)


def test_random_saturation_full_grayscale():
    """random_saturation_test.py::test_random_saturation_full_grayscale: factor 0 gives
    equal channels."""
    inputs = np.random.default_rng(1).random((2, 3, 8, 8))
    out = as_numpy(pp.RandomSaturation(factor=(0.0, 0.0))(inputs))
    np.testing.assert_allclose(out[:, 0], out[:, 1])
    np.testing.assert_allclose(out[:, 1], out[:, 2])


def test_random_saturation_full_saturation():
    """random_saturation_test.py::test_random_saturation_full_saturation: factor 1 gives
    HSV saturation 1 (the largest, within 0.1), in (0, 1) images (upstream compares with
    ``value_range[1]`` of its default (0, 255), where it clips saturation to 255; here the
    saturation is clipped to [0, 1]: D-K-18)."""
    inputs = np.random.default_rng(2).random((2, 3, 8, 8))
    out = as_numpy(pp.RandomSaturation(factor=(1.0, 1.0), value_range=(0, 1))(inputs))
    high, low = out.max(axis=1), out.min(axis=1)
    saturation = (high - low) / np.maximum(high, 1e-7)
    assert abs(saturation.max() - 1.0) <= 0.1
    assert np.allclose(saturation, 1.0, atol=1e-5)


def test_random_saturation_randomness():
    """random_saturation_test.py::test_random_saturation_randomness."""
    image = torch.rand(3, 3, 3, generator=torch.Generator().manual_seed(3))
    assert not torch.allclose(pp.RandomSaturation(0.2, seed=4)(image), image)


def test_tf_data_compatibility():
    """random_saturation_test.py::test_tf_data_compatibility."""
    layer = pp.RandomSaturation(factor=0.5, data_format="channels_first", seed=1337)
    data = np.random.default_rng(5).random((2, 3, 8, 8))
    assert tuple(next(iter(dp.from_tensor_slices(data).batch(2).map(layer))).shape) == (2, 3, 8, 8)
