"""tf.image's seeded random augmentations: ``stateless_random_flip_left_right``,
``stateless_random_flip_up_down``, ``stateless_random_crop``,
``stateless_random_brightness``, ``stateless_random_contrast``,
``stateless_random_saturation``, ``stateless_random_hue``.

tf's contract: ``seed=(a, b)``; the same pair gives the same draw on every call, so a
pipeline that derives a pair per element (``Dataset.random`` or the element's index)
augments each element the same way in every epoch replay, thread and process. The draws
come from numpy's Philox keyed by the pair (``datapipe.image._draws``): the contract is
tf's, the values drawn are not (D-IMG-3). Given the draw, each function is the matching
deterministic one (``adjust_brightness(image, delta)`` ...), whose values agree with tf.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from datapipe.image._common import like, to_numpy
from datapipe.image._draws import generator
from datapipe.image.adjust import (
    adjust_brightness,
    adjust_contrast,
    adjust_hue,
    adjust_saturation,
)

__all__ = [
    "stateless_random_brightness",
    "stateless_random_contrast",
    "stateless_random_crop",
    "stateless_random_flip_left_right",
    "stateless_random_flip_up_down",
    "stateless_random_hue",
    "stateless_random_saturation",
]


def flip_draw(arr: np.ndarray, rng: np.random.Generator, axis: int) -> np.ndarray:
    """Flip ``arr`` (one image, or each image of a batch on its own draw) along ``axis``
    (-2: left-right, -3: up-down) with probability 1/2."""
    if arr.ndim == 3:
        return np.flip(arr, axis) if rng.uniform() < 0.5 else arr
    flips = np.asarray(rng.uniform(size=arr.shape[0])) < 0.5
    return np.where(flips[:, None, None, None], np.flip(arr, axis), arr)


def crop_draw(arr: np.ndarray, size: Any, rng: np.random.Generator, fn: str) -> np.ndarray:
    """A ``size`` crop of ``arr`` at offsets drawn uniformly per axis, as tf's
    ``random_crop`` (``size`` has one entry per axis of ``arr``)."""
    try:
        want = [int(v) for v in size]
    except (TypeError, ValueError):
        raise ValueError(f"{fn}: size must be a sequence of ints, got {size!r}") from None
    if len(want) != arr.ndim or any(s < 0 or s > d for s, d in zip(want, arr.shape)):
        raise ValueError(
            f"{fn}: size must have one entry per axis of the value, each between 0 and that "
            f"axis's length; got size {want} for shape {arr.shape}"
        )
    offsets = [int(rng.integers(0, d - s + 1)) for s, d in zip(want, arr.shape)]
    return arr[tuple(slice(o, o + s) for o, s in zip(offsets, want))]


def _range(lower: float, upper: float, fn: str) -> None:
    if upper <= lower:
        raise ValueError(f"{fn}: upper must be > lower, got lower={lower}, upper={upper}")
    if lower < 0:
        raise ValueError(f"{fn}: lower must be non-negative, got {lower}")


def stateless_random_flip_left_right(image: Any, seed: Any) -> Any:
    """Flip left-right with probability 1/2 (each image of a batch on its own draw), as
    ``tf.image.stateless_random_flip_left_right``.

    Args:
        image: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor.
        seed: ``(a, b)``, two ints: the same pair flips the same images every call.

    Returns:
        The same kind, shape and dtype.

    Raises:
        ValueError: a seed that is not a pair of ints, a rank other than 3 or 4, or a
            shape that looks channels-first.

    Example:
        >>> import numpy as np
        >>> x = np.arange(6).reshape(1, 6, 1)
        >>> a = stateless_random_flip_left_right(x, seed=(1, 2))
        >>> bool((a == stateless_random_flip_left_right(x, seed=(1, 2))).all())
        True
    """
    fn = "stateless_random_flip_left_right"
    arr = to_numpy(image, fn)
    return like(flip_draw(arr, generator(seed, fn), -2), image)


def stateless_random_flip_up_down(image: Any, seed: Any) -> Any:
    """Flip up-down with probability 1/2 (each image of a batch on its own draw), as
    ``tf.image.stateless_random_flip_up_down``; arguments and errors as
    ``stateless_random_flip_left_right``.

    Example:
        >>> import numpy as np
        >>> stateless_random_flip_up_down(np.zeros((4, 2, 3)), seed=(0, 0)).shape
        (4, 2, 3)
    """
    fn = "stateless_random_flip_up_down"
    arr = to_numpy(image, fn)
    return like(flip_draw(arr, generator(seed, fn), -3), image)


def stateless_random_crop(value: Any, size: Any, seed: Any) -> Any:
    """A ``size`` crop at a random offset, as ``tf.image.stateless_random_crop``.

    Args:
        value: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor.
        size: one length per axis of ``value`` (``(h, w, C)``; ``(N, h, w, C)`` crops the
            whole batch at one offset, as tf's).
        seed: ``(a, b)``, two ints: the same pair crops at the same offset every call.

    Returns:
        ``size``-shaped, the same kind and dtype.

    Raises:
        ValueError: a ``size`` of another length or larger than ``value``, a bad seed, a
            rank other than 3 or 4, or a shape that looks channels-first.

    Example:
        >>> import numpy as np
        >>> stateless_random_crop(np.zeros((8, 8, 3)), (5, 4, 3), seed=(3, 4)).shape
        (5, 4, 3)
    """
    fn = "stateless_random_crop"
    arr = to_numpy(value, fn)
    return like(crop_draw(arr, size, generator(seed, fn), fn), value)


def stateless_random_brightness(image: Any, max_delta: float, seed: Any) -> Any:
    """``adjust_brightness`` by a delta drawn uniformly from ``[-max_delta, max_delta)``
    (one draw for the whole input), as ``tf.image.stateless_random_brightness``.

    Args:
        image: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor.
        max_delta: ``>= 0``, on the ``[0, 1]`` scale.
        seed: ``(a, b)``, two ints.

    Returns:
        The same kind, shape and dtype.

    Raises:
        ValueError: a negative ``max_delta``, a bad seed, and ``adjust_brightness``'s.

    Example:
        >>> import numpy as np
        >>> x = np.full((2, 2, 3), 0.5, np.float32)
        >>> y = stateless_random_brightness(x, 0.2, seed=(1, 2))
        >>> bool(0.3 <= y[0, 0, 0] <= 0.7 and (y == y[0, 0, 0]).all())
        True
    """
    fn = "stateless_random_brightness"
    to_numpy(image, fn)  # refused under this function's name, before any draw
    if max_delta < 0:
        raise ValueError(f"{fn}: max_delta must be non-negative, got {max_delta}")
    delta = generator(seed, fn).uniform(-max_delta, max_delta)
    return adjust_brightness(image, np.float32(delta))


def stateless_random_contrast(image: Any, lower: float, upper: float, seed: Any) -> Any:
    """``adjust_contrast`` by a factor drawn uniformly from ``[lower, upper)``, as
    ``tf.image.stateless_random_contrast``.

    Args:
        image: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor.
        lower, upper: ``0 <= lower < upper``.
        seed: ``(a, b)``, two ints.

    Returns:
        The same kind, shape and dtype.

    Raises:
        ValueError: ``upper <= lower``, a negative ``lower``, a bad seed, and
            ``adjust_contrast``'s.

    Example:
        >>> import numpy as np
        >>> stateless_random_contrast(np.zeros((2, 2, 3), np.uint8), 0.5, 1.5, (0, 1)).dtype
        dtype('uint8')
    """
    fn = "stateless_random_contrast"
    to_numpy(image, fn)  # refused under this function's name, before any draw
    _range(lower, upper, fn)
    factor = generator(seed, fn).uniform(lower, upper)
    return adjust_contrast(image, np.float32(factor))


def stateless_random_saturation(image: Any, lower: float, upper: float, seed: Any) -> Any:
    """``adjust_saturation`` by a factor drawn uniformly from ``[lower, upper)``, as
    ``tf.image.stateless_random_saturation``; arguments and errors as
    ``stateless_random_contrast`` (the image must be RGB).

    Example:
        >>> import numpy as np
        >>> grey = np.full((2, 2, 3), 0.5, np.float32)  # no saturation to scale
        >>> bool(np.allclose(stateless_random_saturation(grey, 0.5, 1.5, (5, 6)), 0.5))
        True
    """
    fn = "stateless_random_saturation"
    to_numpy(image, fn)  # refused under this function's name, before any draw
    _range(lower, upper, fn)
    factor = generator(seed, fn).uniform(lower, upper)
    return adjust_saturation(image, np.float32(factor))


def stateless_random_hue(image: Any, max_delta: float, seed: Any) -> Any:
    """``adjust_hue`` by a delta drawn uniformly from ``[-max_delta, max_delta)``, as
    ``tf.image.stateless_random_hue``.

    Args:
        image: ``(H, W, 3)`` or ``(N, H, W, 3)`` RGB, numpy array or torch tensor.
        max_delta: in ``[0, 0.5]``.
        seed: ``(a, b)``, two ints.

    Returns:
        The same kind, shape and dtype.

    Raises:
        ValueError: ``max_delta`` outside ``[0, 0.5]``, a bad seed, and ``adjust_hue``'s.

    Example:
        >>> import numpy as np
        >>> stateless_random_hue(np.zeros((2, 2, 3), np.float32), 0.2, (7, 8)).shape
        (2, 2, 3)
    """
    fn = "stateless_random_hue"
    to_numpy(image, fn)  # refused under this function's name, before any draw
    if not 0 <= max_delta <= 0.5:
        raise ValueError(f"{fn}: max_delta must be in [0, 0.5], got {max_delta}")
    delta = generator(seed, fn).uniform(-max_delta, max_delta)
    return adjust_hue(image, float(delta))
