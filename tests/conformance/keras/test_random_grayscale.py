"""Keras 3's ``image_preprocessing/random_grayscale_test.py``, translated."""

import numpy as np
import pytest

import datapipe as dp
import preprocessing as pp

from ._util import as_numpy, layer_basics


@pytest.mark.parametrize(
    "data_format,shape", [("channels_last", (1, 2, 2, 3)), ("channels_first", (1, 3, 2, 2))]
)
def test_layer(data_format, shape):
    """random_grayscale_test.py::test_layer (both layouts)."""
    layer_basics(pp.RandomGrayscale, {"factor": 0.5, "data_format": data_format}, shape, shape)


@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_grayscale_conversion(data_format):
    """random_grayscale_test.py::test_grayscale_conversion: factor 1 makes R = G = B and
    keeps 3 channels."""
    shape = (2, 4, 4, 3) if data_format == "channels_last" else (2, 3, 4, 4)
    xs = np.random.default_rng(0).uniform(0, 255, size=shape).astype(np.float32)
    out = as_numpy(pp.RandomGrayscale(factor=1.0, data_format=data_format)(xs))
    axis = -1 if data_format == "channels_last" else 1
    assert out.shape[axis] == 3
    r, g, b = np.moveaxis(out, axis, 0)
    assert np.allclose(r, g) and np.allclose(g, b)
    assert not np.allclose(out, xs)


@pytest.mark.parametrize("factor", [-0.1, 1.1])
def test_invalid_factor(factor):
    """random_grayscale_test.py::test_invalid_factor."""
    with pytest.raises(ValueError, match="factor must lie in"):
        pp.RandomGrayscale(factor=factor)


def test_tf_data_compatibility():
    """random_grayscale_test.py::test_tf_data_compatibility."""
    data = np.random.default_rng(1).random((2, 3, 8, 8)) * 255
    layer = pp.RandomGrayscale(factor=0.5, data_format="channels_first")
    assert next(iter(dp.from_tensor_slices(data).batch(2).map(layer))).shape == data.shape


@pytest.mark.parametrize(
    "shape,data_format",
    [
        ((1, 4, 4, 3), "channels_last"),
        ((1, 3, 4, 4), "channels_first"),
        ((4, 4, 3), "channels_last"),
        ((3, 4, 4), "channels_first"),
    ],
)
def test_grayscale_with_single_color_image(shape, data_format):
    """random_grayscale_test.py::test_grayscale_with_single_color_image: a constant 128
    image stays one value per channel (batched and unbatched)."""
    xs = np.full(shape, 128, dtype=np.float32)
    out = as_numpy(pp.RandomGrayscale(factor=1.0, data_format=data_format)(xs))
    image = out[0] if len(shape) == 4 else out
    channel = image[..., 0] if data_format == "channels_last" else image[0]
    assert len(np.unique(channel)) == 1
