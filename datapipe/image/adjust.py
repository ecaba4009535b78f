"""tf.image's pixel adjustments: ``adjust_brightness``, ``adjust_contrast``,
``adjust_saturation``, ``adjust_hue``, ``adjust_gamma``, ``per_image_standardization``.

As TensorFlow's (``image_ops_impl.py``): an integer image is converted to float32 on
``[0, 1]`` (``convert_image_dtype``), float16/float32 images are used as they are (float64
is computed in float32, as tf's conversion does), the adjustment is applied, and the result
is converted back to the input's dtype (saturating for integers). Inputs are numpy arrays
or torch tensors, ``(height, width, channels)`` or ``(batch, height, width, channels)``;
the output is the same kind. Results agree with tf's within float32 rounding (bounds in
tests/image/test_adjust.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from datapipe.image._common import like, need_channels, to_numpy
from datapipe.image.color import hsv_numpy, rgb_numpy
from datapipe.image.dtype import convert_numpy

__all__ = [
    "adjust_brightness",
    "adjust_contrast",
    "adjust_gamma",
    "adjust_hue",
    "adjust_saturation",
    "per_image_standardization",
]

_F32 = np.dtype(np.float32)


def _read(image: Any, fn: str) -> np.ndarray:
    """``to_numpy``, refusing bool: the adjustments rescale by the dtype's maximum."""
    arr = to_numpy(image, fn)
    if arr.dtype.kind == "b":
        raise ValueError(f"{fn}: image must be integer or float, got dtype bool")
    return arr


def _to_float(arr: np.ndarray) -> np.ndarray:
    if arr.dtype in (np.float16, np.float32):
        return arr
    return convert_numpy(arr, _F32)


def adjust_brightness(image: Any, delta: float) -> Any:
    """Add ``delta`` to every value on the ``[0, 1]`` scale, as
    ``tf.image.adjust_brightness``.

    Args:
        image: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor.
        delta: added on the float scale (``0.1`` adds ~25 levels to a uint8 image).

    Returns:
        The same kind, shape and dtype (integers saturate at their range).

    Raises:
        ValueError: a rank other than 3 or 4, a non-numeric dtype, or a shape that looks
            channels-first.

    Example:
        >>> import numpy as np
        >>> adjust_brightness(np.array([[[0, 100, 250]]], np.uint8), 0.1)
        array([[[ 25, 125, 255]]], dtype=uint8)
    """
    arr = _read(image, "adjust_brightness")
    flt = _to_float(arr)
    out = flt + flt.dtype.type(delta)
    return like(convert_numpy(out, arr.dtype, saturate=True), image)


def adjust_contrast(images: Any, contrast_factor: float) -> Any:
    """Scale each channel's distance from its mean, ``(x - mean) * contrast_factor +
    mean``, the mean over each image's height and width, as ``tf.image.adjust_contrast``.

    Args:
        images: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor.
        contrast_factor: the scale (1 leaves the image as it is).

    Returns:
        The same kind, shape and dtype (integers saturate at their range).

    Raises:
        ValueError: a rank other than 3 or 4, a non-numeric dtype, or a shape that looks
            channels-first.

    Example:
        >>> import numpy as np
        >>> adjust_contrast(np.array([[[0.25], [0.75]]], np.float32), 2.0)[..., 0]
        array([[0., 1.]], dtype=float32)
    """
    arr = _read(images, "adjust_contrast")
    flt = _to_float(arr)
    mean = flt.mean(axis=(-3, -2), keepdims=True, dtype=np.float32).astype(flt.dtype)
    out = (flt - mean) * flt.dtype.type(contrast_factor) + mean
    return like(convert_numpy(out, arr.dtype, saturate=True), images)


def adjust_saturation(image: Any, saturation_factor: float) -> Any:
    """Multiply each pixel's HSV saturation by ``saturation_factor`` (clipped to
    ``[0, 1]``), as ``tf.image.adjust_saturation``.

    Args:
        image: ``(H, W, 3)`` or ``(N, H, W, 3)`` RGB, numpy array or torch tensor.
        saturation_factor: ``>= 0``; 0 gives grey, 1 leaves the image as it is.

    Returns:
        The same kind, shape and dtype.

    Raises:
        ValueError: a last axis other than 3, a negative factor, a rank other than 3 or
            4, a non-numeric dtype, or a shape that looks channels-first.

    Example:
        >>> import numpy as np
        >>> adjust_saturation(np.array([[[1.0, 0.5, 0.0]]], np.float32), 0.5)
        array([[[1.  , 0.75, 0.5 ]]], dtype=float32)
    """
    arr = _read(image, "adjust_saturation")
    need_channels(arr, "adjust_saturation", 3)
    if saturation_factor < 0:
        raise ValueError(
            f"adjust_saturation: saturation_factor must be >= 0, got {saturation_factor}"
        )
    hsv = hsv_numpy(_to_float(arr))
    t = hsv.dtype.type
    hsv[..., 1] = np.clip(hsv[..., 1] * t(saturation_factor), t(0), t(1))
    return like(convert_numpy(rgb_numpy(hsv), arr.dtype), image)


def adjust_hue(image: Any, delta: float) -> Any:
    """Rotate each pixel's HSV hue by ``delta`` (a fraction of the colour circle, wrapped
    to ``[0, 1)``), as ``tf.image.adjust_hue``.

    Args:
        image: ``(H, W, 3)`` or ``(N, H, W, 3)`` RGB, numpy array or torch tensor.
        delta: in ``[-1, 1]``.

    Returns:
        The same kind, shape and dtype.

    Raises:
        ValueError: ``delta`` outside ``[-1, 1]`` (tf's message), a last axis other than
            3, a rank other than 3 or 4, a non-numeric dtype, or a shape that looks
            channels-first.

    Example:
        >>> import numpy as np
        >>> adjust_hue(np.array([[[1.0, 0.0, 0.0]]], np.float32), 1 / 3)  # red to green
        array([[[0., 1., 0.]]], dtype=float32)
    """
    if not -1 <= delta <= 1:
        raise ValueError(f"adjust_hue: delta must be in the interval [-1, 1], got {delta}")
    arr = _read(image, "adjust_hue")
    need_channels(arr, "adjust_hue", 3)
    hsv = hsv_numpy(_to_float(arr))
    hsv[..., 0] = np.mod(hsv[..., 0] + hsv.dtype.type(delta), hsv.dtype.type(1))
    return like(convert_numpy(rgb_numpy(hsv), arr.dtype), image)


def adjust_gamma(image: Any, gamma: float = 1, gain: float = 1) -> Any:
    """``gain * x ** gamma`` on the ``[0, 1]`` scale, as ``tf.image.adjust_gamma``.

    Args:
        image: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor.
        gamma: ``>= 0``; below 1 brightens, above 1 darkens.
        gain: a multiplier.

    Returns:
        The same kind, shape and dtype (integers saturate at their range).

    Raises:
        ValueError: a negative ``gamma``, a rank other than 3 or 4, a non-numeric dtype,
            or a shape that looks channels-first.

    Example:
        >>> import numpy as np
        >>> adjust_gamma(np.array([[[0.25]]], np.float32), gamma=0.5)
        array([[[0.5]]], dtype=float32)
    """
    if gamma < 0:
        raise ValueError(f"adjust_gamma: gamma must be >= 0, got {gamma}")
    arr = _read(image, "adjust_gamma")
    flt = _to_float(arr)
    out = flt.dtype.type(gain) * flt ** flt.dtype.type(gamma)
    return like(convert_numpy(out, arr.dtype, saturate=True), image)


def per_image_standardization(image: Any) -> Any:
    """Scale each image to mean 0 and variance 1, as ``tf.image.per_image_standardization``:
    ``(x - mean) / max(stddev, 1 / sqrt(H * W * C))`` over each image's values (the
    floor keeps a uniform image finite). The values are not rescaled first: a uint8
    image is standardised in its 0..255 units.

    Args:
        image: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor.

    Returns:
        float32 of the same kind and shape.

    Raises:
        ValueError: a rank other than 3 or 4, a non-numeric dtype, or a shape that looks
            channels-first.

    Example:
        >>> import numpy as np
        >>> per_image_standardization(np.array([[[0], [2]]], np.uint8))[..., 0]
        array([[-1.,  1.]], dtype=float32)
    """
    arr = to_numpy(image, "per_image_standardization").astype(np.float32)
    axes = (-3, -2, -1)
    mean = arr.mean(axis=axes, keepdims=True, dtype=np.float64).astype(np.float32)
    std = arr.std(axis=axes, keepdims=True, dtype=np.float64).astype(np.float32)
    floor = np.float32(1.0 / np.sqrt(np.prod(arr.shape[-3:])))
    return like((arr - mean) / np.maximum(std, floor), image)
