"""Behaviour of each layer: values, shapes, dtypes, eval identity, seeds, errors."""

import numpy as np
import pytest
import torch

import preprocessing as pp


def img(b=2, c=3, h=5, w=6, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).random((b, c, h, w), dtype=np.float32))


RANDOM_LAYERS = [
    lambda **k: pp.RandomFlip("horizontal_and_vertical", **k),
    lambda **k: pp.RandomRotation(0.2, **k),
    lambda **k: pp.RandomZoom((-0.3, 0.3), (-0.2, 0.4), **k),
    lambda **k: pp.RandomTranslation(0.2, 0.3, **k),
    lambda **k: pp.RandomContrast(0.5, value_range=(0, 1), **k),
    lambda **k: pp.RandomBrightness(0.3, value_range=(0, 1), **k),
]


# --------------------------------------------------------------------- flips
def test_flip_horizontal_exact_pixels_per_image():
    flip = pp.RandomFlip("horizontal")
    x = img(b=2)
    params = {"flip_h": torch.tensor([True, False]), "flip_v": torch.tensor([False, False])}
    out = flip.transform_images(x, params)
    assert torch.equal(out[0], x[0].flip(-1))
    assert torch.equal(out[1], x[1])


def test_flip_both_axes_independent_all_four_outcomes():
    flip = pp.RandomFlip("horizontal_and_vertical", seed=3)
    x = torch.arange(4.0).reshape(1, 1, 2, 2).expand(64, 1, 2, 2).contiguous()
    out = flip(x)
    outcomes = {tuple(o.flatten().tolist()) for o in out}
    assert outcomes == {
        (0.0, 1.0, 2.0, 3.0),
        (1.0, 0.0, 3.0, 2.0),
        (2.0, 3.0, 0.0, 1.0),
        (3.0, 2.0, 1.0, 0.0),
    }


def test_flip_twice_identity_with_same_params():
    flip = pp.RandomFlip("horizontal_and_vertical", seed=1)
    x = img(b=8)
    p = flip.get_random_transformation(x)
    assert torch.equal(flip.transform_images(flip.transform_images(x, p), p), x)


def test_flip_vertical_mode_never_flips_columns():
    flip = pp.RandomFlip("vertical", seed=0)
    p = flip.get_random_transformation(img(b=32))
    assert not p["flip_h"].any() and p["flip_v"].any() and not p["flip_v"].all()


# --------------------------------------------------------------------- crops
def test_random_crop_location_per_image_and_exact_pixels():
    crop = pp.RandomCrop(2, 3, seed=0)
    x = img(b=16, h=6, w=8)
    p = crop.get_random_transformation(x)
    out = crop.transform_images(x, p)
    assert out.shape == (16, 3, 2, 3)
    for i in range(16):
        t, left = int(p["top"][i]), int(p["left"][i])
        assert torch.equal(out[i], x[i, :, t : t + 2, left : left + 3])
    assert len({(int(a), int(b)) for a, b in zip(p["top"], p["left"])}) > 1
    assert int(p["top"].max()) <= 4 and int(p["left"].max()) <= 5


def test_random_crop_eval_is_center_crop():
    crop = pp.RandomCrop(2, 3).eval()
    x = img(b=2, h=6, w=8)
    assert torch.equal(crop(x), x[:, :, 2:4, 2:5])
    assert torch.equal(crop(x), pp.CenterCrop(2, 3)(x))


def test_random_crop_channels_last_and_single_image():
    crop = pp.RandomCrop(2, 2, seed=5, data_format="channels_last")
    x = img(b=1, h=4, w=4)[0].permute(1, 2, 0)  # (H, W, C)
    out = crop(x)
    assert out.shape == (2, 2, 3)
    windows = [x[t : t + 2, s : s + 2] for t in range(3) for s in range(3)]
    assert any(torch.equal(out, wdw) for wdw in windows)


def test_center_crop_smaller_input_resizes_like_keras():
    out = pp.CenterCrop(4, 4)(torch.ones(1, 2, 2))
    assert out.shape == (1, 4, 4) and torch.allclose(out, torch.ones(1, 4, 4))


# -------------------------------------------------------------- resize etc.
def test_resizing_shapes_and_aspect_modes():
    x = img(b=2, h=4, w=8)
    assert pp.Resizing(2, 2)(x).shape == (2, 3, 2, 2)
    cropped = pp.Resizing(4, 4, crop_to_aspect_ratio=True)(x)
    assert torch.equal(cropped, x[:, :, :, 2:6])
    padded = pp.Resizing(8, 8, pad_to_aspect_ratio=True, fill_value=-1.0)(x)
    assert torch.equal(padded[:, :, 2:6], x) and (padded[:, :, :2] == -1).all()


def test_resizing_nearest_uint8_becomes_float32():
    x = torch.tensor([[[0, 10], [20, 30]]], dtype=torch.uint8)
    out = pp.Resizing(4, 4, interpolation="nearest")(x)
    assert out.dtype == torch.float32
    assert out[0].tolist()[0] == [0.0, 0.0, 10.0, 10.0]


def test_rescaling_per_channel_both_formats():
    x = torch.ones(2, 3, 2, 2)
    out = pp.Rescaling([1.0, 2.0, 3.0], offset=[0.0, 0.0, 1.0])(x)
    assert out[:, 2].eq(4.0).all() and out[:, 1].eq(2.0).all()
    out_last = pp.Rescaling([1.0, 2.0, 3.0], data_format="channels_last")(x.permute(0, 2, 3, 1))
    assert torch.equal(out_last.permute(0, 3, 1, 2), x * torch.tensor([1.0, 2, 3]).view(3, 1, 1))


def test_contrast_and_brightness_fixed_values():
    x = torch.tensor([[[0.2, 0.4], [0.6, 0.8]]])
    c = pp.RandomContrast(0.5, value_range=(0, 1)).transform_images(
        x, {"contrast_factor": torch.tensor([2.0])}
    )
    assert torch.allclose(c, torch.tensor([[[0.0, 0.3], [0.7, 1.0]]]))
    b = pp.RandomBrightness(0.5, value_range=(0, 1)).transform_images(
        x, {"delta": torch.tensor([0.3])}
    )
    assert torch.allclose(b, torch.tensor([[[0.5, 0.7], [0.9, 1.0]]]))


def test_contrast_factor_range_follows_keras_docs():
    layer = pp.RandomContrast(0.5, seed=0)
    f = layer.get_random_transformation(img(b=512))["contrast_factor"]
    assert 0.5 <= float(f.min()) < 0.6 and 1.4 < float(f.max()) <= 1.5


# ------------------------------------------------------------ affine layers
def test_rotation_quarter_turn_is_rot90():
    x = img(b=3, h=5, w=5)
    out = pp.RandomRotation((0.25, 0.25))(x)
    np.testing.assert_allclose(out.numpy(), np.rot90(x.numpy(), k=1, axes=(2, 3)), atol=1e-5)


def test_zoom_and_translation_values():
    x = torch.arange(5.0).view(1, 1, 1, 5).expand(1, 1, 3, 5)
    out = pp.RandomTranslation(0.0, (0.2, 0.2), fill_mode="nearest")(x)
    assert torch.allclose(out[0, 0, 0], torch.tensor([0.0, 0.0, 1.0, 2.0, 3.0]), atol=1e-5)
    out = pp.RandomZoom((-0.5, -0.5), fill_mode="constant")(x)  # 2x zoom-in about centre
    assert torch.allclose(out[0, 0, 1], torch.tensor([1.0, 1.5, 2.0, 2.5, 3.0]), atol=1e-5)


@pytest.mark.parametrize("make", RANDOM_LAYERS)
def test_random_layers_vectorised_per_image_same_seed_same_output(make):
    x = img(b=8, h=8, w=8)
    a, b = make(seed=7), make(seed=7)
    out_a = a(x)
    assert torch.equal(out_a, b(x))
    assert out_a.shape == x.shape and out_a.dtype == torch.float32
    # Different images get different parameters (one draw per image).
    params = make(seed=7).get_random_transformation(x)
    first = next(iter(params.values()))
    assert first.shape[0] == 8 and not torch.all(first == first[0])
    # Single image and channels-last agree with the batched channels-first path.
    single = make(seed=7)(x[0])
    assert torch.equal(single, make(seed=7)(x[:1])[0])
    last = make(seed=7, data_format="channels_last")(x.permute(0, 2, 3, 1))
    torch.testing.assert_close(last.permute(0, 3, 1, 2), out_a, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("make", RANDOM_LAYERS)
def test_random_layers_identity_in_eval(make):
    x = img(b=4)
    assert torch.equal(make(seed=1).eval()(x), x)
    u8 = (x * 255).to(torch.uint8)
    out = make(seed=1).eval()(u8)
    assert out.dtype == torch.float32 and torch.equal(out, u8.float())


@pytest.mark.parametrize("make", RANDOM_LAYERS)
def test_generator_argument_numpy_and_torch(make):
    x = img(b=4, h=8, w=8)
    layer = make(seed=None)
    a = layer(x, generator=np.random.default_rng(11))
    b = layer(x, generator=np.random.default_rng(11))
    c = layer(x, generator=np.random.default_rng(12))
    assert torch.equal(a, b) and not torch.equal(a, c)
    g1, g2 = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    assert torch.equal(layer(x, generator=g1), layer(x, generator=g2))


def test_float_dtypes_kept_and_uint8_computed_in_float32():
    x = img(b=2)
    rot = pp.RandomRotation(0.1, seed=0)
    assert rot(x.double()).dtype == torch.float64
    assert rot(x.half()).dtype == torch.float16
    assert rot((x * 255).to(torch.uint8)).dtype == torch.float32
    assert pp.Rescaling(1 / 255)(torch.zeros(3, 2, 2, dtype=torch.uint8)).dtype == torch.float32


def test_numpy_input_accepted():
    out = pp.CenterCrop(2, 2)(np.zeros((3, 4, 4), dtype=np.uint8))
    assert isinstance(out, torch.Tensor) and out.shape == (3, 2, 2)


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: pp.RandomFlip("diagonal"), "RandomFlip: mode must be one of"),
        (lambda: pp.RandomRotation(0.1, fill_mode="mirror"), "RandomRotation: fill_mode"),
        (lambda: pp.RandomRotation(0.1, interpolation="cubic"), "RandomRotation: interpolation"),
        (lambda: pp.RandomRotation(2.0), "RandomRotation: factor must lie in"),
        (lambda: pp.RandomZoom(-1.0), "RandomZoom: height_factor must lie in"),
        (lambda: pp.RandomCrop(0, 3), r"RandomCrop: height must be an int in \[1, 65536\]"),
        (
            lambda: pp.Resizing(2, 2, crop_to_aspect_ratio=True, pad_to_aspect_ratio=True),
            "Resizing: crop_to_aspect_ratio/pad_to_aspect_ratio cannot both be True",
        ),
        (lambda: pp.RandomContrast(1.5), "RandomContrast: factor"),
        (lambda: pp.RandomBrightness(0.1, value_range=(0,)), "RandomBrightness: value_range"),
        (lambda: pp.Normalization(axis=1), "Normalization: axis"),
        (lambda: pp.Normalization(mean=1.0), "Normalization: mean/variance"),
        (lambda: pp.Rescaling("x"), "Rescaling: scale"),
        (lambda: pp.RandomFlip(data_format="NCHW"), "RandomFlip: data_format"),
        (lambda: pp.RandomFlip(seed=1.5), "RandomFlip: seed"),
    ],
)
def test_bad_arguments_name_layer_and_argument(build, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("/", "/")):
        build()


def test_wrong_rank_names_layer_and_shape():
    with pytest.raises(ValueError, match=r"RandomRotation: expected a rank-3 .* shape \(2, 3\)"):
        pp.RandomRotation(0.1)(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"CenterCrop: .* shape \(1, 1, 1, 4, 4\)"):
        pp.CenterCrop(2, 2)(torch.zeros(1, 1, 1, 4, 4))


def test_layers_pickle_and_deepcopy_after_use():
    import copy
    import pickle

    layer = pp.RandomRotation(0.1, seed=3)
    layer(img())
    clone = pickle.loads(pickle.dumps(layer))
    assert torch.equal(clone(img()), pp.RandomRotation(0.1, seed=3)(img()))
    assert copy.deepcopy(layer).get_config() == layer.get_config()
