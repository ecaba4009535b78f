"""Keras 3's ``image_preprocessing/random_invert_test.py``, translated."""

import numpy as np

import datapipe as dp
import preprocessing as pp

from ._util import as_numpy, assert_unchanged, assert_values, layer_basics


def test_layer():
    """random_invert_test.py::test_layer."""
    init = {"factor": 0.75, "value_range": (20, 200), "seed": 1}
    layer_basics(pp.RandomInvert, init, (8, 3, 4, 3), (8, 3, 4, 3), scale=255)


def test_random_invert_inference():
    """random_invert_test.py::test_random_invert_inference: identity in eval()."""
    assert_unchanged(pp.RandomInvert(data_format="channels_last").eval())


def test_random_invert_no_op():
    """random_invert_test.py::test_random_invert_no_op: factor 0 inverts nothing."""
    assert_unchanged(pp.RandomInvert(factor=0, data_format="channels_last"))


def test_random_invert_basic():
    """random_invert_test.py::test_random_invert_basic: factor (1, 1) inverts: 1 - x."""
    data = np.random.default_rng(0).random((1, 3, 8, 8))
    layer = pp.RandomInvert(
        factor=(1, 1), value_range=[0, 1], data_format="channels_first", seed=1337
    )
    assert_values(layer(data), 1 - data, atol=1e-6)


def test_tf_data_compatibility():
    """random_invert_test.py::test_tf_data_compatibility."""
    layer = pp.RandomInvert(factor=0.5, value_range=[0, 1], data_format="channels_first", seed=1337)
    data = np.random.default_rng(1).random((2, 3, 8, 8))
    out = as_numpy(next(iter(dp.from_tensor_slices(data).batch(2).map(layer))))
    for image, original in zip(out, data):  # each image is itself or its inverse
        assert np.allclose(image, original, atol=1e-6) or np.allclose(
            image, 1 - original, atol=1e-6
        )
