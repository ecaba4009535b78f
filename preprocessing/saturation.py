"""RandomSaturation (Keras 3's ``keras.layers.RandomSaturation``)."""

from __future__ import annotations

from typing import Any

import torch

from ._photometric import FactorLayer, check_channels, common_args, scale_saturation


@common_args
class RandomSaturation(FactorLayer):
    """Scale the HSV saturation of each image by a random factor (Keras 3's
    ``RandomSaturation``).

    Per image ``f`` is drawn from ``factor``'s range and the saturation is multiplied by
    ``f / (1 - f + 1e-7)`` and clipped to [0, 1]: ``f = 0.5`` changes nothing, 0 (or
    less) gives grayscale (the HSV value: the largest channel), 1 full saturation. Hue
    and value are kept. (Keras clips the saturation to ``value_range`` instead of [0, 1], which with
    its default (0, 255) lets channels go negative; the two agree for ``(0, 1)``.)

    Args:
        factor: a number ``a`` in [0, 1] draws ``f`` from ``[0, a]`` (Keras's docstring;
            its code draws from ``(-a, a)``, D-K-40); a pair ``(lo, hi)``
            (``-1 <= lo <= hi <= 1``) from ``[lo, hi]``, so the ``(-a, a)`` that Keras
            writes into its config loads as Keras draws it.
        value_range: ``(low, high)`` of the input values (low < high), default (0, 255).
        {common}

    Input: a rank-3 image, a rank-4 batch (3 channels, RGB) or a dict of targets (only
    ``images`` change). Output: same shape; float dtypes are kept, integer inputs come
    back as float32. Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it), an input that is not rank 3 or 4 or not
            3 channels.

    Example:
        >>> import torch
        >>> layer = RandomSaturation((0.0, 0.0), value_range=(0, 1))  # no saturation
        >>> layer(torch.tensor([[[0.8]], [[0.4]], [[0.2]]])).flatten()
        tensor([0.8000, 0.8000, 0.8000])
    """

    _factor_bounds = (-1.0, 1.0)
    _factor_number = "from_zero"  # a number a reads (0, a); a pair may go down to -1

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        f = self._draw_factor(images, generator)
        return {"factor": f / (1.0 - f + 1e-7)}

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        check_channels(self, images, (3,))
        lo, hi = self._range
        x = self._to_float(images)
        out = scale_saturation(x - lo if lo else x, self._channel_axis, params["factor"])
        if lo:
            out = out.add_(lo)
        return out.clamp_(lo, hi)
