"""Keras 3's ``image_preprocessing/auto_contrast_test.py``, translated (upstream's
(1, 2, 1, 1) / (1, 2, 2, 3) images are channels_last: given so here, D-K-1)."""

import numpy as np
import torch

import preprocessing as pp

from ._util import as_numpy, assert_values, layer_basics

LAST = {"data_format": "channels_last"}


def _column(values, dtype="float32"):
    """upstream's image: the values as one (1, n, 1, 1) channels_last image."""
    return np.array(values, dtype=dtype).reshape(1, -1, 1, 1)


def test_layer():
    """auto_contrast_test.py::test_layer."""
    out = layer_basics(
        pp.AutoContrast, {"value_range": (20, 200)}, (8, 3, 4, 3), (8, 3, 4, 3), scale=255
    )
    assert out.min() >= 20 - 1e-3 and out.max() <= 200 + 1e-3


def test_constant_channels_dont_get_nanned():
    """auto_contrast_test.py::test_constant_channels_dont_get_nanned."""
    ys = as_numpy(pp.AutoContrast(value_range=(0, 255), **LAST)(_column([1, 1])))
    assert np.any(ys[0] == 1.0) and not np.isnan(ys).any()


def test_auto_contrast_expands_value_range():
    """auto_contrast_test.py::test_auto_contrast_expands_value_range."""
    ys = as_numpy(pp.AutoContrast(value_range=(0, 255), **LAST)(_column([0, 128])))
    assert np.any(ys[0] == 0.0) and np.any(ys[0] == 255.0)


def test_auto_contrast_different_values_per_channel():
    """auto_contrast_test.py::test_auto_contrast_different_values_per_channel."""
    img = np.array([[[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]]], dtype="float32")
    ys = pp.AutoContrast(value_range=(0, 255), **LAST)(img)
    expected = [
        [[[0.0, 0.0, 0.0], [85.0, 85.0, 85.0]], [[170.0, 170.0, 170.0], [255.0, 255.0, 255.0]]]
    ]
    assert_values(ys, expected, atol=1e-4)


def test_auto_contrast_expands_value_range_uint8():
    """auto_contrast_test.py::test_auto_contrast_expands_value_range_uint8: uint8 in,
    float32 out (D-K-2)."""
    ys = pp.AutoContrast(value_range=(0, 255), **LAST)(_column([0, 128], "uint8"))
    assert ys.dtype == torch.float32
    assert_values(ys, _column([0.0, 255.0]))


def test_auto_contrast_properly_converts_value_range():
    """auto_contrast_test.py::test_auto_contrast_properly_converts_value_range."""
    ys = pp.AutoContrast(value_range=(0, 1), **LAST)(_column([0, 0.5]))
    assert_values(ys[0], np.array([[[0.0]], [[1.0]]]))
