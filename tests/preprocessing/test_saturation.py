"""RandomSaturation: against the standard library's colorsys, the draw, and against Keras 3
with our draw.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import colorsys

import pytest
import torch
from _layer_helpers import FORMATS, close, colorsys_map, photometric_batch, pixels
from differential import keras_transform

import preprocessing as pp


@pytest.mark.parametrize("lo_hi", [(0, 1), (0, 255)])
def test_saturation_scaling_matches_colorsys(lo_hi):
    lo, hi = lo_hi
    x = pixels()
    f = torch.linspace(0.0, 3.0, x.shape[0])

    def expected(i, r, g, b):
        h, s, v = colorsys.rgb_to_hsv(r, g, b)
        return colorsys.hsv_to_rgb(h, min(s * float(f[i]), 1.0), v)

    got = pp.RandomSaturation(0.5, value_range=lo_hi).transform_images(x * hi, {"factor": f})
    torch.testing.assert_close(got / hi, colorsys_map(x, expected), rtol=0, atol=1e-5)


def test_saturation_draw_maps_half_to_no_change():
    layer = pp.RandomSaturation((0.5, 0.5), value_range=(0, 1))
    x = pixels()
    torch.testing.assert_close(layer(x), x, rtol=0, atol=1e-6)
    gray = pp.RandomSaturation((0.0, 0.0), value_range=(0, 1))(x)
    torch.testing.assert_close(gray, x.amax(dim=1, keepdim=True).expand_as(x))


@pytest.mark.parametrize("fmt", FORMATS)
def test_saturation_with_our_draw_where_keras_clips_to_unit(ref, fmt):
    # Keras clips the saturation to value_range: with (0, 1) that is our [0, 1] clip.
    x = photometric_batch(fmt, scale=1.0)
    ours = pp.RandomSaturation(1.0, value_range=(0, 1), data_format=fmt, seed=2)
    params = ours.get_random_transformation(torch.from_numpy(x))
    assert float(params["factor"].max()) > 1.0  # some images get more saturated
    kw = dict(value_range=(0, 1), data_format=fmt)
    draw = {"factor": params["factor"].numpy()}
    expected = ref(keras_transform, "RandomSaturation", (1.0,), kw, x, draw)
    close(ours.transform_images(torch.from_numpy(x), params), expected, 1e-5)
