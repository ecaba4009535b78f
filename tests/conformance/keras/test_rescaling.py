"""Keras 3's ``rescaling_test.py`` (keras/src/layers/preprocessing/), translated."""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_values


@pytest.mark.parametrize(
    "kwargs,dtype",
    [
        ({"scale": 1.0 / 255, "offset": 0.5}, torch.float32),
        ({"scale": 2, "offset": 0.5}, torch.float32),
        ({"scale": 1.0, "offset": 2}, torch.float32),
        ({"scale": 1.0 / 255, "offset": 0.5}, torch.int16),
        ({"scale": np.array(1.0 / 255.0), "offset": np.array(0.5)}, torch.float32),
    ],
    ids=["basics", "int_scale", "int_offset", "int_inputs", "numpy_args"],
)
def test_rescaling_basics(kwargs, dtype):
    """rescaling_test.py::test_rescaling_basics, ::test_rescaling_dtypes (int scale, int
    offset, int16 inputs) and ::test_numpy_args: (2, 3) in, (2, 3) float32 out, no
    weights, x * scale + offset."""
    layer = pp.Rescaling(**kwargs)
    x = torch.arange(6, dtype=dtype).reshape(2, 3)
    out = layer(x)
    assert tuple(out.shape) == (2, 3) and out.dtype == torch.float32
    assert list(layer.parameters()) == [] and list(layer.state_dict()) == []
    scale, offset = float(kwargs["scale"]), float(kwargs["offset"])
    assert_values(out, x.double().numpy() * scale + offset, atol=1e-6)


def test_rescaling_correctness():
    """rescaling_test.py::test_rescaling_correctness."""
    x = np.random.default_rng(0).random((3, 10, 10, 3)) * 255
    out = pp.Rescaling(scale=1.0 / 255, offset=0.5, data_format="channels_last")(x)
    assert_values(out, x / 255 + 0.5, atol=1e-6)


@pytest.mark.parametrize("name", ["tf_data", "grain"])
def test_tf_data_compatibility(name):
    """rescaling_test.py::test_tf_data_compatibility and ::test_grain_compatibility: in a
    pipeline's map (a datapipe Dataset); the output is a CPU tensor."""
    x = np.random.default_rng(1).random((3, 10, 10, 3)) * 255
    layer = pp.Rescaling(scale=1.0 / 255, offset=0.5, data_format="channels_last")
    out = next(iter(dp.from_tensor_slices(x).batch(3).map(layer)))
    assert isinstance(out, torch.Tensor) and out.device.type == "cpu"
    assert_values(out, x / 255 + 0.5, atol=1e-6)


def test_rescaling_with_channels_first_and_vector_scale():
    """rescaling_test.py::test_rescaling_with_channels_first_and_vector_scale: one scale
    per channel of (2, 3, 10, 10) channels-first images."""
    scale = [1.0 / 255, 1.5 / 255, 2.0 / 255]
    x = np.random.default_rng(2).random((2, 3, 10, 10)) * 255
    out = pp.Rescaling(scale=scale, offset=0.5, data_format="channels_first")(x)
    assert_values(out, x * np.array(scale).reshape(1, 3, 1, 1) + 0.5, atol=1e-6)
