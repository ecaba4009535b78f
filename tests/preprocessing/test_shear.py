"""RandomShear: against Keras 3 with the same draw (within 1e-4).

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import numpy as np
import pytest
import torch
from _layer_helpers import FORMATS, in_format, nhwc
from differential import keras_transform

import preprocessing as pp

# -------------------------------------------------------------------- Keras
keras_only = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: pp.RandomShear(1.5), r"RandomShear: x_factor must lie in \[0, 1\]"),
        (lambda: pp.RandomShear(0.1, (0.5, 0.2)), "RandomShear: y_factor must be a pair"),
        (lambda: pp.RandomShear(0.1, fill_mode="mirror"), "RandomShear: fill_mode"),
    ],
)
def test_bad_arguments_name_layer_and_argument(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@keras_only
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill_mode", ["reflect", "constant", "nearest"])
@pytest.mark.parametrize("interpolation", ["bilinear", "nearest"])
def test_shear_matches_keras_with_the_same_draw(ref, fmt, fill_mode, interpolation):
    kw = dict(interpolation=interpolation, fill_mode=fill_mode, fill_value=0.5, data_format=fmt)
    ours = pp.RandomShear(0.4, 0.3, seed=2, **kw)
    x = in_format(nhwc(b=4), fmt)
    params = ours.get_random_transformation(torch.from_numpy(x))
    assert (params["shear_factor"].abs() <= torch.tensor([0.4, 0.3])).all()
    draw = {"shear_factor": params["shear_factor"].numpy()}
    expected = ref(keras_transform, "RandomShear", (0.4, 0.3), kw, x, draw)
    got = ours.transform_images(torch.from_numpy(x), params).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)


def test_shear_keras_config_of_a_number_loads():
    # keras.layers.RandomShear(0.2, seed=3).get_config() (Keras 3.15.1) writes x_factor
    # (-0.2, 0.2), which Keras's own from_config refuses ("in the range [0, 1.0]").
    config = {
        "name": "random_shear",
        "trainable": True,
        "dtype": "float32",
        "data_format": "channels_last",
        "x_factor": (-0.2, 0.2),
        "y_factor": (-0.0, 0.0),
        "fill_mode": "reflect",
        "interpolation": "bilinear",
        "seed": 3,
        "fill_value": 0.0,
    }
    layer = pp.layer_from_config({"class_name": "RandomShear", "config": config})
    assert (layer._x, layer._y) == (pp.RandomShear(0.2)._x, (-0.0, 0.0)) == ((-0.2, 0.2), (0, 0))
    shear = layer.get_random_transformation(torch.zeros(512, 8, 8, 3))["shear_factor"]
    assert float(shear[:, 0].abs().max()) <= 0.2 and float(shear[:, 0].min()) < -0.15
    assert float(shear[:, 0].max()) > 0.15 and float(shear[:, 1].abs().max()) == 0.0
    with pytest.raises(ValueError, match=r"RandomShear: x_factor must lie in \[-1"):
        pp.RandomShear((-1.5, 0.0))
