"""RandomContrast (Keras's ``keras.layers.RandomContrast``)."""

from __future__ import annotations

from typing import Any

import torch

from ._photometric import SeedFirstFactorLayer


class RandomContrast(SeedFirstFactorLayer):
    """Scale each channel's deviation from its mean by a random factor per image.

    For each image and channel: ``(x - mean) * f + mean`` with ``mean`` over the pixels
    of that channel, then clipped to ``value_range``.

    Args:
        factor: a number ``a`` in [0, 1] draws ``f`` from ``[1 - a, 1 + a]`` (Keras's
            documented meaning); a pair ``(lower, upper)`` (each in [0, 1], lower <=
            upper) draws it from ``[1 - lower, 1 + upper]``.
        value_range: ``(low, high)`` of the input values (low < high), default ``(0, 255)``.
        seed: seeds the layer's draws; None uses torch's global RNG.
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch or a dict of targets (only ``images`` change).
    Output: same shape; float dtypes are kept, integer inputs come back as float32.
    Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.
    """

    _factor_number = "both"  # a number a reads (a, a): the draw is in [1 - a, 1 + a]

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        lower, upper = self._factor
        return {"contrast_factor": self._draw_factor(images, generator, (1.0 - lower, 1.0 + upper))}

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        x = self._to_float(images)
        mean = x.mean(dim=self._spatial_axes, keepdim=True)
        f = params["contrast_factor"].to(x.dtype).view(-1, 1, 1, 1)
        # The same arithmetic as ((x - mean) * f + mean).clamp(...) on one fresh tensor.
        return (x - mean).mul_(f).add_(mean).clamp_(self._range[0], self._range[1])
