"""tf.image's colour-space conversions: ``rgb_to_grayscale``, ``grayscale_to_rgb``,
``rgb_to_hsv``, ``hsv_to_rgb``.

They take ``(..., channels)`` numpy arrays or torch tensors (an image, a batch, or any
leading shape, as tf's) and return the same kind. The formulas are TensorFlow's
(``image_ops_impl.py`` and the ``RGBToHSV`` / ``HSVToRGB`` kernels), computed in float32
(float64 for float64 input): results agree with tf's within float rounding (the tests
bound it at 1e-6 of the value range).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from datapipe.image._common import is_tensor, like, need_channels
from datapipe.image.dtype import convert_numpy
from datapipe.image_format import looks_like_other_layout

__all__ = ["grayscale_to_rgb", "hsv_to_rgb", "rgb_to_grayscale", "rgb_to_hsv"]

# ITU-R BT.601 luma, tf's (and PIL's "L") rounded weights
_GRAY_WEIGHTS = (0.2989, 0.5870, 0.1140)


def _read(image: Any, fn: str, channels: int, float_only: bool = False) -> np.ndarray:
    arr = image.detach().cpu().numpy() if is_tensor(image) else np.asarray(image)
    if arr.ndim < 1 or arr.dtype.kind not in "uif" or (float_only and arr.dtype.kind != "f"):
        kinds = "float" if float_only else "integer or float"
        raise ValueError(
            f"{fn}: images must be a {kinds} array of shape (..., {channels}); got shape "
            f"{arr.shape} of dtype {arr.dtype}"
        )
    if looks_like_other_layout(arr.shape, "channels_last") is not None:
        raise ValueError(
            f"{fn}: the input of shape {arr.shape} looks channels_first, but tf.image's "
            f"functions take channels_last images; permute it first (x.permute(1, 2, 0), "
            f"or (0, 2, 3, 1) for a batch)"
        )
    need_channels(arr, fn, channels)
    return arr


def rgb_to_grayscale(images: Any) -> Any:
    """Luma of RGB images, ``0.2989 R + 0.5870 G + 0.1140 B``, as
    ``tf.image.rgb_to_grayscale``: computed in float32 on ``[0, 1]``
    (``convert_image_dtype``) and converted back to the input's dtype.

    Args:
        images: ``(..., 3)``, numpy array or torch tensor, integer or float.

    Returns:
        ``(..., 1)``, the same kind and dtype.

    Raises:
        ValueError: a last axis other than 3, a non-numeric dtype, or a shape that looks
            channels-first.

    Example:
        >>> import numpy as np
        >>> rgb_to_grayscale(np.array([[[255, 0, 0], [255, 255, 255]]], np.uint8))[..., 0]
        array([[ 76, 255]], dtype=uint8)
    """
    arr = _read(images, "rgb_to_grayscale", 3)
    flt = convert_numpy(arr, np.dtype(np.float32))
    gray = np.tensordot(flt, np.asarray(_GRAY_WEIGHTS, np.float32), axes=([-1], [-1]))
    return like(convert_numpy(gray[..., None], arr.dtype), images)


def grayscale_to_rgb(images: Any) -> Any:
    """Repeat a single channel three times, as ``tf.image.grayscale_to_rgb``.

    Args:
        images: ``(..., 1)``, numpy array or torch tensor, any numeric dtype.

    Returns:
        ``(..., 3)``, the same kind and dtype.

    Raises:
        ValueError: a last axis other than 1 or a non-numeric dtype.

    Example:
        >>> import numpy as np
        >>> grayscale_to_rgb(np.array([[[7]]], np.uint8))
        array([[[7, 7, 7]]], dtype=uint8)
    """
    arr = _read(images, "grayscale_to_rgb", 1)
    return like(np.repeat(arr, 3, axis=-1), images)


def hsv_numpy(rgb: np.ndarray) -> np.ndarray:
    """tf's ``RGBToHSV`` kernel on a float ``(..., 3)`` array: hue, saturation and value
    in ``[0, 1]``; hue 0 where the pixel is grey, saturation 0 where it is black."""
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    v = rgb.max(axis=-1)
    rng = v - rgb.min(axis=-1)
    one, zero = rgb.dtype.type(1), rgb.dtype.type(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(v > zero, rng / v, zero)
        norm = one / rng / rgb.dtype.type(6)
        h = np.where(
            r == v,
            norm * (g - b),
            np.where(g == v, norm * (b - r) + one * 2 / 6, norm * (r - g) + one * 4 / 6),
        )
    h = np.where(rng > zero, h, zero)
    h = np.where(h < zero, h + one, h)
    return np.stack([h, s, v], axis=-1).astype(rgb.dtype, copy=False)


def rgb_numpy(hsv: np.ndarray) -> np.ndarray:
    """tf's ``HSVToRGB`` kernel on a float ``(..., 3)`` array."""
    h, s, v = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    t = hsv.dtype.type
    dh = h * t(6)
    dr = np.clip(np.abs(dh - t(3)) - t(1), t(0), t(1))
    dg = np.clip(-np.abs(dh - t(2)) + t(2), t(0), t(1))
    db = np.clip(-np.abs(dh - t(4)) + t(2), t(0), t(1))
    one_s = t(1) - s
    out = [(one_s + s * d) * v for d in (dr, dg, db)]
    return np.stack(out, axis=-1).astype(hsv.dtype, copy=False)


def rgb_to_hsv(images: Any) -> Any:
    """RGB to HSV, as ``tf.image.rgb_to_hsv``: hue, saturation and value in ``[0, 1]``
    (hue 0 for grey pixels, saturation 0 for black ones).

    Args:
        images: ``(..., 3)`` float RGB in ``[0, 1]``, numpy array or torch tensor.

    Returns:
        ``(..., 3)`` HSV, the same kind and dtype.

    Raises:
        ValueError: a non-float dtype (as tf's, which has float kernels only: convert with
            ``convert_image_dtype`` first), a last axis other than 3, or a shape that looks
            channels-first.

    Example:
        >>> import numpy as np
        >>> rgb_to_hsv(np.array([[[1.0, 0.5, 0.0]]], np.float32))
        array([[[0.08333334, 1.        , 1.        ]]], dtype=float32)
    """
    return like(hsv_numpy(_read(images, "rgb_to_hsv", 3, float_only=True)), images)


def hsv_to_rgb(images: Any) -> Any:
    """HSV to RGB, as ``tf.image.hsv_to_rgb`` (the inverse of ``rgb_to_hsv``).

    Args:
        images: ``(..., 3)`` float HSV in ``[0, 1]``, numpy array or torch tensor.

    Returns:
        ``(..., 3)`` RGB in ``[0, 1]``, the same kind and dtype.

    Raises:
        ValueError: a non-float dtype, a last axis other than 3, or a shape that looks
            channels-first.

    Example:
        >>> import numpy as np
        >>> hsv_to_rgb(np.array([[[0.0, 1.0, 1.0]]], np.float32))
        array([[[1., 0., 0.]]], dtype=float32)
    """
    return like(rgb_numpy(_read(images, "hsv_to_rgb", 3, float_only=True)), images)
