"""Differential tests of the photometric layers against Keras 3 (the anchor), on both data
formats, with fixed draws: either a factor range of one value (Keras's draw is exact), or
our drawn parameters handed to Keras's ``transform_images``.

Tolerances: values in [0, 255] computed in float32 by different kernels (TF's depthwise
conv and HSV ops against torch's) differ by a few ulps of 255, about 3e-5; 1e-3 leaves room
for that and still catches any real difference (the smallest change a layer can make to
a pixel that matters here is one grey level). Where the two differ by design (documented
in each layer) only the part where they agree is compared, and the rest is checked for
what it is.
"""

import numpy as np
import pytest
import torch

keras = pytest.importorskip(
    "keras", reason="Keras 3 (tensorflow-cpu, from the bench/dev extras) is not installed"
)

import preprocessing as pp  # noqa: E402

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
def test_color_degeneration_grayscale_invert_exact_draws(fmt):
    x = batch(fmt)
    kw = dict(value_range=(0, 255), data_format=fmt)
    close(
        pp.RandomColorDegeneration((0.3, 0.3), **kw)(torch.from_numpy(x)),
        keras.layers.RandomColorDegeneration((0.3, 0.3), **kw)(x, training=True),
    )
    close(
        pp.RandomGrayscale(1.0, data_format=fmt)(torch.from_numpy(x)),
        keras.layers.RandomGrayscale(1.0, data_format=fmt)(x, training=True),
    )
    close(
        pp.RandomInvert((1.0, 1.0), **kw)(torch.from_numpy(x)),
        keras.layers.RandomInvert((1.0, 1.0), **kw)(x, training=True),
    )


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("value_range", [(0, 255), (0, 1)])
def test_hue_with_our_draw(fmt, value_range):
    x = batch(fmt, scale=value_range[1])
    ours = pp.RandomHue(0.9, value_range=value_range, data_format=fmt, seed=1)
    params = ours.get_random_transformation(torch.from_numpy(x))
    theirs = keras.layers.RandomHue(0.9, value_range=value_range, data_format=fmt)
    expected = theirs.transform_images(x, {"factor": params["factor"].numpy()})
    close(ours.transform_images(torch.from_numpy(x), params), expected, ATOL * value_range[1] / 255)


@pytest.mark.parametrize("fmt", FORMATS)
def test_saturation_with_our_draw_where_keras_clips_to_unit(fmt):
    # Keras clips the saturation to value_range: with (0, 1) that is our [0, 1] clip.
    x = batch(fmt, scale=1.0)
    ours = pp.RandomSaturation(1.0, value_range=(0, 1), data_format=fmt, seed=2)
    params = ours.get_random_transformation(torch.from_numpy(x))
    assert float(params["factor"].max()) > 1.0  # some images get more saturated
    theirs = keras.layers.RandomSaturation(1.0, value_range=(0, 1), data_format=fmt)
    expected = theirs.transform_images(x, {"factor": params["factor"].numpy()})
    close(ours.transform_images(torch.from_numpy(x), params), expected, 1e-5)


@pytest.mark.parametrize("fmt", FORMATS)
def test_color_jitter_equals_keras_steps_with_our_draws(fmt):
    x = batch(fmt)
    kw = dict(value_range=(0, 255), data_format=fmt)
    ours = pp.RandomColorJitter(
        brightness_factor=0.2, contrast_factor=0.3, saturation_factor=(0.2, 0.5), hue_factor=0.4,
        seed=3, **kw,
    )  # fmt: skip
    # Saturation factors <= 1 (f <= 0.5): Keras's clip of the saturation to value_range
    # instead of [0, 1] (see RandomSaturation) does not come into play.
    params = ours.get_random_transformation(torch.from_numpy(x))
    y = x
    keras_steps = [
        (keras.layers.RandomBrightness(0.2, value_range=(0, 255)), "brightness", "delta"),
        (keras.layers.RandomContrast(0.3, **kw), "contrast", "contrast_factor"),
        (keras.layers.RandomSaturation((0.2, 0.5), **kw), "saturation", "factor"),
        (keras.layers.RandomHue(0.4, **kw), "hue", "factor"),
    ]
    keras_keys = {"delta": "rgb_delta"}
    for layer, name, key in keras_steps:
        value = params[name][key].numpy()
        if key in ("delta", "contrast_factor"):
            value = value.reshape(-1, 1, 1, 1)
        y = layer.transform_images(y, {keras_keys.get(key, key): value})
    close(ours.transform_images(torch.from_numpy(x), params), y, 2e-3)


@pytest.mark.parametrize("fmt", FORMATS)
def test_sharpness_interior_with_our_draw(fmt):
    x = batch(fmt, h=8, w=10)
    ours = pp.RandomSharpness(1.0, data_format=fmt, seed=4)
    params = ours.get_random_transformation(torch.from_numpy(x))
    theirs = keras.layers.RandomSharpness(1.0, data_format=fmt)
    expected = np.asarray(theirs.transform_images(x, {"factor": params["factor"].numpy()}))
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
def test_posterization_and_solarization_with_our_draws(fmt, value_range):
    x = batch(fmt, scale=value_range[1])
    kw = dict(value_range=value_range, data_format=fmt)
    ours = pp.RandomPosterization((1, 8), seed=5, **kw)
    params = ours.get_random_transformation(torch.from_numpy(x))
    theirs = keras.layers.RandomPosterization((1, 8), **kw)
    expected = theirs.transform_images(x, {"shift_factor": params["shift_factor"].numpy()})
    close(ours.transform_images(torch.from_numpy(x), params), expected, 1e-5 * value_range[1])
    sol = pp.Solarization((0, 0.3), (0, 0.9), seed=6, **kw)
    params = sol.get_random_transformation(torch.from_numpy(x))
    theirs = keras.layers.Solarization((0, 0.3), (0, 0.9), **kw)
    fixed = {k: v.numpy().reshape(-1, 1, 1, 1) for k, v in params.items()}
    close(sol.transform_images(torch.from_numpy(x), params), theirs.transform_images(x, fixed))


def test_auto_contrast_channels_last_equals_keras_and_first_is_the_same_per_channel():
    x = batch("channels_last") * 0.5 + 40.0
    expected = keras.layers.AutoContrast(value_range=(0, 255))(x)
    close(pp.AutoContrast(data_format="channels_last")(torch.from_numpy(x)), expected)
    # Keras reduces axes (1, 2) whatever the layout; channels_first is compared through
    # the transposed channels_last result.
    first = pp.AutoContrast(data_format="channels_first")(torch.from_numpy(x).permute(0, 3, 1, 2))
    close(first.permute(0, 2, 3, 1), expected)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("value_range", [(0, 255), (0, 1)])
def test_equalization_per_image_equals_keras_on_that_image(fmt, value_range):
    x = np.floor(batch(fmt, h=10, w=11)) / 255.0 * value_range[1]
    x[1] = np.floor(x[1] * 4 / value_range[1]) * value_range[1] / 4  # few levels
    layer = pp.Equalization(value_range=value_range, data_format=fmt)
    got = layer(torch.from_numpy(x.astype(np.float32)))
    theirs = keras.layers.Equalization(value_range=value_range, data_format=fmt)
    for i in range(x.shape[0]):  # Keras's histogram covers whatever batch it is given
        expected = theirs(x[i].astype(np.float32), training=True)
        close(got[i], expected, 1e-5 * value_range[1])


@pytest.mark.parametrize("fmt", FORMATS)
def test_gaussian_blur_interior_with_one_sigma(fmt):
    x = batch(fmt, h=11, w=12)
    ours = pp.RandomGaussianBlur(1.0, kernel_size=5, sigma=(1.3, 1.3), data_format=fmt, seed=7)
    params = ours.get_random_transformation(torch.from_numpy(x))
    params["should_apply_blur"][:] = True
    theirs = keras.layers.RandomGaussianBlur(1.0, kernel_size=5, sigma=1.0, data_format=fmt)
    fixed = {
        "should_apply_blur": np.ones(x.shape[0], bool),
        "blur_factor": params["blur_factor"][0].numpy(),  # Keras: one (x, y) pair per batch
    }
    expected = np.asarray(theirs.transform_images(x, fixed))
    got = ours.transform_images(torch.from_numpy(x), params).numpy()
    inner = (slice(None), slice(None), slice(2, -2), slice(2, -2))
    if fmt == "channels_last":
        inner = (slice(None), slice(2, -2), slice(2, -2), slice(None))
    close(got[inner], expected[inner])


def test_rand_augment_and_aug_mix_configure_ops_as_keras():
    for factor in (0.5, (0.2, 0.7)):
        ours = pp.RandAugment(value_range=(0, 1), factor=factor)
        theirs = keras.layers.RandAugment(value_range=(0, 1), factor=factor)
        assert list(ours.ops) == theirs._AUGMENT_LAYERS
        lo, hi = theirs.factor
        assert ours.ops["random_shear"]._x == (lo, hi)
        assert ours.ops["random_translation"]._w == (lo, hi)
        assert (ours.ops["random_rotation"]._lower, ours.ops["random_rotation"]._upper) == (lo, hi)
        assert ours.ops["random_brightness"]._lower == lo
        assert ours.ops["random_sharpness"]._factor == tuple(theirs.random_sharpness.factor)
        assert ours.ops["solarization"]._addition == tuple(theirs.solarization.addition_factor)
        # Keras draws bits with randint(1, b), leaving b out; ours include it.
        assert ours.ops["random_posterization"]._bits == tuple(theirs.random_posterization.factor)
        mix, kmix = pp.AugMix(factor=factor), keras.layers.AugMix(factor=factor)
        assert list(mix.ops) == kmix._augment_layers
        assert mix.ops["random_contrast"]._upper == kmix.random_contrast.factor[1]
