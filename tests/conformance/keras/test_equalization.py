"""Keras 3's ``image_preprocessing/equalization_test.py``, translated (upstream's default
layout is channels_last: given so here, D-K-1). Keras histograms over the whole batch,
here per image (D-K-16); upstream's cases hold either way."""

import numpy as np
import pytest

import datapipe as dp
import preprocessing as pp

from ._util import as_numpy, assert_values, layer_basics

LAST = {"data_format": "channels_last"}


def _in_range(x, low, high):
    x = as_numpy(x)
    assert (x >= low).all() and (x <= high).all()


@pytest.mark.parametrize(
    "data_format,shape", [("channels_last", (1, 2, 2, 3)), ("channels_first", (1, 3, 2, 2))]
)
def test_layer(data_format, shape):
    """equalization_test.py::test_layer (both layouts)."""
    layer_basics(
        pp.Equalization,
        {"value_range": (0, 255), "data_format": data_format},
        shape,
        shape,
        scale=255,
    )


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_input_dtypes(dtype):
    """equalization_test.py::test_input_dtypes and ::test_equalizes_to_all_bins (float32):
    every level 0..255 appears, within range."""
    xs = np.random.default_rng(42).uniform(0, 255, size=(2, 512, 512, 3)).astype(dtype)
    out = as_numpy(pp.Equalization(value_range=(0, 255), **LAST)(xs))
    assert set(np.unique(out).tolist()) >= set(range(256))
    _in_range(out, 0, 255)


@pytest.mark.parametrize("low,high", [(0, 255), (0, 1)])
def test_output_range(low, high):
    """equalization_test.py::test_output_range."""
    xs = np.random.default_rng(42).uniform(low, high, size=(2, 512, 512, 3)).astype(np.float32)
    _in_range(pp.Equalization(value_range=(low, high), **LAST)(xs), low, high)


def test_constant_regions():
    """equalization_test.py::test_constant_regions."""
    xs = np.zeros((1, 64, 64, 3), dtype=np.float32)
    xs[:, :21], xs[:, 21:42], xs[:, 42:] = 50, 100, 200
    out = as_numpy(pp.Equalization(value_range=(0, 255), **LAST)(xs))
    assert len(np.unique(out)) >= 3
    _in_range(out, 0, 255)


def test_grayscale_images():
    """equalization_test.py::test_grayscale_images (both layouts)."""
    rng = np.random.default_rng(42)
    last = as_numpy(
        pp.Equalization(value_range=(0, 255), **LAST)(rng.uniform(0, 255, (2, 64, 64, 1)))
    )
    assert last.shape[-1] == 1
    _in_range(last, 0, 255)
    first_in = rng.uniform(0, 255, (2, 1, 64, 64))
    first = as_numpy(pp.Equalization(value_range=(0, 255), data_format="channels_first")(first_in))
    assert first.shape[1] == 1
    _in_range(first, 0, 255)


@pytest.mark.parametrize(
    "data_format,shape", [("channels_last", (1, 64, 64, 3)), ("channels_first", (1, 3, 64, 64))]
)
def test_single_color_image(data_format, shape):
    """equalization_test.py::test_single_color_image: a constant image is kept."""
    out = pp.Equalization(value_range=(0, 255), data_format=data_format)(
        np.full(shape, 128, np.float32)
    )
    assert_values(out, np.full(shape, 128.0))


@pytest.mark.parametrize("bins", [16, 64, 128, 256])
def test_different_bin_sizes(bins):
    """equalization_test.py::test_different_bin_sizes."""
    xs = np.random.default_rng(42).uniform(0, 255, size=(1, 64, 64, 3)).astype(np.float32)
    out = as_numpy(pp.Equalization(value_range=(0, 255), bins=bins, **LAST)(xs))
    _in_range(out, 0, 255)
    assert all(len(np.unique(out[..., c])) <= bins for c in range(3))  # a level per bin


def test_tf_data_compatibility():
    """equalization_test.py::test_tf_data_compatibility."""
    data = np.random.default_rng(42).random((2, 8, 8, 3)) * 255
    layer = pp.Equalization(value_range=(0, 255), **LAST)
    _in_range(next(iter(dp.from_tensor_slices(data).batch(2).map(layer))), 0, 255)
