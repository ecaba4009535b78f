"""Solarization: against PIL's solarize, the addition before the threshold, and against
Keras 3 with our draws.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import pytest
import torch
from _layer_helpers import FORMATS, close, from_pil, photometric_batch, pil, uint8_image
from differential import keras_transform
from PIL import ImageOps

import preprocessing as pp


@pytest.mark.parametrize("threshold", [0, 64, 128, 200, 255])
def test_solarization_equals_pil_solarize(threshold):
    x = uint8_image(threshold)
    layer = pp.Solarization()
    params = {"additions": torch.zeros(1), "thresholds": torch.tensor([float(threshold)])}
    expected = from_pil(ImageOps.solarize(pil(x), threshold))
    assert torch.equal(layer.transform_images(x, params), expected)


def test_solarization_adds_then_clips_then_inverts():
    layer = pp.Solarization(value_range=(0, 1))
    x = torch.tensor([[[0.0, 0.2, 0.6, 0.9]]])
    params = {"additions": torch.tensor([51.0]), "thresholds": torch.tensor([204.0])}
    # + 0.2, clip, then values >= 0.8 become 1 - v.
    expected = torch.tensor([[[0.2, 0.4, 0.2, 0.0]]])
    torch.testing.assert_close(layer.transform_images(x, params), expected, rtol=0, atol=1e-6)
    both = pp.Solarization((0.5, 0.5), (0.25, 0.25), seed=0)
    p = both.get_random_transformation(torch.zeros(2, 1, 1, 1))
    assert p["additions"].tolist() == [127.5, 127.5] and p["thresholds"].tolist() == [63.75] * 2


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("value_range", [(0, 255), (0, 1)])
def test_solarization_with_our_draws(ref, fmt, value_range):
    x = photometric_batch(fmt, scale=value_range[1])
    kw = dict(value_range=value_range, data_format=fmt)
    sol = pp.Solarization((0, 0.3), (0, 0.9), seed=6, **kw)
    params = sol.get_random_transformation(torch.from_numpy(x))
    fixed = {k: v.numpy().reshape(-1, 1, 1, 1) for k, v in params.items()}
    expected = ref(keras_transform, "Solarization", ((0, 0.3), (0, 0.9)), kw, x, fixed)
    close(sol.transform_images(torch.from_numpy(x), params), expected)
