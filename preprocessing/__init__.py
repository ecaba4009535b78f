"""Keras's preprocessing layers as ``torch.nn.Module``s: image preprocessing and
augmentation, and the feature layers (lookups, hashing, encodings, discretization, text
vectorization, tabular normalization, spectrograms).

Keras's layer semantics and argument names with PyTorch's conventions: channels-first by
default (one package default, ``image_data_format()`` / ``set_image_data_format()`` from
``datapipe.image_format``, that layers and ``datapipe.image_dataset_from_directory``
created afterwards follow), vectorised over the batch on the input's device, identity in
``eval()`` for the random layers, JSON configs (``get_config`` / ``from_config`` /
``layer_from_config``), state in ``state_dict``, and exportable with ``torch.export`` in
``eval()`` mode, and whole models holding them load with ``torch.load``'s
``weights_only=True`` (``safe_globals``). Every layer and ``Pipeline`` take Keras's
``training=`` call keyword. Dict inputs with Keras 3's keys (``images``, ``labels``,
``bounding_boxes``, ``segmentation_masks``) plus ``keypoints`` receive one draw per sample
(``Layer``); dtype policies follow Keras's names (``set_dtype_policy``).
"""

from datapipe.image_format import image_data_format, set_image_data_format

from . import bounding_boxes
from .affine import AffineLayer, affine_transform
from .aug_mix import AugMix
from .auto_contrast import AutoContrast
from .base import Layer, RandomLayer, layer_from_config, serialize_layer
from .brightness import RandomBrightness
from .category_encoding import CategoryEncoding
from .clahe import ContrastLimitedAdaptiveHistogramEqualization
from .color_degeneration import RandomColorDegeneration
from .color_jitter import RandomColorJitter
from .contrast import RandomContrast
from .crop import RandomCrop
from .discretization import Discretization
from .dtype_policy import DTypePolicy, dtype_policy, set_dtype_policy
from .elastic import RandomElasticTransform
from .equalization import Equalization
from .erasing import RandomErasing
from .flip import RandomFlip
from .gaussian_blur import RandomGaussianBlur
from .geometric import GeometricLayer
from .grayscale import RandomGrayscale
from .hashing import HashedCrossing, Hashing
from .hue import RandomHue
from .invert import RandomInvert
from .lookup import IntegerLookup, StringLookup
from .max_boxes import MaxNumBoundingBoxes
from .mixing import CutMix, MixUp
from .normalization import Normalization
from .perspective import RandomPerspective
from .pipeline import Pipeline
from .posterization import RandomPosterization
from .rand_augment import RandAugment
from .rescaling import Rescaling
from .resized_crop import RandomResizedCrop
from .resizing import CenterCrop, Resizing
from .rotation import RandomRotation
from .saturation import RandomSaturation
from .saving import register_safe_globals as _register_safe_globals
from .saving import safe_globals
from .sharpness import RandomSharpness
from .shear import RandomShear
from .solarization import Solarization
from .spectrogram import MelSpectrogram, STFTSpectrogram
from .text_vectorization import TextVectorization
from .translation import RandomTranslation
from .zoom import RandomZoom

# After every layer module is imported: the classes torch.load(weights_only=True) may
# rebuild (preprocessing.saving).
_register_safe_globals()

__all__ = [
    "AffineLayer",
    "AugMix",
    "AutoContrast",
    "CategoryEncoding",
    "CenterCrop",
    "ContrastLimitedAdaptiveHistogramEqualization",
    "CutMix",
    "Discretization",
    "DTypePolicy",
    "Equalization",
    "GeometricLayer",
    "HashedCrossing",
    "Hashing",
    "IntegerLookup",
    "Layer",
    "MaxNumBoundingBoxes",
    "MelSpectrogram",
    "MixUp",
    "Normalization",
    "Pipeline",
    "RandAugment",
    "RandomBrightness",
    "RandomColorDegeneration",
    "RandomColorJitter",
    "RandomContrast",
    "RandomCrop",
    "RandomElasticTransform",
    "RandomErasing",
    "RandomFlip",
    "RandomGaussianBlur",
    "RandomGrayscale",
    "RandomHue",
    "RandomInvert",
    "RandomLayer",
    "RandomPerspective",
    "RandomPosterization",
    "RandomResizedCrop",
    "RandomRotation",
    "RandomSaturation",
    "RandomSharpness",
    "RandomShear",
    "RandomTranslation",
    "RandomZoom",
    "Rescaling",
    "Resizing",
    "Solarization",
    "STFTSpectrogram",
    "StringLookup",
    "TextVectorization",
    "affine_transform",
    "bounding_boxes",
    "dtype_policy",
    "image_data_format",
    "layer_from_config",
    "safe_globals",
    "serialize_layer",
    "set_dtype_policy",
    "set_image_data_format",
]
