"""tf.image's flips and rotations: ``flip_left_right``, ``flip_up_down``, ``rot90``,
``transpose``.

Each takes a ``(height, width, channels)`` image or a ``(batch, height, width, channels)``
batch (numpy array or torch tensor, any numeric dtype) and returns the same kind, rank and
dtype with the pixels moved, as ``tf.image.<name>`` does. The values are copied unchanged,
so they equal TensorFlow's exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from datapipe.image._common import like, to_numpy

__all__ = ["flip_left_right", "flip_up_down", "rot90", "transpose"]


def flip_left_right(image: Any) -> Any:
    """Mirror each image horizontally (the width axis), as ``tf.image.flip_left_right``.

    Args:
        image: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor.

    Returns:
        The same kind, shape and dtype.

    Raises:
        ValueError: a rank other than 3 or 4, or a shape that looks channels-first.

    Example:
        >>> import numpy as np
        >>> flip_left_right(np.array([[[1], [2], [3]]]))[..., 0]
        array([[3, 2, 1]])
    """
    arr = to_numpy(image, "flip_left_right")
    return like(np.flip(arr, axis=-2), image)


def flip_up_down(image: Any) -> Any:
    """Mirror each image vertically (the height axis), as ``tf.image.flip_up_down``.

    Args:
        image: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor.

    Returns:
        The same kind, shape and dtype.

    Raises:
        ValueError: a rank other than 3 or 4, or a shape that looks channels-first.

    Example:
        >>> import numpy as np
        >>> flip_up_down(np.array([[[1]], [[2]]]))[..., 0]
        array([[2],
               [1]])
    """
    arr = to_numpy(image, "flip_up_down")
    return like(np.flip(arr, axis=-3), image)


def rot90(image: Any, k: int = 1) -> Any:
    """Rotate each image by ``k`` quarter turns counter-clockwise, as ``tf.image.rot90``.

    Args:
        image: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor.
        k: the number of quarter turns (any int; negative turns clockwise).

    Returns:
        The same kind and dtype; height and width swap when ``k`` is odd.

    Raises:
        ValueError: a rank other than 3 or 4, a shape that looks channels-first, or a
            ``k`` that is not an int.

    Example:
        >>> import numpy as np
        >>> rot90(np.array([[[1], [2]], [[3], [4]]]))[..., 0]
        array([[2, 4],
               [1, 3]])
    """
    arr = to_numpy(image, "rot90")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"rot90: k must be an int, got {k!r}")
    return like(np.rot90(arr, int(k) % 4, axes=(-3, -2)), image)


def transpose(image: Any) -> Any:
    """Swap each image's height and width axes, as ``tf.image.transpose``.

    Args:
        image: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor.

    Returns:
        ``(W, H, C)`` or ``(N, W, H, C)``, the same kind and dtype.

    Raises:
        ValueError: a rank other than 3 or 4, or a shape that looks channels-first.

    Example:
        >>> import numpy as np
        >>> transpose(np.zeros((2, 5, 3))).shape
        (5, 2, 3)
    """
    arr = to_numpy(image, "transpose")
    return like(np.swapaxes(arr, -3, -2), image)
