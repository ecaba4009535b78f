"""Keras 3's ``image_preprocessing/random_gaussian_blur_test.py``, translated.

Keras pads with zeros; here the image is reflected at its edges (D-K-15), so upstream's
all-ones 2x2 case, whose every pixel is an edge pixel, is checked against Keras's
formula computed in numpy (the literal 0.7273) and against this layer's 1.0; pixels
whose kernel stays inside the image agree with that formula."""

import numpy as np
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_unchanged, assert_values, layer_basics


def _taps(sigma, size=3):
    x = np.arange(size) - (size - 1) / 2
    taps = np.exp(-0.5 * (x / sigma) ** 2)
    return taps / taps.sum()


def _keras_blur(image, sigma_x, sigma_y):
    """Keras's blur of one (H, W) plane: a 3x3 separable Gaussian, zero padding."""
    kernel = np.outer(_taps(sigma_y), _taps(sigma_x))
    padded = np.pad(image, 1)
    h, w = image.shape
    return np.array(
        [[(padded[i : i + 3, j : j + 3] * kernel).sum() for j in range(w)] for i in range(h)]
    )


def test_layer():
    """random_gaussian_blur_test.py::test_layer."""
    init = {"factor": 1.0, "kernel_size": 3, "sigma": 0, "value_range": (0, 255), "seed": 1}
    layer_basics(pp.RandomGaussianBlur, init, (8, 3, 4, 3), (8, 3, 4, 3), scale=255)


def test_random_erasing_inference():
    """random_gaussian_blur_test.py::test_random_erasing_inference: eval()."""
    assert_unchanged(pp.RandomGaussianBlur(data_format="channels_last").eval())


def test_random_erasing_no_op():
    """random_gaussian_blur_test.py::test_random_erasing_no_op: factor 0."""
    assert_unchanged(pp.RandomGaussianBlur(factor=0, data_format="channels_last"))


def test_random_erasing_basic():
    """random_gaussian_blur_test.py::test_random_erasing_basic: blur_factor (0.3732,
    0.8654) on ones. Keras's zero padding gives 0.7273 (reproduced in numpy); the
    reflected edge keeps 1.0 (D-K-15); on a 5x5 image the interior pixels agree."""
    assert_values(_keras_blur(np.ones((2, 2)), 0.3732, 0.8654), np.full((2, 2), 0.7273), atol=1e-4)
    layer = pp.RandomGaussianBlur(data_format="channels_first")
    params = {
        "blur_factor": torch.tensor([[0.3732, 0.8654]]),
        "should_apply_blur": torch.tensor([True]),
    }
    assert_values(
        layer.transform_images(torch.ones(1, 3, 2, 2), params), np.ones((1, 3, 2, 2)), atol=1e-6
    )
    image = np.random.default_rng(0).random((5, 5)).astype("float32")
    out = layer.transform_images(torch.from_numpy(image)[None, None], params)[0, 0]
    assert_values(out[1:-1, 1:-1], _keras_blur(image, 0.3732, 0.8654)[1:-1, 1:-1], atol=1e-6)


def test_tf_data_compatibility():
    """random_gaussian_blur_test.py::test_tf_data_compatibility."""
    layer = pp.RandomGaussianBlur(data_format="channels_first")
    data = np.random.default_rng(1).random((2, 3, 8, 8))
    assert tuple(next(iter(dp.from_tensor_slices(data).batch(2).map(layer))).shape) == (2, 3, 8, 8)
