"""RandomColorJitter: its steps in Keras's order, each with its own draw, and against Keras
3's four layers applying our draws.

The tolerance against Keras is ``ATOL`` (_layer_helpers.py says why); where the two
differ by design (documented in the layer) only the part where they agree is compared.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import re

import numpy as np
import pytest
import torch
from _layer_helpers import FORMATS, close, photometric_batch
from differential import keras

import preprocessing as pp


def keras_color_jitter_steps(x, kw, draws):
    """Keras's brightness, contrast, saturation and hue layers, one after the other, each
    applying its part of our draw."""
    layers = keras().layers
    steps = [
        layers.RandomBrightness(0.2, value_range=(0, 255)),
        layers.RandomContrast(0.3, **kw),
        layers.RandomSaturation((0.2, 0.5), **kw),
        layers.RandomHue(0.4, **kw),
    ]
    for layer, draw in zip(steps, draws):
        x = layer.transform_images(x, draw)
    return np.asarray(x)


def test_color_jitter_is_its_steps_in_keras_order():
    x = torch.rand(6, 3, 5, 5, generator=torch.Generator().manual_seed(1))
    jitter = pp.RandomColorJitter(
        value_range=(0, 1),
        brightness_factor=0.3,
        contrast_factor=0.4,
        saturation_factor=(0.2, 0.9),
        hue_factor=0.5,
        seed=3,
    )
    assert list(jitter.steps) == ["brightness", "contrast", "saturation", "hue"]
    params = jitter.get_random_transformation(x)
    y = x
    for name in ("brightness", "contrast", "saturation", "hue"):
        y = jitter.steps[name].transform_images(y, params[name])
    torch.testing.assert_close(jitter.transform_images(x, params), y, rtol=0, atol=0)
    # The steps draw independently (Keras hands them one seed).
    draws = [params[k][next(iter(params[k]))] for k in ("brightness", "contrast")]
    assert not torch.allclose(draws[0] / 0.3, draws[1] - 1.0)
    only_hue = pp.RandomColorJitter(value_range=(0, 1), hue_factor=0.5, seed=3)
    assert list(only_hue.steps) == ["hue"]
    assert torch.equal(pp.RandomColorJitter(value_range=(0, 1))(x), x)


def test_hue_and_saturation_refuse_non_rgb():
    with pytest.raises(ValueError, match="RandomHue: expected images with 3 channel"):
        pp.RandomHue(0.5)(torch.zeros(2, 1, 4, 4))
    with pytest.raises(ValueError, match="RandomSaturation: factor"):
        pp.RandomSaturation(1.5)
    with pytest.raises(ValueError, match="RandomColorJitter: value_range"):
        pp.RandomColorJitter(value_range=(3, 3))
    # The jitter's errors name it and the argument the user passed (breaker 12).
    msg = "RandomColorJitter: brightness_factor must lie in [-1.0, 1.0]; got 2.0"
    with pytest.raises(ValueError, match=f"^{re.escape(msg)}$"):
        pp.RandomColorJitter(brightness_factor=2.0)
    msg = (
        "RandomColorJitter: expected images with 3 channel(s) along the channel axis of "
        "'channels_first'; got shape (2, 1, 4, 4) (in the saturation step, set by "
        "saturation_factor)"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(msg)}$"):
        pp.RandomColorJitter(saturation_factor=0.5, seed=1)(torch.zeros(2, 1, 4, 4))


@pytest.mark.parametrize("fmt", FORMATS)
def test_color_jitter_equals_keras_steps_with_our_draws(ref, fmt):
    x = photometric_batch(fmt)
    kw = dict(value_range=(0, 255), data_format=fmt)
    ours = pp.RandomColorJitter(
        brightness_factor=0.2, contrast_factor=0.3, saturation_factor=(0.2, 0.5), hue_factor=0.4,
        seed=3, **kw,
    )  # fmt: skip
    # Saturation factors <= 1 (f <= 0.5): Keras's clip of the saturation to value_range
    # instead of [0, 1] (see RandomSaturation) does not come into play.
    params = ours.get_random_transformation(torch.from_numpy(x))
    steps = [("brightness", "delta"), ("contrast", "contrast_factor"), ("saturation", "factor")]
    keras_keys = {"delta": "rgb_delta"}
    draws = []
    for name, key in [*steps, ("hue", "factor")]:
        value = params[name][key].numpy()
        if key in ("delta", "contrast_factor"):
            value = value.reshape(-1, 1, 1, 1)
        draws.append({keras_keys.get(key, key): value})
    y = ref(keras_color_jitter_steps, x, kw, draws)
    close(ours.transform_images(torch.from_numpy(x), params), y, 2e-3)
