"""preprocessing.affine: the resampling every AffineLayer shares, against Keras 3.

Keras 3 is the anchor: deterministic parameters (a factor pair with equal ends) make
Keras's draw exact, so the outputs must agree within 1e-4.

Keras's TensorFlow backend (the default) clamps instead of wrapping in the one-pixel band
between the last pixel and the first wrapped copy, so ``wrap`` with fractional
coordinates is compared against Keras's own documented implementation (its torch
backend's ``affine_transform``), which this package follows.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import pytest
import torch
from _layer_helpers import FORMATS, INTERPOLATIONS, compare, keras_batch, keras_documented

import preprocessing as pp


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill_mode", ["reflect", "constant", "nearest"])
def test_rotation_and_zoom_fractional(ref, fmt, fill_mode):
    kw = dict(fill_mode=fill_mode, fill_value=0.25, data_format=fmt)
    x = keras_batch(h=9, w=7, fmt=fmt)
    compare(ref, pp.RandomRotation((0.07, 0.07), **kw), "RandomRotation", ((0.07, 0.07),), kw, x)
    zoom = ((0.6, 0.6), (0.3, 0.3))
    compare(ref, pp.RandomZoom(*zoom, **kw), "RandomZoom", zoom, kw, x)
    compare(ref, pp.RandomZoom((-0.3, -0.3), **kw), "RandomZoom", ((-0.3, -0.3),), kw, x)


@pytest.mark.parametrize("interpolation", INTERPOLATIONS)
def test_wrap_fractional_against_keras_documented_implementation(ref, interpolation):
    for fmt in ("channels_last", "channels_first"):  # the order its goldens were made in
        x = torch.from_numpy(keras_batch(h=9, w=7, fmt=fmt))
        for layer in [
            pp.RandomRotation((0.07, 0.07), "wrap", interpolation, data_format=fmt),
            pp.RandomZoom((0.6, 0.6), (0.3, 0.3), "wrap", interpolation, data_format=fmt),
        ]:
            got, expected = keras_documented(ref, layer, x)
            torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)
