"""RandomColorDegeneration: the blend towards the luma, and against Keras 3.

Keras 3 is the anchor: with a factor range of one value Keras's draw is exact; otherwise
our drawn parameters are handed to Keras's ``transform_images``.

The tolerance against Keras is ``ATOL`` (_layer_helpers.py says why); where the two
differ by design (documented in the layer) only the part where they agree is compared.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import pytest
import torch
from _layer_helpers import FORMATS, close, photometric_batch, pixels
from differential import keras_call

import preprocessing as pp


def test_color_degeneration_blends_towards_luma_and_clips():
    x = pixels()
    luma = (0.2989 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]).unsqueeze(1)
    f = torch.linspace(0, 1, x.shape[0])
    layer = pp.RandomColorDegeneration(1.0, value_range=(0, 1))
    got = layer.transform_images(x, {"factor": f})
    expected = x + f.view(-1, 1, 1, 1) * (luma - x)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
    one_channel = torch.full((2, 1, 2, 2), 0.7)
    out = layer.transform_images(one_channel, {"factor": torch.ones(2)})
    torch.testing.assert_close(out, one_channel)


@pytest.mark.parametrize("fmt", FORMATS)
def test_color_degeneration_exact_draw_matches_keras(ref, fmt):
    x = photometric_batch(fmt)
    kw = dict(value_range=(0, 255), data_format=fmt)
    close(
        pp.RandomColorDegeneration((0.3, 0.3), **kw)(torch.from_numpy(x)),
        ref(keras_call, "RandomColorDegeneration", ((0.3, 0.3),), kw, x),
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_color_degeneration_negative_factor_matches_keras(ref, fmt):
    # RandomColorDegeneration(a)'s Keras config holds (-a, a): f < 0 moves away from the
    # luma (more colour), clipped to value_range.
    x = photometric_batch(fmt)
    kw = dict(value_range=(0, 255), data_format=fmt)
    close(
        pp.RandomColorDegeneration((-0.3, -0.3), **kw)(torch.from_numpy(x)),
        ref(keras_call, "RandomColorDegeneration", ((-0.3, -0.3),), kw, x),
    )


def test_color_degeneration_keras_config_of_a_number_loads():
    # keras.layers.RandomColorDegeneration(0.3, value_range=(0, 1), seed=3).get_config()
    # (Keras 3.15.1): the number 0.3 is written as (-0.3, 0.3).
    config = {
        "name": "random_color_degeneration",
        "trainable": True,
        "dtype": "float32",
        "data_format": "channels_last",
        "factor": (-0.3, 0.3),
        "value_range": [0, 1],
        "seed": 3,
    }
    layer = pp.layer_from_config({"class_name": "RandomColorDegeneration", "config": config})
    assert layer._factor == (-0.3, 0.3) and layer._range == (0.0, 1.0)
    # red (0.8, 0.4, 0.2), luma 0.49672, at f = -0.3 (Keras 3.15.1: 0.890984, 0.370984,
    # 0.110984)
    red = torch.tensor([[[[0.8, 0.4, 0.2]]]])
    out = layer.transform_images(red, {"factor": torch.tensor([-0.3])})
    torch.testing.assert_close(out.flatten(), torch.tensor([0.890984, 0.370984, 0.110984]))
    assert pp.RandomColorDegeneration(0.3)._factor == (0.0, 0.3)
