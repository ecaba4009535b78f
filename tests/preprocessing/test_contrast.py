"""RandomContrast: fixed factors, the factor range of Keras's docs, and against Keras 3.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import numpy as np
import pytest
import torch
from _layer_helpers import FORMATS, img, keras_batch
from differential import keras_transform

import preprocessing as pp


@pytest.mark.parametrize("fmt", FORMATS)
def test_contrast_with_our_draw_matches_keras(ref, fmt):
    x = keras_batch(fmt=fmt) * 255
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


def test_contrast_fixed_values():
    x = torch.tensor([[[0.2, 0.4], [0.6, 0.8]]])
    c = pp.RandomContrast(0.5, value_range=(0, 1)).transform_images(
        x, {"contrast_factor": torch.tensor([2.0])}
    )
    assert torch.allclose(c, torch.tensor([[[0.0, 0.3], [0.7, 1.0]]]))


def test_contrast_factor_range_follows_keras_docs():
    layer = pp.RandomContrast(0.5, seed=0)
    f = layer.get_random_transformation(img(b=512))["contrast_factor"]
    assert 0.5 <= float(f.min()) < 0.6 and 1.4 < float(f.max()) <= 1.5


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: pp.RandomContrast(1.5), "RandomContrast: factor"),
    ],
)
def test_bad_arguments_name_layer_and_argument(build, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("/", "/")):
        build()
