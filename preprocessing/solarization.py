"""Solarization (Keras 3's ``keras.layers.Solarization``)."""

from __future__ import annotations

from typing import Any

import torch

from ._photometric import from_255, per_image, to_255
from .base import RandomLayer


class Solarization(RandomLayer):
    """Add a random amount to each image, then invert the values at or above a random
    threshold (Keras 3's ``Solarization``; PIL's ``ImageOps.solarize`` plus an addition).

    In [0, 255] units (the image is mapped there from ``value_range`` and back): per
    image ``a`` is drawn from ``addition_factor``'s range times 255 and ``t`` from
    ``threshold_factor``'s range times 255; ``y = clip(x + a, 0, 255)`` and the output is
    ``y`` where ``y < t``, else ``255 - y``. With the defaults (0, 0) every value is
    inverted. (Keras scales only the upper end of each range by 255; the lower end is
    scaled too here, which changes nothing for the usual lower end 0.)

    Args:
        addition_factor: a number ``a`` in [0, 1] means ``(0, a)``; a pair ``(lo, hi)``
            (``0 <= lo <= hi <= 1``) is taken as is. Default 0.
        threshold_factor: the same, for the threshold. Default 0.
        value_range: ``(low, high)`` of the input values (low < high), default (0, 255).
        seed: seeds the layer's draws; None uses torch's global RNG.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default (the result does not depend on it).
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch or a dict of targets (only ``images`` change).
    Output: same shape; float dtypes are kept, integer inputs come back as float32.
    Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> layer = Solarization(threshold_factor=(0.5, 0.5))  # invert from 127.5 up
        >>> layer(torch.tensor([[[0.0, 100.0, 200.0, 255.0]]]))
        tensor([[[  0., 100.,  55.,   0.]]])
    """

    # set by _set_factor
    _addition_factor: tuple[float, float]
    _threshold_factor: tuple[float, float]

    _checks_layout = False

    def __init__(
        self,
        addition_factor: float | tuple[float, float] = 0.0,
        threshold_factor: float | tuple[float, float] = 0.0,
        value_range: tuple[float, float] = (0, 255),
        seed: int | None = None,
        data_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(seed=seed, data_format=data_format, dtype=dtype, **kwargs)
        self._set_factor(addition_factor, "addition_factor")
        self._set_factor(threshold_factor, "threshold_factor")
        self._set_value_range(value_range)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        a = self._draw_factor(images, generator, self._addition_factor) * 255.0
        t = self._draw_factor(images, generator, self._threshold_factor) * 255.0
        return {"additions": a, "thresholds": t}

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        x = self._to_float(images)
        lo, hi = self._range
        y = to_255(x, lo, hi)
        a = per_image(params["additions"], x)
        y = (y + a if y is x else y.add_(a)).clamp_(0.0, 255.0)
        return from_255(torch.where(y < per_image(params["thresholds"], x), y, 255.0 - y), lo, hi)
