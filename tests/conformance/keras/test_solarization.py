"""Keras 3's ``image_preprocessing/solarization_test.py``, translated."""

import numpy as np
import pytest
import torch

import preprocessing as pp

from ._util import assert_values, layer_basics


def _input_output(layer, input_value, expected_value):
    """upstream's _test_input_output: (2, 224, 224, 3) uint8 constant images."""
    inputs = np.ones((2, 224, 224, 3), dtype="uint8") * input_value
    out = layer(inputs)
    assert out.dtype == torch.float32
    assert_values(out, np.clip(np.ones((2, 224, 224, 3), "float32") * expected_value, 0, 255))


def test_layer():
    """solarization_test.py::test_layer."""
    init = {
        "addition_factor": 0.75,
        "value_range": (20, 200),
        "threshold_factor": (0, 1),
        "seed": 1,
    }
    layer_basics(pp.Solarization, init, (8, 3, 4, 3), (8, 3, 4, 3), scale=255)


@pytest.mark.parametrize("value,expected", [(0, 255), (64, 191), (127, 128), (191, 64), (255, 0)])
def test_output_values(value, expected):
    """solarization_test.py::test_output_values."""
    _input_output(
        pp.Solarization(value_range=(0, 255), data_format="channels_last"), value, expected
    )


@pytest.mark.parametrize("value,expected", [(0, 0), (191, 64), (255, 0)])
def test_only_values_above_threshold_are_solarized(value, expected):
    """solarization_test.py::test_only_values_above_threshold_are_solarized."""
    layer = pp.Solarization(
        threshold_factor=(128.0 / 255.0, 128.0 / 255.0),
        value_range=(0, 255),
        data_format="channels_last",
    )
    _input_output(layer, value, expected)


def test_random_augmentation_applied_per_sample():
    """solarization_test.py::test_random_augmentation_applied_per_sample."""
    image = torch.rand(16, 16, 3, generator=torch.Generator().manual_seed(0)) * 255
    images = torch.stack([image, image])
    layer = pp.Solarization(
        value_range=(0, 255),
        threshold_factor=0.5,
        addition_factor=0.5,
        data_format="channels_last",
        seed=1,
    )
    out = layer(images)
    assert not torch.allclose(out[0], out[1])
