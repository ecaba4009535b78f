"""tf.image's crops and pads: ``central_crop``, ``crop_to_bounding_box``,
``pad_to_bounding_box``, ``resize_with_crop_or_pad``.

Each takes a ``(height, width, channels)`` image or a ``(batch, height, width, channels)``
batch (numpy array or torch tensor, any numeric dtype) and returns the same kind, rank and
dtype, with tf.image's box arithmetic (offsets and sizes in pixels); pads are zeros. The
values are copied unchanged, so they equal TensorFlow's exactly.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from datapipe.image._common import like, to_numpy

__all__ = [
    "central_crop",
    "crop_to_bounding_box",
    "pad_to_bounding_box",
    "resize_with_crop_or_pad",
]


def _ints(fn: str, **values: Any) -> dict[str, int]:
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"{fn}: {name} must be an int, got {v!r}")
    return {k: int(v) for k, v in values.items()}


def central_crop(image: Any, central_fraction: float) -> Any:
    """Keep the central ``central_fraction`` of each image's height and width, as
    ``tf.image.central_crop``.

    The box starts at ``int((h - h * central_fraction) / 2)`` rows from the top (columns
    alike) and is as tall as what that leaves after the same margin at the bottom, as tf
    computes it (in float64, truncated).

    Args:
        image: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor.
        central_fraction: in ``(0, 1]``; 1 returns the image unchanged.

    Returns:
        The same kind, rank and dtype, height and width cropped.

    Raises:
        ValueError: ``central_fraction`` outside ``(0, 1]``, a rank other than 3 or 4, or a
            shape that looks channels-first.

    Example:
        >>> import numpy as np
        >>> central_crop(np.arange(16).reshape(4, 4, 1), 0.5)[..., 0]
        array([[ 5,  6],
               [ 9, 10]])
    """
    arr = to_numpy(image, "central_crop")
    fraction = float(central_fraction)
    if not (0.0 < fraction <= 1.0) or math.isnan(fraction):
        raise ValueError(f"central_crop: central_fraction must be in (0, 1], got {fraction}")
    if fraction == 1.0:
        return image
    h, w = arr.shape[-3], arr.shape[-2]
    top, left = int((h - h * fraction) / 2), int((w - w * fraction) / 2)
    return like(arr[..., top : h - top, left : w - left, :], image)


def crop_to_bounding_box(
    image: Any, offset_height: int, offset_width: int, target_height: int, target_width: int
) -> Any:
    """The box of ``target_height`` x ``target_width`` pixels whose top-left corner is at
    (``offset_height``, ``offset_width``), as ``tf.image.crop_to_bounding_box``.

    Args:
        image: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor.
        offset_height, offset_width: the box's top-left corner, ``>= 0``.
        target_height, target_width: the box's size, ``> 0``; the box must fit the image.

    Returns:
        ``(target_height, target_width, C)`` (or with ``N``), the same kind and dtype.

    Raises:
        ValueError: a negative offset, a size ``<= 0``, a box past the image's edge, a rank
            other than 3 or 4, or a shape that looks channels-first.

    Example:
        >>> import numpy as np
        >>> crop_to_bounding_box(np.arange(16).reshape(4, 4, 1), 1, 2, 2, 1)[..., 0]
        array([[ 6],
               [10]])
    """
    fn = "crop_to_bounding_box"
    arr = to_numpy(image, fn)
    v = _ints(fn, offset_height=offset_height, offset_width=offset_width,
              target_height=target_height, target_width=target_width)  # fmt: skip
    oh, ow, th, tw = v["offset_height"], v["offset_width"], v["target_height"], v["target_width"]
    if oh < 0 or ow < 0:
        raise ValueError(f"{fn}: offsets must be >= 0, got ({oh}, {ow})")
    if th <= 0 or tw <= 0:
        raise ValueError(f"{fn}: target_height and target_width must be > 0, got ({th}, {tw})")
    h, w = arr.shape[-3], arr.shape[-2]
    if oh + th > h or ow + tw > w:
        raise ValueError(
            f"{fn}: the box at ({oh}, {ow}) of size ({th}, {tw}) does not fit an image of "
            f"height {h} and width {w}"
        )
    return like(arr[..., oh : oh + th, ow : ow + tw, :], image)


def pad_to_bounding_box(
    image: Any, offset_height: int, offset_width: int, target_height: int, target_width: int
) -> Any:
    """Place each image at (``offset_height``, ``offset_width``) on a zero canvas of
    ``target_height`` x ``target_width``, as ``tf.image.pad_to_bounding_box``.

    Args:
        image: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor.
        offset_height, offset_width: rows / columns of zeros above / left of it, ``>= 0``.
        target_height, target_width: the canvas's size, at least offset plus image.

    Returns:
        ``(target_height, target_width, C)`` (or with ``N``), the same kind and dtype.

    Raises:
        ValueError: a negative offset, a canvas too small for the offset image, a rank
            other than 3 or 4, or a shape that looks channels-first.

    Example:
        >>> import numpy as np
        >>> pad_to_bounding_box(np.ones((1, 2, 1), np.uint8), 1, 0, 2, 3)[..., 0]
        array([[0, 0, 0],
               [1, 1, 0]], dtype=uint8)
    """
    fn = "pad_to_bounding_box"
    arr = to_numpy(image, fn)
    v = _ints(fn, offset_height=offset_height, offset_width=offset_width,
              target_height=target_height, target_width=target_width)  # fmt: skip
    oh, ow, th, tw = v["offset_height"], v["offset_width"], v["target_height"], v["target_width"]
    if oh < 0 or ow < 0:
        raise ValueError(f"{fn}: offsets must be >= 0, got ({oh}, {ow})")
    h, w = arr.shape[-3], arr.shape[-2]
    if th - oh - h < 0 or tw - ow - w < 0:
        raise ValueError(
            f"{fn}: an image of height {h} and width {w} at ({oh}, {ow}) does not fit a "
            f"target of ({th}, {tw})"
        )
    pads = [(0, 0)] * (arr.ndim - 3) + [(oh, th - oh - h), (ow, tw - ow - w), (0, 0)]
    return like(np.pad(arr, pads), image)


def resize_with_crop_or_pad(image: Any, target_height: int, target_width: int) -> Any:
    """Center-crop and/or zero-pad each image to ``target_height`` x ``target_width``, as
    ``tf.image.resize_with_crop_or_pad``: an axis longer than its target is cropped
    around its centre, a shorter one padded evenly (the odd pixel goes to the bottom /
    right in both cases, as tf's ``diff // 2`` offsets place it).

    Args:
        image: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor.
        target_height, target_width: the output's size, ``> 0``.

    Returns:
        ``(target_height, target_width, C)`` (or with ``N``), the same kind and dtype.

    Raises:
        ValueError: a size ``<= 0``, a rank other than 3 or 4, or a shape that looks
            channels-first.

    Example:
        >>> import numpy as np
        >>> resize_with_crop_or_pad(np.arange(1, 4).reshape(1, 3, 1), 2, 2)[..., 0]
        array([[1, 2],
               [0, 0]])
    """
    fn = "resize_with_crop_or_pad"
    arr = to_numpy(image, fn)
    v = _ints(fn, target_height=target_height, target_width=target_width)
    th, tw = v["target_height"], v["target_width"]
    if th <= 0 or tw <= 0:
        raise ValueError(f"{fn}: target_height and target_width must be > 0, got ({th}, {tw})")
    h, w = arr.shape[-3], arr.shape[-2]
    # the box arithmetic of tf's resize_with_crop_or_pad, sliced here rather than through
    # the public functions: an intermediate (3, 100, 40) crop must not be re-checked as CHW
    top, left = max((h - th) // 2, 0), max((w - tw) // 2, 0)
    cropped = arr[..., top : top + min(th, h), left : left + min(tw, w), :]
    ph, pw = max((th - h) // 2, 0), max((tw - w) // 2, 0)
    ch, cw = cropped.shape[-3], cropped.shape[-2]
    pads = [(0, 0)] * (arr.ndim - 3) + [(ph, th - ph - ch), (pw, tw - pw - cw), (0, 0)]
    out = np.pad(cropped, pads)
    return like(out, image)
