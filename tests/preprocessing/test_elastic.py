"""RandomElasticTransform: against Keras 3 with the same N(0, 1) noise (within 1e-4),
keypoints that invert the field, per-image draws.

Keras's results come through ``ref`` (tests/differential.py): read from
tests/goldens/<this file>.json in the default run, computed by Keras itself under
``pytest -m differential``.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _layer_helpers import FORMATS, in_format, nhwc
from differential import keras, tf

import preprocessing as pp

# -------------------------------------------------------------------- Keras
keras_only = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def keras_elastic(x, h, w, s, seed, fmt, interpolation, fill_mode):
    """Keras's elastic_transform of ``x`` for its own seeded field."""
    layers = keras().layers
    alpha, sigma = layers.RandomElasticTransform(
        scale=s, data_format=fmt
    ).get_elastic_transform_params(h, w, s)
    expected = keras().ops.image.elastic_transform(
        x,
        alpha=alpha,
        sigma=sigma,
        interpolation=interpolation,
        fill_mode=fill_mode,
        fill_value=0.3,
        seed=seed,
        data_format=fmt,
    )
    return np.asarray(expected)


def keras_elastic_noise(h, w, seed):
    """The N(0, 1) noise of Keras's elastic field for ``seed``: Keras draws its x and y
    fields from one seed, so both are this stateless draw."""
    keras()
    from keras.src.random.seed_generator import draw_seed

    return tf().random.stateless_normal((2, h, w), seed=draw_seed(seed), dtype="float32").numpy()


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: pp.RandomElasticTransform(fill_mode="edge"), "RandomElasticTransform: fill_mode"),
        (
            lambda: pp.RandomElasticTransform(value_range=(1, 0)),
            "RandomElasticTransform: value_range",
        ),
    ],
)
def test_bad_arguments_name_layer_and_argument(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@keras_only
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("fill_mode", ["constant", "nearest", "wrap"])
@pytest.mark.parametrize("interpolation", ["bilinear", "nearest"])
def test_elastic_matches_keras_with_the_same_noise(ref, fmt, fill_mode, interpolation):
    h, w, s, seed = 20, 24, 0.8, 1234
    x = in_format(nhwc(b=2, h=h, w=w, seed=3), fmt)
    expected = ref(keras_elastic, x, h, w, s, seed, fmt, interpolation, fill_mode)
    noise = torch.from_numpy(ref(keras_elastic_noise, h, w, seed, key="elastic-noise"))
    ours = pp.RandomElasticTransform(
        scale=s,
        interpolation=interpolation,
        fill_mode=fill_mode,
        fill_value=0.3,
        value_range=(-10, 10),
        data_format=fmt,
    )
    params = {
        "apply_transform": torch.tensor([True, True]),
        "distortion_factor": torch.tensor([s, s]),
        "dx": noise,
        "dy": noise,
    }
    got = ours.transform_images(torch.from_numpy(x), params).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)


def test_elastic_keypoints_invert_the_field():
    layer = pp.RandomElasticTransform(scale=1.0, seed=0, value_range=(0, 1))
    x = torch.rand(3, 1, 96, 96)
    params = layer.get_random_transformation(x)
    src = layer.source_grid(params, 96, 96) + 0.5  # continuous point each pixel samples
    rng = np.random.default_rng(0)
    points = torch.tensor(rng.uniform(20, 76, (3, 12, 2)), dtype=torch.float32)
    params["input_shape"] = tuple(x.shape)
    moved = layer.transform_keypoints(points, params)
    # Sampling the field where the keypoint landed gives the keypoint back.
    grid = (moved - 0.5) / 48.0 - 1.0 + 1.0 / 96.0  # pixel index -> align_corners=False
    back = F.grid_sample(src.permute(0, 3, 1, 2), grid.unsqueeze(1), align_corners=False)
    back = back.squeeze(2).permute(0, 2, 1)
    assert (back - points).norm(dim=-1).max() < 0.01
    displacement = layer.displacement(params, 96, 96)
    assert displacement.abs().max() > 2.0  # a real warp, not a near-identity


def test_elastic_draws_per_image_and_respects_factor_zero():
    x = torch.rand(4, 3, 32, 32)
    off = pp.RandomElasticTransform(factor=0.0, seed=1, value_range=(0, 1))
    assert torch.equal(off(x), x)
    params = pp.RandomElasticTransform(scale=(0.2, 1.0), seed=1).get_random_transformation(x)
    assert params["distortion_factor"].unique().numel() == 4
    assert params["dx"].shape == (4, 32, 32) and not torch.equal(params["dx"], params["dy"])
