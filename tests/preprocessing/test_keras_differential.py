"""Differential tests against Keras 3's layers (the anchor), on both data formats.

Deterministic parameters (a factor pair with equal ends) make Keras's draw exact, so the
outputs must agree within 1e-4. Keras's TensorFlow backend (the default) clamps instead
of wrapping in the one-pixel band between the last pixel and the first wrapped copy, so
``wrap`` with fractional coordinates is compared against Keras's own documented
implementation (its torch backend's ``affine_transform``), which this package follows.

Keras's results are read from tests/goldens/ (``[golden]``) or computed by Keras itself
(``[live]``, ``pytest -m differential``): tests/differential.py.
"""

import numpy as np
import pytest
import torch
from differential import keras, keras_call, keras_transform

import preprocessing as pp

FILL_MODES = ["reflect", "wrap", "constant", "nearest"]
INTERPOLATIONS = ["bilinear", "nearest"]
FORMATS = ["channels_last", "channels_first"]


def batch(h=6, w=8, fmt="channels_last", seed=0):
    x = np.random.default_rng(seed).random((2, h, w, 3), dtype=np.float32)
    return x if fmt == "channels_last" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def compare(ref, ours, layer, args, kw, x, atol=1e-4):
    """Our layer and Keras's ``layer(*args, **kw)`` on ``x`` agree within ``atol``."""
    expected = ref(keras_call, layer, args, kw, x)
    got = ours(torch.from_numpy(x)).numpy()
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=atol, rtol=0)


def keras_affine_transform(x, flat, kw):
    """Keras's torch backend's ``affine_transform`` (its documented fill modes)."""
    keras()
    from keras.src.backend.torch import image as keras_torch_image

    return keras_torch_image.affine_transform(x, flat, **kw).numpy()


def keras_documented(ref, layer, x):
    """Keras's own implementation of its documented fill modes (its torch backend)."""
    params = layer.get_random_transformation(x)
    h, w = layer._hw(layer._as_batch(x)[0])
    m = layer.matrix(params, h, w)
    flat = torch.cat([m[:, 0, :], m[:, 1, :], torch.zeros(m.shape[0], 2)], dim=1)
    kw = dict(
        interpolation=layer.interpolation,
        fill_mode=layer.fill_mode,
        fill_value=layer.fill_value,
        data_format=layer.data_format,
    )
    expected = torch.from_numpy(ref(keras_affine_transform, x, flat, kw))
    return layer.transform_images(x, params), expected


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill_mode", FILL_MODES)
@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
def test_rotation_quarter_turn_non_square(ref, fmt, fill_mode, interpolation):
    # 6x8 image: the turned image leaves the input, so every fill mode is exercised.
    kw = dict(fill_mode=fill_mode, interpolation=interpolation, fill_value=0.5, data_format=fmt)
    ours = pp.RandomRotation((0.25, 0.25), **kw)
    if fill_mode == "wrap":
        # cos(pi/2) is -4e-8 in float32, so coordinates sit a hair below 0, inside the
        # band where TF's kernel clamps instead of wrapping: use the documented one.
        got, expected = keras_documented(ref, ours, torch.from_numpy(batch(fmt=fmt)))
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)
        return
    compare(ref, ours, "RandomRotation", ((0.25, 0.25),), kw, batch(fmt=fmt))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill_mode", ["reflect", "constant", "nearest"])
def test_rotation_and_zoom_fractional(ref, fmt, fill_mode):
    kw = dict(fill_mode=fill_mode, fill_value=0.25, data_format=fmt)
    x = batch(h=9, w=7, fmt=fmt)
    compare(ref, pp.RandomRotation((0.07, 0.07), **kw), "RandomRotation", ((0.07, 0.07),), kw, x)
    zoom = ((0.6, 0.6), (0.3, 0.3))
    compare(ref, pp.RandomZoom(*zoom, **kw), "RandomZoom", zoom, kw, x)
    compare(ref, pp.RandomZoom((-0.3, -0.3), **kw), "RandomZoom", ((-0.3, -0.3),), kw, x)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill_mode", FILL_MODES)
def test_translation(ref, fmt, fill_mode):
    kw = dict(fill_mode=fill_mode, fill_value=0.5, data_format=fmt)
    x = batch(h=8, w=8, fmt=fmt)  # 0.25 * 8 and -0.5 * 8: whole pixels, wrap included
    shift = ((0.25, 0.25), (-0.5, -0.5))
    compare(ref, pp.RandomTranslation(*shift, **kw), "RandomTranslation", shift, kw, x)


@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
def test_wrap_fractional_against_keras_documented_implementation(ref, interpolation):
    for fmt in FORMATS:
        x = torch.from_numpy(batch(h=9, w=7, fmt=fmt))
        for layer in [
            pp.RandomRotation((0.07, 0.07), "wrap", interpolation, data_format=fmt),
            pp.RandomZoom((0.6, 0.6), (0.3, 0.3), "wrap", interpolation, data_format=fmt),
        ]:
            got, expected = keras_documented(ref, layer, x)
            torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("fmt", FORMATS)
def test_color_layers(ref, fmt):
    x = batch(fmt=fmt) * 255
    kw = dict(value_range=(0, 255), data_format=fmt)
    # A contrast pair's ends are amounts below and above 1 (each in [0, 1]), so no valid
    # pair makes the draw exact: Keras applies the factors ours drew.
    ours = pp.RandomContrast((0.2, 0.5), value_range=(0, 255), data_format=fmt, seed=3)
    params = ours.get_random_transformation(torch.from_numpy(x))
    factors = params["contrast_factor"].numpy()
    assert ((factors >= 0.8) & (factors <= 1.5)).all()
    draw = {"contrast_factor": factors.reshape(-1, 1, 1, 1)}
    expected = ref(keras_transform, "RandomContrast", ((0.2, 0.5),), kw, x, draw)
    got = ours.transform_images(torch.from_numpy(x), params).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-3, rtol=0)
    brightness = pp.RandomBrightness((0.2, 0.2), **kw)
    keras_kw = dict(value_range=(0, 255))
    compare(ref, brightness, "RandomBrightness", ((0.2, 0.2),), keras_kw, x, atol=1e-3)


@pytest.mark.parametrize("fmt", FORMATS)
def test_deterministic_layers(ref, fmt):
    x = batch(h=10, w=7, fmt=fmt)
    for kwargs in [
        dict(interpolation="bilinear"),
        dict(crop_to_aspect_ratio=True),
        dict(pad_to_aspect_ratio=True, fill_value=0.5),
    ]:
        kw = dict(data_format=fmt, **kwargs)
        compare(ref, pp.Resizing(5, 5, **kw), "Resizing", (5, 5), kw, x)
    kw = dict(data_format=fmt)
    compare(ref, pp.Resizing(13, 17, **kw), "Resizing", (13, 17), kw, x)
    compare(ref, pp.CenterCrop(4, 3, **kw), "CenterCrop", (4, 3), kw, x)
    compare(ref, pp.CenterCrop(12, 5, **kw), "CenterCrop", (12, 5), kw, x)
    compare(ref, pp.Rescaling(2.0, -1.0, **kw), "Rescaling", (2.0, -1.0), {}, x)


def keras_normalization_adapted(x):
    theirs = keras().layers.Normalization(axis=-1)
    theirs.adapt(x)
    return np.asarray(theirs(x))


def test_normalization_channels_last_matches_keras_adapt(ref):
    x = batch(fmt="channels_last") * 100
    ours = pp.Normalization(data_format="channels_last")
    ours.adapt(x)
    expected = ref(keras_normalization_adapted, x)
    np.testing.assert_allclose(ours(torch.from_numpy(x)).numpy(), expected, atol=1e-4, rtol=0)
