"""Keras's preprocessing layers as ``torch.nn.Module``s: image preprocessing and
augmentation, and the feature layers (lookups, hashing, encodings, discretization, text
vectorization, tabular normalization, spectrograms).

Keras's layer semantics and argument names with PyTorch's conventions: channels-first by
default (one package default, ``image_data_format()`` / ``set_image_data_format()``, that
layers and ``datapipe.image_dataset_from_directory`` created afterwards follow),
vectorised over the batch on the input's device, identity in ``eval()`` for the random
layers, JSON configs (``get_config`` / ``from_config`` / ``layer_from_config``), state in
``state_dict``, and exportable with ``torch.export`` in ``eval()`` mode.
"""

from datapipe._image_format import image_data_format, set_image_data_format

from .affine import AffineLayer, affine_transform
from .base import Layer, RandomLayer, layer_from_config, serialize_layer
from .brightness import RandomBrightness
from .category_encoding import CategoryEncoding
from .contrast import RandomContrast
from .crop import RandomCrop
from .discretization import Discretization
from .flip import RandomFlip
from .hashing import HashedCrossing, Hashing
from .lookup import IntegerLookup, StringLookup
from .normalization import Normalization
from .pipeline import Pipeline
from .rescaling import Rescaling
from .resizing import CenterCrop, Resizing
from .rotation import RandomRotation
from .spectrogram import MelSpectrogram, STFTSpectrogram
from .text_vectorization import TextVectorization
from .translation import RandomTranslation
from .zoom import RandomZoom

__all__ = [
    "AffineLayer",
    "CategoryEncoding",
    "CenterCrop",
    "Discretization",
    "HashedCrossing",
    "Hashing",
    "IntegerLookup",
    "Layer",
    "MelSpectrogram",
    "Normalization",
    "Pipeline",
    "RandomBrightness",
    "RandomContrast",
    "RandomCrop",
    "RandomFlip",
    "RandomLayer",
    "RandomRotation",
    "RandomTranslation",
    "RandomZoom",
    "Rescaling",
    "Resizing",
    "STFTSpectrogram",
    "StringLookup",
    "TextVectorization",
    "affine_transform",
    "image_data_format",
    "layer_from_config",
    "serialize_layer",
    "set_image_data_format",
]
