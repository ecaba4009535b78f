"""Keras 3's ``image_preprocessing/base_image_preprocessing_layer_test.py``, translated, and
the base-layer keyword arguments Keras's layer tests pass (``name``, ``trainable``,
``bounding_box_format`` on layers that move no box, ...): every layer takes them.
"""

import pytest

import preprocessing as pp

IMAGE_LAYERS = [
    ("AugMix", {}),
    ("AutoContrast", {}),
    ("CenterCrop", {"height": 4, "width": 4}),
    ("ContrastLimitedAdaptiveHistogramEqualization", {}),
    ("CutMix", {}),
    ("Equalization", {}),
    ("MaxNumBoundingBoxes", {"max_number": 5}),
    ("MixUp", {}),
    ("RandAugment", {}),
    ("RandomBrightness", {"factor": 0.5}),
    ("RandomColorDegeneration", {"factor": 0.5}),
    ("RandomColorJitter", {}),
    ("RandomContrast", {"factor": 0.5}),
    ("RandomCrop", {"height": 4, "width": 4}),
    ("RandomElasticTransform", {}),
    ("RandomErasing", {}),
    ("RandomFlip", {}),
    ("RandomGaussianBlur", {}),
    ("RandomGrayscale", {}),
    ("RandomHue", {"factor": 0.5}),
    ("RandomInvert", {}),
    ("RandomPerspective", {}),
    ("RandomPosterization", {"factor": 4}),
    ("RandomRotation", {"factor": 0.5}),
    ("RandomSaturation", {"factor": 0.5}),
    ("RandomSharpness", {"factor": 0.5}),
    ("RandomShear", {}),
    ("RandomTranslation", {"height_factor": 0.2, "width_factor": 0.2}),
    ("RandomZoom", {"height_factor": 0.2}),
    ("Resizing", {"height": 4, "width": 4}),
    ("Solarization", {}),
]
IDS = [name for name, _ in IMAGE_LAYERS]


@pytest.mark.parametrize("name,kwargs", IMAGE_LAYERS, ids=IDS)
def test_data_format_serialization(name, kwargs):
    """base_image_preprocessing_layer_test.py::test_data_format_serialization: the layout
    that is not the package default survives get_config -> from_config."""
    other = "channels_last" if pp.image_data_format() == "channels_first" else "channels_first"
    layer = getattr(pp, name)(data_format=other, **kwargs)
    config = layer.get_config()
    assert config["data_format"] == other
    assert type(layer).from_config(config).data_format == other


@pytest.mark.parametrize("name,kwargs", IMAGE_LAYERS, ids=IDS)
def test_keras_base_layer_kwargs(name, kwargs):
    """random_brightness_test.py::test_dict_input (``bounding_box_format`` on a colour
    layer), max_num_bounding_box_test.py::test_output_shapes (on MaxNumBoundingBoxes),
    string_lookup_test.py::test_vocabulary_file (``name``) and
    stft_spectrogram_test.py::test_spectrogram_basics (``trainable``): Keras's base-layer
    arguments are taken by every image layer; ``name`` and ``bounding_box_format`` are
    kept in the config, the others change nothing."""
    keras_kwargs = dict(
        name="aug",
        trainable=False,
        autocast=True,
        input_shape=(3, 8, 8),
        bounding_box_format="xyxy",
    )
    cls = getattr(pp, name)
    layer = cls(**kwargs, **keras_kwargs)
    assert layer.name == "aug"
    config = layer.get_config()
    assert config["name"] == "aug" and config["bounding_box_format"] == "xyxy"
    again = pp.layer_from_config(pp.serialize_layer(layer))
    assert again.name == "aug" and again.get_config() == config
    plain = cls(**kwargs).get_config()
    assert {k: v for k, v in config.items() if k != "name"} == {
        **plain,
        "bounding_box_format": "xyxy",
    }


@pytest.mark.parametrize("name,kwargs", IMAGE_LAYERS, ids=IDS)
def test_unrecognized_kwargs(name, kwargs):
    """index_lookup_test.py::test_unrecognized_kwargs, for the image layers: an argument
    that is neither the layer's nor one of Keras's is refused, and so is a bad value of a
    Keras one."""
    cls = getattr(pp, name)
    with pytest.raises(ValueError, match="unrecognized keyword argument 'extra_arg'"):
        cls(**kwargs, extra_arg=True)
    with pytest.raises(ValueError, match="bounding_box_format must be None or one of"):
        cls(**kwargs, bounding_box_format="xyxz")
    with pytest.raises(ValueError, match="trainable must be True or False"):
        cls(**kwargs, trainable="no")


FEATURE_LAYERS = [
    ("CategoryEncoding", {"num_tokens": 3}),
    ("Discretization", {"bin_boundaries": [0.0]}),
    ("Hashing", {"num_bins": 3}),
    ("HashedCrossing", {"num_bins": 3}),
    ("IntegerLookup", {}),
    ("StringLookup", {}),
    ("TextVectorization", {}),
    ("Normalization", {}),
    ("Rescaling", {"scale": 2.0}),
    ("MelSpectrogram", {}),
    ("STFTSpectrogram", {}),
    ("Pipeline", {"layers": []}),
]


@pytest.mark.parametrize("name,kwargs", FEATURE_LAYERS, ids=[n for n, _ in FEATURE_LAYERS])
def test_feature_layers_take_keras_base_kwargs(name, kwargs):
    """hashing_test.py::test_config_with_custom_name, for every non-image layer: ``name``
    (kept), ``trainable`` (ignored); ``bounding_box_format`` is an image-layer argument
    and is refused here, as Keras's base Layer refuses it."""
    cls = getattr(pp, name)
    layer = cls(**kwargs, name="feature", trainable=False)
    assert layer.name == "feature"
    assert pp.layer_from_config(pp.serialize_layer(layer)).name == "feature"
    with pytest.raises(ValueError, match="unrecognized keyword argument 'bounding_box_format'"):
        cls(**kwargs, bounding_box_format="xyxy")


def test_activity_regularizer_is_refused():
    """Keras's base ``activity_regularizer`` adds a loss; a preprocessing layer has none to
    add, so anything but None is refused (not silently dropped)."""
    assert pp.RandomFlip(activity_regularizer=None).get_config() == pp.RandomFlip().get_config()
    with pytest.raises(ValueError, match="activity_regularizer must be None"):
        pp.RandomFlip(activity_regularizer="l2")


def test_set_image_data_format_none_raises():
    """Keras's ``keras.config.set_image_data_format(None)`` raises ValueError; so does
    this package's, and the format is unchanged."""
    before = pp.image_data_format()
    with pytest.raises(ValueError, match="data_format must be one of"):
        pp.set_image_data_format(None)
    assert pp.image_data_format() == before
    assert pp.RandomFlip().data_format == before


BASE_FACTOR = [
    ("ContrastLimitedAdaptiveHistogramEqualization", {}),
    ("Equalization", {}),
    ("MaxNumBoundingBoxes", {"max_number": 5}),
    ("MixUp", {}),
    ("RandomColorJitter", {}),
    ("RandomCrop", {"height": 4, "width": 4}),
]


@pytest.mark.parametrize("name,kwargs", BASE_FACTOR, ids=[n for n, _ in BASE_FACTOR])
def test_base_layer_factor(name, kwargs):
    """base_image_preprocessing_layer_test.py::test_data_format_serialization's layers,
    built as Keras's base image layer takes them (``__init__(factor, bounding_box_format,
    data_format)``): the layers whose Keras class takes the base ``factor`` without using
    it take it too (checked in [-1, 1], no effect); the others refuse it, as Keras's do."""
    cls = getattr(pp, name)
    assert cls(**kwargs, factor=0.5).get_config() == cls(**kwargs).get_config()
    with pytest.raises(ValueError, match=r"factor must lie in \[-1.0, 1.0\]"):
        cls(**kwargs, factor=2.0)
    with pytest.raises(ValueError, match="unrecognized keyword argument 'factor'"):
        pp.RandomFlip(factor=0.5)
