"""preprocessing (the package): its public names, every layer exported under its class
name from the module that defines it, and the image layout taken from datapipe."""

import importlib

import datapipe.image_format
import preprocessing as pp
from preprocessing.base import _REGISTRY

# The public names of 0.2 (issue 24 moved modules, not names): each must stay.
PUBLIC = """
AffineLayer AugMix AutoContrast CategoryEncoding CenterCrop
ContrastLimitedAdaptiveHistogramEqualization CutMix Discretization DTypePolicy Equalization
GeometricLayer HashedCrossing Hashing IntegerLookup Layer MaxNumBoundingBoxes
MelSpectrogram MixUp Normalization Pipeline RandAugment RandomBrightness
RandomColorDegeneration RandomColorJitter RandomContrast RandomCrop RandomElasticTransform
RandomErasing RandomFlip RandomGaussianBlur RandomGrayscale RandomHue RandomInvert
RandomLayer RandomPerspective RandomPosterization RandomResizedCrop RandomRotation
RandomSaturation RandomSharpness RandomShear RandomTranslation RandomZoom Rescaling
Resizing Solarization STFTSpectrogram StringLookup TextVectorization affine_transform
bounding_boxes dtype_policy image_data_format layer_from_config serialize_layer
set_dtype_policy set_image_data_format
""".split()


def test_public_names_are_kept_and_all_lists_what_exists():
    assert set(PUBLIC) <= set(pp.__all__)
    assert len(pp.__all__) == len(set(pp.__all__))
    for name in pp.__all__:
        assert hasattr(pp, name), name


def test_every_layer_is_exported_from_the_module_that_defines_it():
    for name, cls in _REGISTRY.items():
        assert getattr(pp, name) is cls, name
        module = importlib.import_module(cls.__module__)
        assert module.__name__.startswith("preprocessing.") and getattr(module, name) is cls


def test_one_layer_per_module_for_the_colour_layers():
    modules = {
        "RandomColorDegeneration": "preprocessing.color_degeneration",
        "RandomGrayscale": "preprocessing.grayscale",
        "RandomInvert": "preprocessing.invert",
        "RandomHue": "preprocessing.hue",
        "RandomSaturation": "preprocessing.saturation",
        "RandomColorJitter": "preprocessing.color_jitter",
    }
    assert {name: getattr(pp, name).__module__ for name in modules} == modules


def test_image_layout_is_datapipes():
    assert pp.image_data_format is datapipe.image_format.image_data_format
    assert pp.set_image_data_format is datapipe.image_format.set_image_data_format
