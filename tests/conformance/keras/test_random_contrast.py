"""Keras 3's ``image_preprocessing/random_contrast_test.py``, translated."""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_targets_untouched, assert_values, keras_dict_input, layer_basics


@pytest.mark.parametrize(
    "kwargs,shape",
    [({}, (8, 3, 4, 3)), ({"data_format": "channels_first"}, (8, 3, 4, 4))],
)
def test_layer(kwargs, shape):
    """random_contrast_test.py::test_layer (both layouts)."""
    init = {"factor": 0.75, "value_range": (0, 255), "seed": 1, **kwargs}
    layer_basics(pp.RandomContrast, init, shape, shape, scale=255)


@pytest.mark.parametrize("high", [255, 1], ids=["0_to_255", "0_to_1"])
def test_random_contrast_with_value_range_0_to_255(high):
    """random_contrast_test.py::test_random_contrast_with_value_range_0_to_255 and
    ::test_random_contrast_with_value_range_0_to_1: transform_images applies the drawn
    factor as (x - mean) * f + mean over each channel's pixels, clipped (channels-first
    (12, 3, 8, 16), upstream's branch)."""
    inputs = torch.from_numpy(np.random.RandomState(9809).random((12, 3, 8, 16)).astype("float32"))
    layer = pp.RandomContrast(factor=0.5, value_range=(0, high), seed=9809)
    params = layer.get_random_transformation(inputs)
    out = layer.transform_images(inputs, params)
    factor = params["contrast_factor"].numpy().reshape(-1, 1, 1, 1)
    assert ((factor >= 0.5) & (factor <= 1.5)).all()
    x = inputs.numpy()
    mean = x.mean(axis=(-2, -1), keepdims=True)
    assert_values(out, np.clip((x - mean) * factor + mean, 0, high), atol=1e-6, rtol=1e-6)


def test_tf_data_compatibility():
    """random_contrast_test.py::test_tf_data_compatibility."""
    layer = pp.RandomContrast(factor=0.5, seed=1337, data_format="channels_last")
    data = np.random.default_rng(0).random((2, 8, 8, 3))
    assert tuple(next(iter(dp.from_tensor_slices(data).batch(2).map(layer))).shape) == (2, 8, 8, 3)


def test_dict_input():
    """random_contrast_test.py::test_dict_input: only the images change."""
    layer = pp.RandomContrast(factor=0.1, bounding_box_format="xyxy", data_format="channels_last")
    assert_targets_untouched(layer, keras_dict_input())
