"""``datapipe.image``: tf.image's functions under tf.image's names and arguments.

They take what ``tf.image``'s take -- channels-last images: ``(height, width, channels)``
or a ``(batch, height, width, channels)`` batch -- as numpy arrays or torch tensors, and
return the same kind (a tensor comes back on its device). An input whose layout looks
channels-first (``(3, 224, 224)``) is refused, naming the permute that fixes it
(``datapipe.image_format.looks_like_other_layout``), never misread. They are plain
functions of the element, so they work inside ``Dataset.map`` on every executor.

Values agree with TensorFlow's within float rounding (tests/image/, against goldens written
by tensorflow-cpu); the purposeful differences are rows D-IMG-* of
docs/guides/differences.md. The ``stateless_random_*`` functions keep tf's ``seed=(a, b)``
contract (the same pair, the same draw, on every call and executor) with another random
stream than tf's.

Example:
    >>> import numpy as np
    >>> from datapipe import image
    >>> x = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    >>> image.flip_left_right(x)[0].tolist()
    [[3, 4, 5], [0, 1, 2]]
    >>> image.convert_image_dtype(x, np.float32).dtype
    dtype('float32')
"""

from __future__ import annotations

from datapipe.image.adjust import (
    adjust_brightness,
    adjust_contrast,
    adjust_gamma,
    adjust_hue,
    adjust_saturation,
    per_image_standardization,
)
from datapipe.image.color import grayscale_to_rgb, hsv_to_rgb, rgb_to_grayscale, rgb_to_hsv
from datapipe.image.crop import (
    central_crop,
    crop_to_bounding_box,
    pad_to_bounding_box,
    resize_with_crop_or_pad,
)
from datapipe.image.dtype import convert_image_dtype
from datapipe.image.flip import flip_left_right, flip_up_down, rot90, transpose
from datapipe.image.random import random_crop, random_flip_left_right, random_flip_up_down
from datapipe.image.resize import resize
from datapipe.image.stateless_random import (
    stateless_random_brightness,
    stateless_random_contrast,
    stateless_random_crop,
    stateless_random_flip_left_right,
    stateless_random_flip_up_down,
    stateless_random_hue,
    stateless_random_saturation,
)

__all__ = [
    "adjust_brightness",
    "adjust_contrast",
    "adjust_gamma",
    "adjust_hue",
    "adjust_saturation",
    "central_crop",
    "convert_image_dtype",
    "crop_to_bounding_box",
    "flip_left_right",
    "flip_up_down",
    "grayscale_to_rgb",
    "hsv_to_rgb",
    "pad_to_bounding_box",
    "per_image_standardization",
    "random_crop",
    "random_flip_left_right",
    "random_flip_up_down",
    "resize",
    "resize_with_crop_or_pad",
    "rgb_to_grayscale",
    "rgb_to_hsv",
    "rot90",
    "stateless_random_brightness",
    "stateless_random_contrast",
    "stateless_random_crop",
    "stateless_random_flip_left_right",
    "stateless_random_flip_up_down",
    "stateless_random_hue",
    "stateless_random_saturation",
    "transpose",
]
