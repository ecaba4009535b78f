"""Keras 3's ``image_preprocessing/random_brightness_test.py``, translated.

Keras's default layout is channels_last; this package's is channels_first (D-K-1), so
upstream's (H, W, C) inputs are given with ``data_format="channels_last"``.
"""

import numpy as np
import pytest

import datapipe as dp
import preprocessing as pp

from ._util import (
    as_numpy,
    assert_targets_untouched,
    assert_unchanged,
    keras_dict_input,
    layer_basics,
)

LAST = {"data_format": "channels_last"}


def test_layer():
    """random_brightness_test.py::test_layer."""
    out = layer_basics(
        pp.RandomBrightness,
        {"factor": 0.75, "value_range": (20, 200), "seed": 1},
        (8, 3, 4, 3),
        (8, 3, 4, 3),
        scale=255,
    )
    assert out.min() >= 20 and out.max() <= 200


def test_random_brightness_inference():
    """random_brightness_test.py::test_random_brightness_inference: identity in eval()."""
    assert_unchanged(pp.RandomBrightness([0, 1.0], **LAST).eval())


@pytest.mark.parametrize("factor,sign", [([0.1, 1.0], 1), ([-1.0, -0.1], -1)])
def test_correctness(factor, sign):
    """random_brightness_test.py::test_correctness: always up, or always down."""
    inputs = np.random.RandomState(2390).randint(0, 255, size=(224, 224, 3))
    diff = as_numpy(pp.RandomBrightness(factor, **LAST)(inputs)) - inputs
    assert (sign * diff).min() >= 0 and (sign * diff).mean() > 0


def test_tf_data_compatibility():
    """random_brightness_test.py::test_tf_data_compatibility: in a pipeline's map."""
    layer = pp.RandomBrightness(factor=0.5, seed=1337, **LAST)
    data = np.random.default_rng(0).random((2, 8, 8, 3))
    out = next(iter(dp.from_tensor_slices(data).batch(2).map(layer)))
    assert tuple(out.shape) == (2, 8, 8, 3)


@pytest.mark.parametrize("value_range", ["incorrect_type", [10]])
def test_value_range_incorrect_type(value_range):
    """random_brightness_test.py::test_value_range_incorrect_type and
    ::test_value_range_incorrect_length."""
    with pytest.raises(ValueError, match="value_range must be a pair of numbers"):
        pp.RandomBrightness(factor=0.1, value_range=value_range)


@pytest.mark.parametrize("factor", [[0.1], "invalid_type", -1.1, 1.1])
def test_set_factor_incorrect_length(factor):
    """random_brightness_test.py::test_set_factor_incorrect_length,
    ::test_set_factor_incorrect_type, ::test_factor_range_below_lower_bound and
    ::test_factor_range_above_upper_bound (Keras's private ``_set_factor``: the
    constructor's factor check here)."""
    with pytest.raises(ValueError, match="factor must"):
        pp.RandomBrightness(factor=factor)


def test_randomly_adjust_brightness_input_incorrect_rank():
    """random_brightness_test.py::test_randomly_adjust_brightness_input_incorrect_rank."""
    with pytest.raises(ValueError, match="expected a rank-3 image or a rank-4 batch"):
        pp.RandomBrightness(factor=0.1)(np.random.default_rng(1).random((10, 10)))


def test_dict_input():
    """random_brightness_test.py::test_dict_input: only the images change."""
    layer = pp.RandomBrightness(factor=0.1, bounding_box_format="xyxy", **LAST)
    assert_targets_untouched(layer, keras_dict_input())
