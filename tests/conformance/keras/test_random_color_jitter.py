"""Keras 3's ``image_preprocessing/random_color_jitter_test.py``, translated.

Keras seeds its four sub-layers with the jitter's seed, so a jitter with one factor
draws what the lone layer with that seed draws. Here each step draws from its own seed
derived from the jitter's (D-K-5); the same draws come from one ``torch.Generator`` state
handed to both, which is what upstream's "X only" cases compare.
"""

import numpy as np
import pytest
import torch

import datapipe as dp
import preprocessing as pp

from ._util import assert_unchanged, assert_values, layer_basics


def test_layer():
    """random_color_jitter_test.py::test_layer."""
    init = {
        "value_range": (20, 200),
        "brightness_factor": 0.2,
        "contrast_factor": 0.2,
        "saturation_factor": 0.2,
        "hue_factor": 0.2,
        "seed": 1,
    }
    out = layer_basics(pp.RandomColorJitter, init, (8, 3, 4, 3), (8, 3, 4, 3), scale=255)
    assert out.min() >= 20 and out.max() <= 200


def test_random_color_jitter_inference():
    """random_color_jitter_test.py::test_random_color_jitter_inference: identity in eval()."""
    layer = pp.RandomColorJitter(
        value_range=(0, 1),
        brightness_factor=0.1,
        contrast_factor=0.2,
        saturation_factor=0.9,
        hue_factor=0.1,
        data_format="channels_last",
    )
    assert_unchanged(layer.eval())


@pytest.mark.parametrize(
    "step,cls",
    [
        ("brightness", pp.RandomBrightness),
        ("saturation", pp.RandomSaturation),
        ("hue", pp.RandomHue),
        ("contrast", pp.RandomContrast),
    ],
)
def test_brightness_only(step, cls):
    """random_color_jitter_test.py::test_brightness_only, ::test_saturation_only,
    ::test_hue_only and ::test_contrast_only: a jitter with one factor [0.5, 0.5] equals
    that layer, given the same draws."""
    inputs = torch.from_numpy(np.random.RandomState(2390).random((12, 3, 8, 16)))
    jitter = pp.RandomColorJitter(**{f"{step}_factor": [0.5, 0.5]}, seed=2390)
    alone = cls(factor=[0.5, 0.5], seed=2390)
    out = jitter(inputs, generator=torch.Generator().manual_seed(7))
    want = alone(inputs, generator=torch.Generator().manual_seed(7))
    assert_values(out, want, atol=1e-6)
    assert not torch.allclose(out, inputs)


def test_tf_data_compatibility():
    """random_color_jitter_test.py::test_tf_data_compatibility."""
    layer = pp.RandomColorJitter(
        value_range=(0, 1),
        brightness_factor=0.1,
        contrast_factor=0.2,
        saturation_factor=0.9,
        hue_factor=0.1,
    )
    data = np.random.default_rng(0).random((2, 3, 8, 8))
    out = next(iter(dp.from_tensor_slices(data).batch(2).map(layer)))
    assert tuple(out.shape) == (2, 3, 8, 8) and out.min() >= 0 and out.max() <= 1
