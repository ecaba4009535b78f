"""RandomInvert (Keras 3's ``keras.layers.RandomInvert``)."""

from __future__ import annotations

from typing import Any

import torch

from ._photometric import SeedFirstFactorLayer, apply_where, common_args


@common_args
class RandomInvert(SeedFirstFactorLayer):
    """Invert each image (``low + high - x``) with a random probability (Keras 3's
    ``RandomInvert``).

    Per image a probability ``p`` is drawn from ``factor``'s range and the image is
    inverted when a second uniform draw falls below it (Keras's two draws), so the
    default ``factor=1.0`` inverts half of the images on average. Keras computes
    ``high - x``, which equals ``low + high - x`` for its usual ranges (low = 0) and would
    leave ``[low, high]`` otherwise.

    Args:
        factor: a number ``a`` in [0, 1] draws ``p`` from ``[0, a]``; a pair ``(lo, hi)``
            (``0 <= lo <= hi <= 1``) from ``[lo, hi]``. Default 1.0.
        value_range: ``(low, high)`` of the input values (low < high), default (0, 255).
        {common}

    Input: a rank-3 image, a rank-4 batch or a dict of targets (only ``images`` change).
    Output: same shape; float dtypes are kept, integer inputs come back as float32. Only
    the inverted images are computed. Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> layer = RandomInvert((1.0, 1.0), value_range=(0, 1))  # p = 1: always
        >>> layer(torch.tensor([[[0.0, 0.25, 1.0]]]))
        tensor([[[1.0000, 0.7500, 0.0000]]])
    """

    # Keras's RandomInvert: the factor has a default (1.0), the seed comes before data_format.
    def __init__(
        self,
        factor: float | tuple[float, float] = 1.0,
        value_range: tuple[float, float] = (0, 255),
        seed: int | None = None,
        data_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(factor, value_range, seed, data_format, dtype, **kwargs)

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        p = self._draw_factor(images, generator)
        return {"apply_inversion": self._rand((images.shape[0],), images.device, generator) < p}

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        total = self._range[0] + self._range[1]
        x = self._to_float(images)
        return apply_where(x, params["apply_inversion"], lambda s, i: total - s)
