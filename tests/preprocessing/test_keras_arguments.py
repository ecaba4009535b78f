"""Layer arguments as Keras 3 takes them (the breaker's defects 10-14 of issue 24's layer
base): Keras's configs with their serialized ``DTypePolicy``, numpy scalars and arrays as
numbers, ``data_format`` in any case, the hooks' ``training=`` / ``seed=`` keywords, and
one ``value_range`` rule (low < high) for every layer (D-K-39).

The Keras configs below are literal copies of what Keras 3.15.1 wrote
(``keras.layers.<Layer>(...).get_config()``, torch backend), so the default run needs no
Keras.
"""

import json
import re

import numpy as np
import pytest
import torch

import preprocessing as pp
from datapipe import image_format


def _policy(name):
    """Keras 3.15.1's serialized ``DTypePolicy(name)``, as its configs hold it."""
    return {
        "module": "keras",
        "class_name": "DTypePolicy",
        "config": {"name": name},
        "registered_name": None,
    }


# (class name, Keras 3.15.1's get_config(), our dtype after loading)
KERAS_CONFIGS = [
    (
        "RandomFlip",  # keras.layers.RandomFlip("horizontal", seed=1)
        {
            "name": "random_flip",
            "trainable": True,
            "dtype": _policy("float32"),
            "data_format": "channels_last",
            "seed": 1,
            "mode": "horizontal",
        },
        "float32",
    ),
    (
        "RandomBrightness",  # ((-0.2, 0.1), value_range=(0, 1), seed=3, dtype="mixed_float16")
        {
            "name": "random_brightness",
            "trainable": True,
            "dtype": _policy("mixed_float16"),
            "data_format": "channels_last",
            "factor": (-0.2, 0.1),
            "value_range": [0, 1],
            "seed": 3,
        },
        "mixed_float16",
    ),
    (
        "RandomColorJitter",  # (value_range=(0, 1), brightness_factor=0.1, hue_factor=0.2,
        # seed=5, dtype="mixed_bfloat16")
        {
            "name": "random_color_jitter",
            "trainable": True,
            "dtype": _policy("mixed_bfloat16"),
            "data_format": "channels_last",
            "value_range": (0, 1),
            "brightness_factor": 0.1,
            "contrast_factor": None,
            "saturation_factor": None,
            "hue_factor": 0.2,
            "seed": 5,
        },
        "mixed_bfloat16",
    ),
    (
        "CategoryEncoding",  # (num_tokens=4, output_mode="one_hot", dtype="int32")
        {
            "name": "category_encoding",
            "trainable": True,
            "dtype": _policy("int32"),
            "num_tokens": 4,
            "output_mode": "one_hot",
        },
        "int32",
    ),
    (
        "Resizing",  # (4, 5, dtype="float64")
        {
            "name": "resizing",
            "trainable": True,
            "dtype": _policy("float64"),
            "data_format": "channels_last",
            "height": 4,
            "width": 5,
            "interpolation": "bilinear",
            "crop_to_aspect_ratio": False,
            "pad_to_aspect_ratio": False,
            "fill_mode": "constant",
            "fill_value": 0.0,
            "antialias": False,
        },
        "float64",
    ),
    (
        "StringLookup",  # (vocabulary=["a", "b"]): vocabulary_size and oov_method too
        {
            "name": "string_lookup",
            "trainable": True,
            "dtype": _policy("float32"),
            "invert": False,
            "max_tokens": None,
            "num_oov_indices": 1,
            "oov_token": "[UNK]",
            "mask_token": None,
            "output_mode": "int",
            "sparse": False,
            "pad_to_max_tokens": False,
            "idf_weights": None,
            "vocabulary": ["a", "b"],
            "vocabulary_size": 3,
            "oov_method": "floormod",
            "salt": None,
            "encoding": "utf-8",
        },
        None,
    ),
    (
        "IntegerLookup",  # (vocabulary=[1, 2])
        {
            "name": "integer_lookup",
            "trainable": True,
            "dtype": _policy("float32"),
            "invert": False,
            "max_tokens": None,
            "num_oov_indices": 1,
            "oov_token": -1,
            "mask_token": None,
            "output_mode": "int",
            "sparse": False,
            "pad_to_max_tokens": False,
            "vocabulary_dtype": "int64",
            "idf_weights": None,
            "vocabulary": [1, 2],
            "vocabulary_size": 3,
            "oov_method": "floormod",
            "salt": None,
        },
        None,
    ),
    (
        "TextVectorization",  # (vocabulary=["a", "b"])
        {
            "name": "text_vectorization",
            "trainable": True,
            "dtype": _policy("float32"),
            "max_tokens": None,
            "standardize": "lower_and_strip_punctuation",
            "split": "whitespace",
            "ngrams": None,
            "output_mode": "int",
            "output_sequence_length": None,
            "pad_to_max_tokens": False,
            "sparse": False,
            "ragged": False,
            "vocabulary": ["a", "b"],
            "idf_weights": None,
            "encoding": "utf-8",
            "vocabulary_size": 4,
        },
        None,
    ),
    (
        "MaxNumBoundingBoxes",  # (max_number=3): a layer without a dtype of its own
        {
            "name": "max_num_bounding_boxes",
            "trainable": True,
            "dtype": _policy("float32"),
            "data_format": "channels_last",
            "max_number": 3,
        },
        None,
    ),
]


# ------------------------------------------------------------------ (a) Keras configs
@pytest.mark.parametrize("name, config, dtype", KERAS_CONFIGS, ids=[c[0] for c in KERAS_CONFIGS])
def test_keras_3_configs_load(name, config, dtype):
    config = json.loads(json.dumps(config))  # as a saved file holds it
    for layer in (
        getattr(pp, name).from_config(config),
        pp.layer_from_config({"class_name": name, "config": config}),
    ):
        assert type(layer) is getattr(pp, name)
        assert layer.get_config().get("dtype") == dtype
        assert layer.name == config["name"]
        if "data_format" in config:
            assert layer.data_format == "channels_last"
        if "vocabulary_size" in config:
            assert layer.vocabulary_size() == config["vocabulary_size"]
        json.dumps(layer.get_config())  # plain JSON again


def test_keras_vocabulary_size_is_checked():
    configs = {name: config for name, config, _ in KERAS_CONFIGS}
    config = dict(configs["IntegerLookup"], vocabulary_size=5)  # a vocabulary of 3
    expected = (
        "IntegerLookup.from_config: vocabulary_size is 5 but the config builds a layer "
        "with vocabulary_size() == 3"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        pp.IntegerLookup.from_config(config)
    words = pp.StringLookup.from_config(configs["StringLookup"])
    assert words(["b", "a", "z"]).tolist() == [2, 1, 0]


# keras.saving.serialize_keras_object(keras.layers.Pipeline([keras.layers.RandomFlip(
# "horizontal", seed=1), keras.layers.RandomBrightness(0.1, seed=2)])), Keras 3.15.1, as JSON
KERAS_PIPELINE = json.loads(
    '{"module": "keras.layers", "class_name": "Pipeline", "config": {"layers": [{"module": '
    '"keras.layers", "class_name": "RandomFlip", "config": {"name": "random_flip", "trainable": '
    'true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": '
    '"float32"}, "registered_name": null}, "data_format": "channels_last", "seed": 1, "mode": '
    '"horizontal"}, "registered_name": null}, {"module": "keras.layers", "class_name": '
    '"RandomBrightness", "config": {"name": "random_brightness", "trainable": true, "dtype": '
    '{"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, '
    '"registered_name": null}, "data_format": "channels_last", "factor": [-0.1, 0.1], '
    '"value_range": [0, 255], "seed": 2}, "registered_name": null}], "name": "pipeline"}, '
    '"registered_name": null}'
)


def test_keras_serialized_pipeline_loads():
    pipeline = pp.layer_from_config(KERAS_PIPELINE)
    assert type(pipeline) is pp.Pipeline and pipeline.name == "pipeline"
    flip, brightness = pipeline.layers
    assert type(flip) is pp.RandomFlip and flip.mode == "horizontal" and flip.seed == 1
    assert flip.data_format == "channels_last" and flip.dtype == "float32"
    assert type(brightness) is pp.RandomBrightness and brightness._factor == (-0.1, 0.1)
    assert brightness.value_range == [0, 255] and brightness.name == "random_brightness"


@pytest.mark.parametrize(
    "change",
    [{"module": "my_package.layers"}, {"registered_name": "Custom>RandomFlip"}, {"x": 1}],
)
def test_other_keras_envelopes_are_refused(change):
    envelope = {**KERAS_PIPELINE["config"]["layers"][0], **change}
    with pytest.raises(ValueError, match=r"^layer_from_config: expected a dict with exactly"):
        pp.layer_from_config(envelope)


def test_keras_policy_sets_the_compute_dtype():
    config = json.loads(json.dumps(KERAS_CONFIGS[1][1]))
    assert config["dtype"]["config"]["name"] == "mixed_float16"  # RandomBrightness
    layer = pp.RandomBrightness.from_config(config)
    assert layer.compute_dtype == torch.float16
    assert layer.variable_dtype == torch.float32
    layer.eval()
    out = layer(torch.full((1, 2, 2, 3), 0.5))
    assert out.dtype == torch.float16 and out.shape == (1, 2, 2, 3)
    assert torch.equal(out, torch.full((1, 2, 2, 3), 0.5, dtype=torch.float16))
    # A mixed policy on a feature layer is its output (compute) dtype, as Keras's.
    policy = _policy("mixed_float16")
    encoding = pp.CategoryEncoding(num_tokens=3, output_mode="one_hot", dtype=policy)
    assert encoding.dtype == "float16"
    assert encoding(torch.tensor([2])).dtype == torch.float16


@pytest.mark.parametrize(
    "dtype",
    [
        _policy("int8_from_float32"),
        {**_policy("float32"), "class_name": "QuantizedDTypePolicy"},
        {**_policy("float32"), "module": "other"},
        {"name": "float32"},
    ],
)
def test_other_serialized_dtypes_are_refused_as_given(dtype):
    expected = (
        "RandomFlip: dtype must be one of ('float16', 'bfloat16', 'float32', 'float64', "
        "'mixed_float16', 'mixed_bfloat16'), a DTypePolicy, Keras's serialized "
        f"DTypePolicy of one of them or None; got {dtype!r}"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        pp.RandomFlip.from_config({"dtype": dtype})


def test_dtype_of_a_layer_without_its_own_is_checked():
    assert pp.MaxNumBoundingBoxes(3, dtype="float32").get_config() == {
        "max_number": 3,
        "fill_value": -1,
        "data_format": "channels_first",
    }
    with pytest.raises(ValueError, match=r"^MaxNumBoundingBoxes: dtype must be None or 'float32'"):
        pp.MaxNumBoundingBoxes(3, dtype=_policy("float64"))


# ------------------------------------------------------------------ (b) numpy numbers
@pytest.mark.parametrize(
    "name, factor, stored",
    [
        ("RandomGrayscale", np.float32(0.5), 0.5),
        ("RandomBrightness", np.float32(0.5), 0.5),
        ("RandomHue", np.float32(0.25), 0.25),
        ("RandomSaturation", np.float32(0.5), 0.5),
        ("RandomInvert", np.float32(0.5), 0.5),
        ("RandomSharpness", np.float32(0.5), 0.5),
        ("RandomPosterization", np.int64(4), 4),
        ("RandomBrightness", (np.float32(0.25), np.float32(0.5)), [0.25, 0.5]),
        ("RandomContrast", np.array([0.25, 0.5]), [0.25, 0.5]),
    ],
)
def test_numpy_factors_are_numbers(name, factor, stored):
    layer = getattr(pp, name)(factor=factor)
    config = layer.get_config()
    assert config["factor"] == stored
    assert type(json.loads(json.dumps(config))["factor"]) is type(stored)
    assert getattr(pp, name).from_config(config).get_config() == config


def test_numpy_value_ranges_are_numbers():
    for value_range in (np.array([0, 1]), (np.float32(0), np.float32(1)), (np.int64(0), 1)):
        layer = pp.RandomHue(0.1, value_range=value_range)
        assert layer._range == (0.0, 1.0)
        assert layer.get_config()["value_range"] == [0, 1]
        assert all(type(v) in (int, float) for v in layer.value_range)


@pytest.mark.parametrize("bad", [np.bool_(True), True, "0.5", np.float32("nan")])
def test_a_number_argument_says_a_number_is_allowed(bad):
    expected = (
        f"RandomGrayscale: factor must be a number or a pair of numbers (lower, upper); got {bad!r}"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        pp.RandomGrayscale(factor=bad)


# ------------------------------------------------------------------ (d) data_format, hooks
@pytest.mark.parametrize("given", ["CHANNELS_LAST", "Channels_Last", "channels_last"])
def test_data_format_in_any_case(given):
    layer = pp.RandomBrightness(0.2, data_format=given)
    assert layer.data_format == "channels_last"
    assert layer.get_config()["data_format"] == "channels_last"
    try:
        image_format.set_image_data_format(given)
        assert pp.image_data_format() == "channels_last"
        assert pp.RandomFlip().data_format == "channels_last"
    finally:
        image_format.set_image_data_format("channels_first")
    expected = (
        "RandomBrightness: data_format must be one of ('channels_first', 'channels_last'); "
        "got 'channels_last '"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        pp.RandomBrightness(0.2, data_format="channels_last ")


def test_hooks_take_keras_training_and_seed():
    x = torch.rand(2, 4, 4, 3) * 255
    layer = pp.RandomBrightness(0.2, seed=1, data_format="channels_last")
    # seed=int: the draw of a generator seeded with it, the same for the same seed.
    a = layer.get_random_transformation(x, training=True, seed=5)
    b = layer.get_random_transformation(x, seed=5)
    expected = layer.get_random_transformation(x, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a["delta"], b["delta"]) and torch.equal(a["delta"], expected["delta"])
    assert not torch.equal(a["delta"], layer.get_random_transformation(x, seed=6)["delta"])
    # seed=None: the layer's own stream, as without the keyword.
    fresh = pp.RandomBrightness(0.2, seed=1, data_format="channels_last")
    assert torch.equal(
        layer.get_random_transformation(x, training=True, seed=None)["delta"],
        fresh.get_random_transformation(x)["delta"],
    )
    y = layer.transform_images(x, a, training=True)
    assert torch.equal(y, layer.transform_images(x, transformation=a))
    assert not torch.equal(y, x)
    # training=False: Keras returns the images unchanged; the draw is the eval() one.
    assert layer.transform_images(x, a, training=False) is x
    assert torch.equal(layer.transform_images(x[0], a, training=False), x[0])
    assert layer.get_random_transformation(x, training=False) is None
    # A deterministic layer ignores training, as Keras's AutoContrast does.
    contrast = pp.AutoContrast(data_format="channels_last")
    assert contrast.get_random_transformation(x, training=False, seed=None) is None
    assert torch.equal(contrast.transform_images(x, None, training=False), contrast(x))
    with pytest.raises(ValueError, match=r"^RandomBrightness: seed cannot be given with a gen"):
        layer.get_random_transformation(x, torch.Generator(), seed=3)
    with pytest.raises(ValueError, match=r"^RandomBrightness: seed must be an int"):
        layer.get_random_transformation(x, seed="3")
    with pytest.raises(ValueError, match=r"^RandomBrightness: training must be True or False"):
        layer.transform_images(x, a, training=None)


# ------------------------------------------------------------------ (e) value_range
VALUE_RANGE_LAYERS = [
    ("RandomBrightness", {"factor": 0.5}),
    ("RandomContrast", {"factor": 0.5}),
    ("RandomHue", {"factor": 0.5}),
    ("RandomSaturation", {"factor": 0.5}),
    ("RandomColorDegeneration", {"factor": 0.5}),
    ("RandomSharpness", {"factor": 0.5}),
    ("RandomPosterization", {"factor": 4}),
    ("RandomInvert", {"factor": 0.5}),
    ("RandomColorJitter", {}),
    ("Solarization", {}),
    ("AutoContrast", {}),
    ("Equalization", {}),
    ("RandAugment", {}),
    ("AugMix", {}),
    ("RandomGaussianBlur", {}),
    ("RandomElasticTransform", {}),
    ("RandomErasing", {}),
]


@pytest.mark.parametrize("name, kw", VALUE_RANGE_LAYERS, ids=[n for n, _ in VALUE_RANGE_LAYERS])
def test_an_empty_value_range_is_refused_by_every_layer(name, kw):
    # D-K-39: Keras takes (0, 0) and returns zeros, NaN or raises ZeroDivisionError.
    expected = f"{name}: value_range must be a pair (low, high) with low < high; got (0, 0)"
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        getattr(pp, name)(value_range=(0, 0), **kw)
    assert getattr(pp, name)(value_range=(0, 1), **kw)._range == (0.0, 1.0)
