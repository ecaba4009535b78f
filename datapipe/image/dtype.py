"""``convert_image_dtype``: tf.image's dtype conversion, which rescales the values.

TensorFlow's rules (``tf.image.convert_image_dtype``): floats hold ``[0, 1]``, integers
``[0, MAX]`` of their dtype.

- int -> wider int: cast, then multiply by ``(MAX_out + 1) // (MAX_in + 1)``;
  int -> narrower int: floor-divide by ``(MAX_in + 1) // (MAX_out + 1)``, then cast;
- int -> float: cast, then multiply by ``1 / MAX_in`` (in the output dtype);
- float -> int: multiply by ``MAX_out + 0.5`` (in the input dtype), then truncate;
- float -> float: a plain cast. The same dtype returns the input.

``saturate=True`` clips to the output dtype's range before an integer cast. tf leaves the
result of ``saturate=False`` undefined where a value falls outside the output's range
(a float outside ``[0, 1]``, a negative int into an unsigned dtype); here a float ->
int conversion clips then too (docs/guides/differences.md, D-IMG-2).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from datapipe.image._common import is_tensor, like

__all__ = ["convert_image_dtype"]


def _dtype(dtype: Any) -> np.dtype:
    if type(dtype).__module__.startswith("torch"):
        import torch

        return np.dtype(torch.empty((), dtype=dtype).numpy().dtype)
    out = np.dtype(dtype)
    if out.kind not in "uif":
        raise ValueError(f"convert_image_dtype: dtype must be an integer or float dtype, got {out}")
    return out


def _saturate(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(x, max(info.min, -(2**63)), info.max)


def convert_numpy(arr: np.ndarray, dtype: np.dtype, saturate: bool = False) -> np.ndarray:
    """``convert_image_dtype`` on a numpy array (no rank or layout check)."""
    src = arr.dtype
    if src == dtype:
        return arr
    if src.kind in "iu" and dtype.kind in "iu":
        max_in, max_out = int(np.iinfo(src).max), int(np.iinfo(dtype).max)
        if max_in > max_out:
            scaled = arr // ((max_in + 1) // (max_out + 1))
            return (_saturate(scaled, dtype) if saturate else scaled).astype(dtype)
        cast = (_saturate(arr, dtype) if saturate else arr).astype(dtype)
        return cast * dtype.type((max_out + 1) // (max_in + 1))
    if src.kind == "f" and dtype.kind == "f":
        return arr.astype(dtype)
    if src.kind in "iu":  # int -> float
        return arr.astype(dtype) * dtype.type(1.0 / int(np.iinfo(src).max))
    # float -> int: tf truncates toward zero (its cast); out-of-range values are clipped
    # whatever ``saturate`` says (tf's result is undefined there; D-IMG-2)
    scaled = arr * src.type(float(np.iinfo(dtype).max) + 0.5)
    info = np.iinfo(dtype)
    # clipped in float64: float32(2**31 - 1) rounds up to 2**31, past int32's range
    return np.clip(np.nan_to_num(scaled).astype(np.float64), info.min, info.max).astype(dtype)


def convert_image_dtype(image: Any, dtype: Any, saturate: bool = False) -> Any:
    """Convert ``image`` to ``dtype``, rescaling the values, as
    ``tf.image.convert_image_dtype`` (the rules are in the module's docstring).

    Args:
        image: a numpy array or torch tensor of any shape and any integer or float dtype
            (a bool mask is cast to 0 and 1, not rescaled).
        dtype: the output dtype: a numpy dtype (or its name) or a torch dtype.
        saturate: clip to the output dtype's range before an integer cast.

    Returns:
        The same kind and shape, of ``dtype``.

    Raises:
        ValueError: a non-numeric input or output dtype.

    Example:
        >>> import numpy as np
        >>> convert_image_dtype(np.array([0, 128, 255], np.uint8), np.float32)
        array([0.       , 0.5019608, 1.       ], dtype=float32)
        >>> convert_image_dtype(np.array([0.0, 0.5, 1.0], np.float32), np.uint8)
        array([  0, 127, 255], dtype=uint8)
        >>> convert_image_dtype(np.array([255], np.uint8), np.int16)
        array([32640], dtype=int16)
    """
    arr = image.detach().cpu().numpy() if is_tensor(image) else np.asarray(image)
    if arr.dtype.kind == "b":  # a mask: 0 and 1 in any dtype, not rescaled
        return like(arr.astype(_dtype(dtype)), image)
    if arr.dtype.kind not in "uif":
        raise ValueError(f"convert_image_dtype: image must be integer or float, got {arr.dtype}")
    return like(convert_numpy(arr, _dtype(dtype), saturate), image)
