"""Issue 11, preprocessing: one image layout default followed by loaders and layers, a
clear error when an input looks like the other layout, scikit-learn's scale for constant
features, Keras's range checks (a reversed pair refused), and configs checked when read."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from differential import library
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import datapipe as dp
import preprocessing as pp
from preprocessing.base import _REGISTRY


@pytest.fixture
def restore_format():
    yield
    pp.set_image_data_format("channels_first")


# ---- one package default ------------------------------------------------------------------
def test_the_default_is_channels_first_and_followed_by_new_layers_only(restore_format):
    assert pp.image_data_format() == "channels_first"
    before = pp.RandomFlip()
    pp.set_image_data_format("channels_last")
    assert pp.image_data_format() == "channels_last"
    after, explicit = pp.RandomFlip(), pp.Resizing(2, 2, data_format="channels_first")
    assert (before.data_format, after.data_format, explicit.data_format) == (
        "channels_first",
        "channels_last",
        "channels_first",
    )
    # The config records the value taken: a round trip keeps it whatever the default.
    config = json.loads(json.dumps(pp.serialize_layer(before)))
    assert pp.layer_from_config(config).data_format == "channels_first"
    with pytest.raises(ValueError, match="data_format must be one of"):
        pp.set_image_data_format("NHWC")


def _folder(tmp_path):
    for c in ("a", "b"):
        (tmp_path / c).mkdir()
        Image.fromarray(np.zeros((6, 5, 3), np.uint8)).save(tmp_path / c / "0.png")
    return str(tmp_path)


def test_the_image_loader_follows_the_default(tmp_path, restore_format):
    root = _folder(tmp_path)
    kw = dict(image_size=(4, 7), batch_size=2, shuffle=False, verbose=False)
    images, _ = next(iter(dp.image_dataset_from_directory(root, **kw)))
    assert images.shape == (2, 3, 4, 7)  # what the layers take by default
    pp.set_image_data_format("channels_last")
    images, _ = next(iter(dp.image_dataset_from_directory(root, **kw)))
    assert images.shape == (2, 4, 7, 3)
    images, _ = next(
        iter(dp.image_dataset_from_directory(root, data_format="channels_first", **kw))
    )
    assert images.shape == (2, 3, 4, 7)


def test_loader_and_layers_agree_by_default(tmp_path):
    root = _folder(tmp_path)
    ds = dp.image_dataset_from_directory(root, image_size=(8, 8), batch_size=2, verbose=False)
    images, _ = next(iter(ds.to_torch()))
    assert pp.Resizing(4, 4)(images).shape == (2, 3, 4, 4)
    assert pp.RandomFlip(seed=0)(images).shape == (2, 3, 8, 8)


# ---- inputs in the other layout -----------------------------------------------------------
LAYERS = {
    "RandomFlip": lambda f: pp.RandomFlip("horizontal", seed=0, data_format=f),
    "RandomRotation": lambda f: pp.RandomRotation(0.1, seed=0, data_format=f),
    "RandomZoom": lambda f: pp.RandomZoom(0.1, seed=0, data_format=f),
    "RandomTranslation": lambda f: pp.RandomTranslation(0.1, 0.1, seed=0, data_format=f),
    "RandomCrop": lambda f: pp.RandomCrop(8, 8, seed=0, data_format=f),
    "RandomBrightness": lambda f: pp.RandomBrightness(0.1, seed=0, data_format=f),
    "RandomContrast": lambda f: pp.RandomContrast(0.1, seed=0, data_format=f),
    "Resizing": lambda f: pp.Resizing(8, 8, data_format=f),
    "CenterCrop": lambda f: pp.CenterCrop(8, 8, data_format=f),
    "Rescaling_per_channel": lambda f: pp.Rescaling([1.0, 2.0, 3.0], data_format=f),
    "Normalization": lambda f: pp.Normalization(mean=[0.0] * 3, variance=[1.0] * 3, data_format=f),
    "Pipeline": lambda f: pp.Pipeline(
        [pp.RandomFlip(seed=0, data_format=f), pp.RandomRotation(0.1, seed=1, data_format=f)],
        data_format=f,
    ),
}
NHWC, NCHW = (2, 16, 16, 3), (2, 3, 16, 16)


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_an_input_in_the_other_layout_raises(name, mode):
    for fmt, wrong, right in (("channels_first", NHWC, NCHW), ("channels_last", NCHW, NHWC)):
        layer = LAYERS[name](fmt)
        layer.train(mode == "train")
        with pytest.raises(ValueError, match=f"data_format is '{fmt}' but the input of shape"):
            layer(torch.rand(wrong))
        with pytest.raises(ValueError, match="data_format"):
            layer(torch.rand(wrong[1:]))  # one image
        out = layer(torch.rand(right))
        assert out.shape[0] == 2


def test_the_issue_examples_raise():
    x = torch.rand(2, 32, 32, 3)  # NHWC, from a channels_last loader
    with pytest.raises(ValueError, match="pass data_format='channels_last'"):
        pp.RandomFlip("horizontal")(x)
    with pytest.raises(ValueError, match="data_format"):
        pp.Resizing(8, 8)(x)
    with pytest.raises(ValueError, match="data_format"):
        pp.Normalization().adapt(x)


def test_layout_free_layers_and_ambiguous_shapes_do_not_raise():
    nhwc = torch.rand(2, 16, 16, 3)
    assert pp.Rescaling(0.5)(nhwc).shape == nhwc.shape  # a scalar scale: any layout
    norm = pp.Normalization(axis=None)
    norm.adapt(nhwc)
    assert norm(nhwc).shape == nhwc.shape
    # 8 channels but 8 wide at the other end, or 4 channels: can't tell, accepted.
    assert pp.RandomFlip(seed=0)(torch.rand(2, 8, 8, 8)).shape == (2, 8, 8, 8)
    assert pp.Resizing(2, 2)(torch.rand(2, 4, 4, 3)).shape == (2, 4, 2, 2)


# ---- Normalization of a constant feature ----------------------------------------------------
def test_a_constant_feature_is_centred_not_scaled_by_1e7():
    data = torch.rand(64, 3, 4, 4, dtype=torch.float64)
    data[:, 1] = 0.1  # constant, and 0.1 is not exact in binary: rounding leaves a tiny m2
    norm = pp.Normalization()
    norm.adapt(data)
    assert norm.variance.flatten()[1].item() == 0.0
    x = torch.full((1, 3, 1, 1), 0.1, dtype=torch.float64)
    x[0, 1] = 5.1
    out = norm(x)
    assert out[0, 1].item() == pytest.approx(5.0)  # not 5e7: scale 1 (scikit-learn)
    back = pp.Normalization(
        invert=True, mean=norm.mean.flatten().tolist(), variance=norm.variance.flatten().tolist()
    )(out)
    assert back[0, 1].item() == pytest.approx(5.1)


def sklearn_standard_scaler(flat):
    """scikit-learn's StandardScaler fitted on ``flat`` and applied to it."""
    return library("sklearn").preprocessing.StandardScaler().fit(flat).transform(flat)


def test_zero_variance_matches_scikit_learn(ref):
    rng = np.random.default_rng(0)
    data = rng.random((50, 3, 2, 2))
    data[:, 2] = 7.0
    norm = pp.Normalization()
    norm.adapt(data)
    flat = data.transpose(0, 2, 3, 1).reshape(-1, 3)
    # StandardScaler's documented rule: (x - mean) / std, with std 1 for constant features.
    std = flat.std(axis=0)
    expected = (flat - flat.mean(axis=0)) / np.where(std == 0, 1.0, std)
    got = norm(torch.from_numpy(data)).numpy().transpose(0, 2, 3, 1).reshape(-1, 3)
    np.testing.assert_allclose(got, expected, atol=1e-9)
    np.testing.assert_allclose(got, ref(sklearn_standard_scaler, flat), atol=1e-9)


# ---- ranges ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: pp.RandomZoom(height_factor=(0.5, 0.2)), "RandomZoom: height_factor"),
        (lambda: pp.RandomZoom(0.1, width_factor=(0.3, -0.3)), "RandomZoom: width_factor"),
        (lambda: pp.RandomRotation((0.3, 0.1)), "RandomRotation: factor"),
        (lambda: pp.RandomTranslation((0.2, 0.1), 0.1), "RandomTranslation: height_factor"),
        (lambda: pp.RandomBrightness((0.5, -0.5)), "RandomBrightness: factor"),
        (lambda: pp.RandomContrast((0.5, 0.2)), "RandomContrast: factor"),
        (lambda: pp.RandomBrightness(0.1, value_range=(255, 0)), "RandomBrightness: value_range"),
        (lambda: pp.RandomContrast(0.1, value_range=(1, 0)), "RandomContrast: value_range"),
    ],
)
def test_a_reversed_pair_is_refused(make, message):
    with pytest.raises(ValueError, match=f"{message} must be a pair .* lower <= upper"):
        make()


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: pp.RandomZoom(-1.0), "RandomZoom: height_factor must lie in"),
        (lambda: pp.RandomZoom((0.5, 1.5)), "RandomZoom: height_factor must lie in"),
        (lambda: pp.RandomRotation(1.5), "RandomRotation: factor must lie in"),
        (lambda: pp.RandomTranslation(0.1, (-2, 0)), "RandomTranslation: width_factor must lie"),
        (lambda: pp.RandomBrightness(1.2), "RandomBrightness: factor must lie in"),
        (lambda: pp.RandomContrast(1.5), "RandomContrast: factor must be a number in"),
        (lambda: pp.RandomContrast((-0.5, 0.5)), "RandomContrast: factor must lie in"),
        (lambda: pp.RandomZoom((0.1, 0.2, 0.3)), "RandomZoom: height_factor must be a number"),
        (lambda: pp.Resizing(10**12, 4), r"Resizing: height must be an int in \[1, 65536\]"),
        (lambda: pp.CenterCrop(4, 0), r"CenterCrop: width must be an int in \[1, 65536\]"),
        (lambda: pp.Resizing(4, 4, antialias="False"), "Resizing: antialias must be True or"),
        (lambda: pp.Normalization(invert="yes"), "Normalization: invert must be True or False"),
    ],
)
def test_out_of_range_values_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_valid_pairs_still_work():
    layer = pp.RandomZoom((-0.2, 0.3), seed=0)
    assert layer._height_factor == (-0.2, 0.3)
    assert pp.RandomContrast((0.2, 0.5))._factor[0] == 0.2
    assert pp.RandomBrightness(-0.4)._factor[0] == -0.4


# ---- configs ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "config, message",
    [
        ([1, 2], "expected a dict with exactly the keys"),
        (None, "expected a dict with exactly the keys"),
        ({"class_name": "Resizing", "config": {}, "x": 1}, "exactly the keys"),
        ({"class_name": ["Resizing"], "config": {}}, "'class_name' must be a str"),
        ({"class_name": "Resizing", "config": None}, "'config' must be a dict"),
        ({"class_name": "Resizing", "config": [4, 4]}, "'config' must be a dict"),
        ({"class_name": "Resizing", "config": {"height": 4, "widht": 4}}, "unknown key 'widht'"),
        ({"class_name": "Resizing", "config": {"width": 4}}, r"missing key\(s\) \['height'\]"),
        ({"class_name": "Resizing", "config": {"height": 10**12, "width": 4}}, "height must be"),
        ({"class_name": "RandomZoom", "config": {"height_factor": [0.5, 0.2]}}, "height_factor"),
        ({"class_name": "RandomFlip", "config": {"seed": [1]}}, "RandomFlip: seed must be"),
        ({"class_name": "Pipeline", "config": {"layers": "RandomFlip"}}, "layers must be a list"),
        (
            {"class_name": "Pipeline", "config": {"layers": [{"class_name": 3, "config": {}}]}},
            "'class_name' must be a str",
        ),
    ],
)
def test_layer_from_config_names_the_bad_key(config, message):
    with pytest.raises(ValueError, match=message):
        pp.layer_from_config(config)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=6)
    | st.sampled_from(["channels_last", "bilinear", "reflect", "horizontal", "channel"]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def _configs(draw):
    name = draw(st.sampled_from(sorted(_REGISTRY)))
    import inspect

    keys = [k for k in inspect.signature(_REGISTRY[name].__init__).parameters if k != "self"]
    chosen = draw(st.lists(st.sampled_from(keys + ["zz"]), unique=True, max_size=len(keys) + 1))
    return {"class_name": name, "config": {k: draw(JSON) for k in chosen}}


@settings(max_examples=300, deadline=None)
@given(config=_configs())
def test_layer_from_config_raises_only_value_errors(config):
    # Whatever JSON holds, a config is either a layer or a ValueError naming the problem:
    # never a TypeError from deep inside, never a layer that fails later in torch.
    try:
        layer = pp.layer_from_config(config)
    except ValueError:
        return
    x = torch.rand(1, 3, 6, 6) if layer.data_format == "channels_first" else torch.rand(1, 6, 6, 3)
    if isinstance(layer, pp.Normalization) and layer.mean.numel() == 0:
        return
    try:
        layer.eval()(x)
    except ValueError:
        pass  # e.g. per-channel values that do not match 3 channels: a clear error
