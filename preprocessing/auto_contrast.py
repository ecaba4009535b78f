"""AutoContrast (Keras 3's ``keras.layers.AutoContrast``)."""

from __future__ import annotations

from typing import Any

import torch

from .base import Layer


class AutoContrast(Layer):
    """Stretch each channel of each image to the full ``value_range`` (Keras 3's
    ``AutoContrast``; PIL's ``ImageOps.autocontrast`` without a cutoff).

    Per image and channel, ``(x - min) / (max - min)`` over its pixels, mapped onto
    ``[low, high]``; a constant channel is left as it is. Deterministic: applied in
    ``train()`` and ``eval()`` alike, as Keras does. (Keras's reduction axes assume
    ``channels_last``; here each layout takes its own channel axis.)

    Args:
        value_range: ``(low, high)`` of the input values (low < high), default (0, 255).
        data_format: ``"channels_first"`` or ``"channels_last"``; None (default): the
            package default, ``preprocessing.image_data_format()``.
        dtype: a dtype policy name or None (``preprocessing.dtype_policy``).

    Input: a rank-3 image, a rank-4 batch or a dict of targets (only ``images`` change).
    Output: same shape; float dtypes are kept, integer inputs come back as float32.

    Raises:
        ValueError: a bad argument (naming it) or an input that is not rank 3 or 4.

    Example:
        >>> import torch
        >>> AutoContrast(value_range=(0, 1))(torch.tensor([[[0.25, 0.5, 0.75]]]))
        tensor([[[0.0000, 0.5000, 1.0000]]])
    """

    def __init__(
        self,
        value_range: tuple[float, float] = (0, 255),
        data_format: str | None = None,
        dtype: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(data_format=data_format, dtype=dtype, **kwargs)
        self._set_value_range(value_range)

    def transform_images(self, images: torch.Tensor, params: object = None) -> torch.Tensor:
        x = self._to_float(images)
        dims = self._spatial_axes
        low, high = x.amin(dim=dims, keepdim=True), x.amax(dim=dims, keepdim=True)
        lo, hi = self._range
        span = high - low
        scale = torch.where(span > 0, (hi - lo) / span, torch.ones_like(span))
        offset = torch.where(span > 0, lo - low * scale, torch.zeros_like(span))
        return torch.addcmul(offset, x, scale).clamp_(lo, hi)
