"""RandomPerspective: against Keras 3 with the same draw (within 1e-4).

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
        (
            lambda: pp.RandomPerspective(scale=2.0),
            r"RandomPerspective: scale must be a number in \[0, 1\]",
        ),
        (lambda: pp.RandomPerspective(factor=-0.1), "RandomPerspective: factor must lie in"),
    ],
)
def test_bad_arguments_name_layer_and_argument(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@keras_only
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("interpolation", ["bilinear", "nearest"])
def test_perspective_matches_keras_with_the_same_draw(ref, fmt, interpolation):
    kw = dict(scale=0.8, interpolation=interpolation, fill_value=0.25, data_format=fmt)
    ours = pp.RandomPerspective(factor=(0.5, 0.5), seed=4, **kw)
    x = in_format(nhwc(b=6, h=10, w=13), fmt)
    params = ours.get_random_transformation(torch.from_numpy(x))
    assert 0 < int(params["apply_perspective"].sum()) < 6  # both branches exercised
    transformation = {k: v.numpy() for k, v in params.items() if k != "input_shape"}
    kw = dict(factor=(0.5, 0.5), **kw)
    expected = ref(keras_transform, "RandomPerspective", (), kw, x, transformation)
    got = ours.transform_images(torch.from_numpy(x), params).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)
