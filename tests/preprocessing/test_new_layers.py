"""RandomShear, RandomPerspective, RandomElasticTransform, RandomResizedCrop.

Keras 3 is the anchor for the first three: with the same draw (a transformation dict, or
for the elastic field the same N(0, 1) noise) the outputs must agree within 1e-4.
torchvision's RandomResizedCrop cannot be imported beside this torch build, so its
semantics are tested directly: the draw against a line-by-line transcription of
``RandomResizedCrop.get_params``, the resize against ``F.interpolate`` of each crop.
Keras's outputs come through ``ref`` (tests/differential.py): read from tests/goldens/ in
the default run, computed by Keras under ``-m differential``.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from differential import keras, keras_transform, tf

import preprocessing as pp
from preprocessing import _regions
from preprocessing.resized_crop import resize_windows

FORMATS = ["channels_first", "channels_last"]


def nhwc(b=2, h=9, w=11, seed=0):
    return np.random.default_rng(seed).random((b, h, w, 3), dtype=np.float32)


def in_format(x, fmt):
    return x if fmt == "channels_last" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))


NEW_LAYERS = {
    "shear": lambda **k: pp.RandomShear(0.3, 0.2, **k),
    "perspective": lambda **k: pp.RandomPerspective(scale=0.5, **k),
    "elastic": lambda **k: pp.RandomElasticTransform(scale=1.0, value_range=(0, 1), **k),
    "resized_crop": lambda **k: pp.RandomResizedCrop(8, 8, **k),
}


# ------------------------------------------------------------------- generic
@pytest.mark.parametrize("name", sorted(NEW_LAYERS))
def test_per_image_draws_seeds_ranks_and_formats(name):
    make = NEW_LAYERS[name]
    x = torch.rand(6, 3, 24, 24)
    a = make(seed=7)(x)
    assert torch.equal(a, make(seed=7)(x)) and not torch.equal(a, make(seed=8)(x))
    assert a.dtype == torch.float32 and a.shape[:2] == (6, 3)
    outs = [a[i] for i in range(6)]
    assert len({tuple(o.flatten()[:50].tolist()) for o in outs}) == 6  # one draw per image
    single = make(seed=7)(x[0])
    torch.testing.assert_close(single, make(seed=7)(x[:1])[0])
    last = make(seed=7, data_format="channels_last")(x.permute(0, 2, 3, 1))
    torch.testing.assert_close(last.permute(0, 3, 1, 2), a, atol=1e-5, rtol=1e-5)
    u8 = make(seed=7)((x * 255).to(torch.uint8))
    assert u8.dtype == torch.float32
    assert make(seed=7)(x.double()).dtype == torch.float64
    g = np.random.default_rng(3)
    assert torch.equal(make()(x, generator=g), make()(x, generator=np.random.default_rng(3)))


@pytest.mark.parametrize("name", ["shear", "perspective", "elastic"])
def test_identity_in_eval(name):
    x = torch.rand(2, 3, 10, 12)
    layer = NEW_LAYERS[name](seed=1).eval()
    assert torch.equal(layer(x), x)


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: pp.RandomShear(1.5), r"RandomShear: x_factor must lie in \[0, 1\]"),
        (lambda: pp.RandomShear(0.1, (0.5, 0.2)), "RandomShear: y_factor must be a pair"),
        (lambda: pp.RandomShear(0.1, fill_mode="mirror"), "RandomShear: fill_mode"),
        (
            lambda: pp.RandomPerspective(scale=2.0),
            r"RandomPerspective: scale must be a number in \[0, 1\]",
        ),
        (lambda: pp.RandomPerspective(factor=-0.1), "RandomPerspective: factor must lie in"),
        (lambda: pp.RandomElasticTransform(fill_mode="edge"), "RandomElasticTransform: fill_mode"),
        (
            lambda: pp.RandomElasticTransform(value_range=(1, 0)),
            "RandomElasticTransform: value_range",
        ),
        (
            lambda: pp.RandomResizedCrop(8, 8, scale=(0.5, 0.1)),
            "RandomResizedCrop: scale must be a pair",
        ),
        (
            lambda: pp.RandomResizedCrop(8, 8, ratio=(0, 1)),
            "RandomResizedCrop: ratio must be a pair",
        ),
        (
            lambda: pp.RandomResizedCrop(8, 8, interpolation="area"),
            "RandomResizedCrop: interpolation",
        ),
        (
            lambda: pp.RandomResizedCrop(8, 8, antialias=1),
            "RandomResizedCrop: antialias must be True",
        ),
    ],
)
def test_bad_arguments_name_layer_and_argument(build, message):
    with pytest.raises(ValueError, match=message):
        build()


# -------------------------------------------------------------------- Keras
keras_only = pytest.mark.filterwarnings("ignore::DeprecationWarning")


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


# ------------------------------------------------------- RandomResizedCrop
def torchvision_get_params(h, w, scale, ratio, areas, logs, u_top, u_left):
    """torchvision.transforms.RandomResizedCrop.get_params, transcribed, with its random
    draws replaced by the given uniforms (area fraction, log ratio, two U[0, 1))."""
    area = h * w
    for k in range(10):
        target_area = area * areas[k]
        aspect_ratio = math.exp(logs[k])
        cw = int(round(math.sqrt(target_area * aspect_ratio)))
        ch = int(round(math.sqrt(target_area / aspect_ratio)))
        if 0 < cw <= w and 0 < ch <= h:
            return int(u_top * (h - ch + 1)), int(u_left * (w - cw + 1)), ch, cw
    in_ratio = float(w) / float(h)
    if in_ratio < min(ratio):
        cw, ch = w, int(round(w / min(ratio)))
    elif in_ratio > max(ratio):
        ch, cw = h, int(round(h * max(ratio)))
    else:
        cw, ch = w, h
    return (h - ch) // 2, (w - cw) // 2, ch, cw


@pytest.mark.parametrize(
    "scale, ratio",
    [((0.08, 1.0), (3 / 4, 4 / 3)), ((0.5, 1.0), (0.2, 5.0)), ((0.9, 1.0), (2.5, 3.0))],
)
def test_resized_crop_draw_follows_torchvision(scale, ratio, monkeypatch):
    h, w, n = 30, 50, 64
    layer = pp.RandomResizedCrop(16, 16, scale=scale, ratio=ratio, seed=0)
    drawn = []
    real = layer._uniform

    def recording(count, low, high, device, generator):
        values = real(count, low, high, device, generator)
        drawn.append(values.double().numpy())
        return values

    monkeypatch.setattr(layer, "_uniform", recording)
    params = layer.get_random_transformation(torch.zeros(n, 3, h, w))
    areas, logs, tops, lefts = drawn
    areas, logs = areas.reshape(n, 10), logs.reshape(n, 10)
    got = torch.stack([params[k] for k in ("top", "left", "crop_height", "crop_width")], 1)
    fallbacks = 0
    for i in range(n):
        sides = [math.sqrt(h * w * a * math.exp(r)) for a, r in zip(areas[i], logs[i])]
        sides += [math.sqrt(h * w * a / math.exp(r)) for a, r in zip(areas[i], logs[i])]
        if any(abs(s % 1 - 0.5) < 1e-3 for s in sides):
            continue  # float32 vs float64 could round a half the other way
        expected = torchvision_get_params(h, w, scale, ratio, areas[i], logs[i], tops[i], lefts[i])
        assert tuple(got[i].tolist()) == expected, i
        fallbacks += expected == torchvision_get_params(
            h, w, scale, ratio, [9.0] * 10, [0.0] * 10, 0, 0
        )
    if ratio == (2.5, 3.0):
        assert fallbacks > 0  # the wide-ratio case exercises the centre-crop fallback


def test_resized_crop_fallback_is_torchvision_centre_crop():
    layer = pp.RandomResizedCrop(4, 4, scale=(1.0, 1.0), ratio=(2.0, 2.0), seed=0)
    params = layer.get_random_transformation(torch.zeros(3, 1, 10, 10))
    # No 2:1 crop of the whole area fits: width 10, height round(10 / 2) = 5, centred.
    assert params["crop_width"].tolist() == [10] * 3 and params["crop_height"].tolist() == [5] * 3
    assert params["top"].tolist() == [2] * 3 and params["left"].tolist() == [0] * 3


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "nearest-exact", "bicubic"])
@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("host", [True, False])
def test_resize_windows_equals_interpolate_of_each_crop(monkeypatch, mode, antialias, host):
    # host: one F.interpolate per crop (CPU); else the per-tap gathers (devices, compile)
    monkeypatch.setattr(_regions, "on_host", lambda t: host)
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.random((8, 2, 40, 36)))  # float64, the same every run
    top = torch.tensor(rng.integers(0, 20, 8))
    left = torch.tensor(rng.integers(0, 16, 8))
    ch = torch.tensor(rng.integers(1, 21, 8))
    cw = torch.tensor(rng.integers(1, 21, 8))
    ch[0], cw[0], ch[1], cw[1] = 20, 20, 3, 2  # downscale and strong upscale
    got = resize_windows(x, top, left, ch, cw, (11, 13), mode, antialias)
    for i in range(8):
        crop = x[i : i + 1, :, top[i] : top[i] + ch[i], left[i] : left[i] + cw[i]]
        kw = {} if mode.startswith("nearest") else dict(align_corners=False, antialias=antialias)
        expected = F.interpolate(crop, size=(11, 13), mode=mode, **kw)
        # float64 weights and sums in another order than torch's kernels: a few eps of
        # float64 (taps computed in float32 put 1.5e-6 of error here).
        torch.testing.assert_close(got[i : i + 1], expected, atol=1e-12, rtol=0)


def test_resized_crop_eval_resizes_the_centred_aspect_window():
    layer = pp.RandomResizedCrop(4, 8, antialias=False).eval()
    x = torch.rand(2, 3, 12, 12)
    expected = F.interpolate(x[:, :, 3:9, :], size=(4, 8), mode="bilinear", align_corners=False)
    torch.testing.assert_close(layer(x), expected)


def test_resized_crop_scale_and_ratio_hold_for_found_crops():
    layer = pp.RandomResizedCrop(8, 8, seed=3)
    p = layer.get_random_transformation(torch.zeros(500, 3, 64, 96))
    area = (p["crop_height"] * p["crop_width"]).double() / (64 * 96)
    aspect = p["crop_width"].double() / p["crop_height"]
    assert area.min() >= 0.06 and area.max() <= 1.0
    assert aspect.min() >= 0.6 and aspect.max() <= 1.6
    assert (p["top"] + p["crop_height"] <= 64).all() and (p["left"] + p["crop_width"] <= 96).all()
    assert len(set(p["crop_width"].tolist())) > 20


# ------------------------------------------------------------------ review (issue 13)
@pytest.mark.parametrize(
    "layer, out_hw",
    [
        (pp.RandomElasticTransform(seed=0, bounding_box_format="xyxy"), (8, 8)),
        (pp.RandomResizedCrop(4, 6, seed=0, bounding_box_format="xyxy"), (4, 6)),
        (pp.RandomCrop(4, 6, seed=0, bounding_box_format="xyxy"), (4, 6)),
        (pp.RandomShear(0.2, seed=0, bounding_box_format="xyxy"), (8, 8)),
        (pp.RandomPerspective(seed=0, bounding_box_format="xyxy"), (8, 8)),
    ],
)
def test_empty_batch_gives_an_empty_batch(layer, out_hw):
    # A batch of 0 images (a filtered-out batch) failed inside torch's reshape/stack.
    out = layer(torch.rand(0, 3, 8, 8))
    assert out.shape == (0, 3, *out_hw) and out.dtype == torch.float32
    data = {
        "images": torch.rand(0, 3, 8, 8),
        "bounding_boxes": {"boxes": torch.zeros(0, 2, 4), "labels": torch.zeros(0, 2)},
        "segmentation_masks": torch.zeros(0, 8, 8, dtype=torch.int64),
        "keypoints": torch.zeros(0, 3, 2),
    }
    out = layer(data)
    assert out["images"].shape == (0, 3, *out_hw)
    assert out["bounding_boxes"]["boxes"].shape == (0, 2, 4)
    assert out["segmentation_masks"].shape == (0, *out_hw)
    assert out["keypoints"].shape == (0, 3, 2)
