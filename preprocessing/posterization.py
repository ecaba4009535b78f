"""RandomPosterization (Keras 3's ``keras.layers.RandomPosterization``)."""

from __future__ import annotations

from typing import Any, cast

import torch

from ._photometric import FactorLayer, from_255, to_255
from .base import _is_number


class RandomPosterization(FactorLayer):
    """Keep only the ``bits`` most significant bits of each 8-bit channel value, ``bits``
    drawn per image (Keras 3's ``RandomPosterization``; PIL's ``ImageOps.posterize``).

    The image is mapped from ``value_range`` to [0, 255], truncated to integers (Keras's
    cast to uint8), its low ``8 - bits`` bits cleared, and mapped back.

    Args:
        factor: the number of bits to keep, an int in [1, 8]: a number ``b`` draws ``bits``
            from the integers in ``[1, b]``, a pair ``(lo, hi)`` from those in ``[lo, hi]``
            (both ends included; Keras's ``randint`` leaves the upper end out, so its
            ``factor=(8, 8)`` keeps 8 bits but ``factor=8`` never does).
        value_range: ``(low, high)`` of the input values (low < high), default (0, 255).
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        seed: seeds the layer's draws; None uses torch's global RNG.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch or a dict of targets (only ``images`` change).
    Output: same shape; float dtypes are kept, integer inputs come back as float32.
    Identity (but for the dtype) in ``eval()``.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> RandomPosterization((2, 2))(torch.tensor([[[0.0, 63.0, 64.0, 200.0, 255.0]]]))
        tensor([[[  0.,   0.,  64., 192., 192.]]])
    """

    _factor_bounds = (1, 8)  # bits kept; a number b reads (1, b)
    _bits: tuple[int, int]

    def _take_factor(self, factor: Any) -> None:
        ints = "must be an int in [1, 8] or a pair of them"
        bits = cast(float, factor)
        if _is_number(factor) and not (float(bits).is_integer() and 1 <= bits <= 8):
            self._fail("factor", ints, factor)
        lo, hi = self._set_factor(factor, bounds=self._factor_bounds)
        if not (lo.is_integer() and hi.is_integer()):
            self._fail("factor", ints, factor)
        self._bits = (int(lo), int(hi))

    def get_random_transformation(self, images: torch.Tensor, generator: Any = None):
        lo, hi = self._bits
        u = self._rand((images.shape[0],), images.device, generator)
        bits = (lo + (u * (hi - lo + 1)).floor()).clamp_(max=hi).to(torch.uint8)
        return {"shift_factor": 8 - bits}

    def transform_images(self, images: torch.Tensor, params: dict[str, torch.Tensor]):
        x = self._to_float(images)
        lo, hi = self._range
        q = to_255(x, lo, hi)
        # Truncating to an int and clearing the low s bits is floor(v / 2**s) * 2**s for
        # v in [0, 255]: three in-place float passes, no uint8 round trip.
        step = torch.pow(2.0, params["shift_factor"].to(x.dtype)).view(-1, 1, 1, 1)
        q = q.clamp(0.0, 255.0) if q is x else q.clamp_(0.0, 255.0)
        q = q.div_(step).floor_().mul_(step)
        return from_255(q, lo, hi)
