"""Keras 3's ``image_preprocessing/random_elastic_transform_test.py``, translated."""

import numpy as np
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_unchanged, layer_basics


def test_layer():
    """random_elastic_transform_test.py::test_layer."""
    init = {
        "factor": 1.0,
        "scale": 0.5,
        "interpolation": "bilinear",
        "fill_mode": "reflect",
        "fill_value": 0,
        "value_range": (0, 255),
        "seed": 1,
    }
    layer_basics(pp.RandomElasticTransform, init, (8, 3, 4, 3), (8, 3, 4, 3), scale=255)


def test_random_elastic_transform_inference():
    """random_elastic_transform_test.py::test_random_elastic_transform_inference."""
    assert_unchanged(pp.RandomElasticTransform(data_format="channels_last").eval())


def test_random_elastic_transform_no_op():
    """random_elastic_transform_test.py::test_random_elastic_transform_no_op: factor 0,
    then scale 0."""
    for kwargs in ({"factor": 0}, {"scale": 0}):
        assert_unchanged(pp.RandomElasticTransform(**kwargs, data_format="channels_last"))


def test_random_elastic_transform_basic():
    """random_elastic_transform_test.py::test_random_elastic_transform_basic: a given
    distortion 0.9109325 (Keras passes a seed for the field; here the field's N(0, 1)
    draws are parameters) moves the 2x2 square, same shape."""
    inputs = np.zeros((1, 8, 8), dtype="float32")
    inputs[:, 3:5, 3:5] = 1.0
    layer = pp.RandomElasticTransform(data_format="channels_first")
    noise = torch.randn(2, 1, 8, 8, generator=torch.Generator().manual_seed(42))
    params = {
        "apply_transform": torch.tensor([True]),
        "distortion_factor": torch.tensor([0.9109325]),
        "dx": noise[0],
        "dy": noise[1],
    }
    out = layer.transform_images(torch.from_numpy(inputs), params)
    assert out.shape == inputs.shape
    assert not torch.allclose(out, torch.from_numpy(inputs))


def test_tf_data_compatibility():
    """random_elastic_transform_test.py::test_tf_data_compatibility."""
    data = np.random.default_rng(0).random((2, 3, 8, 8))
    layer = pp.RandomElasticTransform(data_format="channels_first")
    assert tuple(next(iter(dp.from_tensor_slices(data).batch(2).map(layer))).shape) == (2, 3, 8, 8)
