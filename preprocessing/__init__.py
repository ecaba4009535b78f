"""Image preprocessing and augmentation layers as ``torch.nn.Module``s.

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
from .contrast import RandomContrast
from .crop import RandomCrop
from .flip import RandomFlip
from .normalization import Normalization
from .pipeline import Pipeline
from .rescaling import Rescaling
from .resizing import CenterCrop, Resizing
from .rotation import RandomRotation
from .translation import RandomTranslation
from .zoom import RandomZoom

__all__ = [
    "AffineLayer",
    "CenterCrop",
    "Layer",
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
    "affine_transform",
    "image_data_format",
    "layer_from_config",
    "serialize_layer",
    "set_image_data_format",
]
