"""RandomHue (Keras 3's ``keras.layers.RandomHue``)."""

from __future__ import annotations

from typing import Any

import torch

from ._photometric import FactorLayer, check_channels, common_args, shift_hue


@common_args
class RandomHue(FactorLayer):
    """Rotate the hue of each image by a random amount (Keras 3's ``RandomHue``).

    Per image a magnitude ``f`` is drawn from ``factor``'s range and a sign with
    probability 1/2 each; the hue (HSV, in turns) moves by ``sign * f / 2``, so
    ``factor=1`` reaches half a turn either way. Saturation and value are kept; the
    result is clipped to ``value_range``.

    Args:
        factor: a number ``a`` in [0, 1] draws ``f`` from ``[0, a]``; a pair ``(lo, hi)``
            (``0 <= lo <= hi <= 1``) from ``[lo, hi]``. 0: no change.
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
        >>> layer = RandomHue((2 / 3, 2 / 3), value_range=(0, 1), seed=0)  # +-1/3 turn
        >>> layer(torch.tensor([[[1.0]], [[0.0]], [[0.0]]])).flatten().round(decimals=4)
        tensor([0., 0., 1.])
    """

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        u = self._rand((images.shape[0],), images.device, generator)
        sign = torch.where(u > 0.5, -1.0, 1.0)  # Keras's order of draws: the sign first
        f = self._draw_factor(images, generator)
        return {"factor": sign * f * 0.5}

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        check_channels(self, images, (3,))
        lo, hi = self._range
        x = self._to_float(images)
        # The HSV formulas are homogeneous in the pixel values: shifting by low is the
        # whole of Keras's rescaling to [0, 1] and back.
        out = shift_hue(x - lo if lo else x, self._channel_axis, params["factor"])
        if lo:
            out = out.add_(lo)
        return out.clamp_(lo, hi)
