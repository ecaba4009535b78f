"""RandomColorDegeneration (Keras 3's ``keras.layers.RandomColorDegeneration``)."""

from __future__ import annotations

import torch

from ._photometric import FactorLayer, check_channels, common_args, grayscale, per_image


@common_args
class RandomColorDegeneration(FactorLayer):
    """Blend each image towards its grayscale version by a random amount.

    ``clip(x + f * (gray(x) - x), low, high)`` per image, ``gray`` the luma
    ``0.2989 R + 0.587 G + 0.114 B`` (Keras 3's ``RandomColorDegeneration``; PIL's
    ``ImageEnhance.Color`` with factor ``1 - f``).

    Args:
        factor: a number ``a`` in [0, 1] draws ``f`` from ``[0, a]`` (Keras's docstring;
            its code draws from ``(-a, a)``, D-K-40); a pair ``(lo, hi)``
            (``-1 <= lo <= hi <= 1``) from ``[lo, hi]``, so the ``(-a, a)`` that Keras
            writes into its config loads as Keras draws it. ``f = 1``: grayscale;
            ``f < 0`` moves away from gray (more colour), clipped to ``value_range``.
        value_range: ``(low, high)`` of the input values (low < high), default (0, 255).
        {common}

    Input: a rank-3 image, a rank-4 batch (3 channels, or 1: unchanged but for the clip)
    or a dict of targets (only ``images`` change). Output: same shape; float dtypes are
    kept, integer inputs come back as float32. Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it), an input that is not rank 3 or 4, or a
            channel count other than 1 or 3.

    Example:
        >>> import torch
        >>> layer = RandomColorDegeneration((1.0, 1.0), value_range=(0, 1))
        >>> layer(torch.tensor([[[1.0]], [[0.0]], [[0.0]]])).flatten()  # red -> its luma
        tensor([0.2989, 0.2989, 0.2989])
    """

    _factor_bounds = (-1.0, 1.0)
    _factor_number = "from_zero"  # a number a reads (0, a); a pair may go down to -1

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        check_channels(self, images, (1, 3))
        x = self._to_float(images)
        gray = grayscale(x, self._channel_axis)
        out = torch.lerp(x, gray.expand_as(x), per_image(params["factor"], x))
        return out.clamp_(*self._range)
