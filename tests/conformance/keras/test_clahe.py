"""Keras 3's ``image_preprocessing/clahe_test.py``, translated."""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import as_numpy, layer_basics

CLAHE = pp.ContrastLimitedAdaptiveHistogramEqualization
LAST = {"data_format": "channels_last"}


def _in_range(x, low, high):
    x = as_numpy(x)
    assert (x >= low).all() and (x <= high).all()


@pytest.mark.parametrize(
    "data_format,shape", [("channels_last", (1, 4, 4, 3)), ("channels_first", (1, 3, 4, 4))]
)
def test_layer(data_format, shape):
    """clahe_test.py::test_layer (both layouts, 2x2 tiles)."""
    init = {"value_range": (0, 255), "data_format": data_format, "tile_grid_size": (2, 2)}
    layer_basics(CLAHE, init, shape, shape, scale=255)


def test_clahe_identity():
    """clahe_test.py::test_clahe_identity."""
    xs = np.random.default_rng(0).uniform(0, 255, size=(2, 64, 64, 3)).astype(np.float32)
    out = CLAHE(value_range=(0, 255), **LAST)(xs)
    assert tuple(out.shape) == (2, 64, 64, 3)
    _in_range(out, 0, 255)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_input_dtypes(dtype):
    """clahe_test.py::test_input_dtypes (integers come back as float32: D-K-2)."""
    xs = np.random.default_rng(1).uniform(0, 255, size=(2, 32, 32, 3)).astype(dtype)
    out = CLAHE(value_range=(0, 255), **LAST)(xs)
    assert out.dtype == torch.float32
    _in_range(out, 0, 255)


@pytest.mark.parametrize("low,high", [(0, 255), (0, 1)])
def test_output_range(low, high):
    """clahe_test.py::test_output_range."""
    xs = np.random.default_rng(2).uniform(low, high, size=(2, 32, 32, 3)).astype(np.float32)
    _in_range(CLAHE(value_range=(low, high), **LAST)(xs), low, high)


def test_grayscale_images():
    """clahe_test.py::test_grayscale_images."""
    xs = np.random.default_rng(3).uniform(0, 255, size=(2, 32, 32, 1)).astype(np.float32)
    out = as_numpy(CLAHE(value_range=(0, 255), **LAST)(xs))
    assert out.shape[-1] == 1
    _in_range(out, 0, 255)


def test_tf_data_compatibility():
    """clahe_test.py::test_tf_data_compatibility."""
    data = np.random.default_rng(4).random((2, 16, 16, 3)) * 255
    out = next(iter(dp.from_tensor_slices(data).batch(2).map(CLAHE(value_range=(0, 255), **LAST))))
    assert tuple(out.shape) == (2, 16, 16, 3)
    _in_range(out, 0, 255)
