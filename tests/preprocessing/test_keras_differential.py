"""Differential tests against Keras 3's layers (the anchor), on both data formats.

Deterministic parameters (a factor pair with equal ends) make Keras's draw exact, so the
outputs must agree within 1e-4. Keras's TensorFlow backend (the default) clamps instead
of wrapping in the one-pixel band between the last pixel and the first wrapped copy, so
``wrap`` with fractional coordinates is compared against Keras's own documented
implementation (its torch backend's ``affine_transform``), which this package follows.
"""

import numpy as np
import pytest
import torch

keras = pytest.importorskip(
    "keras", reason="Keras 3 (tensorflow-cpu, from the bench/dev extras) is not installed"
)

import preprocessing as pp  # noqa: E402

FILL_MODES = ["reflect", "wrap", "constant", "nearest"]
INTERPOLATIONS = ["bilinear", "nearest"]
FORMATS = ["channels_last", "channels_first"]


def batch(h=6, w=8, fmt="channels_last", seed=0):
    x = np.random.default_rng(seed).random((2, h, w, 3), dtype=np.float32)
    return x if fmt == "channels_last" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def compare(ours, theirs, x, atol=1e-4):
    expected = np.asarray(theirs(x, training=True))
    got = ours(torch.from_numpy(x)).numpy()
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=atol, rtol=0)


def keras_documented(layer, x):
    """Keras's own implementation of its documented fill modes (its torch backend)."""
    from keras.src.backend.torch import image as keras_torch_image

    params = layer.get_random_transformation(x)
    h, w = layer._hw(layer._as_batch(x)[0])
    m = layer.matrix(params, h, w)
    flat = torch.cat([m[:, 0, :], m[:, 1, :], torch.zeros(m.shape[0], 2)], dim=1)
    expected = keras_torch_image.affine_transform(
        x,
        flat,
        interpolation=layer.interpolation,
        fill_mode=layer.fill_mode,
        fill_value=layer.fill_value,
        data_format=layer.data_format,
    )
    return layer.transform_images(x, params), expected


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill_mode", FILL_MODES)
@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
def test_rotation_quarter_turn_non_square(fmt, fill_mode, interpolation):
    # 6x8 image: the turned image leaves the input, so every fill mode is exercised.
    kw = dict(fill_mode=fill_mode, interpolation=interpolation, fill_value=0.5, data_format=fmt)
    ours = pp.RandomRotation((0.25, 0.25), **kw)
    if fill_mode == "wrap":
        # cos(pi/2) is -4e-8 in float32, so coordinates sit a hair below 0, inside the
        # band where TF's kernel clamps instead of wrapping: use the documented one.
        got, expected = keras_documented(ours, torch.from_numpy(batch(fmt=fmt)))
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)
        return
    compare(ours, keras.layers.RandomRotation((0.25, 0.25), **kw), batch(fmt=fmt))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill_mode", ["reflect", "constant", "nearest"])
def test_rotation_and_zoom_fractional(fmt, fill_mode):
    kw = dict(fill_mode=fill_mode, fill_value=0.25, data_format=fmt)
    x = batch(h=9, w=7, fmt=fmt)
    compare(
        pp.RandomRotation((0.07, 0.07), **kw), keras.layers.RandomRotation((0.07, 0.07), **kw), x
    )
    compare(
        pp.RandomZoom((0.6, 0.6), (0.3, 0.3), **kw),
        keras.layers.RandomZoom((0.6, 0.6), (0.3, 0.3), **kw),
        x,
    )
    compare(pp.RandomZoom((-0.3, -0.3), **kw), keras.layers.RandomZoom((-0.3, -0.3), **kw), x)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill_mode", FILL_MODES)
def test_translation(fmt, fill_mode):
    kw = dict(fill_mode=fill_mode, fill_value=0.5, data_format=fmt)
    x = batch(h=8, w=8, fmt=fmt)  # 0.25 * 8 and -0.5 * 8: whole pixels, wrap included
    compare(
        pp.RandomTranslation((0.25, 0.25), (-0.5, -0.5), **kw),
        keras.layers.RandomTranslation((0.25, 0.25), (-0.5, -0.5), **kw),
        x,
    )


@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
def test_wrap_fractional_against_keras_documented_implementation(interpolation):
    for fmt in FORMATS:
        x = torch.from_numpy(batch(h=9, w=7, fmt=fmt))
        for layer in [
            pp.RandomRotation((0.07, 0.07), "wrap", interpolation, data_format=fmt),
            pp.RandomZoom((0.6, 0.6), (0.3, 0.3), "wrap", interpolation, data_format=fmt),
        ]:
            got, expected = keras_documented(layer, x)
            torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("fmt", FORMATS)
def test_color_layers(fmt):
    x = batch(fmt=fmt) * 255
    kw = dict(value_range=(0, 255), data_format=fmt)
    # A contrast pair's ends are amounts below and above 1 (each in [0, 1]), so no valid
    # pair makes the draw exact: Keras applies the factors ours drew.
    ours = pp.RandomContrast((0.2, 0.5), value_range=(0, 255), data_format=fmt, seed=3)
    params = ours.get_random_transformation(torch.from_numpy(x))
    factors = params["contrast_factor"].numpy()
    assert ((factors >= 0.8) & (factors <= 1.5)).all()
    theirs = keras.layers.RandomContrast((0.2, 0.5), **kw)
    expected = theirs.transform_images(x, {"contrast_factor": factors.reshape(-1, 1, 1, 1)})
    got = ours.transform_images(torch.from_numpy(x), params).numpy()
    np.testing.assert_allclose(got, np.asarray(expected), atol=1e-3, rtol=0)
    compare(
        pp.RandomBrightness((0.2, 0.2), **kw),
        keras.layers.RandomBrightness((0.2, 0.2), value_range=(0, 255)),
        x,
        atol=1e-3,
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_deterministic_layers(fmt):
    x = batch(h=10, w=7, fmt=fmt)
    for kwargs in [
        dict(interpolation="bilinear"),
        dict(crop_to_aspect_ratio=True),
        dict(pad_to_aspect_ratio=True, fill_value=0.5),
    ]:
        compare(
            pp.Resizing(5, 5, data_format=fmt, **kwargs),
            keras.layers.Resizing(5, 5, data_format=fmt, **kwargs),
            x,
        )
    compare(pp.Resizing(13, 17, data_format=fmt), keras.layers.Resizing(13, 17, data_format=fmt), x)
    compare(pp.CenterCrop(4, 3, data_format=fmt), keras.layers.CenterCrop(4, 3, data_format=fmt), x)
    compare(
        pp.CenterCrop(12, 5, data_format=fmt), keras.layers.CenterCrop(12, 5, data_format=fmt), x
    )
    compare(pp.Rescaling(2.0, -1.0, data_format=fmt), keras.layers.Rescaling(2.0, -1.0), x)


def test_normalization_channels_last_matches_keras_adapt():
    x = batch(fmt="channels_last") * 100
    ours = pp.Normalization(data_format="channels_last")
    ours.adapt(x)
    theirs = keras.layers.Normalization(axis=-1)
    theirs.adapt(x)
    compare(ours, lambda v, training: theirs(v), x)
