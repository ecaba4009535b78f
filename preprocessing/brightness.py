"""RandomBrightness (Keras's ``keras.layers.RandomBrightness``)."""

from __future__ import annotations

from typing import Any

import torch

from ._photometric import SeedFirstFactorLayer


class RandomBrightness(SeedFirstFactorLayer):
    """Add a random offset per image: ``clip(x + d * (high - low), low, high)``.

    Args:
        factor: a number ``f`` in [-1, 1] draws ``d`` from ``[-|f|, |f|]``; a pair
            ``(lo, hi)`` (each in [-1, 1], ``lo <= hi``) from ``[lo, hi]``.
        value_range: ``(low, high)`` of the input values (low < high), default
            ``(0, 255)``.
        seed: seeds the layer's draws; None uses torch's global RNG.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch or a dict of targets (only ``images`` change).
    Output: same shape; float dtypes are kept, integer inputs come back as float32.
    Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> layer = RandomBrightness((0.5, 0.5), value_range=(0, 1), seed=0)
        >>> layer(torch.tensor([[[0.0, 0.25, 0.75]]]))
        tensor([[[0.5000, 0.7500, 1.0000]]])
    """

    _factor_bounds = (-1.0, 1.0)
    _factor_number = "symmetric"  # a number f reads (-|f|, |f|)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        d = self._draw_factor(images, generator)
        return {"delta": d * (self._range[1] - self._range[0])}

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        x = self._to_float(images)
        # One fresh tensor, clipped in place: a second full-size allocation costs as much
        # as the arithmetic on CPU.
        return (x + params["delta"].to(x.dtype).view(-1, 1, 1, 1)).clamp_(*self._range)
