"""Differential tests of the photometric layers against Keras 3 (the anchor), on both data
formats, with fixed draws: either a factor range of one value (Keras's draw is exact), or
our drawn parameters handed to Keras's ``transform_images``.

Tolerances: values in [0, 255] computed in float32 by different kernels (TF's depthwise
conv and HSV ops against torch's) differ by a few ulps of 255, about 3e-5; 1e-3 leaves room
for that and still catches any real difference (the smallest change a layer can make to
a pixel that matters here is one grey level). Where the two differ by design (documented
in each layer) only the part where they agree is compared, and the rest is checked for
what it is.

Keras's results are read from tests/goldens/ (``[golden]``) or computed by Keras itself
(``[live]``, ``pytest -m differential``): tests/differential.py.
"""

import numpy as np
import pytest
import torch
from differential import keras, keras_call, keras_transform

import preprocessing as pp

FORMATS = ["channels_last", "channels_first"]
ATOL = 1e-3


def batch(fmt, n=3, h=7, w=9, seed=0, scale=255.0):
    x = np.random.default_rng(seed).random((n, h, w, 3), dtype=np.float32) * scale
    if fmt == "channels_first":
        x = x.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(x)


def close(ours, theirs, atol=ATOL):
    ours = ours.numpy() if isinstance(ours, torch.Tensor) else ours
    theirs = np.asarray(theirs)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, atol=atol, rtol=0)


@pytest.mark.parametrize("fmt", FORMATS)
def test_color_degeneration_grayscale_invert_exact_draws(ref, fmt):
    x = batch(fmt)
    kw = dict(value_range=(0, 255), data_format=fmt)
    close(
        pp.RandomColorDegeneration((0.3, 0.3), **kw)(torch.from_numpy(x)),
        ref(keras_call, "RandomColorDegeneration", ((0.3, 0.3),), kw, x),
    )
    close(
        pp.RandomGrayscale(1.0, data_format=fmt)(torch.from_numpy(x)),
        ref(keras_call, "RandomGrayscale", (1.0,), dict(data_format=fmt), x),
    )
    close(
        pp.RandomInvert((1.0, 1.0), **kw)(torch.from_numpy(x)),
        ref(keras_call, "RandomInvert", ((1.0, 1.0),), kw, x),
    )


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("value_range", [(0, 255), (0, 1)])
def test_hue_with_our_draw(ref, fmt, value_range):
    x = batch(fmt, scale=value_range[1])
    ours = pp.RandomHue(0.9, value_range=value_range, data_format=fmt, seed=1)
    params = ours.get_random_transformation(torch.from_numpy(x))
    kw = dict(value_range=value_range, data_format=fmt)
    draw = {"factor": params["factor"].numpy()}
    expected = ref(keras_transform, "RandomHue", (0.9,), kw, x, draw)
    close(ours.transform_images(torch.from_numpy(x), params), expected, ATOL * value_range[1] / 255)


@pytest.mark.parametrize("fmt", FORMATS)
def test_saturation_with_our_draw_where_keras_clips_to_unit(ref, fmt):
    # Keras clips the saturation to value_range: with (0, 1) that is our [0, 1] clip.
    x = batch(fmt, scale=1.0)
    ours = pp.RandomSaturation(1.0, value_range=(0, 1), data_format=fmt, seed=2)
    params = ours.get_random_transformation(torch.from_numpy(x))
    assert float(params["factor"].max()) > 1.0  # some images get more saturated
    kw = dict(value_range=(0, 1), data_format=fmt)
    draw = {"factor": params["factor"].numpy()}
    expected = ref(keras_transform, "RandomSaturation", (1.0,), kw, x, draw)
    close(ours.transform_images(torch.from_numpy(x), params), expected, 1e-5)


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


@pytest.mark.parametrize("fmt", FORMATS)
def test_color_jitter_equals_keras_steps_with_our_draws(ref, fmt):
    x = batch(fmt)
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


@pytest.mark.parametrize("fmt", FORMATS)
def test_sharpness_interior_with_our_draw(ref, fmt):
    x = batch(fmt, h=8, w=10)
    ours = pp.RandomSharpness(1.0, data_format=fmt, seed=4)
    params = ours.get_random_transformation(torch.from_numpy(x))
    draw = {"factor": params["factor"].numpy()}
    expected = ref(keras_transform, "RandomSharpness", (1.0,), dict(data_format=fmt), x, draw)
    got = ours.transform_images(torch.from_numpy(x), params).numpy()
    inner = (slice(None), slice(None), slice(1, -1), slice(1, -1))
    if fmt == "channels_last":
        inner = (slice(None), slice(1, -1), slice(1, -1), slice(None))
    close(got[inner], expected[inner])
    # The frame is the input (PIL's rule; Keras's zero padding changes it).
    frame = np.ones(got.shape, bool)
    frame[inner] = False
    np.testing.assert_array_equal(got[frame], x[frame])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("value_range", [(0, 255), (0, 1)])
def test_posterization_and_solarization_with_our_draws(ref, fmt, value_range):
    x = batch(fmt, scale=value_range[1])
    kw = dict(value_range=value_range, data_format=fmt)
    ours = pp.RandomPosterization((1, 8), seed=5, **kw)
    params = ours.get_random_transformation(torch.from_numpy(x))
    draw = {"shift_factor": params["shift_factor"].numpy()}
    expected = ref(keras_transform, "RandomPosterization", ((1, 8),), kw, x, draw)
    close(ours.transform_images(torch.from_numpy(x), params), expected, 1e-5 * value_range[1])
    sol = pp.Solarization((0, 0.3), (0, 0.9), seed=6, **kw)
    params = sol.get_random_transformation(torch.from_numpy(x))
    fixed = {k: v.numpy().reshape(-1, 1, 1, 1) for k, v in params.items()}
    expected = ref(keras_transform, "Solarization", ((0, 0.3), (0, 0.9)), kw, x, fixed)
    close(sol.transform_images(torch.from_numpy(x), params), expected)


def test_auto_contrast_channels_last_equals_keras_and_first_is_the_same_per_channel(ref):
    x = batch("channels_last") * 0.5 + 40.0
    expected = ref(keras_call, "AutoContrast", (), dict(value_range=(0, 255)), x)
    close(pp.AutoContrast(data_format="channels_last")(torch.from_numpy(x)), expected)
    # Keras reduces axes (1, 2) whatever the layout; channels_first is compared through
    # the transposed channels_last result.
    first = pp.AutoContrast(data_format="channels_first")(torch.from_numpy(x).permute(0, 3, 1, 2))
    close(first.permute(0, 2, 3, 1), expected)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("value_range", [(0, 255), (0, 1)])
def test_equalization_per_image_equals_keras_on_that_image(ref, fmt, value_range):
    x = np.floor(batch(fmt, h=10, w=11)) / 255.0 * value_range[1]
    x[1] = np.floor(x[1] * 4 / value_range[1]) * value_range[1] / 4  # few levels
    layer = pp.Equalization(value_range=value_range, data_format=fmt)
    got = layer(torch.from_numpy(x.astype(np.float32)))
    kw = dict(value_range=value_range, data_format=fmt)
    for i in range(x.shape[0]):  # Keras's histogram covers whatever batch it is given
        expected = ref(keras_call, "Equalization", (), kw, x[i].astype(np.float32))
        close(got[i], expected, 1e-5 * value_range[1])


@pytest.mark.parametrize("fmt", FORMATS)
def test_gaussian_blur_interior_with_one_sigma(ref, fmt):
    x = batch(fmt, h=11, w=12)
    ours = pp.RandomGaussianBlur(1.0, kernel_size=5, sigma=(1.3, 1.3), data_format=fmt, seed=7)
    params = ours.get_random_transformation(torch.from_numpy(x))
    params["should_apply_blur"][:] = True
    kw = dict(kernel_size=5, sigma=1.0, data_format=fmt)
    fixed = {
        "should_apply_blur": np.ones(x.shape[0], bool),
        "blur_factor": params["blur_factor"][0].numpy(),  # Keras: one (x, y) pair per batch
    }
    expected = ref(keras_transform, "RandomGaussianBlur", (1.0,), kw, x, fixed)
    got = ours.transform_images(torch.from_numpy(x), params).numpy()
    inner = (slice(None), slice(None), slice(2, -2), slice(2, -2))
    if fmt == "channels_last":
        inner = (slice(None), slice(2, -2), slice(2, -2), slice(None))
    close(got[inner], expected[inner])


def keras_policy_configuration(factor):
    """How Keras's RandAugment and AugMix configure their ops for ``factor``."""
    theirs = keras().layers.RandAugment(value_range=(0, 1), factor=factor)
    kmix = keras().layers.AugMix(factor=factor)
    return {
        "ops": list(theirs._AUGMENT_LAYERS),
        "factor": tuple(float(f) for f in theirs.factor),
        "sharpness": tuple(theirs.random_sharpness.factor),
        "solarization_addition": tuple(theirs.solarization.addition_factor),
        "posterization_bits": tuple(theirs.random_posterization.factor),
        "aug_mix_ops": list(kmix._augment_layers),
        "aug_mix_contrast_upper": kmix.random_contrast.factor[1],
    }


def test_rand_augment_and_aug_mix_configure_ops_as_keras(ref):
    for factor in (0.5, (0.2, 0.7)):
        ours = pp.RandAugment(value_range=(0, 1), factor=factor)
        theirs = ref(keras_policy_configuration, factor)
        assert list(ours.ops) == theirs["ops"]
        lo, hi = theirs["factor"]
        assert ours.ops["random_shear"]._x == (lo, hi)
        assert ours.ops["random_translation"]._w == (lo, hi)
        assert (ours.ops["random_rotation"]._lower, ours.ops["random_rotation"]._upper) == (lo, hi)
        assert ours.ops["random_brightness"]._lower == lo
        assert ours.ops["random_sharpness"]._factor == theirs["sharpness"]
        assert ours.ops["solarization"]._addition == theirs["solarization_addition"]
        # Keras draws bits with randint(1, b), leaving b out; ours include it.
        assert ours.ops["random_posterization"]._bits == theirs["posterization_bits"]
        mix = pp.AugMix(factor=factor)
        assert list(mix.ops) == theirs["aug_mix_ops"]
        assert mix.ops["random_contrast"]._upper == theirs["aug_mix_contrast_upper"]
