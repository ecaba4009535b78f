"""Keras 3's ``image_preprocessing/random_erasing_test.py``, translated. The erased
rectangle is given by its float corners ``[x0, x1, y0, y1]`` here, by a boolean pixel
mask in Keras (the same pixels)."""

import numpy as np
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_unchanged, assert_values, layer_basics

LAST = {"data_format": "channels_last"}


def test_layer():
    """random_erasing_test.py::test_layer."""
    init = {"factor": 1.0, "scale": 0.5, "fill_value": 0, "value_range": (0, 255), "seed": 1}
    layer_basics(pp.RandomErasing, init, (8, 3, 4, 3), (8, 3, 4, 3), scale=255)


def test_random_erasing_inference():
    """random_erasing_test.py::test_random_erasing_inference: identity in eval()."""
    assert_unchanged(pp.RandomErasing(**LAST).eval())


def test_random_erasing_no_op():
    """random_erasing_test.py::test_random_erasing_no_op: factor 0, then scale 0."""
    assert_unchanged(pp.RandomErasing(factor=0, **LAST))
    assert_unchanged(pp.RandomErasing(scale=0, **LAST))


def test_random_erasing_basic():
    """random_erasing_test.py::test_random_erasing_basic: the top-left pixel of a ones
    (2, 2, 1) image is filled with 0 (upstream's channels_last case)."""
    layer = pp.RandomErasing(fill_value=0, **LAST)
    params = {
        "corners": torch.tensor([[0.0, 1.0, 0.0, 1.0]]),
        "apply_erasing": torch.tensor([True]),
    }
    out = layer.transform_images(torch.ones(1, 2, 2, 1), params)
    assert_values(out, [[[[0.0], [1.0]], [[1.0], [1.0]]]])


def test_tf_data_compatibility():
    """random_erasing_test.py::test_tf_data_compatibility."""
    data = np.random.default_rng(0).random((2, 3, 8, 8))
    layer = pp.RandomErasing(data_format="channels_first")
    assert tuple(next(iter(dp.from_tensor_slices(data).batch(2).map(layer))).shape) == (2, 3, 8, 8)
