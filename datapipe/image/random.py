"""tf.image's stateful random augmentations: ``random_flip_left_right``,
``random_flip_up_down``, ``random_crop``.

``seed=None`` draws from fresh OS entropy on every call. ``seed=int`` (tf's op seed) starts
a stream that later calls with the same seed continue, in this process: the sequence of
draws repeats from the start in a new process, but calls from several threads or worker
processes share or repeat it in an order nobody fixes. For augmentations that are the same
on every executor and every replay, use the ``stateless_random_*`` functions with a seed
pair per element (D-IMG-4).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from datapipe.image._common import like, to_numpy
from datapipe.image.stateless_random import crop_draw, flip_draw

__all__ = ["random_crop", "random_flip_left_right", "random_flip_up_down"]

_streams: dict[int, np.random.Generator] = {}
_lock = threading.Lock()  # numpy Generators are not safe to share between threads unlocked


def _draw(seed: int | None, fn: str, use: Any) -> Any:
    if seed is None:
        return use(np.random.default_rng())
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"{fn}: seed must be an int or None, got {seed!r}")
    with _lock:
        rng = _streams.setdefault(int(seed), np.random.default_rng(int(seed) % 2**64))
        return use(rng)


def random_flip_left_right(image: Any, seed: int | None = None) -> Any:
    """Flip left-right with probability 1/2 (each image of a batch on its own draw), as
    ``tf.image.random_flip_left_right``.

    Args:
        image: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor.
        seed: None (fresh entropy) or an int starting a per-process stream (module text).

    Returns:
        The same kind, shape and dtype.

    Raises:
        ValueError: a seed that is not an int, a rank other than 3 or 4, or a shape that
            looks channels-first.

    Example:
        >>> import numpy as np
        >>> x = np.arange(3).reshape(1, 3, 1)
        >>> random_flip_left_right(x)[0, :, 0].tolist() in ([0, 1, 2], [2, 1, 0])
        True
    """
    fn = "random_flip_left_right"
    arr = to_numpy(image, fn)
    return like(_draw(seed, fn, lambda rng: flip_draw(arr, rng, -2)), image)


def random_flip_up_down(image: Any, seed: int | None = None) -> Any:
    """Flip up-down with probability 1/2, as ``tf.image.random_flip_up_down``; arguments
    and errors as ``random_flip_left_right``.

    Example:
        >>> import numpy as np
        >>> random_flip_up_down(np.zeros((2, 5, 3)), seed=1).shape
        (2, 5, 3)
    """
    fn = "random_flip_up_down"
    arr = to_numpy(image, fn)
    return like(_draw(seed, fn, lambda rng: flip_draw(arr, rng, -3)), image)


def random_crop(value: Any, size: Any, seed: int | None = None) -> Any:
    """A ``size`` crop at a random offset, as ``tf.image.random_crop``.

    Args:
        value: ``(H, W, C)`` or ``(N, H, W, C)``, numpy array or torch tensor.
        size: one length per axis of ``value``.
        seed: None (fresh entropy) or an int starting a per-process stream (module text).

    Returns:
        ``size``-shaped, the same kind and dtype.

    Raises:
        ValueError: a ``size`` of another length or larger than ``value``, a seed that is
            not an int, a rank other than 3 or 4, or a shape that looks channels-first.

    Example:
        >>> import numpy as np
        >>> random_crop(np.zeros((8, 8, 3)), (4, 4, 3)).shape
        (4, 4, 3)
    """
    fn = "random_crop"
    arr = to_numpy(value, fn)
    return like(_draw(seed, fn, lambda rng: crop_draw(arr, size, rng, fn)), value)
