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


def test_saturation_negative_factor_clips_to_gray_like_colorsys():
    # The (-a, a) pairs Keras writes into RandomSaturation(a)'s config draw f < 0, whose
    # f / (1 - f) scale is negative: the saturation clips to 0 (gray), as in Keras.
    x = pixels()
    f = torch.linspace(-1.0, 0.5, x.shape[0])

    def expected(i, r, g, b):
        h, s, v = colorsys.rgb_to_hsv(r, g, b)
        return colorsys.hsv_to_rgb(h, min(max(s * float(f[i]), 0.0), 1.0), v)

    got = pp.RandomSaturation(0.5, value_range=(0, 1)).transform_images(x, {"factor": f})
    torch.testing.assert_close(got, colorsys_map(x, expected), rtol=0, atol=1e-5)


def test_saturation_keras_config_of_a_number_loads_as_keras_draws_it():
    # keras.layers.RandomSaturation(0.5, value_range=(0, 1), seed=3).get_config(), Keras
    # 3.15.1: its code reads the number 0.5 as (-0.5, 0.5) (its docstring: [0, 0.5]).
    config = {
        "name": "random_saturation",
        "trainable": True,
        "dtype": {
            "module": "keras",
            "class_name": "DTypePolicy",
            "config": {"name": "float32"},
            "registered_name": None,
        },
        "data_format": "channels_last",
        "factor": (-0.5, 0.5),
        "value_range": [0, 1],
        "seed": 3,
    }
    layer = pp.layer_from_config({"class_name": "RandomSaturation", "config": config})
    assert layer._factor == (-0.5, 0.5)
    draws = layer.get_random_transformation(torch.zeros(4096, 8, 8, 3))["factor"]
    # f in (-0.5, 0.5) maps to f / (1 - f) in (-1/3, 1)
    assert -1 / 3 - 1e-6 <= float(draws.min()) < -0.3 and 0.95 < float(draws.max()) <= 1.0
    assert pp.RandomSaturation(0.5)._factor == (0.0, 0.5)  # a number: Keras's docstring
    with pytest.raises(ValueError, match=r"RandomSaturation: factor must lie in \[0, 1"):
        pp.RandomSaturation(-0.5)
    with pytest.raises(ValueError, match=r"RandomSaturation: factor must lie in \[-1"):
        pp.RandomSaturation((-1.5, 0.5))


@pytest.mark.parametrize("fmt", FORMATS)
def test_saturation_negative_draws_match_keras(ref, fmt):
    x = photometric_batch(fmt, scale=1.0)
    ours = pp.RandomSaturation((-0.5, 0.5), value_range=(0, 1), data_format=fmt, seed=2)
    params = ours.get_random_transformation(torch.from_numpy(x))
    assert float(params["factor"].min()) < 0.0  # some images go gray
    kw = dict(value_range=(0, 1), data_format=fmt)
    draw = {"factor": params["factor"].numpy()}
    expected = ref(keras_transform, "RandomSaturation", ((-0.5, 0.5),), kw, x, draw)
    close(ours.transform_images(torch.from_numpy(x), params), expected, 1e-5)
