"""RandomBrightness: fixed deltas, and against Keras 3.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import pytest
import torch
from _layer_helpers import FORMATS, compare, keras_batch

import preprocessing as pp


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: pp.RandomBrightness(0.1, value_range=(0,)), "RandomBrightness: value_range"),
    ],
)
def test_bad_arguments_name_layer_and_argument(build, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("/", "/")):
        build()


@pytest.mark.parametrize("fmt", FORMATS)
def test_brightness_matches_keras(ref, fmt):
    x = keras_batch(fmt=fmt) * 255
    kw = dict(value_range=(0, 255), data_format=fmt)
    brightness = pp.RandomBrightness((0.2, 0.2), **kw)
    keras_kw = dict(value_range=(0, 255))
    compare(ref, brightness, "RandomBrightness", ((0.2, 0.2),), keras_kw, x, atol=1e-3)


def test_brightness_fixed_values():
    x = torch.tensor([[[0.2, 0.4], [0.6, 0.8]]])
    b = pp.RandomBrightness(0.5, value_range=(0, 1)).transform_images(
        x, {"delta": torch.tensor([0.3])}
    )
    assert torch.allclose(b, torch.tensor([[[0.5, 0.7], [0.9, 1.0]]]))
