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
