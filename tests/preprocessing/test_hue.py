"""RandomHue: against the standard library's colorsys, the signed draw, and against Keras 3
with our draw.

The tolerance against Keras is ``ATOL`` (_layer_helpers.py says why); where the two
differ by design (documented in the layer) only the part where they agree is compared.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import colorsys

import pytest
import torch
from _layer_helpers import ATOL, FORMATS, close, colorsys_map, photometric_batch, pixels
from differential import keras_transform

import preprocessing as pp


@pytest.mark.parametrize("lo_hi", [(0, 1), (0, 255), (-1, 1)])
def test_hue_rotation_matches_colorsys(lo_hi):
    lo, hi = lo_hi
    x = pixels()
    shift = torch.linspace(-0.5, 0.5, x.shape[0])

    def expected(i, r, g, b):
        h, s, v = colorsys.rgb_to_hsv(r, g, b)
        return colorsys.hsv_to_rgb((h + float(shift[i])) % 1.0, s, v)

    layer = pp.RandomHue(1.0, value_range=lo_hi)
    got = layer.transform_images(lo + x * (hi - lo), {"factor": shift})
    torch.testing.assert_close((got - lo) / (hi - lo), colorsys_map(x, expected), rtol=0, atol=1e-5)


def test_hue_draw_is_a_signed_half_factor():
    params = pp.RandomHue((0.4, 0.4), seed=0).get_random_transformation(torch.zeros(500, 3, 1, 1))
    values = torch.unique(params["factor"]).tolist()
    assert len(values) == 2 and values[0] == pytest.approx(-0.2) and values[1] == pytest.approx(0.2)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("value_range", [(0, 255), (0, 1)])
def test_hue_with_our_draw(ref, fmt, value_range):
    x = photometric_batch(fmt, scale=value_range[1])
    ours = pp.RandomHue(0.9, value_range=value_range, data_format=fmt, seed=1)
    params = ours.get_random_transformation(torch.from_numpy(x))
    kw = dict(value_range=value_range, data_format=fmt)
    draw = {"factor": params["factor"].numpy()}
    expected = ref(keras_transform, "RandomHue", (0.9,), kw, x, draw)
    close(ours.transform_images(torch.from_numpy(x), params), expected, ATOL * value_range[1] / 255)
