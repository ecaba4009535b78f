"""``resize``: ``tf.image.resize(method="bilinear")``, the function ``dp.resize_image`` has
been (``datapipe.io.image_resize``, which has the kernel, the backends and the tolerance
against TensorFlow); ``dp.resize_image`` stays, as this function's older name.

One difference on purpose (docs/guides/differences.md, D-IMG-1): tf returns float32 for
every input; this returns the input's dtype (integers rounded half to even and clipped)
unless ``dtype`` says otherwise -- pass ``dtype=np.float32`` for tf's result.
"""

from __future__ import annotations

from typing import Any

from datapipe.image._common import is_tensor, like
from datapipe.io.image_resize import resize_image

__all__ = ["resize"]


def resize(
    images: Any,
    size: tuple[int, int],
    method: str = "bilinear",
    preserve_aspect_ratio: bool = False,
    antialias: bool = False,
    *,
    dtype: Any = None,
) -> Any:
    """Resize an image or a batch with bilinear interpolation, as ``tf.image.resize``.

    Args:
        images: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor, any
            integer or float dtype.
        size: ``(height, width)`` of the output, positive ints.
        method: ``"bilinear"`` (tf's default; the only method here).
        preserve_aspect_ratio: False (tf's default; True is not supported here).
        antialias: as tf's: when an axis shrinks, a triangle filter as wide as the scale.
        dtype: the output dtype; default the input's (tf: always float32, D-IMG-1).

    Returns:
        ``(height, width, C)`` (or with ``N``), the same kind as ``images``.

    Raises:
        ValueError: another ``method``, ``preserve_aspect_ratio=True``, and what
            ``datapipe.io.resize_image`` raises: a rank other than 3 or 4, a bad ``size``
            or ``dtype``, or a shape that looks channels-first (naming ``data_format``).

    Example:
        >>> import numpy as np
        >>> resize(np.array([[0, 100], [200, 255]], np.uint8)[..., None], (1, 1))[..., 0]
        array([[139]], dtype=uint8)
    """
    if method != "bilinear":
        raise ValueError(
            f"resize: method={method!r} is not supported; only 'bilinear' (tf's default)"
        )
    if preserve_aspect_ratio:
        raise ValueError(
            "resize: preserve_aspect_ratio=True is not supported; compute the size that "
            "keeps the aspect ratio and pass it"
        )
    arr = images.detach().cpu().numpy() if is_tensor(images) else images
    out = resize_image(arr, size, antialias=antialias, dtype=dtype)
    return like(out, images)
